import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/** `entctl import FILE` as a process: it uploads, polls the import until it ends, and exits by its result. */
const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
let adminUrl: string;
let dir: string;

const entctl = (org: TestOrganization, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, ...args], {
    env: {
      ...process.env,
      DATABASE_URL: ctx.config.databaseUrl,
      ADMIN_URL: adminUrl,
      ENT_API_KEY: org.api_key,
    },
    timeout: 60_000,
  });

const ndjson = (...records: object[]) => records.map((record) => JSON.stringify(record)).join('\n') + '\n';

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

const subscriberIds = async (org: TestOrganization) =>
  (
    await ctx.db
      .selectFrom('subscribers')
      .select('subscriber_id')
      .where('organization_id', '=', org.organization_id)
      .orderBy('subscriber_id')
      .execute()
  ).map((row) => row.subscriber_id);

beforeAll(async () => {
  ctx = await createAdminContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  adminUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
  dir = await mkdtemp(join(tmpdir(), 'entctl-import-'));
}, 60_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await ctx.close();
});

describe('entctl import', () => {
  it('imports the file, waits for the end, and prints the finished import with --json (exit 0)', async () => {
    const org = await createTestOrganization(ctx.db, 'Imported by entctl');
    const path = await file(
      'good.ndjson',
      ndjson(
        { type: 'feature', key: 'sso', name: 'SSO', kind: 'flag' },
        {
          type: 'plan',
          key: 'pro',
          name: 'Pro',
          kind: 'catalog',
          grants: [{ feature: 'sso', kind: 'flag' }],
        },
        { type: 'subscriber', subscriber_id: 'alice' },
        { type: 'subscription', subscriber_id: 'alice', plan_id: 'pro' },
      ),
    );
    const { stdout, stderr } = await entctl(org, 'import', path, '--json');
    expect(JSON.parse(stdout)).toMatchObject({
      status: 'succeeded',
      lines: 4,
      applied: 4,
      failed: 0,
      dry_run: false,
    });
    expect(stderr).toBe('');
    expect(await subscriberIds(org)).toEqual(['alice']);
  }, 90_000);

  it('exits 1 when a line failed, naming the line and its error', async () => {
    const org = await createTestOrganization(ctx.db, 'Partly imported');
    const path = await file(
      'one-bad.ndjson',
      ndjson(
        { type: 'subscriber', subscriber_id: 'bob' },
        { type: 'subscription', subscriber_id: 'bob', plan_id: 'nope' },
      ),
    );
    const failure = await entctl(org, 'import', path).then(
      () => null,
      (error: { code: number; stdout: string }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stdout).toMatch(/succeeded: 2 lines, 1 applied, 0 unchanged, 1 failed/);
    expect(failure?.stdout).toMatch(/line 2: \S+ /);
    expect(await subscriberIds(org)).toEqual(['bob']);
  }, 90_000);

  it('exits 1 with one line naming a path that is not a file', async () => {
    const org = await createTestOrganization(ctx.db, 'Not a file');
    const failure = await entctl(org, 'import', tmpdir()).then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure).toMatchObject({ code: 1, stderr: `entctl: ${tmpdir()} is not a file\n` });
  }, 90_000);

  it('--dry-run applies nothing', async () => {
    const org = await createTestOrganization(ctx.db, 'Dry run');
    const path = await file('dry.ndjson', ndjson({ type: 'subscriber', subscriber_id: 'carol' }));
    const { stdout } = await entctl(org, 'import', path, '--dry-run', '--json');
    expect(JSON.parse(stdout)).toMatchObject({ status: 'succeeded', dry_run: true, lines: 1, failed: 0 });
    expect(await subscriberIds(org)).toEqual([]);
  }, 90_000);
});
