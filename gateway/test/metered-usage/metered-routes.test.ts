import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { publishArrangement, saveArrangement } from '@ent/common/metering/arrangement';
import { redisKeys } from '@ent/common/redis/keys';
import type { CatalogDoc, MeteredGrant } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { deleteKeys } from '../../../test-support/redis-keys.ts';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, gatewayOverAdmin, injector } from '../helpers.ts';

/**
 * Metered features on two gateways of one admin, one Redis and one clock the test moves. The catalog and subscriber
 * documents are written to Redis directly, at versions past admin's, as the snapshot builder publishes them.
 */
const clock = new ManualClock(Date.parse('2026-03-31T23:59:00Z'));
let ctx: AdminTestContext;
const gateways: GatewayApp[] = [];
let catalogVersion = 1000;
let subscriberCount = 0;

const grant = (limit: number | null, extra: Partial<MeteredGrant> = {}): MeteredGrant => ({
  kind: 'metered',
  limit,
  reset: 'month',
  anchor: 'calendar',
  soft: false,
  ...extra,
});

async function publishCatalog(
  org: string,
  plans: Record<string, Record<string, MeteredGrant | { kind: 'flag' }>>,
) {
  const doc = {
    features: { calls: 'metered', tokens: 'metered', sso: 'flag' },
    plans: Object.fromEntries(Object.entries(plans).map(([id, grants]) => [id, { archived: false, grants }])),
  } as unknown as CatalogDoc;
  await snapshotStore(ctx.redis, redisKeys(ctx.config.redisKeyPrefix)).putCatalog(org, {
    version: ++catalogVersion,
    doc,
  });
}

/** An organization with plan `pro` (calls: 10 a month, hard; tokens: 100 a day, soft; sso) and one subscriber. */
async function organization(): Promise<{
  org: TestOrganization;
  subscriber: string;
  call: ReturnType<typeof catalogClient>['send'][];
}> {
  const org = await createTestOrganization(ctx.db, `metered ${subscriberCount}`);
  await saveArrangement(ctx.db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 10_000,
  });
  const subscriber = `sub${subscriberCount++}`;
  const calls = gateways.map((gateway) => catalogClient(injector(gateway), org.headers).send);
  await calls[0]!('POST', '/org/subscribers', { subscriber_id: subscriber, name: subscriber }, 201);
  await publishCatalog(org.organization_id, {
    pro: { calls: grant(10), tokens: grant(100, { reset: 'day', soft: true }), sso: { kind: 'flag' } },
  });
  await snapshotStore(ctx.redis, redisKeys(ctx.config.redisKeyPrefix)).putSubscriber(
    org.organization_id,
    subscriber,
    {
      version: 1000 + subscriberCount,
      doc: { exists: true, plans: ['pro'], overrides: {} },
    },
  );
  return { org, subscriber, call: calls };
}

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateways.push(await gatewayOverAdmin(ctx, { clock }), await gatewayOverAdmin(ctx, { clock }));
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await ctx?.close();
});

const check = (
  send: ReturnType<typeof catalogClient>['send'],
  subscriber: string,
  body: object,
  headers?: Record<string, string>,
) =>
  headers
    ? send('POST', `/org/subscribers/${subscriber}/entitlements/check`, body)
    : send('POST', `/org/subscribers/${subscriber}/entitlements/check`, body);

describe('metered features on the gateway', () => {
  it('answers use, consumes exactly up to a hard limit on either gateway, and lists metered features with their use', async () => {
    const { subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    const read = await check(a, subscriber, { feature: 'calls' });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual({
      feature: 'calls',
      kind: 'metered',
      limit: 10,
      used: 0,
      remaining: 10,
      allowed: true,
      period_start: '2026-03-01T00:00:00.000Z',
      resets_at: '2026-04-01T00:00:00.000Z',
      source: 'plan',
      credits: [],
    });
    const consumed = [];
    for (const [send, n] of [
      [a, 4],
      [b, 5],
      [a, 2],
      [b, 1],
    ] as const) {
      consumed.push((await check(send, subscriber, { feature: 'calls', consume: n })).json());
    }
    expect(consumed.map((r) => [r.allowed, r.used, r.remaining])).toEqual([
      [true, 4, 6],
      [true, 9, 1],
      [false, 9, 1],
      [true, 10, 0],
    ]);
    const soft = (await check(b, subscriber, { feature: 'tokens', consume: 150 })).json();
    expect(soft).toMatchObject({
      allowed: true,
      used: 150,
      remaining: 0,
      overage: 50,
      resets_at: '2026-04-01T00:00:00.000Z',
    });
    const list = await a('GET', `/org/subscribers/${subscriber}/entitlements`);
    expect(
      list.json().entitlements.map((e: { feature: string; used?: number }) => [e.feature, e.used]),
    ).toEqual([
      ['calls', 10],
      ['sso', undefined],
      ['tokens', 150],
    ]);
    const usage = await b('GET', `/org/subscribers/${subscriber}/usage`);
    expect(usage.statusCode).toBe(200);
    expect(usage.json().usage.map((u: { feature: string; used: number }) => [u.feature, u.used])).toEqual([
      ['calls', 10],
      ['tokens', 150],
    ]);
  });

  it('refuses consume on a flag, a report without exactly one of delta and set, and answers 404 for unknowns', async () => {
    const { subscriber, call } = await organization();
    const [a] = call as [ReturnType<typeof catalogClient>['send']];
    const flag = await check(a, subscriber, { feature: 'sso', consume: 1 });
    expect(flag.statusCode).toBe(422);
    expect(flag.json().error.details.field).toBe('consume');
    for (const body of [
      { feature: 'calls' },
      { feature: 'calls', delta: 1, set: 2 },
      { feature: 'calls', delta: 0 },
    ]) {
      const res = await a('POST', `/org/subscribers/${subscriber}/usage`, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
      expect(res.json().error.code).toBe('VALIDATION_ERROR');
    }
    expect(
      (await a('POST', `/org/subscribers/nobody/usage`, { feature: 'calls', delta: 1 })).statusCode,
    ).toBe(404);
    expect((await check(a, 'nobody', { feature: 'calls', consume: 1 })).statusCode).toBe(404);
    expect((await a('GET', `/org/subscribers/nobody/usage`)).statusCode).toBe(404);
    expect(
      (await a('POST', `/org/subscribers/${subscriber}/usage`, { feature: 'sso', delta: 1 })).statusCode,
    ).toBe(422);
  });

  it('applies reports and batches, each event answered in order, and replays an idempotent report on the other gateway', async () => {
    const { org, subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    const report = (send: typeof a, body: object, key: string) =>
      gateways[send === a ? 0 : 1]!.inject({
        method: 'POST',
        url: `/org/subscribers/${subscriber}/usage`,
        headers: { ...org.headers, 'idempotency-key': key },
        payload: body,
      });
    const first = await report(a, { feature: 'calls', delta: 7 }, 'r1');
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ used: 7, remaining: 3, allowed: true });
    const again = await report(b, { feature: 'calls', delta: 7 }, 'r1');
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const reused = await report(b, { feature: 'calls', delta: 8 }, 'r1');
    expect(reused.statusCode).toBe(422);
    expect(reused.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');

    const batch = await b('POST', '/org/usage-events', {
      events: [
        { subscriber_id: subscriber, feature: 'calls', set: 2 },
        { subscriber_id: 'nobody', feature: 'calls', delta: 1 },
        { subscriber_id: subscriber, feature: 'sso', delta: 1 },
        { subscriber_id: subscriber, feature: 'missing', delta: 1 },
        { subscriber_id: subscriber, feature: 'calls', delta: 20, idempotency_key: 'e1' },
        { subscriber_id: subscriber, feature: 'calls', delta: 20, idempotency_key: 'e1' },
        { subscriber_id: subscriber, feature: 'calls', delta: -50 },
      ],
    });
    expect(batch.statusCode).toBe(200);
    const results = batch.json().results;
    expect(results.map((r: { used?: number; error?: { code: string } }) => r.error?.code ?? r.used)).toEqual([
      2,
      'NOT_FOUND',
      'VALIDATION_ERROR',
      'NOT_FOUND',
      22,
      22,
      0,
    ]);
    // An idempotent consume repeated on the other gateway is applied once.
    const consume = (gateway: GatewayApp) =>
      gateway.inject({
        method: 'POST',
        url: `/org/subscribers/${subscriber}/entitlements/check`,
        headers: { ...org.headers, 'idempotency-key': 'c1' },
        payload: { feature: 'calls', consume: 3 },
      });
    const once = await consume(gateways[0]!);
    const twice = await consume(gateways[1]!);
    expect(once.json()).toMatchObject({ used: 3, allowed: true });
    expect(twice.json()).toEqual(once.json());
    expect(twice.headers['idempotent-replayed']).toBe('true');
    expect((await check(a, subscriber, { feature: 'calls' })).json().used).toBe(3);
  });

  it('replays a batch of keyed events on the other gateway exactly, repeated balances and keys within it included', async () => {
    const { subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    // One balance many times over (the script keeps it in memory for the batch), a key repeated within the batch
    // (the first answer again) and reused for another amount (422), past the hard limit (reports are not refused).
    const events = [
      ...Array.from({ length: 12 }, (_, i) => ({
        subscriber_id: subscriber,
        feature: 'calls',
        delta: 1,
        idempotency_key: `b${i}`,
      })),
      { subscriber_id: subscriber, feature: 'calls', delta: 1, idempotency_key: 'b3' },
      { subscriber_id: subscriber, feature: 'calls', delta: 2, idempotency_key: 'b4' },
      { subscriber_id: subscriber, feature: 'tokens', set: 40, idempotency_key: 'b12' },
    ];
    const first = await a('POST', '/org/usage-events', { events });
    expect(first.statusCode).toBe(200);
    const results = first.json().results as { used?: number; remaining?: number; error?: { code: string } }[];
    expect(results.map((r) => r.error?.code ?? r.used)).toEqual([
      ...Array.from({ length: 12 }, (_, i) => i + 1),
      4,
      'IDEMPOTENCY_KEY_REUSED',
      40,
    ]);
    expect(results[11]).toMatchObject({ remaining: 0, allowed: false });
    const again = await b('POST', '/org/usage-events', { events });
    expect(again.statusCode).toBe(200);
    // request_id differs per request; everything else is the first answer.
    const withoutRequestIds = (body: { results: { error?: { request_id?: string } }[] }) =>
      body.results.map((r) => (r.error ? { ...r, error: { ...r.error, request_id: '' } } : r));
    expect(withoutRequestIds(again.json())).toEqual(withoutRequestIds(first.json()));
    expect((await check(b, subscriber, { feature: 'calls' })).json().used).toBe(12);
  });

  it('applies a batch sent again under its Idempotency-Key once, on either gateway, and says when all of it was replayed', async () => {
    const { org, subscriber, call } = await organization();
    const send = (gateway: GatewayApp, events: object[], headers: Record<string, string> = {}) =>
      gateway.inject({
        method: 'POST',
        url: '/org/usage-events',
        headers: { ...org.headers, ...headers },
        payload: { events },
      });
    const usedOf = (response: { json(): { results: { used?: number; error?: { code: string } }[] } }) =>
      response.json().results.map((r) => r.error?.code ?? r.used);
    const events = [
      { subscriber_id: subscriber, feature: 'calls', delta: 2 },
      { subscriber_id: subscriber, feature: 'calls', delta: 3, idempotency_key: 'own-1' },
    ];
    const batchKey = { 'idempotency-key': 'batch-1' };
    const first = await send(gateways[0]!, events, batchKey);
    expect(usedOf(first)).toEqual([2, 5]);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await send(gateways[1]!, events, batchKey);
    expect(again.json()).toEqual(first.json());
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await check(call[0]!, subscriber, { feature: 'calls' })).json().used).toBe(5);

    // Under the same key, a changed event is refused, an added one applied, an unchanged one answered again.
    const changed = await send(
      gateways[0]!,
      [{ ...events[0], delta: 4 }, events[1]!, { subscriber_id: subscriber, feature: 'calls', delta: 1 }],
      batchKey,
    );
    expect(usedOf(changed)).toEqual(['IDEMPOTENCY_KEY_REUSED', 5, 6]);
    expect(changed.headers['idempotent-replayed']).toBeUndefined();
    // Without the header, an event without a key is applied each time; keyed events alone are replayed.
    expect(usedOf(await send(gateways[1]!, [events[0]!]))).toEqual([8]);
    const keyedOnly = await send(gateways[1]!, [events[1]!]);
    expect(usedOf(keyedOnly)).toEqual([5]);
    expect(keyedOnly.headers['idempotent-replayed']).toBe('true');
    expect((await check(call[1]!, subscriber, { feature: 'calls' })).json().used).toBe(8);
  });

  it("takes reports at the organization's usage-event rate, whole batches or nothing, apart from evals", async () => {
    const { org, subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    await publishArrangement(ctx.redis, redisKeys(ctx.config.redisKeyPrefix), org.organization_id, {
      plan: null,
      evalLimit: null,
      blocking: false,
      burstPerSecond: 10_000,
      usageEventsPerSecond: 3,
    });
    const event = { subscriber_id: subscriber, feature: 'calls', delta: 1 };
    expect((await a('POST', '/org/usage-events', { events: [event, event] })).statusCode).toBe(200);
    const over = await b('POST', '/org/usage-events', { events: [event, event] });
    expect(over.statusCode).toBe(429);
    expect(over.headers['retry-after']).toBe('1');
    expect(
      (await b('POST', `/org/subscribers/${subscriber}/usage`, { feature: 'calls', delta: 1 })).statusCode,
    ).toBe(200);
    expect(
      (await a('POST', `/org/subscribers/${subscriber}/usage`, { feature: 'calls', delta: 1 })).statusCode,
    ).toBe(429);
    // Evals are not usage events: checks still answer, and the refused batch applied nothing.
    expect((await check(a, subscriber, { feature: 'calls' })).json().used).toBe(3);
    clock.advance(1000);
    expect(
      (await a('POST', `/org/subscribers/${subscriber}/usage`, { feature: 'calls', delta: 1 })).json().used,
    ).toBe(4);
    // A batch larger than the rate itself can never be taken: 422 naming the rate, not a 429 to retry for ever.
    clock.advance(1000);
    const tooLarge = await a('POST', '/org/usage-events', { events: [event, event, event, event] });
    expect(tooLarge.statusCode).toBe(422);
    expect(tooLarge.headers['retry-after']).toBeUndefined();
    expect(tooLarge.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'events', value: 4, expected: 'at most 3 events a request' },
    });
    expect((await a('POST', '/org/usage-events', { events: [event, event, event] })).statusCode).toBe(200);
  });

  it('starts a new period at the boundary of the app clock, and applies a changed limit on the next eval on both gateways', async () => {
    clock.set(Date.parse('2026-03-31T23:59:00Z'));
    const { org, subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    expect((await check(a, subscriber, { feature: 'calls', consume: 10 })).json()).toMatchObject({
      used: 10,
      allowed: true,
    });
    expect((await check(b, subscriber, { feature: 'calls', consume: 1 })).json()).toMatchObject({
      used: 10,
      allowed: false,
    });
    // Raised to 12: both gateways hold the old catalog, and both apply the new limit on their next eval.
    await publishCatalog(org.organization_id, {
      pro: { calls: grant(12), tokens: grant(100, { reset: 'day', soft: true }) },
    });
    expect((await check(b, subscriber, { feature: 'calls', consume: 1 })).json()).toMatchObject({
      used: 11,
      limit: 12,
      allowed: true,
    });
    expect((await check(a, subscriber, { feature: 'calls', consume: 1 })).json()).toMatchObject({
      used: 12,
      limit: 12,
      allowed: true,
    });
    await publishCatalog(org.organization_id, {
      pro: { calls: grant(5), tokens: grant(100, { reset: 'day', soft: true }) },
    });
    expect((await check(a, subscriber, { feature: 'calls', consume: 1 })).json()).toMatchObject({
      used: 12,
      limit: 5,
      remaining: 0,
      allowed: false,
    });
    expect((await check(b, subscriber, { feature: 'calls' })).json()).toMatchObject({
      used: 12,
      limit: 5,
      allowed: false,
    });

    clock.set(Date.parse('2026-04-01T00:00:00Z'));
    for (const send of [a, b]) {
      expect((await check(send, subscriber, { feature: 'calls' })).json()).toMatchObject({
        used: 0,
        period_start: '2026-04-01T00:00:00.000Z',
        resets_at: '2026-05-01T00:00:00.000Z',
      });
    }
    expect((await check(b, subscriber, { feature: 'calls', consume: 5 })).json()).toMatchObject({
      used: 5,
      allowed: true,
    });
  });

  it("answers a batch with a subscriber's new plan once its document moved, though the others are not read again", async () => {
    const { org, subscriber, call } = await organization();
    const [a] = call as [ReturnType<typeof catalogClient>['send']];
    await publishCatalog(org.organization_id, {
      pro: { calls: grant(10) },
      team: { calls: grant(30) },
    });
    const other = `sub${subscriberCount++}`;
    await a('POST', '/org/subscribers', { subscriber_id: other, name: other }, 201);
    const store = snapshotStore(ctx.redis, redisKeys(ctx.config.redisKeyPrefix));
    await store.putSubscriber(org.organization_id, other, {
      version: 5000,
      doc: { exists: true, plans: ['pro'], overrides: {} },
    });
    const batch = async () => {
      const answer = await a('POST', '/org/usage-events', {
        events: [
          { subscriber_id: subscriber, feature: 'calls', delta: 1 },
          { subscriber_id: other, feature: 'calls', delta: 1 },
        ],
      });
      expect(answer.statusCode).toBe(200);
      return answer.json().results.map((r: { limit: number; used: number }) => [r.limit, r.used]);
    };
    expect(await batch()).toEqual([
      [10, 1],
      [10, 1],
    ]);
    // Both entries are now verified at the organization's stamp; a write of one subscriber moves it.
    await store.putSubscriber(org.organization_id, subscriber, {
      version: 6000,
      doc: { exists: true, plans: ['team'], overrides: {} },
    });
    expect(await batch()).toEqual([
      [30, 2],
      [10, 2],
    ]);
    expect(await batch()).toEqual([
      [30, 3],
      [10, 3],
    ]);
  });

  it("refills balances Redis lost before answering: Postgres figures merged with the gateway's own", async () => {
    clock.set(Date.parse('2026-05-10T00:00:00Z'));
    const { org, subscriber, call } = await organization();
    const [a, b] = call as [
      ReturnType<typeof catalogClient>['send'],
      ReturnType<typeof catalogClient>['send'],
    ];
    // Two figures of one balance: the gateway keeps the later one (6), not the first it saw (2).
    expect((await check(a, subscriber, { feature: 'calls', consume: 2 })).json()).toMatchObject({ used: 2 });
    expect((await check(a, subscriber, { feature: 'calls', consume: 4 })).json()).toMatchObject({ used: 6 });
    // The worker had persisted an older figure; tokens only ever reached Postgres.
    await ctx.ownerDb
      .insertInto('metered_usage')
      .values([
        {
          organization_id: org.organization_id,
          subscriber_id: subscriber,
          feature_key: 'calls',
          period_start: new Date('2026-05-01T00:00:00Z'),
          period_end: new Date('2026-06-01T00:00:00Z'),
          used: 4,
          revision: 1,
        },
        {
          organization_id: org.organization_id,
          subscriber_id: subscriber,
          feature_key: 'tokens',
          period_start: new Date('2026-05-10T00:00:00Z'),
          period_end: new Date('2026-05-11T00:00:00Z'),
          used: 70,
          revision: 3,
        },
        {
          organization_id: org.organization_id,
          subscriber_id: subscriber,
          feature_key: 'tokens',
          period_start: new Date('2026-05-09T00:00:00Z'),
          period_end: new Date('2026-05-10T00:00:00Z'),
          used: 99,
          revision: 3,
        },
      ])
      .execute();
    const keys = redisKeys(ctx.config.redisKeyPrefix);
    await deleteKeys(ctx.redis, `${keys.meteredBalance(org.organization_id, '')}*`);
    await ctx.redis.del(keys.meteredReady(org.organization_id));
    // While the gateways gather their figures, metered answers are 503 with Retry-After (nothing applied), on both.
    const gathering = await check(a, subscriber, { feature: 'calls', consume: 1 });
    expect(gathering.statusCode).toBe(503);
    expect(gathering.headers['retry-after']).toBe('1');
    expect((await check(b, subscriber, { feature: 'tokens' })).statusCode).toBe(503);
    for (let i = 0; i < 100 && !(await ctx.redis.exists(keys.meteredReady(org.organization_id))); i++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await check(a, subscriber, { feature: 'calls', consume: 1 })).json()).toMatchObject({ used: 7 });
    expect((await check(b, subscriber, { feature: 'tokens' })).json()).toMatchObject({ used: 70 });
  });
});
