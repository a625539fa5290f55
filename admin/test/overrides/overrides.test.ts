import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { WriteOutcome } from '../../src/features/shared/write/outcome.ts';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
  subscriberVersion,
} from '../../../test-support/admin-context.ts';

const NOW = Date.parse('2027-03-15T12:00:00.000Z');
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

let ctx: AdminTestContext;
let org: TestOrganization;
const clock = new ManualClock(NOW);
const writes: WriteOutcome[] = [];
const lastWrite = () => writes[writes.length - 1]!;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  ctx.app.writePipeline.onCommitted(async (_request, write) => void writes.push(write));
});
// Every case gets an organization of its own (six features, three subscribers, no override yet), so cases
// share no state and run in any order.
beforeEach(async () => {
  clock.set(NOW);
  org = await createTestOrganization(ctx.db, 'Acme');
  for (const [key, kind] of [
    ['sso', 'flag'],
    ['audit-log', 'flag'],
    ['beta', 'flag'],
    ['seats', 'limit'],
    ['projects', 'limit'],
    ['api-calls', 'metered'],
  ]) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: org.headers,
      payload: { key, name: key, kind },
    });
    expect(res.statusCode).toBe(201);
  }
  for (const subscriber_id of ['alice', 'bob', 'carol']) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/subscribers',
      headers: org.headers,
      payload: { subscriber_id },
    });
    expect(res.statusCode).toBe(201);
  }
});
afterAll(() => ctx.close());

const url = (subscriberId: string, featureKey?: string) =>
  `/org/subscribers/${subscriberId}/overrides${featureKey === undefined ? '' : `/${featureKey}`}`;
const put = (subscriberId: string, featureKey: string, payload: unknown) =>
  ctx.app.inject({
    method: 'PUT',
    url: url(subscriberId, featureKey),
    headers: org.headers,
    payload: payload as object,
  });
const get = (path: string) => ctx.app.inject({ method: 'GET', url: path, headers: org.headers });
const del = (subscriberId: string, featureKey: string) =>
  ctx.app.inject({ method: 'DELETE', url: url(subscriberId, featureKey), headers: org.headers });
const listedFeatures = async (path: string) => {
  const res = await get(path);
  expect(res.statusCode).toBe(200);
  return (res.json().overrides as Array<{ feature: string }>).map((o) => o.feature);
};
const versionOf = (subscriberId: string) => subscriberVersion(ctx.db, org.organization_id, subscriberId);

describe('PUT .../overrides/{feature_key}', () => {
  it('creates a flag override with 200 and reports what it created', async () => {
    const before = await versionOf('alice');
    const res = await put('alice', 'sso', { kind: 'flag', allowed: true });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^ovr_[0-9a-z]{26}$/),
      subscriber_id: 'alice',
      feature: 'sso',
      kind: 'flag',
      allowed: true,
      expires_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await versionOf('alice')).toBe(before + 1);
    const write = lastWrite();
    expect(write.details).toEqual({ override_id: body.id, kind: 'flag', allowed: true, expires_at: null });
    expect([...write.subscribersChanged]).toEqual(['alice']);
    expect(write.events).toEqual([{ type: 'override.upserted', data: body }]);
  });

  it('creates a limit override with an expiry, normalised to UTC with milliseconds', async () => {
    const res = await put('alice', 'seats', {
      kind: 'limit',
      limit: 10,
      expires_at: '2030-01-01T00:00:00+02:00',
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      feature: 'seats',
      kind: 'limit',
      limit: 10,
      expires_at: '2029-12-31T22:00:00.000Z',
    });
    expect(body).not.toHaveProperty('allowed');
    expect(lastWrite().details).toEqual({
      override_id: body.id,
      kind: 'limit',
      limit: 10,
      expires_at: '2029-12-31T22:00:00.000Z',
    });
  });

  it('accepts null as an unlimited limit', async () => {
    const res = await put('bob', 'seats', { kind: 'limit', limit: null });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ kind: 'limit', limit: null, expires_at: null });
  });

  it('accepts limit 0 and allowed false (absolute values)', async () => {
    expect((await put('bob', 'projects', { kind: 'limit', limit: 0 })).json().limit).toBe(0);
    expect((await put('bob', 'sso', { kind: 'flag', allowed: false })).json().allowed).toBe(false);
  });

  it('replaces an existing override in place and reports the changes', async () => {
    await put('alice', 'seats', { kind: 'limit', limit: 10, expires_at: '2030-01-01T00:00:00+02:00' });
    const first = (await get(url('alice', 'seats'))).json();
    const before = await versionOf('alice');
    const res = await put('alice', 'seats', { kind: 'limit', limit: 20 });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ id: first.id, limit: 20, expires_at: null, created_at: first.created_at });
    expect(await versionOf('alice')).toBe(before + 1);
    expect(lastWrite().details).toEqual({
      limit: { from: 10, to: 20 },
      expires_at: { from: '2029-12-31T22:00:00.000Z', to: null },
    });
    expect(lastWrite().events).toEqual([{ type: 'override.upserted', data: body }]);
  });

  it('reports only what changed', async () => {
    await put('alice', 'seats', { kind: 'limit', limit: 20 });
    const res = await put('alice', 'seats', { kind: 'limit', limit: 20, expires_at: iso(NOW + 48 * HOUR) });
    expect(res.statusCode).toBe(200);
    expect(lastWrite().details).toEqual({ expires_at: { from: null, to: iso(NOW + 48 * HOUR) } });
    await put('alice', 'seats', { kind: 'limit', limit: null, expires_at: iso(NOW + 48 * HOUR) });
    expect(lastWrite().details).toEqual({ limit: { from: 20, to: null } });
  });

  it('changes nothing (details null, version kept) when the values are the same', async () => {
    await put('alice', 'sso', { kind: 'flag', allowed: true });
    const before = await versionOf('alice');
    const res = await put('alice', 'sso', { kind: 'flag', allowed: true, expires_at: null });
    expect(res.statusCode).toBe(200);
    expect(await versionOf('alice')).toBe(before);
    expect(lastWrite().details).toBeNull();
    expect(lastWrite().events).toEqual([]);
  });

  it('accepts an expires_at in the past: the override exists and is already expired', async () => {
    const res = await put('carol', 'beta', { kind: 'flag', allowed: true, expires_at: iso(NOW - HOUR) });
    expect(res.statusCode).toBe(200);
    expect(res.json().expires_at).toBe(iso(NOW - HOUR));
  });

  it('answers 404 for an unknown subscriber or feature', async () => {
    const ghost = await put('ghost', 'sso', { kind: 'flag', allowed: true });
    expect(ghost.statusCode).toBe(404);
    expect(ghost.json().error).toMatchObject({
      code: 'NOT_FOUND',
      details: { field: 'subscriber_id', value: 'ghost' },
    });
    const feature = await put('alice', 'nope', { kind: 'flag', allowed: true });
    expect(feature.statusCode).toBe(404);
    expect(feature.json().error).toMatchObject({
      code: 'NOT_FOUND',
      details: { field: 'feature_key', value: 'nope' },
    });
  });

  it('refuses a kind that differs from the feature kind with 422', async () => {
    const res = await put('alice', 'seats', { kind: 'flag', allowed: true });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'kind', value: 'flag', expected: 'limit' },
    });
    const other = await put('alice', 'sso', { kind: 'limit', limit: 3 });
    expect(other.statusCode).toBe(422);
    expect(other.json().error.details.field).toBe('kind');
  });

  it.each([
    [{ allowed: true }, 'kind'],
    [{ kind: 'toggle', allowed: true }, 'kind'],
    [{ kind: 'flag' }, 'allowed'],
    [{ kind: 'flag', allowed: 'yes' }, 'allowed'],
    [{ kind: 'flag', allowed: true, limit: 5 }, 'limit'],
    [{ kind: 'flag', allowed: true, limit: null }, 'limit'],
    [{ kind: 'limit' }, 'limit'],
    [{ kind: 'limit', limit: 5, allowed: true }, 'allowed'],
    [{ kind: 'limit', limit: -1 }, 'limit'],
    [{ kind: 'limit', limit: 1.5 }, 'limit'],
    [{ kind: 'limit', limit: '5' }, 'limit'],
    [{ kind: 'limit', limit: 2 ** 60 }, 'limit'],
    [{ kind: 'limit', limit: 5, expires_at: 'tomorrow' }, 'expires_at'],
    [{ kind: 'limit', limit: 5, expires_at: '2030-01-01' }, 'expires_at'],
    [{ kind: 'limit', limit: 5, expires_at: '2030-01-01T00:00:00' }, 'expires_at'],
    [{ kind: 'limit', limit: 5, expires_at: '2030-02-30T00:00:00Z' }, 'expires_at'],
    [{ kind: 'limit', limit: 5, expires_at: 1893456000 }, 'expires_at'],
    [{ kind: 'limit', limit: 5, note: 'x' }, 'note'],
  ])('refuses %j with 422 on %s', async (payload, field) => {
    const res = await put('bob', 'projects', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('left the override untouched after refused bodies', async () => {
    await put('bob', 'projects', { kind: 'limit', limit: 0 });
    expect((await put('bob', 'projects', { kind: 'limit', limit: -1 })).statusCode).toBe(422);
    expect((await put('bob', 'projects', { kind: 'flag', allowed: true })).statusCode).toBe(422);
    expect((await get(url('bob', 'projects'))).json()).toMatchObject({ limit: 0, expires_at: null });
  });
  it('keeps one override per feature under concurrent puts', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => put('bob', 'audit-log', { kind: 'flag', allowed: i % 2 === 0 })),
    );
    expect(results.map((res) => res.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(results.map((res) => res.json().id)).size).toBe(1);
    await del('bob', 'audit-log');
  });
});

describe('metered overrides (DESIGN.md §5: the limit only)', () => {
  it('creates, replaces and deletes a metered override, audited and raised as a limit override is', async () => {
    const before = await versionOf('alice');
    const res = await put('alice', 'api-calls', {
      kind: 'metered',
      limit: 5000,
      expires_at: '2030-01-01T00:00:00Z',
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^ovr_/),
      subscriber_id: 'alice',
      feature: 'api-calls',
      kind: 'metered',
      limit: 5000,
      expires_at: '2030-01-01T00:00:00.000Z',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await versionOf('alice')).toBe(before + 1);
    expect(lastWrite().details).toEqual({
      override_id: body.id,
      kind: 'metered',
      limit: 5000,
      expires_at: '2030-01-01T00:00:00.000Z',
    });
    expect(lastWrite().events).toEqual([{ type: 'override.upserted', data: body }]);
    expect((await get(url('alice', 'api-calls'))).json()).toEqual(body);
    expect(await listedFeatures(url('alice'))).toEqual(['api-calls']);

    const unlimited = await put('alice', 'api-calls', { kind: 'metered', limit: null });
    expect(unlimited.json()).toMatchObject({ id: body.id, kind: 'metered', limit: null, expires_at: null });
    expect(lastWrite().details).toEqual({
      limit: { from: 5000, to: null },
      expires_at: { from: '2030-01-01T00:00:00.000Z', to: null },
    });

    expect((await put('alice', 'api-calls', { kind: 'metered', limit: null })).statusCode).toBe(200);
    expect(lastWrite().details).toBeNull();

    expect((await del('alice', 'api-calls')).statusCode).toBe(204);
    expect(lastWrite().events).toEqual([
      { type: 'override.deleted', data: expect.objectContaining({ kind: 'metered', limit: null }) },
    ]);
  });

  it('accepts limit 0', async () => {
    expect((await put('bob', 'api-calls', { kind: 'metered', limit: 0 })).json().limit).toBe(0);
  });

  it('refuses a kind other than the feature kind with 422, either way', async () => {
    const limitOfMetered = await put('alice', 'api-calls', { kind: 'limit', limit: 3 });
    expect(limitOfMetered.statusCode).toBe(422);
    expect(limitOfMetered.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'kind', value: 'limit', expected: 'metered' },
    });
    const meteredOfLimit = await put('alice', 'seats', { kind: 'metered', limit: 3 });
    expect(meteredOfLimit.json().error).toMatchObject({
      details: { field: 'kind', value: 'metered', expected: 'limit' },
    });
  });

  it.each([
    [
      { kind: 'metered' },
      'limit',
      'limit is required for a metered override (an integer >= 0, or null for unlimited).',
    ],
    [{ kind: 'metered', limit: 5, allowed: true }, 'allowed', 'A metered override sets limit, not allowed.'],
    [{ kind: 'metered', allowed: true }, 'allowed', 'A metered override sets limit, not allowed.'],
    [{ kind: 'metered', limit: -1 }, 'limit', undefined],
    [{ kind: 'metered', limit: 1.5 }, 'limit', undefined],
    [{ kind: 'metered', limit: 5, reset: 'day' }, 'reset', undefined],
    [{ kind: 'metered', limit: 5, soft: true }, 'soft', undefined],
    [{ kind: 'metered', limit: 5, expires_at: 'tomorrow' }, 'expires_at', undefined],
  ])('refuses %j with 422 on %s, and creates nothing', async (payload, field, message) => {
    const res = await put('carol', 'api-calls', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field },
      ...(message === undefined ? {} : { message }),
    });
    expect((await get(url('carol', 'api-calls'))).statusCode).toBe(404);
  });
});

describe('GET .../overrides/{feature_key}', () => {
  it('returns the override', async () => {
    await put('alice', 'sso', { kind: 'flag', allowed: true });
    const res = await get(url('alice', 'sso'));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ subscriber_id: 'alice', feature: 'sso', kind: 'flag', allowed: true });
  });

  it('returns an expired override too', async () => {
    await put('carol', 'beta', { kind: 'flag', allowed: true, expires_at: iso(NOW - HOUR) });
    const res = await get(url('carol', 'beta'));
    expect(res.statusCode).toBe(200);
    expect(res.json().expires_at).toBe(iso(NOW - HOUR));
  });

  it('answers 404 when none exists, and for an unknown feature or subscriber', async () => {
    const none = await get(url('alice', 'projects'));
    expect(none.statusCode).toBe(404);
    expect(none.json().error.code).toBe('NOT_FOUND');
    expect((await get(url('alice', 'nope'))).statusCode).toBe(404);
    expect((await get(url('ghost', 'sso'))).statusCode).toBe(404);
  });
});

describe('GET .../overrides', () => {
  it('lists live overrides ordered by feature key; include_expired=true adds expired ones', async () => {
    await put('carol', 'beta', { kind: 'flag', allowed: true, expires_at: iso(NOW - HOUR) });
    await put('carol', 'sso', { kind: 'flag', allowed: true, expires_at: iso(NOW + HOUR) });
    await put('carol', 'seats', { kind: 'limit', limit: 5 });
    await put('carol', 'audit-log', { kind: 'flag', allowed: false, expires_at: iso(NOW) });
    expect(await listedFeatures(url('carol'))).toEqual(['seats', 'sso']);
    expect(await listedFeatures(`${url('carol')}?include_expired=false`)).toEqual(['seats', 'sso']);
    expect(await listedFeatures(`${url('carol')}?include_expired=true`)).toEqual([
      'audit-log',
      'beta',
      'seats',
      'sso',
    ]);
  });

  it('treats expiry by the service clock: an override expires the instant its time passes', async () => {
    await put('carol', 'sso', { kind: 'flag', allowed: true, expires_at: iso(NOW + HOUR) });
    await put('carol', 'seats', { kind: 'limit', limit: 5 });
    clock.advance(HOUR - 1);
    expect(await listedFeatures(url('carol'))).toEqual(['seats', 'sso']);
    clock.advance(1);
    expect(await listedFeatures(url('carol'))).toEqual(['seats']);
    clock.set(NOW);
  });

  it('pages with limit and starting_after (a feature key)', async () => {
    await put('carol', 'beta', { kind: 'flag', allowed: true, expires_at: iso(NOW - HOUR) });
    await put('carol', 'sso', { kind: 'flag', allowed: true, expires_at: iso(NOW + HOUR) });
    await put('carol', 'seats', { kind: 'limit', limit: 5 });
    await put('carol', 'audit-log', { kind: 'flag', allowed: false, expires_at: iso(NOW) });
    const first = await get(`${url('carol')}?include_expired=true&limit=3`);
    expect(first.json().overrides.map((o: { feature: string }) => o.feature)).toEqual([
      'audit-log',
      'beta',
      'seats',
    ]);
    expect(first.json().has_more).toBe(true);
    const next = await get(`${url('carol')}?include_expired=true&limit=3&starting_after=seats`);
    expect(next.json()).toMatchObject({ overrides: [{ feature: 'sso' }], has_more: false });
    // The last item's own id names the same place (a client walking every list by `id`).
    const lastId = (first.json().overrides as { id: string }[]).at(-1)!.id;
    expect(lastId).toMatch(/^ovr_/);
    const byId = await get(`${url('carol')}?include_expired=true&limit=3&starting_after=${lastId}`);
    expect(byId.json()).toEqual(next.json());
  });

  it("refuses a starting_after that is not the feature key of one of the subscriber's overrides with 422", async () => {
    // Another subscriber's override id names no place in this list.
    const othersId = (await put('bob', 'sso', { kind: 'flag', allowed: true })).json().id as string;
    for (const cursor of ['nope', 'a', 'zzz', othersId, 'ovr_00000000000000000000000000']) {
      const res = await get(`${url('carol')}?starting_after=${cursor}`);
      expect(res.statusCode, cursor).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after', value: cursor },
      });
    }
  });

  it("lists only the subscriber's own overrides", async () => {
    await put('bob', 'seats', { kind: 'limit', limit: null });
    await put('bob', 'projects', { kind: 'limit', limit: 0 });
    await put('bob', 'sso', { kind: 'flag', allowed: false });
    await put('alice', 'beta', { kind: 'flag', allowed: true });
    expect(await listedFeatures(url('bob'))).toEqual(['projects', 'seats', 'sso']);
  });

  it('answers 404 for an unknown subscriber', async () => {
    expect((await get(url('ghost'))).statusCode).toBe(404);
  });

  it.each(['include_expired=yes', 'include_expired=', 'expired=true', 'limit=500'])(
    'refuses ?%s with 422',
    async (query) => {
      const res = await get(`${url('carol')}?${query}`);
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('VALIDATION_ERROR');
    },
  );
});

describe('DELETE .../overrides/{feature_key}', () => {
  it('deletes the override with 204; it is gone afterwards', async () => {
    await put('bob', 'seats', { kind: 'limit', limit: null });
    await put('bob', 'projects', { kind: 'limit', limit: 0 });
    await put('bob', 'sso', { kind: 'flag', allowed: false });
    const existing = (await get(url('bob', 'seats'))).json();
    const before = await versionOf('bob');
    const res = await del('bob', 'seats');
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(await versionOf('bob')).toBe(before + 1);
    const write = lastWrite();
    expect(write.details).toBeNull();
    expect([...write.subscribersChanged]).toEqual(['bob']);
    expect(write.events).toEqual([{ type: 'override.deleted', data: existing }]);
    expect((await get(url('bob', 'seats'))).statusCode).toBe(404);
    expect(await listedFeatures(url('bob'))).toEqual(['projects', 'sso']);
  });

  it('answers 204 and changes nothing when there is no override', async () => {
    const before = await versionOf('bob');
    const res = await del('bob', 'seats');
    expect(res.statusCode).toBe(204);
    expect(await versionOf('bob')).toBe(before);
    expect(lastWrite().events).toEqual([]);
  });

  it('answers 404 for an unknown subscriber or feature', async () => {
    expect((await del('ghost', 'sso')).statusCode).toBe(404);
    expect((await del('bob', 'nope')).statusCode).toBe(404);
  });

  it('can create the override again after a delete (a new id)', async () => {
    const first = await put('bob', 'seats', { kind: 'limit', limit: 3 });
    expect((await del('bob', 'seats')).statusCode).toBe(204);
    const res = await put('bob', 'seats', { kind: 'limit', limit: 1 });
    expect(res.statusCode).toBe(200);
    expect(lastWrite().details).toMatchObject({ kind: 'limit', limit: 1, override_id: res.json().id });
    expect(res.json().id).not.toBe(first.json().id);
  });
});
