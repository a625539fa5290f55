import { describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { periodOf, usageTtlMs } from '@ent/common/metering/period';
import { EvalGateUnavailableError } from '../../src/metering/contract.ts';
import { createEvalMeter } from '../../src/metering/meter.ts';
import {
  meteredOperation,
  usageApplyArguments,
  type MeteredKind,
  type MeteredOperation,
} from '../../src/metering/metered-operations.ts';
import type { RedisClock } from '../../src/metering/redis-clock.ts';
import { CALL_EXPIRED, GATE_REPLY_HEADER } from '../../src/metering/scripts.ts';
import { GATE_BATCH_MEMORY_MS } from '../../src/metering/settlements.ts';
import { proMeteredCatalog, proSubscriber } from '../../../test-support/metered-documents.ts';
import {
  SEEDED_VERSIONS,
  gateBatchCall,
  meteringTestRedis,
  seededOrganizations,
  unpersistedBalances,
  usageApplyCall,
} from '../../../test-support/metering-redis.ts';

const { keys, redis } = meteringTestRedis();
const clock = new ManualClock(Date.parse('2026-03-10T12:00:00Z'));

const catalog = proMeteredCatalog({ calls: { limit: 10 } });
const alice = proSubscriber;

const organization = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });

const op = (kind: MeteredKind, amount: number, idempotencyKey = '') =>
  meteredOperation(
    { catalog, subscriber: alice, ...SEEDED_VERSIONS },
    'alice',
    'calls',
    kind,
    amount,
    clock.now(),
    idempotencyKey,
    keys,
    'org_unused',
  );
const member = op('r', 0).member;

/** Redis's own clock, ms (as the scripts read it). */
async function redisNow(): Promise<number> {
  const [seconds, microseconds] = await redis.time();
  return Number(seconds) * 1000 + Number(microseconds) / 1000;
}
const passed = async () => Math.floor(await redisNow()) - 1000;
const ahead = async () => Math.floor(await redisNow()) + 60_000;

let calls = 0;
const usageApply = (org: string, ops: MeteredOperation[], deadline: number) =>
  usageApplyCall(redis, keys, { org, callId: `call-${calls++}`, ops, deadline });

/** The gate script as the meter calls it, for one eval of alice carrying `ops`. */
const gateBatch = (
  org: string,
  batchId: string,
  ops: MeteredOperation[] | undefined,
  deadline: number | '',
) =>
  gateBatchCall(redis, keys, {
    org,
    batchId,
    subscriberId: 'alice',
    nowMs: clock.now(),
    evals: [ops],
    deadline,
  });
const evalCount = (org: string) => redis.hget(keys.evalUsage(org, periodOf(clock.now())), 'count');

describe('usage-apply-6.lua past its deadline', () => {
  it('applies, reads and records nothing and answers the expiry code; within its deadline it applies as before', async () => {
    const org = await organization();
    const ops = [op('c', 3, 'k1'), op('d', 2, 'k2'), op('r', 0)];
    expect(await usageApply(org, ops, await passed())).toEqual([CALL_EXPIRED]);
    expect(await redis.exists(keys.meteredBalance(org, member))).toBe(0);
    expect(await redis.exists(keys.usageIdempotency(org, 'k1'), keys.usageIdempotency(org, 'k2'))).toBe(0);
    expect(await redis.scard(keys.meteredDirty(org))).toBe(0);

    expect(await usageApply(org, ops, await ahead())).toEqual([0, 3, 0, 5, 0, 5]);
    expect(await redis.exists(keys.usageIdempotency(org, 'k1'), keys.usageIdempotency(org, 'k2'))).toBe(2);
    const before = await redis.hgetall(keys.meteredBalance(org, member));
    expect(before).toMatchObject({ u: '5', r: '2' });

    // A report sent again under a new key, late: still nothing.
    expect(await usageApply(org, [op('d', 2, 'k3'), op('s', 9)], await passed())).toEqual([CALL_EXPIRED]);
    expect(await redis.hgetall(keys.meteredBalance(org, member))).toEqual(before);
    expect(await redis.exists(keys.usageIdempotency(org, 'k3'))).toBe(0);
  });

  it('answers the expiry code before anything else: also without the readiness marker', async () => {
    const org = await organization({ ready: false });
    expect(await usageApply(org, [op('c', 1)], await passed())).toEqual([CALL_EXPIRED]);
    expect(await usageApply(org, [op('c', 1)], await ahead())).toEqual([3, 0]);
  });

  it('refuses a call without a deadline', async () => {
    const org = await organization();
    const withoutDeadline = usageApplyArguments(
      keys.meteredBalance(org, ''),
      keys.usageIdempotency(org, ''),
      [op('c', 1)],
    );
    await expect(
      redis.usageApply(
        keys.catalog(org),
        keys.subscriberVersions(org),
        keys.meteredDirty(org),
        keys.meteredReady(org),
        keys.gateBatch(org, 'no-deadline'),
        ...withoutDeadline,
      ),
    ).rejects.toThrow('the last argument must be the deadline');
    expect(await redis.exists(keys.meteredBalance(org, member))).toBe(0);
  });
});

describe('eval-gate-batch-8.lua past its deadline', () => {
  it('counts, deducts and remembers nothing, so its settle takes it for a batch that never ran', async () => {
    const org = await organization();
    expect(await gateBatch(org, 'late', [op('c', 3, 'k1')], await passed())).toEqual([CALL_EXPIRED]);
    expect(await evalCount(org)).toBeNull();
    expect(await redis.exists(keys.gateBatch(org, 'late'))).toBe(0);
    expect(await redis.exists(keys.burst(org))).toBe(0);
    expect(await redis.exists(keys.meteredBalance(org, member), keys.usageIdempotency(org, 'k1'))).toBe(0);
    expect(await redis.scard(keys.meteredDirty(org))).toBe(0);

    // The gateway answered the consume 503 and, say, two fail-open evals of the batch 2xx: the count is those two.
    const settled = await redis.evalSettle(
      keys.arrangement(org),
      keys.evalUsage(org, periodOf(clock.now())),
      keys.gateBatch(org, 'late'),
      keys.meteredDirty(org),
      2,
      clock.now(),
      usageTtlMs(clock.now()),
      GATE_BATCH_MEMORY_MS,
      keys.meteredBalance(org, ''),
      keys.usageIdempotency(org, ''),
    );
    expect(settled.slice(0, 3)).toEqual([0, 2, 2]);
    // The same batch arriving within a (later) deadline after its settle still changes nothing.
    expect(await gateBatch(org, 'late', [op('c', 3, 'k1')], await ahead())).toEqual([4]);
    expect(await redis.exists(keys.meteredBalance(org, member))).toBe(0);
    expect(await evalCount(org)).toBe('2');
  });

  it('within its deadline counts, remembers and applies as before; without operations it needs none', async () => {
    const org = await organization();
    const reply = await gateBatch(org, 'on-time', [op('c', 3, 'k1')], await ahead());
    expect(reply.slice(0, 1)).toEqual([0]);
    expect(reply.slice(GATE_REPLY_HEADER)).toEqual([4 * 6, 0, 3]);
    // The count it made, then the consume it applied (for a settle to give back).
    expect((await redis.get(keys.gateBatch(org, 'on-time')))?.split('\n')[0]).toBe('1');
    expect(await redis.hget(keys.meteredBalance(org, member), 'u')).toBe('3');
    expect(await redis.exists(keys.usageIdempotency(org, 'k1'))).toBe(1);

    const plain = await gateBatch(org, 'plain', undefined, '');
    expect(plain.slice(0, 1)).toEqual([0]);
    expect(plain.slice(GATE_REPLY_HEADER)).toEqual([4 * 6]);
    expect(await evalCount(org)).toBe('2');
  });
});

describe('the gateway meeting an expired call', () => {
  /** A clock whose every deadline has passed: each call arrives too late. */
  const alwaysLate: RedisClock = {
    deadline: () => 0,
    measure: async () => ({ offsetMs: 0, uncertaintyMs: 0 }),
  };

  it('fails the whole gate batch as a call that timed out, and settles only its 2xx answers', async () => {
    const org = await organization();
    const meter = createEvalMeter({
      redis,
      keys,
      redisClock: alwaysLate,
      loadArrangement: async () => ({ plan: null, evalLimit: null, blocking: false, burstPerSecond: 1000 }),
    });
    const nowMs = clock.now();
    // One batch: a consume and a plain eval of the same turn.
    const failures = await Promise.all([
      meter
        .gate({ organizationId: org, subscriberId: 'alice', nowMs, metered: [op('c', 3)] })
        .catch((e: unknown) => e),
      meter.gate({ organizationId: org, subscriberId: 'alice', nowMs }).catch((e: unknown) => e),
    ]);
    expect(failures.every((error) => error instanceof EvalGateUnavailableError)).toBe(true);
    const [consume, plain] = failures as EvalGateUnavailableError[];
    expect(consume!.message).toContain('after its deadline');
    consume!.report(false); // answered 503
    plain!.report(true); // answered from memory, 2xx
    await meter.settlePending();
    expect(meter.pendingSettlements()).toBe(0);
    expect(await evalCount(org)).toBe('1');
    expect(await redis.exists(keys.meteredBalance(org, member))).toBe(0);

    // A batch without metered operations carries no deadline: the clock is not asked.
    expect((await meter.gate({ organizationId: org, subscriberId: 'alice', nowMs })).outcome).toBe('counted');
    expect(await evalCount(org)).toBe('2');
  });

  it('answers a usage call that expired with the 503 of a Redis that did not answer', async () => {
    const org = await organization();
    const balances = unpersistedBalances({ redis, keys, clock, redisClock: alwaysLate });
    await expect(balances.apply(org, [op('d', 4, 'k9')])).rejects.toMatchObject({
      status: 503,
      code: 'SERVICE_UNAVAILABLE',
      headers: { 'retry-after': '1' },
    });
    expect(await redis.exists(keys.meteredBalance(org, member), keys.usageIdempotency(org, 'k9'))).toBe(0);
  });
});
