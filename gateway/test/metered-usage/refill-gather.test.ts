import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import type { PersistedFigures } from '../../src/metering/metered-balances.ts';
import { meteredOperation } from '../../src/metering/metered-operations.ts';
import { proMeteredCatalog, proSubscriber } from '../../../test-support/metered-documents.ts';
import {
  meteringTestRedis,
  SEEDED_VERSIONS,
  seededOrganizations,
  unpersistedBalances,
} from '../../../test-support/metering-redis.ts';

// After Redis comes back empty, the last usage may have gone through any gateway: each one that serves the
// organization merges its own last figures before any answers resume (metered-balances.ts, the gathering).

const { keys, redis } = meteringTestRedis();
const clock = new ManualClock(Date.parse('2026-03-10T12:00:00Z'));
const catalog = proMeteredCatalog({ calls: { limit: 10 } });
const alice = proSubscriber;
const seeded = seededOrganizations({ redis, keys, catalog, subscribers: { alice } });
let org: string;

beforeAll(async () => {
  org = await seeded();
});

/** A consume of alice's calls (a read when `amount` is 0) in `organization`. */
const consume = (amount: number, organization = org) =>
  meteredOperation(
    { catalog, subscriber: alice, ...SEEDED_VERSIONS },
    'alice',
    'calls',
    amount === 0 ? 'r' : 'c',
    amount,
    clock.now(),
    '',
    keys,
    organization,
  );

describe('a refill after Redis came back empty', () => {
  it("gathers every gateway's last figures before answers resume", async () => {
    // The worker persisted 1 unit; then gateway A applied 2 more, gateway B 3 more after it, and Redis lost them.
    const persisted: PersistedFigures = {
      balances: [
        {
          subscriberId: 'alice',
          feature: 'calls',
          periodStartMs: Date.parse('2026-03-01T00:00:00Z'),
          periodEndMs: Date.parse('2026-04-01T00:00:00Z'),
          used: 1,
          revision: 1,
        },
      ],
      credits: [],
    };
    const gateway = () =>
      unpersistedBalances({ redis, keys, clock, loadBalances: async () => persisted, refillGatherMs: 300 });
    const [a, b] = [gateway(), gateway()];
    await redis.hset(keys.meteredBalance(org, consume(0).member), { u: 1, r: 1 });
    expect(await a.apply(org, [consume(2)])).toEqual([{ status: 'applied', used: 3 }]);
    expect(await b.apply(org, [consume(3)])).toEqual([{ status: 'applied', used: 6 }]);
    await redis.del(keys.meteredReady(org), keys.meteredBalance(org, consume(0).member));

    // A meets "not ready" first and merges 3; B, a moment later, merges 6. Both are answered 503 while the gathering
    // lasts (not held); once it is over the answers resume from 6, not 3.
    await expect(a.apply(org, [consume(0)])).rejects.toMatchObject({ status: 503 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(b.apply(org, [consume(0)])).rejects.toMatchObject({ status: 503 });
    await a.refill(org);
    expect(await a.apply(org, [consume(0)])).toEqual([{ status: 'applied', used: 6 }]);
    expect(await b.apply(org, [consume(0)])).toEqual([{ status: 'applied', used: 6 }]);
    expect(await a.apply(org, [consume(4)])).toEqual([{ status: 'applied', used: 10 }]);
    expect(await b.apply(org, [consume(1)])).toEqual([{ status: 'refused', used: 10 }]);
  });
});

describe('an organization no gateway and no Postgres knows a balance of', () => {
  it('answers its first metered operation at once, even with credits persisted (a new or imported organization)', async () => {
    const fresh = await seeded({ ready: false });
    const gateway = unpersistedBalances({
      redis,
      keys,
      clock,
      loadBalances: async () => ({
        balances: [],
        credits: [{ subscriberId: 'alice', feature: 'calls', creditId: 'cr_imported', spent: 2 }],
      }),
      refillGatherMs: 60_000,
    });
    expect(await gateway.apply(fresh, [consume(1, fresh)])).toEqual([{ status: 'applied', used: 1 }]);
    expect(await redis.hget(keys.creditSpent(fresh, 'alice', 'calls'), 'cr_imported')).toBe('2');
  });
});

describe('a Redis that loses the organization again while a gathering lasts (restarted empty twice)', () => {
  it('is not marked ready by that gathering: the gateway merges its figures into it again first', async () => {
    const again = await seeded();
    const op = (amount: number) => consume(amount, again);
    const lost = () =>
      redis.del(
        keys.meteredReady(again),
        keys.meteredRefillStarted(again),
        keys.meteredDirty(again),
        keys.meteredBalance(again, op(0).member),
      );
    const gateway = unpersistedBalances({
      redis,
      keys,
      clock,
      refillGatherMs: 1000,
    });
    expect(await gateway.apply(again, [op(6)])).toEqual([{ status: 'applied', used: 6 }]);

    // Redis comes back empty: the gateway merges its 6 and gathers; Redis loses it all again before the gathering ends.
    await lost();
    await expect(gateway.apply(again, [op(0)])).rejects.toMatchObject({ status: 503 });
    const firstGathering = gateway.refill(again);
    await lost();
    await firstGathering;
    // The gathering's mark would have made the empty Redis answer 0 (a consume of 5 applied on top of nothing).
    expect(await redis.get(keys.meteredReady(again))).toBeNull();

    await expect(gateway.apply(again, [op(0)])).rejects.toMatchObject({ status: 503 });
    await gateway.refill(again);
    expect(await gateway.apply(again, [op(5)])).toEqual([{ status: 'refused', used: 6 }]);
  });
});
