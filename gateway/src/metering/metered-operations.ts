import {
  meteredPeriodOf,
  meteredResult,
  meteredTermsOf,
  NO_METERED_CREDITS,
  type MeteredCredits,
} from '@ent/common/resolve/resolve';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import type { CheckCredit } from '@ent/contract/credits';
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
  /** The live credits the script spends, in spending order ('' = none: metered-balance.fragment.lua). */
  credits: string;
  /** Those credits as the answer lists them (the order of `credits`). */
  creditList: readonly OperationCredit[];
}

/** What a script answered about credits (issue 35): what they covered, the period's rollover, each one's spent. */
export interface CreditFigures {
  covered: number;
  rollover: number;
  spent: readonly number[];
}

/** What a script did with one operation. */
export type MeteredOutcome =
  | { status: 'applied' | 'refused'; used: number; credits?: CreditFigures }
  | { status: 'replayed'; answer: MeteredCheckResult }
  | { status: 'stale' | 'not_ready' | 'skipped' | 'key_reused' };

/** A balance lives this long after its period ends, so the worker and late reads still find it. */
const BALANCE_AFTER_PERIOD_MS = 35 * 86_400_000;

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

/** The rendering terms; the sixth, only with credits, lists them (so a replay lists the credits of its time). */
type EncodedTerms = [
  limit: number | null,
  soft: 0 | 1,
  source: MeteredCheckResult['source'],
  start: number,
  end: number | null,
  credits?: readonly OperationCredit[],
];

/** The credits an answer lists: those with something left, with what is left, in the order given. */
function meteredCreditsOf(
  list: readonly OperationCredit[],
  figures: CreditFigures | undefined,
): MeteredCredits {
  if (figures === undefined) return NO_METERED_CREDITS;
  const credits: CheckCredit[] = [];
  list.forEach(([id, amount, expiresAt], i) => {
    const remaining = (amount ?? figures.rollover) - (figures.spent[i] ?? 0);
    if (remaining > 0) credits.push({ credit_id: id, remaining, expires_at: expiresAt });
  });
  return { covered: figures.covered, credits };
}

/** The answer from what a script returned and the operation's rendered terms. */
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

/** The answer of an applied or refused operation. */
export const answerOf = (
  op: MeteredOperation,
  outcome: { status: 'applied' | 'refused'; used: number; credits?: CreditFigures },
) => render(op.feature, op.kind, op.terms, outcome.status, outcome.used, outcome.credits);

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
  const period = meteredPeriodOf(terms, nowMs);
  const encoded: EncodedTerms = [terms.limit, terms.soft ? 1 : 0, terms.source, period.startMs, period.endMs];
  const credits = creditsSpec(snapshot, subscriberId, feature, terms, period, nowMs, keys, organizationId);
  const json = JSON.stringify(encoded);
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
    fingerprint: `${kind}|${subscriberId}|${feature}|${amount}`,
    // The credit list, when there is one, is the terms' sixth element: its JSON is built once per live set.
    terms: credits.listJson === '' ? json : `${json.slice(0, -1)},${credits.listJson}]`,
    credits: credits.spec,
    creditList: credits.list,
  };
}
