import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, Webhook, WebhookDelivery, WebhookDeliveryStatus } from '@ent/common/db/database';
import type { Updateable } from 'kysely';

type Db = Kysely<Database> | Transaction<Database>;

export function findWebhook(db: Db, organizationId: string): Promise<Webhook | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
}

/** The organization's webhook row, locked until the transaction ends. */
export function lockWebhook(
  trx: Transaction<Database>,
  organizationId: string,
): Promise<Webhook | undefined> {
  return trx
    .selectFrom('webhooks')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .forUpdate()
    .executeTakeFirst();
}

export interface DeliveryListFilter {
  limit: number;
  startingAfter?: string;
  status?: WebhookDeliveryStatus;
  eventType?: string;
}

/** Newest first; one extra row for `has_more`. */
export function listDeliveries(
  db: Db,
  organizationId: string,
  filter: DeliveryListFilter,
): Promise<WebhookDelivery[]> {
  let query = db.selectFrom('webhook_deliveries').selectAll().where('organization_id', '=', organizationId);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.eventType) query = query.where('event_type', '=', filter.eventType);
  if (filter.startingAfter) query = query.where('id', '<', filter.startingAfter);
  return query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

export function findDelivery(db: Db, deliveryId: string): Promise<WebhookDelivery | undefined> {
  return db.selectFrom('webhook_deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
}

/** For the metrics: deliveries still pending, and those that failed for good in the last hour. */
export async function webhookDeliveryCounts(db: Db): Promise<{ pending: number; failedLastHour: number }> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select([
      sql<number>`count(*) FILTER (WHERE status = 'pending')::int`.as('pending'),
      sql<number>`count(*) FILTER (WHERE status = 'failed' AND updated_at > now() - interval '1 hour')::int`.as(
        'failed',
      ),
    ])
    .where((eb) =>
      eb.or([
        eb('status', '=', 'pending'),
        eb.and([eb('status', '=', 'failed'), eb('updated_at', '>', sql<Date>`now() - interval '1 hour'`)]),
      ]),
    )
    .executeTakeFirstOrThrow();
  return { pending: row.pending, failedLastHour: row.failed };
}

export function insertWebhook(
  trx: Transaction<Database>,
  values: {
    organizationId: string;
    url: string;
    secretCiphertext: string;
    secretPrefix: string;
    disabled: boolean;
    now: Date;
  },
): Promise<Webhook> {
  return trx
    .insertInto('webhooks')
    .values({
      organization_id: values.organizationId,
      url: values.url,
      secret_ciphertext: values.secretCiphertext,
      secret_prefix: values.secretPrefix,
      disabled: values.disabled,
      created_at: values.now,
      updated_at: values.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function updateWebhookRow(
  trx: Transaction<Database>,
  organizationId: string,
  values: Updateable<Database['webhooks']>,
): Promise<Webhook> {
  return trx
    .updateTable('webhooks')
    .set(values)
    .where('organization_id', '=', organizationId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Deliveries still queued when a disabled webhook is enabled again are canceled: they were queued before it was
 * disabled (a disabled webhook records none), and docs/webhooks.md promises they are never sent. Left pending, they
 * would go out at their next attempt, to whatever URL the webhook has by then.
 */
export async function cancelQueuedDeliveries(db: Db, organizationId: string, now: Date): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'canceled', last_error: 'webhook disabled', next_attempt_at: null, updated_at: now })
    .where('organization_id', '=', organizationId)
    .where('status', '=', 'pending')
    .execute();
}
