import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, type AdminTestContext } from '../../test-support/admin-context.ts';

/** `npx entctl org create` as DESIGN.md §4 states it, run as a process against this file's own database. */
const run = promisify(execFile);
const entctlPath = new URL('../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
beforeAll(async () => {
  ctx = await createAdminContext();
});
afterAll(() => ctx.close());

const entctl = (...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, 'org', 'create', ...args], {
    env: { ...process.env, DATABASE_URL: ctx.config.databaseUrl },
    timeout: 20_000,
  });

const organizations = async () =>
  Number(
    (
      await ctx.db
        .selectFrom('organizations')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe('entctl org create', () => {
  it('prints exactly {organization_id, member_id, service_account_id, api_key}, a full-access key that works', async () => {
    const { stdout } = await entctl('--name', 'Created by entctl', '--json');
    const created = JSON.parse(stdout) as Record<string, string>;
    expect(Object.keys(created).sort()).toEqual([
      'api_key',
      'member_id',
      'organization_id',
      'service_account_id',
    ]);
    expect(created.api_key).toMatch(/^svc-mk-1-/);
    const features = await ctx.app.inject({
      method: 'GET',
      url: '/org/features',
      headers: { 'x-api-key': created.api_key! },
    });
    expect(features.statusCode).toBe(200);
    // DESIGN.md §4: "whose service account is `admin`": its name and its role, one name for the member it is.
    const headers = { 'x-api-key': created.api_key! };
    const account = await ctx.app.inject({
      method: 'GET',
      url: `/org/service-accounts/${created.service_account_id}`,
      headers,
    });
    expect(account.json()).toMatchObject({ name: 'admin', role: 'admin', member_id: created.member_id });
    const member = await ctx.app.inject({ method: 'GET', url: `/org/members/${created.member_id}`, headers });
    expect(member.json()).toMatchObject({ name: 'admin', role: 'admin' });
  }, 60_000);

  it.each([
    ['an empty', ''],
    ['a blank', '   '],
    ['a 256-character', 'x'.repeat(256)],
  ])(
    'refuses %s name with its own message, creating nothing',
    async (_what, name) => {
      const before = await organizations();
      await expect(entctl('--name', name, '--json')).rejects.toThrow(/--name.*1 to 255 characters/);
      expect(await organizations()).toBe(before);
    },
    60_000,
  );
});
