import { meteredResult, NO_METERED_CREDITS, type MeteredCredits } from '@ent/common/resolve/resolve';
import { checkCreditsOf, ListedCredit, type CreditFigures } from '@ent/common/metering/credit-answer';
import type { CheckCredit } from '@ent/contract/credits';
import type { RedisKeys } from '@ent/common/redis/keys';
import { balanceTtlMs, type MeteredPeriod } from '@ent/common/metering/metered-period';
import { operationTermsOf, type OperationTerms } from './operation-terms.ts';
import type { CatalogDoc, SubscriberDoc } from '@ent/common/snapshots/documents';
import type { MeteredCheckResult } from '@ent/contract/evals';
import {
  creditsSpec,
  CreditSpecs,
  NO_OPERATION_CREDITS,
  renderingTermsWith,
  type OperationCredit,
} from './operation-credits.ts';

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
  /** `|<feature>|<period start ms>`: the member after the subscriber id, what the scripts' term sets send. */
  memberTail: string;
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
  /**
   * The organization's subscriber-write stamp at which `subscriberVersion` was the index's (the entry's verifiedStamp;
   * 0 or absent: not known). The usage call does not read again a version read at the stamp Redis still holds.
   */
  subscriberStamp?: number;
  idempotencyKey: string;
  /**
   * What an idempotency key's record is compared by: subscriber, feature, operation, amount ('' without a key: the
   * script reads it only to write or compare a record).
   */
  fingerprint: string;
  /**
   * How the answer is rendered (limit, soft, source, period, and with credits and a key the credits), kept with an
   * idempotent answer for its replay; without a key nothing reads it.
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

/** What a gate call's operations on one period of one feature share: one term set of eval-gate-batch-8.lua. */
interface GateTermSet {
  first: MeteredOperation;
  index: number;
}

/** A batch's operations mostly share a handful of term sets: the newest few are searched, older ones made again. */
const TERM_SETS_SEARCHED = 8;

/**
 * The 7 values of a term set, as eval-gate-batch-8.lua and usage-apply-6.lua both take them: catalog version, member
 * tail, limit ('' = unlimited), soft, period end ('' = never), ttl ('' = forever), terms.
 */
const termSetValues = (op: MeteredOperation): (string | number)[] => [
  op.catalogVersion,
  op.memberTail,
  op.limit === null ? '' : op.limit,
  op.soft ? '1' : '0',
  op.periodEndMs === null ? '' : op.periodEndMs,
  op.ttlMs === null ? '' : op.ttlMs,
  op.terms,
];

/** True when `op` has every value of the term set `set.first` opened (its ttl aside: see gateOperationArguments). */
const sharesTerms = (set: MeteredOperation, op: MeteredOperation) =>
  set.period === op.period &&
  set.periodEndMs === op.periodEndMs &&
  set.feature === op.feature &&
  set.catalogVersion === op.catalogVersion &&
  set.limit === op.limit &&
  set.soft === op.soft &&
  set.terms === op.terms;

/**
 * An operation's character in eval-gate-batch-8.lua's kinds string: its kind, upper case when it sends an idempotency
 * key and fingerprint after its values (a read never does: the rule ignores a read's key).
 */
/** A keyed operation's kind as the gate script reads it: upper case. */
const KEYED_KIND = { r: 'R', c: 'C', d: 'D', s: 'S' } as const;

const gateKindOf = (op: MeteredOperation) =>
  op.idempotencyKey === '' || op.kind === 'r' ? op.kind : KEYED_KIND[op.kind];

/**
 * eval-gate-batch-8.lua's metered section after its four keys: the number of term sets, 7 values per term set
 * (catalog version, member tail, limit, soft, period end, ttl, terms), the number of credit specs and each spec once,
 * the operations' kinds as one string (a character each, gateKindOf), then 5 values per operation (eval index, term
 * set, amount, subscriber version, credit spec: 0 = none, else its place among the specs) and, for an upper-case kind,
 * its idempotency key and fingerprint. The script makes each member from its eval's subscriber id and the set's tail.
 * A batch's operations on one feature's period share a set, so each one sends 5 short values rather than its 14 (each
 * argument costs the gateway, and Redis a Lua string); a subscriber's operations on one feature share its credit spec
 * (a few hundred bytes), sent and parsed once per call.
 * A set's ttl is its first operation's: the instants of one batch lie milliseconds apart, and the expiry (period end
 * + 35 days) is set only when a balance is made or its period end changes.
 */
export function gateOperationArguments(
  evals: readonly { subscriberId: string; metered?: readonly MeteredOperation[] | undefined }[],
): (string | number)[] {
  const sets: GateTermSet[] = [];
  const shared: (string | number)[] = [];
  const own: (string | number)[] = [];
  const creditSpecs = new CreditSpecs();
  let kinds = '';
  for (let i = 0; i < evals.length; i++) {
    const ops = evals[i]!.metered;
    if (ops === undefined) continue;
    for (const op of ops) {
      if (op.subscriberId !== evals[i]!.subscriberId)
        throw new Error(
          `A gate call's operation on "${op.subscriberId}" belongs to another subscriber's eval.`,
        );
      let set: GateTermSet | undefined;
      for (let k = sets.length - 1; k >= 0 && k >= sets.length - TERM_SETS_SEARCHED; k--) {
        if (sharesTerms(sets[k]!.first, op)) {
          set = sets[k]!;
          break;
        }
      }
      if (set === undefined) {
        set = { first: op, index: sets.length + 1 };
        sets.push(set);
        shared.push(...termSetValues(op));
      }
      const kind = gateKindOf(op);
      kinds += kind;
      own.push(i + 1, set.index, op.amount, op.subscriberVersion, creditSpecs.indexOf(op.credits));
      if (kind !== op.kind) own.push(op.idempotencyKey, op.fingerprint);
    }
  }
  const args: (string | number)[] = [sets.length];
  for (const value of shared) args.push(value);
  creditSpecs.pushTo(args);
  args.push(kinds);
  for (const value of own) args.push(value);
  return args;
}

/**
 * usage-apply-6.lua's arguments after its keys (its last two, the memory's time to live and the deadline, are the
 * caller's): the prefixes, then what the operations on one feature's period share (terms, period, ttl: the same for
 * every event of a batch on that feature, but for keyed events with credits, whose terms list them), once, then five
 * arguments for all the operations (the stamp the trusted versions were read at and which are, the subscribers once
 * each, the versions read of them, the operations' records: a thousand arguments cost as much to write as the rest of
 * the call), then the operations' idempotency keys, one argument each (a key may hold any byte).
 */
export function usageApplyArguments(
  balancePrefix: string,
  idempotencyPrefix: string,
  ops: readonly MeteredOperation[],
): (string | number)[] {
  const termSets = new Map<string, number>();
  const shared: (string | number)[] = [];
  const keys: string[] = [];
  // A subscriber's place among those the call names, by id: a second version of one id (an operation redone on a
  // fresher entry beside one that was not) takes a place of its own.
  const places = new Map<string, number>();
  const subscribers: string[] = [];
  const versions: number[] = [];
  const touches: number[] = [];
  // The stamp the call trusts: the first one an operation names (a batch's entries were mostly verified by one read).
  let stamp = 0;
  let trusted = '';
  const opPlaces = new Array<number>(ops.length);
  const opSets = new Array<number>(ops.length);
  let last: { op: MeteredOperation; set: number } | undefined;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    let place = places.get(op.subscriberId);
    if (place === undefined || versions[place - 1] !== op.subscriberVersion) {
      place = subscribers.push(op.subscriberId);
      versions.push(op.subscriberVersion);
      const opStamp = op.subscriberStamp ?? 0;
      if (stamp === 0 && opStamp !== 0) stamp = opStamp;
      trusted += opStamp !== 0 && opStamp === stamp ? '1' : '0';
      touches.push(0);
      places.set(op.subscriberId, place);
    }
    touches[place - 1]!++;
    opPlaces[i] = place;
    const tail = op.memberTail;
    let set: number | undefined;
    // A batch's events on one feature follow each other with the same terms: compared before any key is built.
    if (
      last !== undefined &&
      last.op.terms === op.terms &&
      last.op.memberTail === tail &&
      last.op.limit === op.limit &&
      last.op.soft === op.soft &&
      last.op.periodEndMs === op.periodEndMs &&
      last.op.catalogVersion === op.catalogVersion &&
      last.op.ttlMs === op.ttlMs
    )
      set = last.set;
    else {
      // The tail names the feature and period start, and the limit, soft and period end are named apart from the
      // terms (the plain rendering terms; with credits and a key, terms that list them: a set of their own).
      const key = `${op.catalogVersion}|${op.ttlMs}|${tail}|${op.limit}|${op.soft}|${op.periodEndMs}|${op.terms}`;
      set = termSets.get(key);
      if (set === undefined) {
        set = termSets.size + 1;
        termSets.set(key, set);
        shared.push(...termSetValues(op));
      }
      last = { op, set };
    }
    opSets[i] = set;
  }
  const records: string[] = new Array(ops.length);
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    const place = opPlaces[i]!;
    // Buffered when its subscriber has another operation in the call (the same balance or not: a copy of a balance
    // touched once costs a little, and answers the same).
    const buffered = touches[place - 1]! > 1 ? '1' : '0';
    const keyed = op.idempotencyKey === '' ? '0' : '1';
    if (keyed === '1') keys.push(op.idempotencyKey);
    records[i] =
      `${place}\x1f${opSets[i]}\x1f${op.kind}\x1f${op.amount}\x1f${buffered}\x1f${op.fingerprint}` +
      `\x1f${op.credits}\x1f${keyed}`;
  }
  const args: (string | number)[] = [balancePrefix, idempotencyPrefix, termSets.size];
  for (const value of shared) args.push(value);
  args.push(
    stamp === 0 ? '' : stamp,
    trusted,
    subscribers.join('\x1f'),
    versions.join('\x1f'),
    records.join('\x1e'),
  );
  for (const key of keys) args.push(key);
  return args;
}

/**
 * What eval-settle-4.lua needs of a call's operations to give back those its memory names (a gate batch's consumes
 * applied, by place; a usage call's changes): seven values per operation, in the call's order.
 */
export function giveBackArguments(ops: readonly MeteredOperation[]): (string | number)[] {
  const args: (string | number)[] = [];
  for (const op of ops)
    args.push(
      op.member,
      op.amount,
      op.periodEndMs ?? '',
      op.ttlMs ?? '',
      op.credits,
      op.idempotencyKey,
      op.limit ?? '',
    );
  return args;
}

/** What an idempotency key's record is compared by (MeteredOperation.fingerprint). */
const meteredFingerprint = (kind: MeteredKind, subscriberId: string, feature: string, amount: number) =>
  `${kind}|${subscriberId}|${feature}|${amount}`;

/** The rendering terms; the sixth, only with credits, lists them (so a replay lists the credits of its time). */
type EncodedTerms = [
  limit: number | null,
  soft: 0 | 1,
  source: MeteredCheckResult['source'],
  start: number,
  end: number | null,
  credits?: readonly OperationCredit[],
];

/**
 * What each credit list last answered: its figures (written over in place) and, while they hold, the answer built
 * from them. One entry per list for its lifetime: a consume that spends a credit changes the figures every time, and
 * a new entry, figures or answer kept per consume would live until that subscriber's next answer (seconds later at a
 * busy gateway), long enough to be promoted and collected as old garbage. So a changed answer is kept only once the
 * same figures answer again (a refused consume repeated, a metered check after a consume).
 */
interface LatestCredits {
  covered: number;
  rollover: number;
  spent: number[];
  /** The answer of these figures, once they answered twice (undefined: not kept). */
  answer: MeteredCredits | undefined;
  /**
   * The last answer kept: it lends its credits to the next answers (checkCreditsOf), those whose remaining did not
   * move, so an answer that spends makes one credit, not five, even from an older answer.
   */
  lender: readonly CheckCredit[];
}
const latestCredits = new WeakMap<readonly OperationCredit[], LatestCredits>();
const NO_CHECK_CREDITS: readonly CheckCredit[] = Object.freeze([]);

/** Whether two lists of spent figures (null: none named) are equal, figure by figure. */
export function sameSpent(a: readonly number[] | null, b: readonly number[] | null): boolean {
  if (a === b) return true;
  if (a === null || b === null || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const sameFigures = (latest: LatestCredits, figures: CreditFigures): boolean =>
  latest.covered === figures.covered &&
  latest.rollover === figures.rollover &&
  sameSpent(latest.spent, figures.spent);

/**
 * `spent` as a long-lived holder keeps it (a kept figure, a list's latest figures): written into the holder's own
 * array when it has as many figures. The holder is old by its next write, and a young array it pointed to, one per
 * consume that meets credits, would be kept alive and promoted, then collected as old garbage.
 */
export function keptSpent(kept: number[] | null, spent: readonly number[]): number[] {
  if (kept === null || kept.length !== spent.length) return spent.slice();
  for (let i = 0; i < spent.length; i++) kept[i] = spent[i]!;
  return kept;
}

/**
 * `built` as it is kept: a copy of its list and wrapper, made here rather than where every answer's are made. V8
 * decides per allocation site whether to allocate straight into the old generation: had the kept answers (each list's
 * first) come from checkCreditsOf's own site, all of them surviving made V8 allocate every later answer's list old,
 * and each young credit such a list points to then survived its collections too (most of what a spending consume
 * still promoted).
 */
function keptAnswer(latest: LatestCredits, built: MeteredCredits): MeteredCredits {
  const answer: MeteredCredits = { covered: built.covered, credits: built.credits.slice() };
  latest.answer = answer;
  latest.lender = answer.credits;
  ListedCredit.keepListText(answer.credits);
  return answer;
}

/**
 * The credits an answer lists (common/src/metering/credit-answer.ts, shared with admin's usage answers). Built once
 * per credit list and figures while those figures answer again: while only the allowance is spent, the figures stay
 * as they were, and the answers of a subscriber's consumes share one list rather than building it each time. Answers
 * never change their list.
 */
export function meteredCreditsOf(
  list: readonly OperationCredit[],
  figures: CreditFigures | undefined,
): MeteredCredits {
  if (figures === undefined) return NO_METERED_CREDITS;
  const latest = latestCredits.get(list);
  if (latest === undefined) {
    const made: LatestCredits = {
      covered: figures.covered,
      rollover: figures.rollover,
      spent: figures.spent.slice(),
      answer: undefined,
      lender: NO_CHECK_CREDITS,
    };
    latestCredits.set(list, made);
    return keptAnswer(made, checkCreditsOf(list, figures));
  }
  if (sameFigures(latest, figures)) {
    if (latest.answer !== undefined) return latest.answer;
    return keptAnswer(latest, checkCreditsOf(list, figures, latest.lender));
  }
  latest.covered = figures.covered;
  latest.rollover = figures.rollover;
  latest.spent = keptSpent(latest.spent, figures.spent);
  latest.answer = undefined;
  return checkCreditsOf(list, figures, latest.lender);
}

/**
 * What an operation with credits was answered when the script's value is the integer used: nothing covered, no
 * rollover, no credit spent (metered-balance.fragment.lua leaves the text out when every figure is 0; its
 * idempotency record keeps the text for gateways of the version before, and `render` reads either).
 */
// Not frozen: the figures `creditFiguresOf` makes and this keep one shape where they are compared per consume.
const NOTHING_FROM_CREDITS: CreditFigures = { covered: 0, rollover: 0, spent: [] };

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
    // A record of an operation with credits (its terms list them) that holds the integer used: every figure was 0.
    // Today's script still records the text ('used 0 0') for the gateways of the version before; this reads the
    // integer record its next version will write once they are gone (metered-balance.fragment.lua).
    list === undefined
      ? meteredCreditsOf(NO_OPERATION_CREDITS, figures)
      : meteredCreditsOf(list, figures ?? NOTHING_FROM_CREDITS),
  );
}

/**
 * The number written in `text` from `from` to `to`, as `Number` reads it: the digits of a whole figure (what the
 * scripts write) read in place, anything else by `Number` (no split into strings, one per figure, per answer).
 */
function figureIn(text: string, from: number, to: number): number {
  // 15 digits stay below 2^53: summed exactly, as Number reads them.
  if (to - from > 15 || to === from) return Number(text.slice(from, to));
  let value = 0;
  for (let i = from; i < to; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return Number(text.slice(from, to));
    value = value * 10 + digit;
  }
  return value;
}

/** A script's figures with credits: 'used covered rollover spent...' (an applied or refused value, or a replay's). */
function creditFiguresOf(text: string): { used: number; figures: CreditFigures } {
  // A figure the text leaves out reads as NaN, as Number(undefined) did.
  let used = NaN;
  let covered = NaN;
  let rollover = NaN;
  const spent: number[] = [];
  let from = 0;
  for (let place = 0; from <= text.length; place++) {
    let to = text.indexOf(' ', from);
    if (to === -1) to = text.length;
    const figure = figureIn(text, from, to);
    if (place === 0) used = figure;
    else if (place === 1) covered = figure;
    else if (place === 2) rollover = figure;
    else spent.push(figure);
    from = to + 1;
  }
  return { used, figures: { covered, rollover, spent } };
}

const STATUS = ['applied', 'refused', 'stale', 'not_ready', 'skipped', 'replayed', 'key_reused'] as const;

/** One operation's pair of reply values as its outcome. */
export function decodeOutcome(op: MeteredOperation, status: unknown, value: unknown): MeteredOutcome {
  const name = STATUS[Number(status)];
  switch (name) {
    case 'applied':
    case 'refused': {
      if (typeof value !== 'string')
        return op.credits === ''
          ? { status: name, used: Number(value) }
          : { status: name, used: Number(value), credits: NOTHING_FROM_CREDITS };
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
        ? creditFiguresOf(recorded)
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

export interface ResolvedSnapshot {
  catalog: CatalogDoc;
  subscriber: SubscriberDoc;
  catalogVersion: number;
  subscriberVersion: number;
  /** The stamp `subscriberVersion` was read at (MeteredOperation.subscriberStamp); absent: not known. */
  subscriberStamp?: number;
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
  /** The feature's terms at `nowMs` when the caller has resolved them already (a usage batch, for its answers). */
  resolved: OperationTerms = operationTermsOf(snapshot.catalog, snapshot.subscriber, feature, nowMs),
): MeteredOperation {
  const { terms, period, memberTail, encoded } = resolved;
  const keyed = idempotencyKey !== '';
  const credits = creditsSpec(snapshot, subscriberId, feature, terms, period, nowMs, keys, organizationId);
  return {
    kind,
    subscriberId,
    feature,
    member: subscriberId + memberTail,
    memberTail,
    amount,
    limit: terms.limit,
    soft: terms.soft,
    source: terms.source,
    period,
    periodEndMs: period.endMs,
    ttlMs: balanceTtlMs(period.endMs, nowMs),
    catalogVersion: snapshot.catalogVersion,
    subscriberVersion: snapshot.subscriberVersion,
    subscriberStamp: snapshot.subscriberStamp ?? 0,
    idempotencyKey,
    fingerprint: keyed ? meteredFingerprint(kind, subscriberId, feature, amount) : '',
    // Rendering terms are read only from a key's record (its replay); with credits and a key the sixth element lists
    // them, written per keyed operation. Without a key they are the plain terms of the feature's period, whoever the
    // subscriber: its operations share a term set with the keyed ones without credits.
    terms: keyed ? renderingTermsWith(encoded, credits.list) : encoded,
    credits: credits.spec,
    creditList: credits.list,
  };
}
