import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { loadConfig } from '@ent/common/config';
import { periodOf } from '@ent/common/metering/period';
import { createRedis } from '@ent/common/redis/connect';
import { creditBalanceDirtyMember } from '@ent/common/redis/keys';
import { EvalGateUnavailableError } from '../../src/metering/contract.ts';
import { createEvalMeter, meteredOperationsOf } from '../../src/metering/meter.ts';
import { meteredOperation, type MeteredOperation } from '../../src/metering/metered-operations.ts';
import { GATE_REPLY_HEADER, withMeteringCommands, type MeteringRedis } from '../../src/metering/scripts.ts';
import {
  SEEDED_VERSIONS,
  gateBatchCall,
  meteringTestRedis,
  seededOrganizations,
  settleCall,
} from '../../../test-support/metering-redis.ts';
import { aliceWithCredits } from '../../../test-support/metered-documents.ts';
import { redisShutDownMidReply } from './redis-shut-down-mid-reply.ts';

const { keys, redis } = meteringTestRedis();
const { start: START, catalog, alice, calls: CALLS, soft: SOFT } = aliceWithCredits();
const HOUR = 3_600_000;
const clock = new ManualClock(START + 2 * HOUR);
// The calls balance met credits: it is named with its credit-spent hash.
const CALLS_WITH_CREDITS = creditBalanceDirtyMember(CALLS);

const seededOrganization = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });
const organization = (client: MeteringRedis = redis) => seededOrganization({ redis: client });

const consume = (org: string, feature: string, amount: number, idempotencyKey = '') =>
  meteredOperation(
    { catalog, subscriber: alice, ...SEEDED_VERSIONS },
    'alice',
    feature,
    'c',
    amount,
    clock.now(),
    idempotencyKey,
    keys,
    org,
  );

/** Each batch's operations in its order, kept by the meter's own function as for a failed call's settle. */
const sentOperations = new Map<string, MeteredOperation[]>();
/** The gate script as the meter calls it: one eval of alice per entry of `evals`, each carrying its operations. */
const gateBatch = (org: string, batchId: string, evals: MeteredOperation[][]) => {
  sentOperations.set(`${org}/${batchId}`, meteredOperationsOf(evals.map((metered) => ({ metered }))) ?? []);
  return gateBatchCall(redis, keys, {
    org,
    batchId,
    subscriberId: 'alice',
    nowMs: clock.now(),
    evals,
    deadline: Date.now() + 60_000,
  });
};
/** The settle of a failed call whose evals were all answered non-2xx (a consume's 503), with its operations. */
const settle = (org: string, batchId: string) =>
  settleCall(redis, keys, {
    org,
    batchId,
    nowMs: clock.now(),
    answered: 0,
    operations: sentOperations.get(`${org}/${batchId}`),
  });
/** The metered pairs (status, value) of a gate reply of `evals` evals. */
const meteredPairs = (reply: readonly unknown[], evals: number) => reply.slice(GATE_REPLY_HEADER + evals);

/** What a consume changes, as figures (a missing field is 0): used, covered by credits, each credit's spent. */
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
const evalCount = (org: string, client: MeteringRedis = redis) =>
  client.hget(keys.evalUsage(org, periodOf(clock.now())), 'count');

describe('a failed gate call that ran: its settle gives its consumes back (eval-settle-4.lua)', () => {
  it('undoes consumes of the allowance, of the allowance then two credits, and of a soft overage, exactly', async () => {
    const org = await organization();
    // Before: 8 of the allowance of 10 used, by a call that was answered.
    expect(meteredPairs(await gateBatch(org, 'answered', [[consume(org, 'calls', 8)]]), 1)).toEqual([
      0,
      // 'used k ro spent...' once a figure is not 0; while all are 0 (the allowance only), the integer used.
      8,
    ]);
    const before = await figures(org);
    expect(before).toEqual([8, 0, 0, 0, 0]);
    await redis.del(keys.meteredDirty(org)); // the worker took it

    // The failed call: 3 (2 of the allowance, 1 of the promotion), 6 (4 of the promotion, 2 of the top-up), 12 of a
    // soft limit of 10, and one that does not fit (refused: nothing to give back).
    const reply = await gateBatch(org, 'lost', [
      [consume(org, 'calls', 3), consume(org, 'calls', 6)],
      [consume(org, 'soft', 12)],
      [consume(org, 'calls', 5)],
    ]);
    expect(meteredPairs(reply, 3)).toEqual([0, '11 1 0 1', 0, '17 7 0 5 2', 0, 12, 1, '17 7 0 5 2']);
    expect(await figures(org)).toEqual([17, 7, 5, 2, 12]);
    await redis.del(keys.meteredDirty(org));
    const revision = Number(await redis.hget(keys.meteredBalance(org, CALLS), 'r'));

    // The eval count goes back to the answered call's one; the three consumes applied are given back.
    const settled = await settle(org, 'lost');
    expect(settled.slice(0, 3)).toEqual([0, 1, -3]);
    expect(settled[4]).toBe(3);
    expect(await figures(org)).toEqual(before);
    expect(await evalCount(org)).toBe('1');
    // Changed like any change: a new revision, and named for the worker (the balances and the credits).
    expect(Number(await redis.hget(keys.meteredBalance(org, CALLS), 'r'))).toBeGreaterThan(revision);
    expect((await redis.smembers(keys.meteredDirty(org))).sort()).toEqual([CALLS_WITH_CREDITS, SOFT].sort());
  });

  it('gives back a soft consume that spent a credit and then went over: the overage first, then the credit', async () => {
    const onSoft = {
      id: 'cr_soft',
      amount: 5,
      priority: 1,
      effectiveAt: START - HOUR,
      expiresAt: null,
      createdAt: START - HOUR,
    };
    const withSoftCredit = { ...alice, credits: { ...alice.credits, soft: [onSoft] } };
    const org = await seededOrganization({ subscribers: { alice: withSoftCredit } });
    const consumeSoft = (amount: number) =>
      meteredOperation(
        { catalog, subscriber: withSoftCredit, ...SEEDED_VERSIONS },
        'alice',
        'soft',
        'c',
        amount,
        clock.now(),
        '',
        keys,
        org,
      );
    const softFigures = async () => [
      ...(await redis.hmget(keys.meteredBalance(org, SOFT), 'u', 'k')),
      await redis.hget(keys.creditSpent(org, 'alice', 'soft'), 'cr_soft'),
    ];
    // Answered: the allowance's 10 and 2 of the credit. Lost: 3 more of the credit, then 3 of overage.
    await gateBatch(org, 'answered', [[consumeSoft(12)]]);
    expect(await softFigures()).toEqual(['12', '2', '2']);
    await gateBatch(org, 'lost', [[consumeSoft(6)]]);
    expect(await softFigures()).toEqual(['18', '5', '5']);
    expect((await settle(org, 'lost'))[4]).toBe(1);
    expect(await softFigures()).toEqual(['12', '2', '2']);
  });

  it("gives back the consumes by their place among the batch's operations, reads and refusals among them", async () => {
    const org = await organization();
    const read = (feature: string) =>
      meteredOperation(
        { catalog, subscriber: alice, ...SEEDED_VERSIONS },
        'alice',
        feature,
        'r',
        0,
        clock.now(),
        '',
        keys,
        org,
      );
    await gateBatch(org, 'answered', [[consume(org, 'soft', 2)]]);
    await gateBatch(org, 'lost', [
      [read('calls'), consume(org, 'soft', 5)],
      [consume(org, 'calls', 40), read('soft')],
      [consume(org, 'calls', 4)],
    ]);
    expect(await figures(org)).toEqual([4, 0, 0, 0, 7]);
    await redis.del(keys.meteredDirty(org));

    expect((await settle(org, 'lost'))[4]).toBe(2);
    expect(await figures(org)).toEqual([0, 0, 0, 0, 2]);
    expect((await redis.smembers(keys.meteredDirty(org))).sort()).toEqual([CALLS, SOFT].sort());
  });

  it('gives back into credits partly spent before, leaving what earlier consumes spent', async () => {
    const org = await organization();
    await gateBatch(org, 'answered', [[consume(org, 'calls', 11)]]);
    const before = await figures(org);
    expect(before).toEqual([11, 1, 1, 0, 0]);
    await gateBatch(org, 'lost', [[consume(org, 'calls', 6)]]);
    expect(await figures(org)).toEqual([17, 7, 5, 2, 0]);
    await settle(org, 'lost');
    expect(await figures(org)).toEqual(before);
  });

  it('deletes the record of an idempotent consume it gives back: a retry under its key applies afresh', async () => {
    const org = await organization();
    const keyed = consume(org, 'calls', 4, 'retry-me');
    expect(meteredPairs(await gateBatch(org, 'lost', [[keyed]]), 1)).toEqual([0, 4]);
    expect(await redis.exists(keys.usageIdempotency(org, 'retry-me'))).toBe(1);

    await settle(org, 'lost');
    expect(await redis.exists(keys.usageIdempotency(org, 'retry-me'))).toBe(0);
    expect(await figures(org)).toEqual([0, 0, 0, 0, 0]);
    // The client's retry (it was told 503) is applied once, not replayed as applied.
    expect(meteredPairs(await gateBatch(org, 'retry', [[keyed]]), 1)).toEqual([0, 4]);
    expect(meteredPairs(await gateBatch(org, 'replay', [[keyed]]), 1)[0]).toBe(5);
    expect(await figures(org)).toEqual([4, 0, 0, 0, 0]);
  });

  it('gives back once: a second settle, and the batch run again, change nothing more', async () => {
    const org = await organization();
    await gateBatch(org, 'lost', [[consume(org, 'calls', 3)]]);
    await settle(org, 'lost');
    const after = await figures(org);
    expect(after).toEqual([0, 0, 0, 0, 0]);
    expect(await settle(org, 'lost')).toEqual([5, 0, 0]);
    expect(await gateBatch(org, 'lost', [[consume(org, 'calls', 3)]])).toEqual([4]);
    expect(await figures(org)).toEqual(after);
    expect(await evalCount(org)).toBe('0');
  });

  it('counts the applied consumes it was sent no operation for, rather than skipping them silently', async () => {
    const org = await organization();
    await gateBatch(org, 'short', [[consume(org, 'calls', 2)], [consume(org, 'calls', 3)]]);
    const kept = sentOperations.get(`${org}/short`)!;
    sentOperations.set(`${org}/short`, kept.slice(0, 1));
    const [code, , , , givenBack, unmatched] = await settle(org, 'short');
    expect([code, givenBack, unmatched]).toEqual([0, 1, 1]);
    expect((await figures(org))[0]).toBe(3);
  });

  it('marks a batch that never ran settled: arriving late, it changes nothing', async () => {
    const org = await organization();
    expect(await settle(org, 'never-ran')).toEqual([0, 0, 0, 0, 0, 0]);
    expect(await gateBatch(org, 'never-ran', [[consume(org, 'calls', 3, 'late')]])).toEqual([4]);
    expect(await redis.exists(keys.meteredBalance(org, CALLS), keys.usageIdempotency(org, 'late'))).toBe(0);
    expect(await redis.scard(keys.meteredDirty(org))).toBe(0);
  });
});

describe('the meter meeting a call whose connection dropped after Redis ran it', () => {
  it('answers it unavailable, and gives its consume back once the settle runs', async () => {
    const org = await organization();
    // Its own client: the gate call runs, then its reply is lost as when Redis shuts down before sending it.
    const client = withMeteringCommands(createRedis(loadConfig()));
    const dropReply = async (...keysAndArgs: (string | number)[]) => {
      await client.evalGateBatch(...keysAndArgs);
      throw new Error('Connection is closed.');
    };
    // A view of the client (not a changed method: ioredis's auto-pipelining calls a command by its name).
    const dropping = new Proxy(client, {
      get(target, property) {
        if (property === 'evalGateBatch') return dropReply;
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    try {
      await client.ping();
      const meter = createEvalMeter({
        redis: dropping,
        keys,
        loadArrangement: async () => ({ plan: null, evalLimit: null, blocking: false, burstPerSecond: 1000 }),
      });
      const nowMs = clock.now();
      const failure = await meter
        .gate({ organizationId: org, subscriberId: 'alice', nowMs, metered: [consume(org, 'calls', 12)] })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(EvalGateUnavailableError);
      // It ran: deducted, until the settle.
      expect(await figures(org)).toEqual([12, 2, 2, 0, 0]);
      await redis.srem(keys.meteredDirtyOrganizations, org);

      (failure as EvalGateUnavailableError).report(false); // answered 503
      await meter.settlePending();
      expect(meter.pendingSettlements()).toBe(0);
      expect(await figures(org)).toEqual([0, 0, 0, 0, 0]);
      expect(await evalCount(org)).toBe('0');
      expect(await redis.sismember(keys.meteredDirtyOrganizations, org)).toBe(1);
      expect(await redis.sismember(keys.meteredDirty(org), CALLS_WITH_CREDITS)).toBe(1);
    } finally {
      client.disconnect();
    }
  });
});

describe('a Redis shut down (SIGTERM) with a consume in flight, back with its data', () => {
  it('answers the consume unavailable, and once Redis is back the settle gives it back', async () => {
    const redisShutDown = await redisShutDownMidReply('evalGateBatch', 'ent-give-back-');
    const { client, busyClient } = redisShutDown;
    try {
      const org = await organization(client);
      const meter = createEvalMeter({
        redis: busyClient,
        keys,
        loadArrangement: async () => ({ plan: null, evalLimit: null, blocking: false, burstPerSecond: 1000 }),
      });
      const gate = (amount: number) =>
        meter.gate({
          organizationId: org,
          subscriberId: 'alice',
          nowMs: clock.now(),
          metered: [consume(org, 'calls', amount)],
        });
      expect((await gate(1)).outcome).toBe('counted');

      const sent = redisShutDown.nextCallSent();
      const inFlight = gate(12).catch((error: unknown) => error);
      await sent;
      await redisShutDown.shutDown();
      const failure = await inFlight;
      expect(failure).toBeInstanceOf(EvalGateUnavailableError);
      (failure as EvalGateUnavailableError).report(false); // answered 503

      await redisShutDown.restart();
      // It ran before Redis exited (and was persisted): deducted, until the settle.
      expect(await figures(org, client)).toEqual([13, 3, 3, 0, 0]);
      await meter.settlePending();
      expect(meter.pendingSettlements()).toBe(0);
      expect(await figures(org, client)).toEqual([1, 0, 0, 0, 0]);
      expect(await evalCount(org, client)).toBe('1');
    } finally {
      await redisShutDown.close();
    }
  });
});
