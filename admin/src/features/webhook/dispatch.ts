import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';
import type { Queues } from '../../jobs/queues.ts';
import type { DomainEvent, WriteOutcome } from '../shared/write/outcome.ts';

/** The JSON body of every delivery (documented in docs/webhooks.md). */
export interface WebhookPayload {
  id: string;
  type: string;
  created_at: string;
  organization_id: string;
  data: Record<string, unknown>;
}

/** Enqueuing must not hold a response hostage when Redis is slow; the row stays `pending` for a replay. */
const ENQUEUE_TIMEOUT_MS = 2000;

/**
 * One delivery row per event, when the organization has an enabled webhook (a disabled webhook sends
 * nothing, so nothing is recorded for it). Returns the new delivery ids.
 */
export async function recordDeliveries(
  db: Kysely<Database>,
  organizationId: string,
  events: DomainEvent[],
  now: Date,
): Promise<string[]> {
  if (events.length === 0) return [];
  const webhook = await db
    .selectFrom('webhooks')
    .select(['disabled'])
    .where('organization_id', '=', organizationId)
    .executeTakeFirst();
  if (!webhook || webhook.disabled) return [];
  const rows = events.map((event) => {
    const payload: WebhookPayload = {
      id: newId('evt'),
      type: event.type,
      created_at: now.toISOString(),
      organization_id: organizationId,
      data: event.data,
    };
    return {
      id: newId('whd'),
      organization_id: organizationId,
      event_id: payload.id,
      event_type: event.type,
      payload: JSON.stringify(payload),
      next_attempt_at: now,
      created_at: now,
      updated_at: now,
    };
  });
  await db.insertInto('webhook_deliveries').values(rows).execute();
  return rows.map((row) => row.id);
}

export const deliveryJobId = (deliveryId: string, attempt: number) => `${deliveryId}.${attempt}`;

export async function enqueueDeliveries(
  queues: Pick<Queues, 'webhook-delivery'>,
  deliveryIds: string[],
): Promise<void> {
  if (deliveryIds.length === 0) return;
  const queue = queues['webhook-delivery'];
  const added = queue.addBulk(
    deliveryIds.map((deliveryId) => ({
      name: 'webhook-delivery',
      data: { deliveryId },
      opts: { jobId: deliveryJobId(deliveryId, 1) },
    })),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error('enqueueing webhook deliveries timed out')),
      ENQUEUE_TIMEOUT_MS,
    );
  });
  try {
    await Promise.race([added, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Each write's events become delivery rows in the write's own transaction (committed with the change, so none
 * is lost to a crash), handed to the worker after the commit. The response waits only for the enqueue, never for
 * a delivery; a delivery whose enqueue failed stays `pending` and the sweep re-queues it.
 */
export function registerWebhookDispatch(app: FastifyInstance): void {
  const recorded = new WeakMap<WriteOutcome, string[]>();
  app.writePipeline.beforeCommit(async (trx, request, outcome) => {
    const principal = request.principal;
    if (!principal || outcome.events.length === 0) return;
    recorded.set(
      outcome,
      await recordDeliveries(trx, principal.organizationId, outcome.events, new Date(app.clock.now())),
    );
  });
  app.writePipeline.onCommitted(async (_request, outcome) => {
    await enqueueDeliveries(app.queues, recorded.get(outcome) ?? []);
  });
}
