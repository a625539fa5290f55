import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_PATH_VALUE_NAMES } from '@ent/contract/audit';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { auditLog, type AuditEvent } from './log.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Audit org');
  other = await createTestOrganization(ctx.db, 'Other org');
});
afterAll(() => ctx.close());

const { inject, list, uniqueKey, createFeature } = auditLog(() => ({ ctx, org }));

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
    // Numbers only as decimal text: Number() would read these as 16, 10, 3, 3 and 2.
    ['limit=0x10', 'limit'],
    ['limit=1e1', 'limit'],
    ['limit=%2B3', 'limit'],
    ['limit=3.0', 'limit'],
    ['limit=2%20', 'limit'],
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
