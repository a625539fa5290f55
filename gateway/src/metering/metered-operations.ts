import { meteredResult, meteredTermsOf, type MeteredTerms } from '@ent/common/resolve/resolve';
import { checkCreditsOf, type CreditFigures } from '@ent/common/metering/credit-answer';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { MeteredPeriod } from '@ent/common/metering/metered-period';
import { createPeriodCache } from './period-cache.ts';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { creditsSpec, NO_OPERATION_CREDITS, type OperationCredit } from './operation-credits.ts';

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
  source: MeteredCheckResult['source'];
  /** The balance's period (its labels included): what an applied or refused operation answers with. */
  period: MeteredPeriod;
  periodEndMs: number | null;
  /** How long the balance lives after a change (its period end + 35 days, on the app's clock); null: forever. */
  ttlMs: number | null;
  catalogVersion: number;
  subscriberVersion: number;
  idempotencyKey: string;
  /**
   * What an idempotency key's record is compared by: subscriber, feature, operation, amount ('' without a key: the
   * script reads it only to write or compare a record).
   */
  fingerprint: string;
  /**
   * How the answer is rendered (limit, soft, source, period), kept with an idempotent answer for its replay ('' without
   * a key, likewise).
   */
  terms: string;
  /** The live credits the script spends, in spending order ('' = none: metered-balance.fragment.lua). */
  credits: string;
  /** Those credits as the answer lists them (the order of `credits`). */
  creditList: readonly OperationCredit[];
}

/** What a script answered about credits (issue 35): what they covered, the period's rollover, each one's spent. */
export type { CreditFigures };

/** What a script did with one operation. */
export type MeteredOutcome =
  | { status: 'applied' | 'refused'; used: number; credits?: CreditFigures }
  | { status: 'replayed'; answer: MeteredCheckResult }
  | { status: 'stale' | 'not_ready' | 'skipped' | 'key_reused' };

/** A balance lives this long after its period ends, so the worker and late reads still find it. */
export const BALANCE_AFTER_PERIOD_MS = 35 * 86_400_000;

/** The 14 values of one operation after its first (the eval index or the subscriber id): the scripts' layout. */
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
    op.credits,
  ];
}

/**
 * usage-apply-4.lua's arguments after its keys: the prefixes, then what the operations on one feature's period share
 * (terms, period, ttl: the same for every event of a batch on that feature), once, then each operation's own values
 * (its credits among them: they are the subscriber's).
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
      last.op.limit === op.limit &&
      last.op.soft === op.soft &&
      last.op.periodEndMs === op.periodEndMs &&
      last.op.catalogVersion === op.catalogVersion &&
      last.op.ttlMs === op.ttlMs
    )
      set = last.set;
    else {
      // The tail names the feature and period start; the terms are '' without an idempotency key, so the limit, soft
      // and period end are named apart (with credits and a key, the terms list them: a set of their own).
      const key = `${op.catalogVersion}|${op.ttlMs}|${tail}|${op.limit}|${op.soft}|${op.periodEndMs}|${op.terms}`;
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
      op.credits,
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

/** The rendering terms; the sixth, only with credits, lists them (so a replay lists the credits of its time). */
type EncodedTerms = [
  limit: number | null,
  soft: 0 | 1,
  source: MeteredCheckResult['source'],
  start: number,
  end: number | null,
  credits?: readonly OperationCredit[],
];

/** The credits an answer lists (shared with admin's usage answers: common/src/metering/credit-answer.ts). */
export const meteredCreditsOf = checkCreditsOf;

/** A replayed answer from the terms its record kept. */
function render(
  feature: string,
  kind: MeteredKind,
  terms: string,
  status: 'applied' | 'refused',
  used: number,
  figures: CreditFigures | undefined,
) {
  const [limit, soft, source, startMs, endMs, list] = JSON.parse(terms) as EncodedTerms;
  return meteredResult(
    feature,
    { limit, soft: soft === 1, source },
    { startMs, endMs },
    used,
    kind === 'c' ? status === 'applied' : undefined,
    meteredCreditsOf(list ?? NO_OPERATION_CREDITS, figures),
  );
}

/** A script's figures with credits: {used, covered, rollover, spent...} (a table reply, or a replay's words). */
function creditFiguresOf(values: readonly unknown[]): { used: number; figures: CreditFigures } {
  return {
    used: Number(values[0]),
    figures: {
      covered: Number(values[1]),
      rollover: Number(values[2]),
      spent: values.slice(3).map(Number),
    },
  };
}

const STATUS = ['applied', 'refused', 'stale', 'not_ready', 'skipped', 'replayed', 'key_reused'] as const;

/** One operation's pair of reply values as its outcome. */
export function decodeOutcome(op: MeteredOperation, status: unknown, value: unknown): MeteredOutcome {
  const name = STATUS[Number(status)];
  switch (name) {
    case 'applied':
    case 'refused': {
      if (!Array.isArray(value)) return { status: name, used: Number(value) };
      const { used, figures } = creditFiguresOf(value);
      return { status: name, used, credits: figures };
    }
    case 'replayed': {
      const text = String(value);
      const first = text.indexOf('\n');
      const second = text.indexOf('\n', first + 1);
      const firstStatus = text.slice(0, first) === '0' ? 'applied' : 'refused';
      const recorded = text.slice(first + 1, second);
      const { used, figures } = recorded.includes(' ')
        ? creditFiguresOf(recorded.split(' '))
        : { used: Number(recorded), figures: undefined };
      return {
        status: 'replayed',
        answer: render(op.feature, op.kind, text.slice(second + 1), firstStatus, used, figures),
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

/** The answer of an applied or refused operation, from the terms the operation was resolved with. */
export const answerOf = (
  op: MeteredOperation,
  outcome: { status: 'applied' | 'refused'; used: number; credits?: CreditFigures },
) =>
  meteredResult(
    op.feature,
    { limit: op.limit, soft: op.soft, source: op.source },
    op.period,
    outcome.used,
    op.kind === 'c' ? outcome.status === 'applied' : undefined,
    meteredCreditsOf(op.creditList, outcome.credits),
  );

/** Periods are the same for every operation of the same terms until they end: computed once (period-cache.ts). */
const periodOf = createPeriodCache();

/** The terms a key's record keeps, as render() reads them back. */
function encodedTerms(terms: MeteredTerms, period: MeteredPeriod, creditListJson: string): string {
  const encoded: EncodedTerms = [terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs];
  const json = JSON.stringify(encoded);
  return creditListJson === '' ? json : `${json.slice(0, -1)},${creditListJson}]`;
}

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
  idempotencyKey: string,
  keys: RedisKeys,
  organizationId: string,
): MeteredOperation {
  const terms = meteredTermsOf(snapshot.catalog, snapshot.subscriber, feature, nowMs);
  const period = periodOf(terms, nowMs);
  const keyed = idempotencyKey !== '';
  const credits = creditsSpec(snapshot, subscriberId, feature, terms, period, nowMs, keys, organizationId);
  return {
    kind,
    subscriberId,
    feature,
    member: meteredMember(subscriberId, feature, period.startMs),
    amount,
    limit: terms.limit,
    soft: terms.soft,
    source: terms.source,
    period,
    periodEndMs: period.endMs,
    ttlMs: period.endMs === null ? null : Math.max(1, period.endMs + BALANCE_AFTER_PERIOD_MS - nowMs),
    catalogVersion: snapshot.catalogVersion,
    subscriberVersion: snapshot.subscriberVersion,
    idempotencyKey,
    fingerprint: keyed ? meteredFingerprint(kind, subscriberId, feature, amount) : '',
    // Rendering terms are kept only with a key's record (for its replay); with credits the sixth element lists them,
    // their JSON built once per live set.
    terms: keyed ? encodedTerms(terms, period, credits.listJson) : '',
    credits: credits.spec,
    creditList: credits.list,
  };
}
