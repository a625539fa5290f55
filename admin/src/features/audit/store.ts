import { sql, type Kysely } from 'kysely';
import type { AuditOutcomeKind, Database } from '@ent/common/db/database';
import type { AuditOutcomeName } from '@ent/contract/audit';
import { auditIdFloor, type AuditEntryRow } from './entry.ts';

export interface NewAuditEntry {
  id: string;
  organizationId: string;
  occurredAt: Date;
  requestId: string;
  actor: { memberId: string; authType: 'member_apikey' | 'member_session'; keyPrefix: string };
  service: 'api' | 'identity';
  method: string;
  route: string;
  params: Record<string, string>;
  ip: string;
  userAgent: string | null;
}

export interface NewAuditOutcome {
  eventId: string;
  organizationId: string;
  outcome: AuditOutcomeKind;
  status: number | null;
  details: Record<string, unknown> | null;
}

const entryValues = (entry: NewAuditEntry) => ({
  id: entry.id,
  organization_id: entry.organizationId,
  occurred_at: entry.occurredAt,
  request_id: entry.requestId,
  actor_member_id: entry.actor.memberId,
  actor_auth_type: entry.actor.authType,
  actor_key_prefix: entry.actor.keyPrefix,
  service: entry.service,
  method: entry.method,
  route: entry.route,
  params: JSON.stringify(entry.params),
  ip: entry.ip,
  user_agent: entry.userAgent,
});

const outcomeValues = (outcome: NewAuditOutcome) => ({
  event_id: outcome.eventId,
  organization_id: outcome.organizationId,
  outcome: outcome.outcome,
  status: outcome.status,
  details: outcome.details === null ? null : JSON.stringify(outcome.details),
});

/** The `pending` entry: one autocommitted statement, before the write runs. */
export async function insertPendingEntry(db: Kysely<Database>, entry: NewAuditEntry): Promise<void> {
  await db.insertInto('audit_events').values(entryValues(entry)).execute();
}

/** An entry and its outcome at once (a request refused before anything ran). */
export async function insertSettledEntry(
  db: Kysely<Database>,
  entry: NewAuditEntry,
  outcome: Omit<NewAuditOutcome, 'eventId' | 'organizationId'>,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('audit_events').values(entryValues(entry)).execute();
    await trx
      .insertInto('audit_outcomes')
      .values(outcomeValues({ ...outcome, eventId: entry.id, organizationId: entry.organizationId }))
      .execute();
  });
}

/** Appends the outcome; false when the entry already has one (settled to `no_response` first). */
export async function appendOutcome(db: Kysely<Database>, outcome: NewAuditOutcome): Promise<boolean> {
  const result = await db
    .insertInto('audit_outcomes')
    .values(outcomeValues(outcome))
    .onConflict((oc) => oc.column('event_id').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

export interface AuditListFilter {
  limit: number;
  startingAfter?: string;
  actorMemberId?: string;
  outcome?: AuditOutcomeName;
  method?: string;
  route?: string;
  params?: Record<string, string>;
  service?: 'api' | 'identity';
  requestId?: string;
  /** Epoch milliseconds, inclusive. */
  occurredAfter?: number;
  /** Epoch milliseconds, exclusive. */
  occurredBefore?: number;
}

export async function auditEntryExists(
  db: Kysely<Database>,
  organizationId: string,
  id: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('audit_events')
    .select('id')
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row !== undefined;
}

/** Newest first by id, each entry with its outcome (none yet = pending); fetches `limit + 1` rows. */
export async function listAuditEntries(
  db: Kysely<Database>,
  organizationId: string,
  filter: AuditListFilter,
): Promise<AuditEntryRow[]> {
  let query = db
    .selectFrom('audit_events as e')
    .leftJoin('audit_outcomes as o', 'o.event_id', 'e.id')
    .select([
      'e.id',
      'e.organization_id',
      'e.occurred_at',
      'e.request_id',
      'e.actor_member_id',
      'e.actor_auth_type',
      'e.actor_key_prefix',
      'e.service',
      'e.method',
      'e.route',
      'e.params',
      'e.ip',
      'e.user_agent',
      'o.outcome',
      'o.status',
      'o.details',
    ])
    .where('e.organization_id', '=', organizationId);
  if (filter.startingAfter) query = query.where('e.id', '<', filter.startingAfter);
  if (filter.actorMemberId) query = query.where('e.actor_member_id', '=', filter.actorMemberId);
  if (filter.method) query = query.where('e.method', '=', filter.method);
  if (filter.route) query = query.where('e.route', '=', filter.route);
  if (filter.service) query = query.where('e.service', '=', filter.service);
  if (filter.requestId) query = query.where('e.request_id', '=', filter.requestId);
  // An entry's id carries its occurred_at (auditEntryIds), so a time window is an id range on the key.
  if (filter.occurredAfter !== undefined)
    query = query.where('e.id', '>=', auditIdFloor(filter.occurredAfter));
  if (filter.occurredBefore !== undefined)
    query = query.where('e.id', '<', auditIdFloor(filter.occurredBefore));
  if (filter.params && Object.keys(filter.params).length > 0) {
    query = query.where(sql<boolean>`e.params @> ${JSON.stringify(filter.params)}::jsonb`);
  }
  if (filter.outcome === 'pending') {
    // Everything recorded before the latest settle mark has an outcome: only entries after it can be pending.
    const settledBefore = await latestSettleMark(db);
    if (settledBefore) query = query.where('e.id', '>=', auditIdFloor(settledBefore.getTime()));
    query = query.where('o.event_id', 'is', null);
  } else if (filter.outcome) {
    // Stated on the outcome row too, so the (organization_id, outcome, event_id) index can drive the page.
    query = query.where('o.organization_id', '=', organizationId).where('o.outcome', '=', filter.outcome);
  }
  const rows = await query
    .orderBy('e.id', 'desc')
    .limit(filter.limit + 1)
    .execute();
  return rows.map((row) => ({
    ...row,
    outcome: row.outcome ?? null,
    status: row.status ?? null,
    details: row.details ?? null,
  }));
}

/**
 * Every entry that occurred before the latest mark has an outcome (the settle job's invariant). Marks after
 * `notAfter` (default: the database's clock) are ignored: a future-dated mark (clock skew, a bad row) would
 * otherwise make every settle run skip and hide pending entries from the filter. Ignoring a mark is always
 * safe, only slower: an earlier mark covers less.
 */
export async function latestSettleMark(db: Kysely<Database>, notAfter?: Date): Promise<Date | null> {
  const row = await db
    .selectFrom('audit_settle_marks')
    .select((eb) => eb.fn.max('settled_before').as('settled_before'))
    .where('settled_before', '<=', notAfter ?? sql<Date>`now()`)
    .executeTakeFirst();
  return row?.settled_before ? new Date(row.settled_before) : null;
}

export async function insertSettleMark(db: Kysely<Database>, settledBefore: Date): Promise<void> {
  await db
    .insertInto('audit_settle_marks')
    .values({ settled_before: settledBefore })
    .onConflict((oc) => oc.column('settled_before').doNothing())
    .execute();
}

/** Entries that occurred in [since, cutoff) and have no outcome get `no_response`; returns how many (one batch). */
export async function settlePendingEntries(
  db: Kysely<Database>,
  { cutoff, since, batchSize }: { cutoff: Date; since: Date | null; batchSize: number },
): Promise<number> {
  const result = await sql`
    INSERT INTO audit_outcomes (event_id, organization_id, outcome)
    SELECT e.id, e.organization_id, 'no_response'
    FROM audit_events e
    WHERE e.occurred_at < ${cutoff} AND e.occurred_at >= ${since ?? new Date(0)}
      AND NOT EXISTS (SELECT 1 FROM audit_outcomes o WHERE o.event_id = e.id)
    ORDER BY e.occurred_at
    LIMIT ${batchSize}
    ON CONFLICT (event_id) DO NOTHING
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
