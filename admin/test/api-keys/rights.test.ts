import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '@ent/common/auth/api-key';
import type { Role, Scope } from '@ent/common/auth/scopes';
import { SCOPES } from '@ent/common/auth/scopes';
import { newId } from '@ent/common/ids';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

/**
 * Rights never grow through the API (DESIGN.md §2.10). The expected answers are written out here from the
 * rule in docs/decisions.md, independently of the code's grant functions.
 */
let ctx: AdminTestContext;
let org: TestOrganization;
/** A service account of each role, none of them a caller's own. */
const targets = {} as Record<Role, string>;

const ALL: Scope[] = [...SCOPES];
const ROLE_HAS: Record<Role, Scope[]> = {
  admin: ALL,
  developer: ALL.filter((scope) => scope !== 'org:audit:read'),
  viewer: ['check', 'catalog:read', 'subscribers:read', 'org:read'],
};
const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2 };
const ROLES: Role[] = ['admin', 'developer', 'viewer'];

interface Caller {
  role: Role;
  scopes: Scope[];
}
const held = (caller: Caller): Scope[] =>
  (caller.scopes.length === 0 ? ALL : caller.scopes).filter((scope) => ROLE_HAS[caller.role].includes(scope));

/** Past the route's scope gate (and the admin-only gate), where the grant rules start. */
const writes = (caller: Caller): boolean => held(caller).includes('org:write');
const adminWrites = (caller: Caller): boolean => caller.role === 'admin' && writes(caller);

/** Key creation: `asked` undefined means the body omits scopes (the default `check`). */
function keyAllowed(caller: Caller, asked: Scope[] | undefined, target: Role | 'own'): boolean {
  const mine = held(caller);
  if (!mine.includes('org:write')) return false;
  const targetRole = target === 'own' ? caller.role : target;
  if (RANK[targetRole] > RANK[caller.role]) return false;
  if (caller.scopes.length > 0 && target !== 'own') return false;
  const scopes = asked ?? ['check'];
  if (scopes.length === 0) return caller.scopes.length === 0;
  return scopes.every((scope) => mine.includes(scope));
}

/** Giving a member (or invitee) a role: admins only, holding every scope of that role. */
const roleAllowed = (caller: Caller, role: Role): boolean =>
  caller.role === 'admin' &&
  held(caller).includes('org:write') &&
  ROLE_HAS[role].every((s) => held(caller).includes(s));

/** A service account's role is a ceiling for its keys, which are checked when minted; only the rank counts. */
const serviceAccountAllowed = (caller: Caller, role: Role): boolean =>
  held(caller).includes('org:write') && RANK[role] <= RANK[caller.role];

const callerScopeSets: Scope[][] = [
  [],
  ['org:write'],
  ['org:write', 'check'],
  ['org:write', 'org:read', 'catalog:read', 'catalog:write'],
  ['org:write', 'org:audit:read'],
  ['check', 'catalog:read', 'subscribers:read', 'org:read', 'org:write'],
];
const callers: Caller[] = ROLES.flatMap((role) => callerScopeSets.map((scopes) => ({ role, scopes })));
const askedSets: (Scope[] | undefined)[] = [
  undefined,
  [],
  ['check'],
  ['catalog:write'],
  ['org:audit:read'],
  ['org:write'],
];

/** One more `check` key on an existing service account. */
async function addKey(serviceAccountId: string): Promise<{ keyId: string; serviceAccountId: string }> {
  const generated = generateApiKey();
  const keyId = newId('key');
  await ctx.db
    .insertInto('api_keys')
    .values({
      id: keyId,
      organization_id: org.organization_id,
      service_account_id: serviceAccountId,
      name: 'victim',
      key_prefix: generated.prefix,
      key_hash: generated.hash,
      scopes: ['check'],
    })
    .execute();
  return { keyId, serviceAccountId };
}

const post = (apiKey: string, url: string, payload: object) =>
  ctx.app.inject({ method: 'POST', url, headers: { 'x-api-key': apiKey }, payload });
const patch = (apiKey: string, url: string, payload: object) =>
  ctx.app.inject({ method: 'PATCH', url, headers: { 'x-api-key': apiKey }, payload });

/** Each request's audit outcome, by request id (read as the owner: the log is the test's witness). */
async function outcomes(requestIds: string[]): Promise<Map<string, string>> {
  if (requestIds.length === 0) return new Map();
  const rows = await ctx.ownerDb
    .selectFrom('audit_events as e')
    .innerJoin('audit_outcomes as o', 'o.event_id', 'e.id')
    .select(['e.request_id', 'o.outcome'])
    .where('e.request_id', 'in', requestIds)
    .execute();
  return new Map(rows.map((row) => [row.request_id, row.outcome]));
}

interface Sent {
  what: string;
  expected: number;
  status: number;
  requestId: string;
  /** Past the route's own scope and role gate, a refusal names the field that asked too much. */
  gated: boolean;
  body: { error?: { type: string; code: string; message: string; details: Record<string, unknown> } };
}

/** Every mismatch in status, error body or audit outcome, as readable lines. */
async function mismatches(sent: Sent[]): Promise<string[]> {
  const recorded = await outcomes(sent.map((s) => s.requestId));
  const wrong: string[] = [];
  for (const s of sent) {
    if (s.status !== s.expected) wrong.push(`${s.what}: got ${s.status}, expected ${s.expected}`);
    if (s.status === 403) {
      const error = s.body.error;
      const named = !s.gated || typeof error?.details.field === 'string';
      if (error?.type !== 'permission_error' || error.code !== 'FORBIDDEN' || !named)
        wrong.push(`${s.what}: 403 body ${JSON.stringify(s.body)}`);
      if (recorded.get(s.requestId) !== 'rejected')
        wrong.push(`${s.what}: audit outcome ${recorded.get(s.requestId)}, expected rejected`);
    }
    if (s.status < 300 && recorded.get(s.requestId) !== 'responded')
      wrong.push(`${s.what}: audit outcome ${recorded.get(s.requestId)}, expected responded`);
  }
  return wrong;
}

const sentOf = async (
  what: string,
  expected: number,
  res: Awaited<ReturnType<typeof post>>,
  gated: boolean,
): Promise<Sent> => ({
  what,
  expected,
  gated,
  status: res.statusCode,
  requestId: String(res.headers['x-request-id']),
  body: res.json(),
});

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Rights');
  for (const role of ROLES) {
    targets[role] = (
      await createKeyWithScopes(ctx.db, org.organization_id, ['check'], role)
    ).serviceAccountId;
  }
});
afterAll(() => ctx.close());

describe('the exploit from issue 12', () => {
  it('an org:write key cannot mint a full-access key on its own admin account (403, rejected, no key)', async () => {
    const ci = await createKeyWithScopes(ctx.db, org.organization_id, ['org:write'], 'admin');
    const url = `/org/service-accounts/${ci.serviceAccountId}/api-keys`;
    const res = await post(ci.apiKey, url, { scopes: [] });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toMatchObject({
      type: 'permission_error',
      code: 'FORBIDDEN',
      details: { field: 'scopes', value: [] },
    });
    expect(res.json().error.message).toMatch(/full-access/);
    const audit = await outcomes([String(res.headers['x-request-id'])]);
    expect([...audit.values()]).toEqual(['rejected']);
    const keys = await ctx.db
      .selectFrom('api_keys')
      .select('id')
      .where('service_account_id', '=', ci.serviceAccountId)
      .execute();
    expect(keys).toEqual([{ id: ci.keyId }]);
    // Nor by listing the scope it wants: the refusal names exactly what it lacks.
    const audit2 = await post(ci.apiKey, url, { scopes: ['org:write', 'org:audit:read'] });
    expect(audit2.statusCode).toBe(403);
    expect(audit2.json().error.details).toEqual({ field: 'scopes', value: ['org:audit:read'] });
    // What it holds, it may pass on (rotating its own key).
    const same = await post(ci.apiKey, url, { scopes: ['org:write'] });
    expect(same.statusCode).toBe(201);
    expect(same.json().scopes).toEqual(['org:write']);
  });
});

describe('key creation: caller (role x scopes) x requested (scopes x target)', () => {
  const targetsOf: (Role | 'own')[] = ['own', 'admin', 'developer', 'viewer'];
  it.each(callers.map((c) => [c.role, c.scopes] as const))('%s key with scopes %j', async (role, scopes) => {
    const caller = { role, scopes };
    const key = await createKeyWithScopes(ctx.db, org.organization_id, scopes, role);
    const sent: Sent[] = [];
    for (const target of targetsOf) {
      const accountId = target === 'own' ? key.serviceAccountId : targets[target];
      for (const asked of askedSets) {
        const res = await post(
          key.apiKey,
          `/org/service-accounts/${accountId}/api-keys`,
          asked === undefined ? {} : { scopes: asked },
        );
        const expected = keyAllowed(caller, asked, target) ? 201 : 403;
        sent.push(
          await sentOf(`${target} account, scopes ${JSON.stringify(asked)}`, expected, res, writes(caller)),
        );
        if (res.statusCode === 201) expect(res.json().scopes).toEqual(asked ?? ['check']);
      }
    }
    expect(await mismatches(sent)).toEqual([]);
  });
});

describe('key revocation: a restricted key revokes only its own account’s keys', () => {
  it.each(callers.map((c) => [c.role, c.scopes] as const))('%s key with scopes %j', async (role, scopes) => {
    const caller = { role, scopes };
    const key = await createKeyWithScopes(ctx.db, org.organization_id, scopes, role);
    const sent: Sent[] = [];
    for (const target of ['own', ...ROLES] as const) {
      // A fresh key to revoke, on the caller's own account or on another account of the target role.
      const victim =
        target === 'own'
          ? await addKey(key.serviceAccountId)
          : await createKeyWithScopes(ctx.db, org.organization_id, ['check'], target);
      const accountId = target === 'own' ? key.serviceAccountId : victim.serviceAccountId;
      const keyId = victim.keyId;
      const res = await ctx.app.inject({
        method: 'DELETE',
        url: `/org/service-accounts/${accountId}/api-keys/${keyId}`,
        headers: { 'x-api-key': key.apiKey },
      });
      const targetRole = target === 'own' ? role : target;
      const allowed =
        held(caller).includes('org:write') &&
        RANK[targetRole] <= RANK[role] &&
        (scopes.length === 0 || target === 'own');
      sent.push({
        what: `revoke on ${target} account`,
        expected: allowed ? 204 : 403,
        status: res.statusCode,
        requestId: String(res.headers['x-request-id']),
        gated: writes(caller),
        body: res.body ? res.json() : {},
      });
    }
    expect(await mismatches(sent)).toEqual([]);
  });
});

describe('role grants: members, invites, member role changes, service accounts', () => {
  let counter = 0;
  it.each(callers.map((c) => [c.role, c.scopes] as const))('%s key with scopes %j', async (role, scopes) => {
    const caller = { role, scopes };
    const key = await createKeyWithScopes(ctx.db, org.organization_id, scopes, role);
    const sent: Sent[] = [];
    for (const granted of ROLES) {
      const n = ++counter;
      const member = await post(key.apiKey, '/org/members', { email: `m${n}@example.com`, role: granted });
      sent.push(
        await sentOf(
          `POST /org/members ${granted}`,
          roleAllowed(caller, granted) ? 201 : 403,
          member,
          adminWrites(caller),
        ),
      );
      const invite = await post(key.apiKey, '/org/invites', { role: granted });
      sent.push(
        await sentOf(
          `POST /org/invites ${granted}`,
          roleAllowed(caller, granted) ? 201 : 403,
          invite,
          adminWrites(caller),
        ),
      );
      const account = await post(key.apiKey, '/org/service-accounts', { name: `sa${n}`, role: granted });
      sent.push(
        await sentOf(
          `POST /org/service-accounts ${granted}`,
          serviceAccountAllowed(caller, granted) ? 201 : 403,
          account,
          writes(caller),
        ),
      );
      if (granted === 'viewer') continue;
      // Raising a viewer (a user, and a service account whose full-access key would follow the role), active or
      // suspended: a role raised while suspended is handed out by whoever reactivates the member later.
      for (const kind of ['user', 'service account'] as const) {
        for (const state of ['active', 'suspended'] as const) {
          const name = `t${n}-${state}`;
          const target =
            kind === 'user'
              ? (await post(org.api_key, '/org/members', { email: `${name}@example.com`, role: 'viewer' })).json()
              : (await post(org.api_key, '/org/service-accounts', { name, role: 'viewer' })).json();
          if (state === 'suspended') {
            expect((await patch(org.api_key, `/org/members/${target.member_id}`, { status: 'suspended' })).statusCode).toBe(200);
          }
          const raised = await patch(key.apiKey, `/org/members/${target.member_id}`, { role: granted });
          sent.push(
            await sentOf(
              `PATCH ${state} ${kind} viewer -> ${granted}`,
              roleAllowed(caller, granted) ? 200 : 403,
              raised,
              adminWrites(caller),
            ),
          );
        }
      }
    }
    expect(await mismatches(sent)).toEqual([]);
  });

  it('a suspended admin is made active again only by a caller holding every admin scope', async () => {
    const admin = (
      await post(org.api_key, '/org/members', { email: 'dormant@example.com', role: 'admin' })
    ).json();
    expect(
      (await patch(org.api_key, `/org/members/${admin.member_id}`, { status: 'suspended' })).statusCode,
    ).toBe(200);
    const narrow = await createKeyWithScopes(
      ctx.db,
      org.organization_id,
      ALL.filter((s) => s !== 'org:audit:read'),
    );
    const refused = await patch(narrow.apiKey, `/org/members/${admin.member_id}`, { status: 'active' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.message).toContain('org:audit:read');
    const everything = await createKeyWithScopes(ctx.db, org.organization_id, ALL);
    expect(
      (await patch(everything.apiKey, `/org/members/${admin.member_id}`, { status: 'active' })).statusCode,
    ).toBe(200);
  });
});

describe('property: no key created through the API is worth more than its creator', () => {
  const role = fc.constantFrom<Role>(...ROLES);
  const scopes = fc.subarray(ALL);
  it('random callers asking random keys on random accounts', async () => {
    await fc.assert(
      fc.asyncProperty(
        role,
        scopes,
        fc.option(scopes, { nil: undefined }),
        fc.constantFrom<Role | 'own'>('own', ...ROLES),
        async (callerRole, callerScopes, asked, target) => {
          const caller = { role: callerRole, scopes: callerScopes };
          const key = await createKeyWithScopes(ctx.db, org.organization_id, callerScopes, callerRole);
          const accountId = target === 'own' ? key.serviceAccountId : targets[target];
          const res = await post(
            key.apiKey,
            `/org/service-accounts/${accountId}/api-keys`,
            asked === undefined ? {} : { scopes: asked },
          );
          expect(res.statusCode).toBe(keyAllowed(caller, asked, target) ? 201 : 403);
          if (res.statusCode !== 201) return;
          const created = res.json() as { api_key: string; scopes: Scope[] };
          const targetRole = target === 'own' ? callerRole : target;
          const rights = (created.scopes.length === 0 ? ALL : created.scopes).filter((s) =>
            ROLE_HAS[targetRole].includes(s),
          );
          expect(rights.filter((s) => !held(caller).includes(s))).toEqual([]);
          // The consequence that matters: the audit log stays closed to a creator that could not read it.
          const audit = await ctx.app.inject({
            method: 'GET',
            url: '/org/audit-events?limit=1',
            headers: { 'x-api-key': created.api_key },
          });
          expect(audit.statusCode).toBe(rights.includes('org:audit:read') ? 200 : 403);
          if (audit.statusCode === 200) expect(held(caller)).toContain('org:audit:read');
        },
      ),
      { numRuns: 60 },
    );
  });
});
