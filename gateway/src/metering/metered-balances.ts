import { LRUCache } from 'lru-cache';
import { refillArguments, type RefillBalance } from '@ent/common/metering/refill-arguments';
import { AppError } from '@ent/common/errors/app-error';
import type { Clock } from '@ent/common/clock';
import type { RedisClient } from '@ent/common/redis/connect';
import { creditDirtyMember, meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { OperationCredit } from './operation-credits.ts';
import {
  decodeOutcome,
  keptSpent,
  sameSpent,
  usageApplyArguments,
  type MeteredOperation,
  type MeteredOutcome,
} from './metered-operations.ts';
import { createRedisClock, type RedisClock } from './redis-clock.ts';
import { CALL_EXPIRED, CALL_SETTLED_BEFORE, withMeteringCommands } from './scripts.ts';
import type { EvalMeter } from './contract.ts';
import { createCallIds, GATE_BATCH_MEMORY_MS } from './settlements.ts';

/** One balance as Postgres last persisted it (admin's `GET /internal/metered/balances`). */
export interface PersistedBalance {
  subscriberId: string;
  feature: string;
  periodStartMs: number;
  periodEndMs: number | null;
  used: number;
  revision: number;
  /** What credits covered of `used`, and the period's rollover (issue 35); absent from an admin older than credits. */
  covered?: number;
  rollover?: number;
}

/** What a live credit had spent when the worker last persisted it. */
export interface PersistedCreditSpent {
  subscriberId: string;
  feature: string;
  creditId: string;
  spent: number;
}

/** What admin answers a refill with (`GET /internal/metered/balances`). */
export interface PersistedFigures {
  balances: PersistedBalance[];
  credits: PersistedCreditSpent[];
}

export interface MeteredBalancesOptions {
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  /** The organization's balances whose period has not ended and its credits' spent, from Postgres (through admin). */
  loadBalances: (organizationId: string) => Promise<PersistedFigures>;
  /** The most balances whose last figure this gateway keeps for a refill (bounded memory). */
  maxFigures?: number;
  /** Redis's clock, for each call's deadline (default: its own, measured on first use). */
  redisClock?: RedisClock;
  /** How long a refill with figures to merge gathers the other gateways' before marking ready (default 1 s). */
  refillGatherMs?: number;
  /**
   * The eval meter's settlements: a usage call that failed on this side after it was sent (it may have run) is settled
   * once through them, which gives back what it applied (decisions.md, "A usage call answered 503 is given back when
   * it ran"); while any is pending, a usage call waits for them first, so a retry through this gateway meets the
   * give-back done (not a replay of "applied" that the settle then takes back).
   */
  settlements: Pick<EvalMeter, 'settleLater' | 'settlePending' | 'pendingSettlements'>;
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
/**
 * How long after the first gateway merged its figures into a Redis that came back empty the organization stays "not
 * ready", so every gateway serving it meets "not ready" and merges its own last figures too: the last usage before
 * the loss may have been applied through any of them, and a figure merged after answers resumed would come too late
 * (a unit applied on top of a lower figure cannot be told from the lost one). Three seconds, longer than a gateway's
 * Redis client waits between reconnection attempts (up to 2 s). Operations that meet "not ready" meanwhile are
 * answered 503 with Retry-After, not held: held, they outlived clients' timeouts (5 s in the fault matrix) and were
 * applied for requests no client saw answered (decisions.md).
 */
const DEFAULT_REFILL_GATHER_MS = 3000;

interface Refill {
  merged: Promise<void>;
  done: Promise<void>;
}

export interface MeteredBalances {
  /**
   * Applies `ops` in one usage-apply call, refilling the organization first when Redis says it is not ready.
   * Stale outcomes are the caller's to redo with a fresh snapshot. Throws a 503 AppError when Redis fails.
   */
  apply(organizationId: string, ops: readonly MeteredOperation[]): Promise<MeteredOutcome[]>;
  /**
   * Puts the organization's balances and its credits' spent back (Postgres and this gateway's figures) and marks it
   * ready, unless Redis lost the organization again during the gathering (then the next "not ready" refills again).
   */
  refill(organizationId: string): Promise<void>;
  /** Keeps what a reply showed (the figures a refill merges) and marks the organization dirty after a change. */
  observe(
    organizationId: string,
    ops: readonly MeteredOperation[],
    outcomes: readonly MeteredOutcome[],
  ): void;
}

/** What a reply showed of a balance: with credits, the figures of the same instant (issue 35). */
interface Figure {
  used: number;
  covered: number;
  rollover: number;
  periodEndMs: number | null;
  readonly subscriberId: string;
  readonly feature: string;
  /** The operation's credits in its order, and what each had spent (null: the reply named no credits). */
  credits: readonly OperationCredit[] | null;
  spent: number[] | null;
}

export function createMeteredBalances(options: MeteredBalancesOptions): MeteredBalances {
  const redis = withMeteringCommands(options.redis);
  const { keys, clock } = options;
  const redisClock = options.redisClock ?? createRedisClock(redis);
  const gatherMs = options.refillGatherMs ?? DEFAULT_REFILL_GATHER_MS;
  const newCallId = createCallIds();
  const { settlements } = options;
  // By organization and member: what this gateway last saw of each balance, so a Redis that came back empty gets
  // back what it had reached even before the worker persisted it.
  const figures = new LRUCache<string, Figure>({ max: options.maxFigures ?? 100_000 });
  const refilling = new Map<string, Refill>();
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
      const credits = outcome.credits;
      const covered = credits?.covered ?? 0;
      const rollover = credits?.rollover ?? 0;
      const spent = credits?.spent ?? null;
      // A read that shows what this gateway last saw of the balance adds nothing: no new figure per metered check.
      if (op.kind === 'r') {
        const known = figures.peek(key);
        if (
          known !== undefined &&
          known.used === outcome.used &&
          known.covered === covered &&
          known.rollover === rollover &&
          known.periodEndMs === op.periodEndMs &&
          sameSpent(known.spent, spent)
        )
          continue;
      }
      // A balance seen before (the key names it: subscriber and feature are the same) takes the new figure in place:
      // one lookup that also makes it the most recent, and no object per consume or event. Figures are read only
      // synchronously (the refill's merge), so none is seen half written.
      let figure = figures.get(key);
      if (figure === undefined) {
        // Every field in the order the cache's figures are always made (one shape).
        figure = {
          used: 0,
          covered: 0,
          rollover: 0,
          periodEndMs: null,
          subscriberId: op.subscriberId,
          feature: op.feature,
          credits: null,
          spent: null,
        };
        figures.set(key, figure);
      }
      figure.used = outcome.used;
      figure.covered = covered;
      figure.rollover = rollover;
      figure.periodEndMs = op.periodEndMs;
      figure.credits = credits ? op.creditList : null;
      figure.spent = spent === null ? null : keptSpent(figure.spent, spent);
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

  async function refillOnce(organizationId: string): Promise<number> {
    const nowMs = clock.now();
    const persisted = await options.loadBalances(organizationId);
    const merged = new Map<string, RefillBalance>();
    for (const balance of persisted.balances) {
      merged.set(meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs), {
        used: balance.used,
        revision: balance.revision,
        periodEndMs: balance.periodEndMs,
        covered: balance.covered ?? 0,
        rollover: balance.rollover ?? 0,
      });
    }
    // By credit-spent hash, then credit id: the largest spent known (never lower than the truth).
    const spent = new Map<string, { subscriberId: string; feature: string; figures: Map<string, number> }>();
    const raiseSpent = (subscriberId: string, feature: string, creditId: string, figure: number) => {
      const group = creditDirtyMember(subscriberId, feature);
      let entry = spent.get(group);
      if (!entry) spent.set(group, (entry = { subscriberId, feature, figures: new Map() }));
      if ((entry.figures.get(creditId) ?? -1) < figure) entry.figures.set(creditId, figure);
    };
    for (const credit of persisted.credits)
      raiseSpent(credit.subscriberId, credit.feature, credit.creditId, credit.spent);
    const prefix = `${organizationId}\n`;
    let knownHere = false;
    for (const [key, figure] of figures.entries()) {
      if (!key.startsWith(prefix)) continue;
      knownHere = true;
      figure.credits?.forEach(([creditId], i) => {
        const figureSpent = figure.spent?.[i] ?? 0;
        if (figureSpent > 0) raiseSpent(figure.subscriberId, figure.feature, creditId, figureSpent);
      });
      if (figure.periodEndMs !== null && figure.periodEndMs <= nowMs) continue;
      const member = key.slice(prefix.length);
      const known = merged.get(member);
      // The larger figure is the later one: its covered and rollover come with it, as one instant.
      if (!known || known.used < figure.used)
        merged.set(member, {
          used: figure.used,
          revision: known?.revision ?? 0,
          periodEndMs: figure.periodEndMs,
          covered: figure.covered,
          rollover: figure.rollover,
        });
    }
    // No balance known anywhere (an organization's first metered operation, or one just imported: credits' spent alone
    // came with no usage to lose): nothing to gather; answers resume at once.
    const gather = merged.size > 0 || knownHere ? gatherMs : 0;
    const args = refillArguments(keys, organizationId, merged, spent, nowMs, gather === 0);
    await redis.meteredRefill(keys.meteredReady(organizationId), keys.meteredDirty(organizationId), ...args);
    return gather;
  }

  /**
   * Marks the organization ready once the gathering that the first merge started has lasted `gather` ms, unless Redis
   * lost the organization again meanwhile (restarted empty): its start is then gone from Redis (or another gathering's
   * is there), and a mark set anyway would make an empty Redis answer before any gateway merged into it.
   */
  async function readyAfterGathering(organizationId: string, gather: number): Promise<void> {
    const started = keys.meteredRefillStarted(organizationId);
    await redis.set(started, String(Date.now()), 'PX', gather * 10, 'NX');
    const start = await redis.get(started);
    if (start === null) return;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(start) + gather - Date.now())));
    await redis.meteredReady(keys.meteredReady(organizationId), started, start);
  }

  /**
   * Starts (once per organization at a time) a refill: `merged` settles when this gateway's figures are in Redis,
   * `done` when the gathering is over (the organization ready, unless Redis lost it again meanwhile). Operations
   * wait for `merged` only: during the gathering they are answered 503 with Retry-After rather than held, so no
   * client waits out its own timeout on a held request.
   */
  const refill = (organizationId: string): Refill => {
    const pending = refilling.get(organizationId);
    if (pending) return pending;
    const gathering = refillOnce(organizationId);
    const done = gathering.then((gather) =>
      gather > 0 ? readyAfterGathering(organizationId, gather) : undefined,
    );
    const started: Refill = { merged: gathering.then(() => undefined), done };
    refilling.set(organizationId, started);
    done.then(
      () => refilling.delete(organizationId),
      () => refilling.delete(organizationId),
    );
    return started;
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
    args.push(GATE_BATCH_MEMORY_MS, typeof known === 'number' ? known : await known);
    // A failure here leaves them pending: the call goes ahead (it fails too while Redis does not answer).
    if (settlements.pendingSettlements() > 0) await settlements.settlePending().catch(() => undefined);
    const callId = newCallId();
    let reply: (number | string)[];
    try {
      reply = await redis.usageApply(
        keys.catalog(organizationId),
        keys.subscriberVersions(organizationId),
        keys.meteredDirty(organizationId),
        keys.meteredReady(organizationId),
        keys.gateBatch(organizationId, callId),
        // One array, flattened once by ioredis (a batch's thousand operations were copied three times more spread).
        args,
      );
    } catch (error) {
      // The caller answers 503 ("nothing applied"), which the settle makes true if the call ran after all.
      settlements.settleLater({
        id: callId,
        organizationId,
        nowMs: clock.now(),
        answered: 0,
        operations: ops,
      });
      throw error;
    }
    // Applied nothing: the caller answers 503, as for a call that timed out.
    if (reply.length === 1 && (reply[0] === CALL_EXPIRED || reply[0] === CALL_SETTLED_BEFORE))
      throw new Error(
        `The usage call reached Redis ${reply[0] === CALL_EXPIRED ? 'after its deadline' : 'after its settle'}.`,
      );
    return ops.map((op, i) => decodeOutcome(op, reply[2 * i], reply[2 * i + 1]));
  }

  return {
    async apply(organizationId, ops) {
      if (ops.length === 0) return [];
      try {
        for (let attempt = 1; ; attempt++) {
          const outcomes = await applyOnce(organizationId, ops);
          if (attempt < READY_ATTEMPTS && outcomes.some((outcome) => outcome.status === 'not_ready')) {
            await refill(organizationId).merged;
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
        await refill(organizationId).done;
      } catch (error) {
        throw Object.assign(meteredUnavailable(), { cause: error });
      }
    },
    observe,
  };
}
