import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
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

/** `entctl export` as a process against this file's admin, listening on a port of its own. */
const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
let org: TestOrganization;
let adminUrl: string;
let dir: string;

const entctl = (env: Record<string, string>, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, ...args], {
    env: { ...process.env, DATABASE_URL: ctx.config.databaseUrl, ADMIN_URL: adminUrl, ...env },
    timeout: 30_000,
  });

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Exported by entctl');
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  adminUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
  dir = await mkdtemp(join(tmpdir(), 'entctl-export-'));
  const post = (url: string, payload: object) =>
    ctx.app.inject({ method: 'POST', url, headers: org.headers, payload });
  await post('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
  await post('/org/plans', {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [{ feature: 'sso', kind: 'flag' }],
  });
  for (const id of ['alice', 'bob']) {
    await post('/org/subscribers', { subscriber_id: id });
    await post(`/org/subscribers/${id}/subscriptions`, { plan_id: 'pro' });
  }
}, 60_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await ctx.close();
});

describe('entctl export', () => {
  it('writes what GET /org/export answers to --output, and --json says how many records', async () => {
    const output = join(dir, 'org.ndjson');
    const { stdout, stderr } = await entctl(
      { ENT_API_KEY: org.api_key },
      'export',
      '--output',
      output,
      '--json',
    );
    const expected = (await ctx.app.inject({ method: 'GET', url: '/org/export', headers: org.headers })).body;
    expect(await readFile(output, 'utf8')).toBe(expected);
    expect(JSON.parse(stdout)).toEqual({ records: 6, output, seconds: expect.any(Number) });
    // Not a terminal: no progress bar.
    expect(stderr).toBe('');
  }, 60_000);

  it('writes the records to standard output without --output, and --json to standard error', async () => {
    const json = await entctl({ ENT_API_KEY: org.api_key }, 'export', '--json');
    expect(JSON.parse(json.stderr)).toEqual({ records: 6, output: null, seconds: expect.any(Number) });
    const { stdout } = await entctl({ ENT_API_KEY: org.api_key }, 'export', '--quiet');
    expect(
      stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line).type),
    ).toEqual(['feature', 'plan', 'subscriber', 'subscriber', 'subscription', 'subscription']);
  }, 60_000);

  it('exits 1 with the API error on one line when the key is refused, and when none is set', async () => {
    await expect(entctl({ ENT_API_KEY: 'svc-mk-1-not-a-key' }, 'export', '--quiet')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^entctl: GET \/org\/export answered 401: UNAUTHENTICATED: /),
    });
    await expect(entctl({ ENT_API_KEY: '' }, 'export')).rejects.toMatchObject({
      code: 1,
      stderr: 'entctl: set ENT_API_KEY to an API key of the organization\n',
    });
  }, 60_000);

  it('names the address and the cause when admin cannot be reached, not a bare "fetch failed"', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await expect(
      entctl({ ENT_API_KEY: 'svc-mk-1-x', ADMIN_URL: `http://127.0.0.1:${port}` }, 'export', '--quiet'),
    ).rejects.toMatchObject({
      code: 1,
      stderr: `entctl: fetch failed: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    });
  }, 60_000);
});
