import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyPrefixOf } from '@ent/common/auth/api-key';
import { AUDIT_PATH_VALUE_NAMES } from '@ent/contract/audit';
import { createKeyWithScopes } from '../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../test-support/admin-context.ts';
import { TEST_APP_ROLE } from '../../test-support/databases.ts';
import {
  auditEntryIds,
  auditIdFloor,
  recordableDetails,
  rfc3339ToMs,
  routeTemplate,
} from '../src/features/audit/entry.ts';
import { settleAudit } from '../src/features/audit/settle.job.ts';
import { jobDefinitions } from '../src/jobs/registry.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;
/** Every plaintext key this file creates: none may appear anywhere in the log. */
const plaintextKeys: string[] = [];

interface AuditEvent {
  id: string;
  occurred_at: string;
  request_id: string;
  organization_id: string;
  actor: { member_id: string; auth_type: string; key_prefix: string };
  service: string;
  method: string;
  route: string;
  params: Record<string, string>;
  ip: string;
  user_agent: string | null;
  outcome: string;
  status: number | null;
  details: Record<string, unknown> | null;
}

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audit org');
  other = await createTestOrganization(ctx.db, 'Other org');
  plaintextKeys.push(org.api_key, other.api_key);
});
afterAll(() => ctx.close());

const inject = (
  method: 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'GET',
  url: string,
  payload?: object,
  headers = org.headers,
) => ctx.app.inject({ method, url, headers: { 'user-agent': 'audit-test/1.0', ...headers }, payload });

async function list(
  query = '',
  headers = org.headers,
): Promise<{ audit_events: AuditEvent[]; has_more: boolean }> {
  const res = await ctx.app.inject({ method: 'GET', url: `/org/audit-events${query}`, headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** Runs `work` while another session holds `table` in ACCESS EXCLUSIVE mode (every query on it waits). */
async function whileLocked(table: string, work: () => Promise<void>): Promise<void> {
  const locker = new pg.Client({ connectionString: ctx.database.ownerUrl });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    await work();
  } finally {
    await locker.query('ROLLBACK');
    await locker.end();
  }
}

async function entryFor(requestId: string): Promise<AuditEvent> {
  const body = await list(`?request_id=${requestId}`);
  expect(body.audit_events).toHaveLength(1);
  return body.audit_events[0]!;
}

async function countRows(): Promise<{ events: number; outcomes: number }> {
  const events = await ctx.ownerDb
    .selectFrom('audit_events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  const outcomes = await ctx.ownerDb
    .selectFrom('audit_outcomes')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return { events: Number(events.n), outcomes: Number(outcomes.n) };
}

let keys = 0;
/** A feature key no other case uses, so each case makes the features it writes. */
const uniqueKey = (base: string) => `${base}-${++keys}`;
const createFeature = async (key: string, name: string) =>
  expect((await inject('POST', '/org/features', { key, name, kind: 'flag' })).statusCode).toBe(201);

describe('recording feature writes', () => {
  it('records a create with every field SPEC.md names', async () => {
    const key = uniqueKey('sso');
    const before = Date.now();
    const res = await inject('POST', '/org/features', { key, name: 'Single sign-on', kind: 'flag' });
    expect(res.statusCode).toBe(201);
    const requestId = res.headers['x-request-id'] as string;
    const entry = await entryFor(requestId);
    expect(entry).toEqual({
      id: expect.stringMatching(/^aud_[0-9a-z]{26}$/),
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      request_id: requestId,
      organization_id: org.organization_id,
      actor: { member_id: org.member_id, auth_type: 'member_apikey', key_prefix: keyPrefixOf(org.api_key) },
      service: 'api',
      method: 'POST',
      route: '/org/features',
      params: {},
      ip: '127.0.0.1',
      user_agent: 'audit-test/1.0',
      outcome: 'responded',
      status: 201,
      details: { key, name: 'Single sign-on', kind: 'flag' },
    });
    const occurred = Date.parse(entry.occurred_at);
    expect(occurred).toBeGreaterThanOrEqual(before);
    expect(occurred).toBeLessThanOrEqual(Date.now());
  });

  it('records a change as {from, to} with the route template and params', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'Single sign-on');
    const res = await inject('PATCH', `/org/features/${key}`, { name: 'SSO', description: 'SAML and OIDC' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry).toMatchObject({
      method: 'PATCH',
      route: '/org/features/{key}',
      params: { key },
      outcome: 'responded',
      status: 200,
      details: {
        name: { from: 'Single sign-on', to: 'SSO' },
        description: { from: '', to: 'SAML and OIDC' },
      },
    });
  });

  it('records a write that changed nothing with details null', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const res = await inject('PATCH', `/org/features/${key}`, { name: 'SSO' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry).toMatchObject({ outcome: 'responded', status: 200, details: null });
  });

  it('records a failed write with its status and no details', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const res = await inject('POST', '/org/features', { key, name: 'Again', kind: 'flag' });
    expect(res.statusCode).toBe(409);
    expect(await entryFor(res.json().error.request_id)).toMatchObject({
      outcome: 'responded',
      status: 409,
      details: null,
    });
    const invalid = await inject('POST', '/org/features', { key: 'Bad Key', name: 'x', kind: 'flag' });
    expect(invalid.statusCode).toBe(422);
    expect(await entryFor(invalid.json().error.request_id)).toMatchObject({
      outcome: 'responded',
      status: 422,
    });
  });

  it('replaces a field over 2 KiB with {too_large: true}, still naming it', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO');
    const description = 'x'.repeat(5000);
    const res = await inject('PATCH', `/org/features/${key}`, { description, name: 'SSO!' });
    expect(res.statusCode).toBe(200);
    const entry = await entryFor(res.headers['x-request-id'] as string);
    expect(entry.details).toEqual({ description: { too_large: true }, name: { from: 'SSO', to: 'SSO!' } });
  });

  it('names the forwarded caller only when the request comes from a trusted proxy', async () => {
    const res = await inject(
      'POST',
      '/org/features',
      { key: 'fwd', name: 'Fwd', kind: 'flag' },
      {
        ...org.headers,
        'x-forwarded-for': '203.0.113.9',
      },
    );
    expect((await entryFor(res.headers['x-request-id'] as string)).ip).toBe('203.0.113.9');
    const direct = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'x-forwarded-for': '203.0.113.9', 'user-agent': '' },
      payload: { key: 'fwd2', name: 'Fwd', kind: 'flag' },
      remoteAddress: '198.51.100.7',
    });
    const entry = await entryFor(direct.headers['x-request-id'] as string);
    expect(entry.ip).toBe('198.51.100.7');
    expect(entry.user_agent).toBeNull();
  });

  it('does not record reads, unknown routes or requests without a valid key', async () => {
    const before = await countRows();
    await inject('GET', '/org/features');
    await inject('GET', '/org/features/sso');
    await inject('POST', '/org/features', { key: 'nokey', name: 'x', kind: 'flag' }, {});
    await inject(
      'POST',
      '/org/features',
      { key: 'nokey', name: 'x', kind: 'flag' },
      { 'x-api-key': 'svc-mk-1-nope' },
    );
    await inject('POST', '/org/no-such-route', {});
    await list();
    expect(await countRows()).toEqual(before);
  });
});

describe('403: rejected', () => {
  it('records a check-only key calling POST /org/features as rejected, and nothing ran', async () => {
    const key = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    plaintextKeys.push(key.apiKey);
    const res = await inject(
      'POST',
      '/org/features',
      { key: 'denied', name: 'Denied', kind: 'flag' },
      { 'x-api-key': key.apiKey },
    );
    expect(res.statusCode).toBe(403);
    const entry = await entryFor(res.json().error.request_id);
    expect(entry).toMatchObject({
      actor: { member_id: key.memberId, auth_type: 'member_apikey', key_prefix: keyPrefixOf(key.apiKey) },
      method: 'POST',
      route: '/org/features',
      outcome: 'rejected',
      status: null,
      details: null,
    });
    expect((await inject('GET', '/org/features/denied')).statusCode).toBe(404);
  });

  it('refuses the audit read to a key without org:audit:read or a non-admin role', async () => {
    const catalog = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const developer = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    plaintextKeys.push(catalog.apiKey, developer.apiKey);
    for (const key of [catalog, developer]) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: '/org/audit-events',
        headers: { 'x-api-key': key.apiKey },
      });
      expect(res.statusCode).toBe(403);
    }
    const auditor = await createKeyWithScopes(ctx.db, org.organization_id, ['org:audit:read']);
    plaintextKeys.push(auditor.apiKey);
    const res = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events',
      headers: { 'x-api-key': auditor.apiKey },
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('503 when the entry cannot be recorded', () => {
  it('refuses the write with 503 SERVICE_UNAVAILABLE when INSERT on the log is refused, and nothing changes', async () => {
    const key = uniqueKey('sso');
    await createFeature(key, 'SSO!');
    const before = await countRows();
    await sql`REVOKE INSERT ON audit_events FROM ${sql.id(TEST_APP_ROLE)}`.execute(ctx.ownerDb);
    try {
      const res = await inject('POST', '/org/features', {
        key: 'unaudited',
        name: 'Unaudited',
        kind: 'flag',
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        type: 'api_error',
        request_id: res.headers['x-request-id'],
      });
      const patch = await inject('PATCH', `/org/features/${key}`, { name: 'Changed while unaudited' });
      expect(patch.statusCode).toBe(503);
      // Reads keep working.
      expect((await inject('GET', `/org/features/${key}`)).statusCode).toBe(200);
    } finally {
      await sql`GRANT INSERT ON audit_events TO ${sql.id(TEST_APP_ROLE)}`.execute(ctx.ownerDb);
    }
    expect((await inject('GET', '/org/features/unaudited')).statusCode).toBe(404);
    expect((await inject('GET', `/org/features/${key}`)).json().name).toBe('SSO!');
    expect(await countRows()).toEqual(before);
  });

  it('answers 503 quickly when the log table is locked, and the write never runs', async () => {
    await whileLocked('audit_events', async () => {
      const started = Date.now();
      const res = await inject('POST', '/org/features', { key: 'locked', name: 'Locked', kind: 'flag' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(5000);
    });
    expect((await inject('GET', '/org/features/locked')).statusCode).toBe(404);
    const retry = await inject('POST', '/org/features', { key: 'locked', name: 'Locked', kind: 'flag' });
    expect(retry.statusCode).toBe(201);
    expect((await entryFor(retry.headers['x-request-id'] as string)).outcome).toBe('responded');
  });

  it('answers 503 quickly when the API key cannot be looked up (keys table locked), and nothing runs', async () => {
    await whileLocked('api_keys', async () => {
      const started = Date.now();
      const res = await inject('POST', '/org/features', { key: 'unlooked', name: 'Unlooked', kind: 'flag' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.message).toMatch(/Credentials cannot be checked/);
      // Within the lookup's own bound, not the main pool's 10 s statement timeout.
      expect(Date.now() - started).toBeLessThan(5000);
    });
    expect((await inject('GET', '/org/features/unlooked')).statusCode).toBe(404);
  });
});

describe('append-only in the database', () => {
  it('refuses UPDATE, DELETE and TRUNCATE to the services role', async () => {
    for (const table of ['audit_events', 'audit_outcomes', 'audit_settle_marks'] as const) {
      await expect(
        sql`UPDATE ${sql.table(table)} SET recorded_at = recorded_at`.execute(ctx.db),
      ).rejects.toThrow(/permission denied/);
      await expect(sql`DELETE FROM ${sql.table(table)}`.execute(ctx.db)).rejects.toThrow(/permission denied/);
      await expect(sql`TRUNCATE ${sql.table(table)} CASCADE`.execute(ctx.db)).rejects.toThrow(
        /permission denied/,
      );
    }
    const grants = await sql<{ table_name: string; privilege_type: string }>`
      SELECT table_name, privilege_type FROM information_schema.role_table_grants
      WHERE grantee = ${TEST_APP_ROLE} AND table_name LIKE 'audit_%' ORDER BY 1, 2`.execute(ctx.ownerDb);
    expect(grants.rows).toEqual([
      { table_name: 'audit_events', privilege_type: 'INSERT' },
      { table_name: 'audit_events', privilege_type: 'SELECT' },
      { table_name: 'audit_outcomes', privilege_type: 'INSERT' },
      { table_name: 'audit_outcomes', privilege_type: 'SELECT' },
      { table_name: 'audit_settle_marks', privilege_type: 'INSERT' },
      { table_name: 'audit_settle_marks', privilege_type: 'SELECT' },
    ]);
    const owners = await sql<{ tableowner: string }>`
      SELECT tableowner FROM pg_tables WHERE tablename LIKE 'audit_%'`.execute(ctx.ownerDb);
    expect(owners.rows.every((row) => row.tableowner !== TEST_APP_ROLE)).toBe(true);
  });

  it('refuses UPDATE, DELETE and TRUNCATE to the owner too (triggers)', async () => {
    await createFeature(uniqueKey('kept'), 'Kept');
    const before = await countRows();
    expect(before.events).toBeGreaterThan(0);
    await sql`INSERT INTO audit_settle_marks (settled_before) VALUES ('2000-01-01')`.execute(ctx.ownerDb);
    for (const table of ['audit_events', 'audit_outcomes', 'audit_settle_marks'] as const) {
      await expect(
        sql`UPDATE ${sql.table(table)} SET recorded_at = recorded_at`.execute(ctx.ownerDb),
      ).rejects.toThrow(/append-only/);
      await expect(sql`DELETE FROM ${sql.table(table)}`.execute(ctx.ownerDb)).rejects.toThrow(/append-only/);
      await expect(sql`TRUNCATE ${sql.table(table)} CASCADE`.execute(ctx.ownerDb)).rejects.toThrow(
        /append-only/,
      );
    }
    expect(await countRows()).toEqual(before);
  });
});

describe('settling entries left pending', () => {
  it('appends no_response to entries pending past the bound, once', async () => {
    const newAuditEntryId = auditEntryIds();
    const { id, occurredAt } = newAuditEntryId(Date.now() - 10 * 60_000);
    const insertPending = (entryId: string, at: Date) =>
      ctx.db
        .insertInto('audit_events')
        .values({
          id: entryId,
          organization_id: org.organization_id,
          occurred_at: at,
          request_id: 'req_01kpendingpendingpendingpe',
          actor_member_id: org.member_id,
          actor_auth_type: 'member_apikey',
          actor_key_prefix: keyPrefixOf(org.api_key),
          service: 'api',
          method: 'POST',
          route: '/org/features',
          params: '{}',
          ip: '127.0.0.1',
          user_agent: null,
        })
        .execute();
    await insertPending(id, occurredAt);
    const fresh = await inject('POST', '/org/features', { key: 'fresh', name: 'Fresh', kind: 'flag' });
    expect(fresh.statusCode).toBe(201);
    expect((await list('?outcome=pending')).audit_events.map((e) => e.id)).toEqual([id]);

    const definition = jobDefinitions.find((d) => d.queue === 'audit-settle')!;
    expect(definition.repeatEveryMs).toBeGreaterThan(0);
    const processor = definition.processor({ ...ctx, queues: {} as never });
    expect(await processor({ data: { olderThanMs: 5 * 60_000 } } as never)).toEqual({ settled: 1 });
    expect(await settleAudit(ctx, 5 * 60_000)).toBe(0);

    expect((await list('?outcome=pending')).audit_events).toEqual([]);
    const settled = (await list('?outcome=no_response')).audit_events;
    expect(settled.map((e) => [e.id, e.outcome, e.status, e.details])).toEqual([
      [id, 'no_response', null, null],
    ]);
    expect((await entryFor(fresh.headers['x-request-id'] as string)).outcome).toBe('responded');

    // After the mark, a request that never answers (recent, no outcome) is still found as pending.
    const recent = newAuditEntryId(Date.now());
    await insertPending(recent.id, recent.occurredAt);
    expect((await list('?outcome=pending')).audit_events.map((e) => e.id)).toEqual([recent.id]);
    expect(await settleAudit(ctx, 5 * 60_000)).toBe(0);
    expect(await settleAudit({ db: ctx.db, clock: { now: () => Date.now() + 6 * 60_000 } }, 5 * 60_000)).toBe(
      1,
    );
    expect((await list('?outcome=pending')).audit_events).toEqual([]);
  });
});

describe('pure helpers', () => {
  it('writes route templates with {name}', () => {
    expect(routeTemplate('/org/subscribers/:subscriber_id/overrides/:feature_key')).toBe(
      '/org/subscribers/{subscriber_id}/overrides/{feature_key}',
    );
    expect(routeTemplate('/org/features')).toBe('/org/features');
  });

  it('keeps details small and secret-free', () => {
    expect(recordableDetails(null)).toBeNull();
    expect(recordableDetails({})).toBeNull();
    expect(recordableDetails({ grants: { a: { from: null, to: { kind: 'flag' } } } })).toEqual({
      grants: { a: { from: null, to: { kind: 'flag' } } },
    });
    expect(
      recordableDetails({
        grants: Object.fromEntries(
          Array.from({ length: 200 }, (_, i) => [`feature_${i}`, { from: null, to: { kind: 'flag' } }]),
        ),
      }),
    ).toEqual({
      grants: { too_large: true },
    });
    expect(recordableDetails({ secret: 'whsec_abcdefghijklmnopqrstuvwxyz' })).toEqual({
      secret: '[redacted]',
    });
    // An invite link pasted into a free-text field (SPEC.md: never a key, invite link or webhook secret).
    const link = 'http://localhost:3000/console/join/Xz93Wye1yh-Zu2ITbFMDeUkPbwCqGiIlHyhmxDfeooM';
    expect(recordableDetails({ description: { from: '', to: `join here: ${link}` } })).toEqual({
      description: { from: '', to: '[redacted]' },
    });
    expect(recordableDetails({ description: { from: '', to: 'see /join/us on the wiki' } })).toEqual({
      description: { from: '', to: 'see /join/us on the wiki' },
    });
  });

  it('makes entry ids that carry occurred_at, so a time window is an id range', () => {
    const newAuditEntryId = auditEntryIds();
    const at = Date.parse('2026-11-22T10:00:00.123Z');
    const first = newAuditEntryId(at);
    const second = newAuditEntryId(at);
    expect(first.occurredAt.toISOString()).toBe('2026-11-22T10:00:00.123Z');
    expect(second.id > first.id).toBe(true);
    expect(first.id >= auditIdFloor(at)).toBe(true);
    expect(first.id < auditIdFloor(at + 1)).toBe(true);
    expect(newAuditEntryId(at - 5).id > second.id).toBe(true);
    expect(rfc3339ToMs('2026-11-22T10:00:00.123Z')).toBe(at);
    expect(rfc3339ToMs('2026-11-22T10:00:00.1231Z')).toBe(at + 1);
    expect(rfc3339ToMs('2026-11-22T11:00:00.123+01:00')).toBe(at);
  });
});

describe('reading the log: filters', () => {
  let filterOrg: TestOrganization;
  let second: Awaited<ReturnType<typeof createKeyWithScopes>>;
  let checkOnly: Awaited<ReturnType<typeof createKeyWithScopes>>;
  let all: AuditEvent[];
  const get = (query: string) =>
    list(query, filterOrg.headers).then((body) => body.audit_events.map((e) => e.request_id));
  const requestIds: Record<string, string> = {};

  beforeAll(async () => {
    filterOrg = await createTestOrganization(ctx.db, 'Filter org');
    second = await createKeyWithScopes(ctx.db, filterOrg.organization_id, ['catalog:write']);
    checkOnly = await createKeyWithScopes(ctx.db, filterOrg.organization_id, ['check']);
    plaintextKeys.push(filterOrg.api_key, second.apiKey, checkOnly.apiKey);
    const steps: [string, 'POST' | 'PATCH', string, object, Record<string, string>][] = [
      ['createF1', 'POST', '/org/features', { key: 'f1', name: 'F1', kind: 'flag' }, filterOrg.headers],
      ['patchF1', 'PATCH', '/org/features/f1', { name: 'F1 renamed' }, filterOrg.headers],
      ['conflictF1', 'POST', '/org/features', { key: 'f1', name: 'F1', kind: 'flag' }, filterOrg.headers],
      [
        'createF2',
        'POST',
        '/org/features',
        { key: 'f2', name: 'F2', kind: 'limit' },
        { 'x-api-key': second.apiKey },
      ],
      ['patchF2', 'PATCH', '/org/features/f2', { description: 'two' }, { 'x-api-key': second.apiKey }],
      [
        'rejected',
        'POST',
        '/org/features',
        { key: 'f3', name: 'F3', kind: 'flag' },
        { 'x-api-key': checkOnly.apiKey },
      ],
    ];
    for (const [name, method, url, payload, headers] of steps) {
      const res = await inject(method, url, payload, headers);
      requestIds[name] = res.headers['x-request-id'] as string;
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    all = (await list('', filterOrg.headers)).audit_events;
  });

  it('lists every entry newest first by id, each with its outcome', () => {
    expect(all.map((e) => e.request_id)).toEqual(
      ['rejected', 'patchF2', 'createF2', 'conflictF1', 'patchF1', 'createF1'].map(
        (name) => requestIds[name],
      ),
    );
    expect([...all.map((e) => e.id)].sort().reverse()).toEqual(all.map((e) => e.id));
    expect(all.map((e) => [e.outcome, e.status])).toEqual([
      ['rejected', null],
      ['responded', 200],
      ['responded', 201],
      ['responded', 409],
      ['responded', 200],
      ['responded', 201],
    ]);
  });

  it('never shows another organization its entries', async () => {
    const theirs = (await list('?limit=100', other.headers)).audit_events;
    expect(theirs.filter((e) => e.organization_id !== other.organization_id)).toEqual([]);
    const mine = await list('?limit=100');
    expect(mine.audit_events.every((e) => e.organization_id === org.organization_id)).toBe(true);
  });

  it.each([
    ['actor_member_id', () => `actor_member_id=${second.memberId}`, ['patchF2', 'createF2']],
    [
      'outcome=responded',
      () => 'outcome=responded',
      ['patchF2', 'createF2', 'conflictF1', 'patchF1', 'createF1'],
    ],
    ['outcome=rejected', () => 'outcome=rejected', ['rejected']],
    ['outcome=pending', () => 'outcome=pending', []],
    ['outcome=no_response', () => 'outcome=no_response', []],
    ['method', () => 'method=PATCH', ['patchF2', 'patchF1']],
    ['method=GET', () => 'method=GET', []],
    ['route', () => `route=${encodeURIComponent('/org/features/{key}')}`, ['patchF2', 'patchF1']],
    ['params[key]', () => 'params[key]=f1', ['patchF1']],
    ['params[key] (encoded brackets)', () => 'params%5Bkey%5D=f2', ['patchF2']],
    ['params, two names (AND)', () => 'params[key]=f1&params[subscriber_id]=x', []],
    [
      'service=api',
      () => 'service=api',
      ['rejected', 'patchF2', 'createF2', 'conflictF1', 'patchF1', 'createF1'],
    ],
    ['service=identity', () => 'service=identity', []],
    ['request_id', () => `request_id=${requestIds.conflictF1}`, ['conflictF1']],
    [
      'actor + method + outcome',
      () => `actor_member_id=${filterOrg.member_id}&method=POST&outcome=responded`,
      ['conflictF1', 'createF1'],
    ],
    [
      'route + params + actor',
      () =>
        `route=${encodeURIComponent('/org/features/{key}')}&params[key]=f2&actor_member_id=${second.memberId}`,
      ['patchF2'],
    ],
    [
      'route + params, actor mismatch',
      () =>
        `route=${encodeURIComponent('/org/features/{key}')}&params[key]=f2&actor_member_id=${filterOrg.member_id}`,
      [],
    ],
  ])('filters by %s', async (_name, query, expected) => {
    expect(await get(`?${query()}`)).toEqual(expected.map((name) => requestIds[name]));
  });

  it('filters by occurred_after (inclusive) and occurred_before (exclusive), alone and combined', async () => {
    const at = (name: string) => all.find((e) => e.request_id === requestIds[name])!.occurred_at;
    expect(await get(`?occurred_after=${at('createF2')}`)).toEqual(
      ['rejected', 'patchF2', 'createF2'].map((n) => requestIds[n]),
    );
    expect(await get(`?occurred_before=${at('createF2')}`)).toEqual(
      ['conflictF1', 'patchF1', 'createF1'].map((n) => requestIds[n]),
    );
    expect(
      await get(`?occurred_after=${at('patchF1')}&occurred_before=${at('patchF2')}&method=POST`),
    ).toEqual(['createF2', 'conflictF1'].map((n) => requestIds[n]));
    const offset = new Date(Date.parse(at('createF2'))).toISOString().replace('Z', '+00:00');
    expect(await get(`?occurred_after=${encodeURIComponent(offset)}`)).toHaveLength(3);
  });

  // These two add entries: each has an organization of its own, so the data set above stays as it is.
  it('pages newest first with no gaps or repeats while new entries arrive', async () => {
    const own = await createTestOrganization(ctx.db, 'Paging org');
    plaintextKeys.push(own.api_key);
    for (let i = 0; i < 5; i++)
      await inject('POST', '/org/features', { key: `seed-${i}`, name: 'Seed', kind: 'flag' }, own.headers);
    const expected = (await list('?limit=100', own.headers)).audit_events.map((e) => e.id);
    expect(expected).toHaveLength(5);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const body = await list(`?limit=2${cursor ? `&starting_after=${cursor}` : ''}`, own.headers);
      if (page === 0) expect(body.audit_events.map((e) => e.id)).toEqual(expected.slice(0, 2));
      seen.push(...body.audit_events.map((e) => e.id));
      // A write lands between pages: it is newer than every page still to come.
      await inject('POST', '/org/features', { key: `page-${page}`, name: 'Page', kind: 'flag' }, own.headers);
      if (!body.has_more) break;
      cursor = body.audit_events.at(-1)!.id;
    }
    expect(seen).toEqual(expected);
    expect(new Set(seen).size).toBe(seen.length);
    const newest = await list('?limit=1', own.headers);
    expect(newest.has_more).toBe(true);
    expect(newest.audit_events[0]!.id > expected[0]!).toBe(true);
  });

  it('defaults to 20 per page and allows at most 100', async () => {
    const own = await createTestOrganization(ctx.db, 'Bulk org');
    plaintextKeys.push(own.api_key);
    for (let i = 0; i < 24; i++)
      await inject('POST', '/org/features', { key: `bulk-${i}`, name: 'Bulk', kind: 'flag' }, own.headers);
    const page = await list('', own.headers);
    expect(page.audit_events).toHaveLength(20);
    expect(page.has_more).toBe(true);
    const big = await list('?limit=100', own.headers);
    expect(big.audit_events).toHaveLength(24);
    expect(big.has_more).toBe(false);
  });

  it.each([
    ['unknown=1', 'unknown'],
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['starting_after=nope', 'starting_after'],
    [`starting_after=aud_${'0'.repeat(26)}`, 'starting_after'],
    ['actor_member_id=someone', 'actor_member_id'],
    ['outcome=done', 'outcome'],
    ['method=post', 'method'],
    ['method=OPTIONS', 'method'],
    ['route=features', 'route'],
    ['service=billing', 'service'],
    ['request_id=abc', 'request_id'],
    ['occurred_after=yesterday', 'occurred_after'],
    ['occurred_after=2026-01-01', 'occurred_after'],
    ['occurred_before=2026-01-01T00:00:00', 'occurred_before'],
    ['params[key]=', 'params[key]'],
    ['params[]=x', 'params[]'],
    ['params=x', 'params'],
    ['params[a-b]=x', 'params[a-b]'],
    // Names no route has as a path value, those of Object.prototype among them.
    ['params[other]=x', 'params[other]'],
    ['params[__proto__]=x', 'params[__proto__]'],
    ['params[constructor]=x', 'params[constructor]'],
    ['params[toString]=x', 'params[toString]'],
    ['params[hasOwnProperty]=x', 'params[hasOwnProperty]'],
    ['params%5B__proto__%5D=x', 'params[__proto__]'],
  ])('answers %s with 422 VALIDATION_ERROR naming %s', async (query, field) => {
    const res = await ctx.app.inject({
      method: 'GET',
      url: `/org/audit-events?${query}`,
      headers: filterOrg.headers,
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('refuses a cursor from another organization', async () => {
    await createFeature(uniqueKey('theirs'), 'Theirs');
    const theirs = (await list('?limit=1', org.headers)).audit_events[0]!;
    const res = await ctx.app.inject({
      method: 'GET',
      url: `/org/audit-events?starting_after=${theirs.id}`,
      headers: filterOrg.headers,
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details).toMatchObject({ field: 'starting_after' });
  });
});

describe('OpenAPI', () => {
  it('lists a params[<name>] filter for each path value name of the /org routes, and no other', async () => {
    const paths = Object.keys((await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths);
    const names = new Set(
      paths
        .filter((path) => path.startsWith('/org/'))
        .flatMap((path) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)),
    );
    expect([...AUDIT_PATH_VALUE_NAMES].sort()).toEqual([...names].sort());
  });

  it('documents the audit route and its filters', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const route = res.json().paths['/org/audit-events'];
    expect(route.get.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining([
        'limit',
        'starting_after',
        'outcome',
        'route',
        'occurred_after',
        'occurred_before',
      ]),
    );
  });
});

describe('no secrets in the log', () => {
  it('holds no plaintext key anywhere, in the tables or through the API', async () => {
    // Keys of every kind at work (whatever else this file ran before): writes, refusals, and keys made over the API.
    const own = await createTestOrganization(ctx.db, 'Keys org');
    plaintextKeys.push(own.api_key);
    for (const scopes of [['catalog:write'], ['check'], ['org:write'], ['catalog:read']] as const) {
      const key = await createKeyWithScopes(ctx.db, own.organization_id, [...scopes]);
      plaintextKeys.push(key.apiKey);
      for (let i = 0; i < 6; i++) {
        await inject(
          'POST',
          '/org/features',
          { key: uniqueKey('swept'), name: 'Swept', kind: 'flag' },
          { 'x-api-key': key.apiKey },
        );
      }
    }
    const made = await inject(
      'POST',
      `/org/service-accounts/${own.service_account_id}/api-keys`,
      { name: 'made over the API' },
      own.headers,
    );
    expect(made.statusCode, made.body).toBe(201);
    plaintextKeys.push(made.json().api_key);
    expect(plaintextKeys.length).toBeGreaterThan(5);
    const rows = await sql<{ row: string }>`
      SELECT row_to_json(e)::text || coalesce(row_to_json(o)::text, '') AS row
      FROM audit_events e LEFT JOIN audit_outcomes o ON o.event_id = e.id`.execute(ctx.ownerDb);
    expect(rows.rows.length).toBeGreaterThan(20);
    const dump = rows.rows.map((r) => r.row).join('\n');
    for (const key of plaintextKeys) {
      expect(dump).not.toContain(key);
      expect(dump).not.toContain(key.slice(keyPrefixOf(key).length));
    }
    for (const headers of [org.headers, other.headers, own.headers]) {
      let cursor = '';
      for (let page = 0; page < 50; page++) {
        const body = await list(`?limit=100${cursor}`, headers);
        const json = JSON.stringify(body);
        for (const key of plaintextKeys) expect(json).not.toContain(key);
        if (!body.has_more) break;
        cursor = `&starting_after=${body.audit_events.at(-1)!.id}`;
      }
    }
  });
});
