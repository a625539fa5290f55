import { meteredPeriodOf, meteredResult, meteredTermsOf } from '@ent/common/resolve/resolve';
import { meteredMember } from '@ent/common/redis/keys';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import type { MeteredCheckResult } from '@ent/contract/evals';

/**
 * One metered operation as the Lua scripts take it (metered-balance.fragment.lua): the balance it acts on, and the
 * terms the gateway resolved for it from the snapshot versions it names.
 */
export type MeteredKind = 'r' | 'c' | 'd' | 's';

export interface MeteredOperation {
  kind: MeteredKind;
  subscriberId: string;
  feature: string;
  member: string;
  amount: number;
  limit: number | null;
  soft: boolean;
  periodEndMs: number | null;
  /** How long the balance lives after a change (its period end + 35 days, on the app's clock); null: forever. */
  ttlMs: number | null;
  catalogVersion: number;
  subscriberVersion: number;
  idempotencyKey: string;
  /** What an idempotency key's record is compared by: subscriber, feature, operation, amount. */
  fingerprint: string;
  /** How the answer is rendered (limit, soft, source, period), kept with an idempotent answer for its replay. */
  terms: string;
}

/** What a script did with one operation. */
export type MeteredOutcome =
  | { status: 'applied' | 'refused'; used: number }
  | { status: 'replayed'; answer: MeteredCheckResult }
  | { status: 'stale' | 'not_ready' | 'skipped' | 'key_reused' };

/** A balance lives this long after its period ends, so the worker and late reads still find it. */
export const BALANCE_AFTER_PERIOD_MS = 35 * 86_400_000;

/** The 13 values of one operation after its first (the eval index or the subscriber id): the scripts' layout. */
export function operationArguments(op: MeteredOperation): (string | number)[] {
  return [
    op.kind,
    op.member,
    op.amount,
    op.limit === null ? '' : op.limit,
    op.soft ? '1' : '0',
    op.periodEndMs === null ? '' : op.periodEndMs,
    op.ttlMs === null ? '' : op.ttlMs,
    op.catalogVersion,
    op.subscriberVersion,
    op.idempotencyKey,
    op.fingerprint,
    op.terms,
  ];
}

/**
 * usage-apply-4.lua's arguments after its keys: the prefixes, then what the operations on one feature's period share
 * (terms, period, ttl: the same for every event of a batch on that feature), once, then each operation's own values.
 */
export function usageApplyArguments(
  balancePrefix: string,
  idempotencyPrefix: string,
  ops: readonly MeteredOperation[],
): (string | number)[] {
  const termSets = new Map<string, number>();
  const shared: (string | number)[] = [];
  const own: (string | number)[] = [];
  let last: { op: MeteredOperation; tail: string; set: number } | undefined;
  for (const op of ops) {
    // A member is the subscriber id followed by '|<feature>|<period start>' (meteredMember).
    const tail = op.member.slice(op.subscriberId.length);
    let set: number | undefined;
    // A batch's events on one feature follow each other with the same terms: compared before any key is built.
    if (
      last !== undefined &&
      last.op.terms === op.terms &&
      last.tail === tail &&
      last.op.catalogVersion === op.catalogVersion &&
      last.op.ttlMs === op.ttlMs
    )
      set = last.set;
    else {
      // The terms name the limit, soft, period start and end; the tail the feature.
      const key = `${op.catalogVersion}|${op.ttlMs}|${tail}|${op.terms}`;
      set = termSets.get(key);
      if (set === undefined) {
        set = termSets.size + 1;
        termSets.set(key, set);
        shared.push(
          op.catalogVersion,
          tail,
          op.limit === null ? '' : op.limit,
          op.soft ? '1' : '0',
          op.periodEndMs === null ? '' : op.periodEndMs,
          op.ttlMs === null ? '' : op.ttlMs,
          op.terms,
        );
      }
      last = { op, tail, set };
    }
    own.push(
      op.subscriberId,
      op.subscriberVersion,
      set,
      op.kind,
      op.amount,
      op.idempotencyKey,
      op.fingerprint,
    );
  }
  const args: (string | number)[] = [balancePrefix, idempotencyPrefix, termSets.size];
  for (const value of shared) args.push(value);
  for (const value of own) args.push(value);
  return args;
}

/** What an idempotency key's record is compared by (MeteredOperation.fingerprint). */
export const meteredFingerprint = (
  kind: MeteredKind,
  subscriberId: string,
  feature: string,
  amount: number,
) => `${kind}|${subscriberId}|${feature}|${amount}`;

type EncodedTerms = [
  limit: number | null,
  soft: 0 | 1,
  source: MeteredCheckResult['source'],
  start: number,
  end: number | null,
];

/** The answer from what a script returned and the operation's rendered terms. */
function render(
  feature: string,
  kind: MeteredKind,
  terms: string,
  status: 'applied' | 'refused',
  used: number,
) {
  const [limit, soft, source, startMs, endMs] = JSON.parse(terms) as EncodedTerms;
  return meteredResult(
    feature,
    { limit, soft: soft === 1, source, reset: 'never', anchorMs: null },
    { startMs, endMs },
    used,
    kind === 'c' ? status === 'applied' : undefined,
  );
}

const STATUS = ['applied', 'refused', 'stale', 'not_ready', 'skipped', 'replayed', 'key_reused'] as const;

/** One operation's pair of reply values as its outcome. */
export function decodeOutcome(op: MeteredOperation, status: unknown, value: unknown): MeteredOutcome {
  const name = STATUS[Number(status)];
  switch (name) {
    case 'applied':
    case 'refused':
      return { status: name, used: Number(value) };
    case 'replayed': {
      const text = String(value);
      const first = text.indexOf('\n');
      const second = text.indexOf('\n', first + 1);
      const firstStatus = text.slice(0, first) === '0' ? 'applied' : 'refused';
      return {
        status: 'replayed',
        answer: render(
          op.feature,
          op.kind,
          text.slice(second + 1),
          firstStatus,
          Number(text.slice(first + 1, second)),
        ),
      };
    }
    case 'stale':
    case 'not_ready':
    case 'skipped':
    case 'key_reused':
      return { status: name };
    default:
      throw new Error(`Unexpected metered reply status ${String(status)}.`);
  }
}

/** The answer of an applied or refused operation. */
export const answerOf = (op: MeteredOperation, outcome: { status: 'applied' | 'refused'; used: number }) =>
  render(op.feature, op.kind, op.terms, outcome.status, outcome.used);

export interface ResolvedSnapshot {
  catalog: CatalogDoc;
  subscriber: SubscriberDoc;
  catalogVersion: number;
  subscriberVersion: number;
}

/**
 * The operation on `feature`'s current balance as `snapshot` resolves it at `nowMs` (DESIGN.md §5): its terms, its
 * period, its balance. The caller checks the feature is metered.
 */
export function meteredOperation(
  snapshot: ResolvedSnapshot,
  subscriberId: string,
  feature: string,
  kind: MeteredKind,
  amount: number,
  nowMs: number,
  idempotencyKey = '',
): MeteredOperation {
  const terms = meteredTermsOf(snapshot.catalog, snapshot.subscriber, feature, nowMs);
  const period = meteredPeriodOf(terms, nowMs);
  const encoded: EncodedTerms = [terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs];
  return {
    kind,
    subscriberId,
    feature,
    member: meteredMember(subscriberId, feature, period.startMs),
    amount,
    limit: terms.limit,
    soft: terms.soft,
    periodEndMs: period.endMs,
    ttlMs: period.endMs === null ? null : Math.max(1, period.endMs + BALANCE_AFTER_PERIOD_MS - nowMs),
    catalogVersion: snapshot.catalogVersion,
    subscriberVersion: snapshot.subscriberVersion,
    idempotencyKey,
    fingerprint: meteredFingerprint(kind, subscriberId, feature, amount),
    terms: JSON.stringify(encoded),
  };
}
