import { LRUCache } from 'lru-cache';
import { AppError } from '@ent/common/errors/app-error';
import type { Clock } from '@ent/common/clock';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import {
  decodeOutcome,
  usageApplyArguments,
  type MeteredOperation,
  type MeteredOutcome,
} from './metered-operations.ts';
import { createRedisClock, type RedisClock } from './redis-clock.ts';
import { CALL_EXPIRED, withMeteringCommands } from './scripts.ts';

/** One balance as Postgres last persisted it (admin's `GET /internal/metered/balances`). */
export interface PersistedBalance {
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  periodEndMs: number | null;
  used: number;
  revision: number;
}

export interface MeteredBalancesOptions {
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  /** The organization's balances whose period has not ended, from Postgres (through admin). */
  loadBalances: (organizationId: string) => Promise<PersistedBalance[]>;
  /** The most balances whose last figure this gateway keeps for a refill (bounded memory). */
  maxFigures?: number;
  /** Redis's clock, for each call's deadline (default: its own, measured on first use). */
  redisClock?: RedisClock;
}

/** What a caller answers when a metered operation cannot be applied exactly: never fail open (DESIGN.md §5). */
export const meteredUnavailable = () =>
  new AppError(
    503,
    'SERVICE_UNAVAILABLE',
    'Metered usage cannot be applied right now; retry shortly.',
    undefined,
    {
      'retry-after': '1',
    },
  );

const BALANCE_AFTER_PERIOD_MS = 35 * 86_400_000;
/**
 * How long a change waits before its organization is named in `mdirty-orgs`: one SADD per organization and interval
 * rather than one per gate reply. Each command is a write and a read of their own on both sides, which cost the
 * gateway about what the gate call's own write does. The members are in the organization's set from the script that
 * changed them; the worker takes them within its next pass after the mark (decisions.md, "Metered consume at eval
 * speed").
 */
const DIRTY_MARK_DELAY_MS = 100;
/** A refill and one retry: a second "not ready" means Redis lost the organization again meanwhile. */
const READY_ATTEMPTS = 3;

export interface MeteredBalances {
  /**
   * Applies `ops` in one usage-apply call, refilling the organization first when Redis says it is not ready.
   * Stale outcomes are the caller's to redo with a fresh snapshot. Throws a 503 AppError when Redis fails.
   */
  apply(organizationId: string, ops: readonly MeteredOperation[]): Promise<MeteredOutcome[]>;
  /** Puts the organization's balances back (Postgres and this gateway's figures) and marks it ready. */
  refill(organizationId: string): Promise<void>;
  /** Keeps what a reply showed (the figures a refill merges) and marks the organization dirty after a change. */
  observe(
    organizationId: string,
    ops: readonly MeteredOperation[],
    outcomes: readonly MeteredOutcome[],
  ): void;
}

interface Figure {
  used: number;
  periodEndMs: number | null;
}

export function createMeteredBalances(options: MeteredBalancesOptions): MeteredBalances {
  const redis = withMeteringCommands(options.redis);
  const { keys, clock } = options;
  const redisClock = options.redisClock ?? createRedisClock(redis);
  // By organization and member: what this gateway last saw of each balance, so a Redis that came back empty gets
  // back what it had reached even before the worker persisted it.
  const figures = new LRUCache<string, Figure>({ max: options.maxFigures ?? 100_000 });
  const refilling = new Map<string, Promise<void>>();
  const dirtyOrganizations = new Set<string>();
  let flushScheduled = false;
  let quietUntil = 0;

  function flushDirty(): void {
    flushScheduled = false;
    quietUntil = Math.max(quietUntil, Date.now() + DIRTY_MARK_DELAY_MS);
    const organizations = [...dirtyOrganizations];
    dirtyOrganizations.clear();
    redis.sadd(keys.meteredDirtyOrganizations, ...organizations).catch(() => {
      // The balances stay in their organization's dirty set; the next change of the organization names it again.
      for (const organization of organizations) dirtyOrganizations.add(organization);
    });
  }

  function observe(
    organizationId: string,
    ops: readonly MeteredOperation[],
    outcomes: readonly MeteredOutcome[],
  ) {
    let changed = false;
    for (let i = 0; i < ops.length; i++) {
      const outcome = outcomes[i]!;
      if (outcome.status !== 'applied' && outcome.status !== 'refused') continue;
      const op = ops[i]!;
      const key = `${organizationId}\n${op.member}`;
      // A read that shows what this gateway last saw of the balance adds nothing: no new figure per metered check.
      if (op.kind === 'r') {
        const known = figures.peek(key);
        if (known !== undefined && known.used === outcome.used && known.periodEndMs === op.periodEndMs) continue;
      }
      figures.set(key, { used: outcome.used, periodEndMs: op.periodEndMs });
      if (op.kind !== 'r' && outcome.status === 'applied') changed = true;
    }
    if (!changed) return;
    dirtyOrganizations.add(organizationId);
    if (flushScheduled) return;
    // The first change after a quiet spell is marked at once (a worker pass right after it sees it); changes within
    // the next DIRTY_MARK_DELAY_MS share one mark at its end.
    flushScheduled = true;
    const now = Date.now();
    if (now >= quietUntil) {
      quietUntil = now + DIRTY_MARK_DELAY_MS;
      queueMicrotask(flushDirty);
    } else setTimeout(flushDirty, quietUntil - now);
  }

  async function refillOnce(organizationId: string): Promise<void> {
    const nowMs = clock.now();
    const merged = new Map<string, { used: number; revision: number; periodEndMs: number | null }>();
    for (const balance of await options.loadBalances(organizationId)) {
      merged.set(meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs), balance);
    }
    const prefix = `${organizationId}\n`;
    for (const [key, figure] of figures.entries()) {
      if (!key.startsWith(prefix) || (figure.periodEndMs !== null && figure.periodEndMs <= nowMs)) continue;
      const member = key.slice(prefix.length);
      const known = merged.get(member);
      if (!known || known.used < figure.used)
        merged.set(member, {
          used: figure.used,
          revision: known?.revision ?? 0,
          periodEndMs: figure.periodEndMs,
        });
    }
    const args: (string | number)[] = [keys.meteredBalance(organizationId, '')];
    for (const [member, { used, revision, periodEndMs }] of merged) {
      const ttl = periodEndMs === null ? '' : Math.max(1, periodEndMs + BALANCE_AFTER_PERIOD_MS - nowMs);
      args.push(member, used, revision, periodEndMs ?? '', ttl);
    }
    await redis.meteredRefill(keys.meteredReady(organizationId), keys.meteredDirty(organizationId), ...args);
  }

  const refill = (organizationId: string): Promise<void> => {
    const pending = refilling.get(organizationId);
    if (pending) return pending;
    const promise = refillOnce(organizationId).finally(() => refilling.delete(organizationId));
    refilling.set(organizationId, promise);
    return promise;
  };

  async function applyOnce(
    organizationId: string,
    ops: readonly MeteredOperation[],
  ): Promise<MeteredOutcome[]> {
    const args = usageApplyArguments(
      keys.meteredBalance(organizationId, ''),
      keys.usageIdempotency(organizationId, ''),
      ops,
    );
    // Taken as the call is sent: a call Redis runs later than the deadline applies nothing.
    const known = redisClock.deadline();
    args.push(typeof known === 'number' ? known : await known);
    const reply = await redis.usageApply(
      keys.catalog(organizationId),
      keys.subscriberVersions(organizationId),
      keys.meteredDirty(organizationId),
      keys.meteredReady(organizationId),
      ...args,
    );
    // Applied nothing: the caller answers 503, as for a call that timed out.
    if (reply.length === 1 && reply[0] === CALL_EXPIRED)
      throw new Error('The usage call reached Redis after its deadline.');
    return ops.map((op, i) => decodeOutcome(op, reply[2 * i], reply[2 * i + 1]));
  }

  return {
    async apply(organizationId, ops) {
      if (ops.length === 0) return [];
      try {
        for (let attempt = 1; ; attempt++) {
          const outcomes = await applyOnce(organizationId, ops);
          if (attempt < READY_ATTEMPTS && outcomes.some((outcome) => outcome.status === 'not_ready')) {
            await refill(organizationId);
            continue;
          }
          observe(organizationId, ops, outcomes);
          if (outcomes.some((outcome) => outcome.status === 'not_ready')) throw meteredUnavailable();
          return outcomes;
        }
      } catch (error) {
        if (error instanceof AppError) throw error;
        throw Object.assign(meteredUnavailable(), { cause: error });
      }
    },
    async refill(organizationId) {
      try {
        await refill(organizationId);
      } catch (error) {
        throw Object.assign(meteredUnavailable(), { cause: error });
      }
    },
    observe,
  };
}
