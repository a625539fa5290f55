import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { loadConfig } from '@ent/common/config';
import { createRedis } from '@ent/common/redis/connect';
import {
  meteredOperation,
  type MeteredKind,
  type MeteredOperation,
} from '../../src/metering/metered-operations.ts';
import { withMeteringCommands, type MeteringRedis } from '../../src/metering/scripts.ts';
import {
  SEEDED_VERSIONS,
  meteringTestRedis,
  openEvalMeter,
  seededOrganizations,
  settleCall,
  unpersistedBalances,
  usageApplyCall,
} from '../../../test-support/metering-redis.ts';
import { aliceWithCredits } from '../../../test-support/metered-documents.ts';
import { redisShutDownMidReply } from './redis-shut-down-mid-reply.ts';

const { keys, redis } = meteringTestRedis();
const { start: START, catalog, alice, calls: CALLS, soft: SOFT } = aliceWithCredits();
const HOUR = 3_600_000;
const clock = new ManualClock(START + 2 * HOUR);

const seededOrganization = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });
const organization = (client: MeteringRedis = redis) => seededOrganization({ redis: client });

const operation = (org: string, kind: MeteredKind, feature: string, amount: number, idempotencyKey = '') =>
  meteredOperation(
    { catalog, subscriber: alice, ...SEEDED_VERSIONS },
    'alice',
    feature,
    kind,
    amount,
    clock.now(),
    idempotencyKey,
    keys,
    org,
  );

const usageCall = (org: string, callId: string, ops: MeteredOperation[]) =>
  usageApplyCall(redis, keys, { org, callId, ops, deadline: Date.now() + 60_000 });
/** The settle of a failed usage call: no eval of it was answered 2xx (it counts none). */
const settle = (org: string, callId: string, operations: MeteredOperation[] = []) =>
  settleCall(redis, keys, { org, batchId: callId, nowMs: clock.now(), answered: 0, operations });

/** Used and covered of calls, each credit's spent, used of soft (a missing field is 0). */
async function figures(org: string, client: MeteringRedis = redis) {
  const [used, covered] = await client.hmget(keys.meteredBalance(org, CALLS), 'u', 'k');
  const [promoSpent, topUpSpent] = await client.hmget(
    keys.creditSpent(org, 'alice', 'calls'),
    'cr_promo',
    'cr_topup',
  );
  const soft = await client.hget(keys.meteredBalance(org, SOFT), 'u');
  return [used, covered, promoSpent, topUpSpent, soft].map(Number);
}
const records = (org: string, client: MeteringRedis, ...idempotencyKeys: string[]) =>
  client.exists(...idempotencyKeys.map((key) => keys.usageIdempotency(org, key)));

/** A report batch of every kind: rises into credits, a set either way, a lowering below 0, a refused keyed consume. */
const reportBatch = (org: string) => [
  operation(org, 'd', 'calls', 5, 'k1'), // 13: 2 of the allowance, 3 of the promotion
  { ...operation(org, 'd', 'calls', 50, 'k-stale'), subscriberVersion: 4 }, // stale: applies and records nothing
  operation(org, 's', 'soft', 12), // +8
  operation(org, 'd', 'calls', -20), // -13: to 0, the promotion's 3 given back
  operation(org, 'd', 'calls', 6, 'k2'), // 6
  operation(org, 's', 'soft', 1), // -11
  operation(org, 'c', 'calls', 1_000_000, 'k3'), // refused: its record is written all the same
];

describe('a failed usage call that ran: its settle gives back what it applied (usage-apply-6.lua, eval-settle-4.lua)', () => {
  it('restores used, covered and the credits, and deletes the records it wrote, once', async () => {
    const org = await organization();
    await usageCall(org, 'answered', [operation(org, 'd', 'calls', 8), operation(org, 'd', 'soft', 4)]);
    const before = await figures(org);
    expect(before).toEqual([8, 0, 0, 0, 4]);
    await redis.del(keys.meteredDirty(org));

    const reply = await usageCall(org, 'lost', reportBatch(org));
    expect(reply.filter((_, i) => i % 2 === 0)).toEqual([0, 2, 0, 0, 0, 0, 1]);
    expect(await figures(org)).toEqual([6, 0, 0, 0, 1]);
    expect(await records(org, redis, 'k1', 'k-stale', 'k2', 'k3')).toBe(3);
    await redis.del(keys.meteredDirty(org));

    const settled = await settle(org, 'lost', reportBatch(org));
    expect(settled.slice(0, 3)).toEqual([0, 0, 0]); // no eval count changed
    expect(settled[4]).toBe(6);
    expect(await figures(org)).toEqual(before);
    expect(await records(org, redis, 'k1', 'k2', 'k3')).toBe(0);
    // Named for the worker: the balances (the credits' spent ended where they were: nothing to name).
    expect((await redis.smembers(keys.meteredDirty(org))).sort()).toEqual([CALLS, SOFT].sort());

    // Once: a second settle, and the call arriving again, change nothing.
    expect(await settle(org, 'lost', reportBatch(org))).toEqual([5, 0, 0]);
    expect(await usageCall(org, 'lost', reportBatch(org))).toEqual([4]);
    expect(await figures(org)).toEqual(before);
    expect(await records(org, redis, 'k1', 'k2', 'k3')).toBe(0);
  });

  it('gives back only its own change when another call changed the balance since', async () => {
    const org = await organization();
    const lost = [operation(org, 's', 'soft', 7)];
    await usageCall(org, 'lost', lost);
    await usageCall(org, 'answered', [operation(org, 'd', 'soft', 2)]);
    await settle(org, 'lost', lost);
    expect((await figures(org))[4]).toBe(2);
  });

  it('marks a call that never ran settled: arriving late, it applies and records nothing', async () => {
    const org = await organization();
    const late = [operation(org, 'd', 'calls', 3, 'late')];
    expect(await settle(org, 'never-ran', late)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(await usageCall(org, 'never-ran', late)).toEqual([4]);
    expect(await redis.exists(keys.meteredBalance(org, CALLS), keys.usageIdempotency(org, 'late'))).toBe(0);
    expect(await redis.scard(keys.meteredDirty(org))).toBe(0);
  });

  it('leaves no memory for a call that applied nothing (reads, replays)', async () => {
    const org = await organization();
    await usageCall(org, 'first', [operation(org, 'd', 'calls', 2, 'once')]);
    await usageCall(org, 'reads', [operation(org, 'r', 'calls', 0), operation(org, 'd', 'calls', 2, 'once')]);
    expect(await redis.exists(keys.gateBatch(org, 'reads'))).toBe(0);
  });
});

describe('metered balances meeting a usage call whose connection dropped after Redis ran it', () => {
  it('answers 503 and settles it at once: the report no longer counts, a retry under its key applies afresh', async () => {
    const org = await organization();
    const client = withMeteringCommands(createRedis(loadConfig()));
    const dropReply = async (...keysAndArgs: (string | number)[]) => {
      await client.usageApply(...keysAndArgs);
      throw new Error('Connection is closed.');
    };
    const dropping = new Proxy(client, {
      get(target, property) {
        if (property === 'usageApply') return dropReply;
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    try {
      const meter = openEvalMeter({ redis: client, keys });
      const losing = unpersistedBalances({ redis: dropping, keys, clock, settlements: meter });
      const report = operation(org, 'd', 'calls', 12, 'report');
      await expect(losing.apply(org, [report])).rejects.toMatchObject({ status: 503 });
      expect(meter.pendingSettlements()).toBe(1);

      // The client's retry through this gateway: the settle (started at once) goes first, so it is applied, once.
      const answering = unpersistedBalances({ redis: client, keys, clock, settlements: meter });
      expect(await answering.apply(org, [report])).toEqual([
        { status: 'applied', used: 12, credits: expect.anything() },
      ]);
      expect(meter.pendingSettlements()).toBe(0);
      expect(await figures(org)).toEqual([12, 2, 2, 0, 0]);
      expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(1);
    } finally {
      client.disconnect();
    }
  });
});

describe('a Redis shut down (SIGTERM) with a report batch in flight, back with its data', () => {
  it('answers the batch 503, and once Redis is back the settle gives it back', async () => {
    const redisShutDown = await redisShutDownMidReply('usageApply', 'ent-usage-give-back-');
    const { client, busyClient } = redisShutDown;
    try {
      const org = await organization(client);
      const meter = openEvalMeter({ redis: client, keys });
      const balances = unpersistedBalances({
        redis: busyClient,
        keys,
        clock,
        settlements: meter,
      });
      await balances.apply(org, [operation(org, 'd', 'calls', 1)]);

      const sent = redisShutDown.nextCallSent();
      const inFlight = balances
        .apply(org, [operation(org, 'd', 'calls', 12, 'batch-1'), operation(org, 's', 'soft', 9, 'batch-2')])
        .catch((error: unknown) => error);
      await sent;
      await redisShutDown.shutDown();
      const failure = await inFlight;
      expect(failure).toMatchObject({ status: 503 });

      await redisShutDown.restart();
      // It ran before Redis exited (and was persisted): counted, until the settle.
      expect(await figures(org, client)).toEqual([13, 3, 3, 0, 9]);
      expect(await records(org, client, 'batch-1', 'batch-2')).toBe(2);
      await meter.settlePending();
      expect(meter.pendingSettlements()).toBe(0);
      expect(await figures(org, client)).toEqual([1, 0, 0, 0, 0]);
      expect(await records(org, client, 'batch-1', 'batch-2')).toBe(0);
    } finally {
      await redisShutDown.close();
    }
  });
});
