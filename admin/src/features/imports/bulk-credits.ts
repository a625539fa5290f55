import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { AppError, conflict, validationError } from '@ent/common/errors/app-error';
import { DEFAULT_CREDIT_PRIORITY, MAX_LIVE_CREDITS_PER_FEATURE } from '@ent/contract/credits';
import type { CreditLine } from '@ent/contract/import-lines';
import { subscriberNotFound } from '../subscribers/service.ts';
import { lastById, lockSubscribers, type BulkResult, type Lined } from './bulk-subscribers.ts';
import { creditTermsOf, type CreditTerms } from './credit-terms.ts';
import type { AppliedResult } from './results.ts';

/** A created credit's spent figure, for the gateway's credit-spent hash (what it spends from). */
export interface CreditSpentSeed {
  subscriberId: string;
  feature: string;
  creditId: string;
  spent: number;
}

export interface CreditBulkResult extends BulkResult {
  seeds: CreditSpentSeed[];
}

interface ExistingCredit {
  id: string;
  subscriber_id: string;
  feature_id: string;
  amount: string;
  priority: number;
  name: string | null;
  effective_at: Date;
  expires_at: Date | null;
  created_at: Date;
  source: string;
  source_period_start: Date | null;
  voided: boolean;
}

const sameInstant = (a: Date | null, b: Date | null) => (a === null ? b === null : b !== null && +a === +b);

/** The fields the line gives that differ from the stored credit (an absent optional field is left as it is). */
function differences(existing: ExistingCredit, terms: CreditTerms, featureId: string): string[] {
  const fields: string[] = [];
  if (existing.subscriber_id !== terms.subscriberId) fields.push('subscriber_id');
  if (existing.feature_id !== featureId) fields.push('feature');
  if (Number(existing.amount) !== terms.amount) fields.push('amount');
  if (terms.given.priority && existing.priority !== terms.priority) fields.push('priority');
  if (terms.given.name && existing.name !== terms.name) fields.push('name');
  if (terms.given.effectiveAt && !sameInstant(existing.effective_at, terms.effectiveAt))
    fields.push('effective_at');
  if (terms.given.expiresAt && !sameInstant(existing.expires_at, terms.expiresAt)) fields.push('expires_at');
  if (terms.given.createdAt && !sameInstant(existing.created_at, terms.createdAt)) fields.push('created_at');
  if (existing.source !== terms.source) fields.push('source');
  if (!sameInstant(existing.source_period_start, terms.sourcePeriodStart)) fields.push('source_period_start');
  return fields;
}

const immutable = (terms: CreditTerms, fields: string[]) =>
  conflict(
    `The credit "${terms.id}" exists with another ${fields.join(', ')}; a credit does not change (void it and ` +
      'import one under another id).',
    { field: fields[0], value: terms.id, fields },
  );

const voided = (terms: CreditTerms) =>
  conflict(`The credit "${terms.id}" was voided; a voided credit is not brought back.`, {
    field: 'credit_id',
    value: terms.id,
  });

const rolloverTaken = (terms: CreditTerms) =>
  conflict(
    `The subscriber "${terms.subscriberId}" already holds the rollover of "${terms.feature}" from that period.`,
    { field: 'source_period_start', value: terms.sourcePeriodStart?.toISOString() ?? null },
  );

const takenMeanwhile = (terms: CreditTerms) =>
  conflict(`The credit "${terms.id}" was created by another write meanwhile; import the line again.`, {
    field: 'credit_id',
    value: terms.id,
  });

/**
 * Credits upserted by id in one INSERT: a line equal to the stored credit is unchanged (its `spent` is the
 * service's, which gateways move), one that differs is refused, a new one is created with its spent figure.
 * Refused as `POST .../credits` refuses, in its order: a missing subscriber (404), a feature that is unknown or not
 * metered (422), one live credit too many on the feature (422). Subscribers are locked in id order, as the route
 * locks its one, so the live counts hold until the batch commits.
 */
export async function applyCredits(
  trx: Transaction<Database>,
  organizationId: string,
  lines: readonly Lined<CreditLine>[],
  nowMs: number,
): Promise<CreditBulkResult> {
  const results = new Map<number, AppliedResult>();
  const winners: { lines: number[]; terms: CreditTerms }[] = [];
  for (const same of lastById(lines, (record) => record.credit_id).values()) {
    const terms = creditTermsOf(same[same.length - 1]!.record, nowMs);
    const numbers = same.map((l) => l.line);
    if (terms instanceof AppError) setAll(results, numbers, refusal(terms));
    else winners.push({ lines: numbers, terms });
  }
  const subscriberIds = [...new Set(winners.map((w) => w.terms.subscriberId))].sort();
  const featureKeys = [...new Set(winners.map((w) => w.terms.feature))];
  const present = await lockSubscribers(trx, organizationId, subscriberIds);
  const { rows: features } = await sql<{ id: string; key: string; kind: string }>`
    SELECT id, key, kind FROM features WHERE organization_id = ${organizationId} AND key = ANY(${featureKeys}::text[])
  `.execute(trx);
  const { rows: existingRows } = await sql<ExistingCredit>`
    SELECT id, subscriber_id, feature_id, amount, priority, name, effective_at, expires_at, created_at, source,
      source_period_start, voided_at IS NOT NULL AS voided
    FROM credits WHERE organization_id = ${organizationId} AND id = ANY(${winners.map((w) => w.terms.id)}::text[])
  `.execute(trx);
  const { rows: liveRows } = await sql<{ subscriber_id: string; feature_id: string; live: string }>`
    SELECT subscriber_id, feature_id, count(*) AS live FROM credits
    WHERE organization_id = ${organizationId} AND subscriber_id = ANY(${subscriberIds}::text[])
      AND voided_at IS NULL AND (expires_at IS NULL OR expires_at > ${new Date(nowMs)})
    GROUP BY subscriber_id, feature_id
  `.execute(trx);
  const featureByKey = new Map(features.map((f) => [f.key, f]));
  const existingById = new Map(existingRows.map((c) => [c.id, c]));
  const live = new Map(liveRows.map((r) => [`${r.subscriber_id}\u0000${r.feature_id}`, Number(r.live)]));

  const created: { lines: number[]; terms: CreditTerms; featureId: string }[] = [];
  const decide = (t: CreditTerms, numbers: number[]): AppliedResult => {
    if (!present.has(t.subscriberId)) return refusal(subscriberNotFound(t.subscriberId));
    const feature = featureByKey.get(t.feature);
    if (!feature)
      return refusal(
        validationError(`No feature with key "${t.feature}".`, { field: 'feature', value: t.feature }),
      );
    if (feature.kind !== 'metered')
      return refusal(
        validationError(
          `The feature "${feature.key}" is a ${feature.kind} feature; credits are for metered features only.`,
          { field: 'feature', value: t.feature },
        ),
      );
    const existing = existingById.get(t.id);
    if (existing) {
      const fields = differences(existing, t, feature.id);
      if (fields.length > 0) return refusal(immutable(t, fields));
      return existing.voided ? refusal(voided(t)) : { result: 'unchanged' };
    }
    const pair = `${t.subscriberId}\u0000${feature.id}`;
    const count = live.get(pair) ?? 0;
    if (count >= MAX_LIVE_CREDITS_PER_FEATURE)
      return refusal(
        validationError(
          `The subscriber "${t.subscriberId}" already holds ${count} credits on "${feature.key}" that are not ` +
            `voided or expired, the most it may (${MAX_LIVE_CREDITS_PER_FEATURE}).`,
          { field: 'feature', value: t.feature, limit: MAX_LIVE_CREDITS_PER_FEATURE },
        ),
      );
    if (t.expiresAt === null || t.expiresAt.getTime() > nowMs) live.set(pair, count + 1);
    created.push({ lines: numbers, terms: t, featureId: feature.id });
    return { result: 'applied' };
  };
  // Line order, so the live-credit cap refuses the later lines, as separate POSTs would.
  for (const { lines: numbers, terms } of winners.sort((a, b) => a.lines[0]! - b.lines[0]!)) {
    setAll(results, numbers, decide(terms, numbers));
  }
  const inserted = await insertCredits(trx, organizationId, created);
  const changed = new Set<string>();
  const seeds: CreditSpentSeed[] = [];
  for (const { lines: numbers, terms } of created) {
    if (!inserted.has(terms.id)) {
      // Taken meanwhile: the id by a concurrent write, or a rollover's period by another id (the unique index).
      setAll(
        results,
        numbers,
        refusal(terms.source === 'rollover' ? rolloverTaken(terms) : takenMeanwhile(terms)),
      );
      continue;
    }
    changed.add(terms.subscriberId);
    seeds.push({
      subscriberId: terms.subscriberId,
      feature: terms.feature,
      creditId: terms.id,
      spent: terms.spent,
    });
  }
  return { results, changed, seeds };
}

const refusal = (error: AppError): AppliedResult => ({ result: 'failed', error });

function setAll(results: Map<number, AppliedResult>, lines: readonly number[], result: AppliedResult) {
  for (const line of lines) results.set(line, result);
}

async function insertCredits(
  trx: Transaction<Database>,
  organizationId: string,
  created: readonly { terms: CreditTerms; featureId: string }[],
): Promise<Set<string>> {
  if (created.length === 0) return new Set();
  const column = <T>(of: (c: { terms: CreditTerms; featureId: string }) => T) => created.map(of);
  const { rows } = await sql<{ id: string }>`
    INSERT INTO credits (id, organization_id, subscriber_id, feature_id, name, amount, spent, priority, effective_at,
      expires_at, source, source_period_start, created_at)
    SELECT c.id, ${organizationId}, c.subscriber_id, c.feature_id, c.name, c.amount, c.spent, c.priority,
      c.effective_at, c.expires_at, c.source, c.source_period_start, c.created_at
    FROM unnest(
      ${column((c) => c.terms.id)}::text[], ${column((c) => c.terms.subscriberId)}::text[],
      ${column((c) => c.featureId)}::text[], ${column((c) => c.terms.name)}::text[],
      ${column((c) => c.terms.amount)}::bigint[], ${column((c) => c.terms.spent)}::bigint[],
      ${column((c) => c.terms.priority ?? DEFAULT_CREDIT_PRIORITY)}::int[],
      ${column((c) => c.terms.effectiveAt.toISOString())}::timestamptz[],
      ${column((c) => c.terms.expiresAt?.toISOString() ?? null)}::timestamptz[],
      ${column((c) => c.terms.source)}::text[],
      ${column((c) => c.terms.sourcePeriodStart?.toISOString() ?? null)}::timestamptz[],
      ${column((c) => c.terms.createdAt.toISOString())}::timestamptz[]
    ) AS c(id, subscriber_id, feature_id, name, amount, spent, priority, effective_at, expires_at, source,
      source_period_start, created_at)
    ON CONFLICT DO NOTHING
    RETURNING id
  `.execute(trx);
  return new Set(rows.map((r) => r.id));
}
