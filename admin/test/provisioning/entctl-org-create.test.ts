import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';

/** `npx entctl org create` as DESIGN.md §4 states it, run as a process against this file's own database. */
const run = promisify(execFile);
const entctlPath = new URL('../../src/cli/entctl.ts', import.meta.url).pathname;

let ctx: AdminTestContext;
beforeAll(async () => {
  ctx = await createAdminContext();
});
afterAll(() => ctx.close());

const entctlOrg = (...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', entctlPath, 'org', ...args], {
    env: { ...process.env, DATABASE_URL: ctx.config.databaseUrl },
    timeout: 20_000,
  });
const entctl = (...args: string[]) => entctlOrg('create', ...args);

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
  it('prints {organization_id, member_id, service_account_id, api_key} exactly, a full-access key that works', async () => {
    const { stdout } = await entctl('--name', 'Created by entctl', '--json');
    const created = JSON.parse(stdout) as Record<string, string>;
    expect(Object.keys(created).sort()).toEqual([
      'api_key',
      'member_id',
      'organization_id',
      'service_account_id',
    ]);
    await ctx.db
      .selectFrom('organizations')
      .select('id')
      .where('id', '=', created.organization_id!)
      .executeTakeFirstOrThrow();
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

describe('entctl org invite', () => {
  it('gives a person of an organization made by org create a console login: link, password, sign-in', async () => {
    const created = JSON.parse((await entctl('--name', 'Invited by entctl', '--json')).stdout) as Record<
      string,
      string
    >;
    const email = `person-${Date.now()}@example.com`;
    const { stdout } = await entctlOrg(
      'invite',
      '--org',
      created.organization_id!,
      '--email',
      email,
      '--json',
    );
    const invite = JSON.parse(stdout) as Record<string, string>;
    const { slug } = await ctx.db
      .selectFrom('organizations')
      .select('slug')
      .where('id', '=', created.organization_id!)
      .executeTakeFirstOrThrow();
    expect(invite).toMatchObject({ organization_id: created.organization_id, slug, role: 'admin', email });
    expect(invite.url).toMatch(/\/console\/join\/[A-Za-z0-9_%-]{40,}$/);

    const token = decodeURIComponent(invite.url!.split('/').at(-1)!);
    const headers = { host: 'console.test', origin: 'http://console.test' };
    const joined = await ctx.app.inject({
      method: 'POST',
      url: `/console/api/invites/${token}/accept`,
      headers,
      payload: { password: 'correct horse battery', name: 'Person' },
    });
    expect(joined.statusCode).toBe(201);
    expect(joined.json().member).toMatchObject({ email, role: 'admin' });
    const signedIn = await ctx.app.inject({
      method: 'POST',
      url: '/console/api/sign-in',
      headers,
      payload: { organization: slug, email, password: 'correct horse battery' },
    });
    expect(signedIn.statusCode).toBe(200);

    // Audited as POST /org/invites is, by the organization's admin service account, from entctl.
    const entries = await ctx.db
      .selectFrom('audit_events as e')
      .innerJoin('audit_outcomes as o', 'o.event_id', 'e.id')
      .select([
        'e.method',
        'e.route',
        'e.actor_member_id',
        'e.user_agent',
        'o.outcome',
        'o.status',
        'o.details',
      ])
      .where('e.organization_id', '=', created.organization_id!)
      .where('e.route', '=', '/org/invites')
      .execute();
    expect(entries).toEqual([
      {
        method: 'POST',
        route: '/org/invites',
        actor_member_id: created.member_id,
        user_agent: 'entctl',
        outcome: 'responded',
        status: 201,
        details: { invite_id: invite.invite_id, role: 'admin' },
      },
    ]);
  }, 90_000);

  it('refuses an unknown organization and a role that does not exist, inviting nobody', async () => {
    await expect(entctlOrg('invite', '--org', 'org_missing', '--json')).rejects.toThrow(
      /no organization with id "org_missing"/,
    );
    await expect(entctlOrg('invite', '--org', 'org_missing', '--role', 'owner')).rejects.toThrow(
      /--role.*admin, developer, viewer/,
    );
  }, 60_000);
});

describe('entctl snapshots rebuild', () => {
  it('refuses an empty --org (an unset shell variable) rather than rebuilding every organization', async () => {
    const rebuild = (...args: string[]) =>
      run(process.execPath, ['--import', 'tsx', entctlPath, 'snapshots', 'rebuild', ...args], {
        env: {
          ...process.env,
          DATABASE_URL: ctx.config.databaseUrl,
          REDIS_URL: ctx.config.redisUrl,
          REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
        },
        timeout: 20_000,
      });
    await expect(rebuild('--org', '', '--json')).rejects.toThrow(/No organization/);
  }, 60_000);
});
