import { DelayedError } from 'bullmq';
import type { Kysely } from 'kysely';
import { Agent, request as httpRequest } from 'undici';
import type { Database, WebhookDelivery } from '@ent/common/db/database';
import { deliveryJobId } from './dispatch.ts';
import { signingSecrets } from './service.ts';
import { signatureHeader } from './signing.ts';
import { TargetRefusedError, assertPublicTarget, publicOnlyLookup, withoutAddresses } from './targets.ts';
import type { JobDefinition, JobDependencies, JobProcessor } from '../../jobs/job.ts';

declare module '../../jobs/queues.ts' {
  interface QueuePayloads {
    /** One webhook delivery attempt sequence for one event. */
    'webhook-delivery': { deliveryId: string };
  }
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * The Standard Webhooks retry schedule: the delay before each attempt (the first is immediate). After the
 * last attempt fails the delivery is `failed`.
 */
export const STANDARD_SCHEDULE_MS = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

export interface DeliveryOptions {
  /** Delay before attempt n+1 is `schedule[n]`; tests pass a fast one. */
  schedule: number[];
  /** Each delay is moved by up to this fraction either way, so retries of many deliveries spread out. */
  jitter: number;
  timeoutMs: number;
  /** The longest Retry-After the worker waits for. */
  maxRetryAfterMs: number;
  random: () => number;
  /**
   * Attempts of one organization a worker sends at once. Another waits `organizationWaitMs` (jittered) outside
   * the worker's slots, so one tenant's slow receiver cannot hold every slot and delay everyone's deliveries.
   */
  perOrganizationInFlight: number;
  organizationWaitMs: number;
}

const defaultDeliveryOptions: DeliveryOptions = {
  schedule: STANDARD_SCHEDULE_MS,
  jitter: 0.1,
  timeoutMs: 15 * SECOND,
  maxRetryAfterMs: 24 * HOUR,
  random: Math.random,
  perOrganizationInFlight: 4,
  organizationWaitMs: SECOND,
};

export const MAX_ERROR_LENGTH = 500;

/**
 * A job of an attempt that is no longer the delivery's next (a duplicate the sweep or a BullMQ retry left
 * behind) sends nothing: the row's own next attempt has its own job.
 */
function isStaleAttempt(
  jobId: string | undefined,
  delivery: Pick<WebhookDelivery, 'id' | 'attempts'>,
): boolean {
  if (jobId === undefined || !jobId.startsWith(`${delivery.id}.`)) return false;
  return jobId !== deliveryJobId(delivery.id, delivery.attempts + 1);
}

/** Seconds or an HTTP date, as milliseconds from `now`; null when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, now: number): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * SECOND;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

export function jittered(delayMs: number, options: Pick<DeliveryOptions, 'jitter' | 'random'>): number {
  if (delayMs === 0) return 0;
  return Math.max(0, Math.round(delayMs * (1 + (options.random() * 2 - 1) * options.jitter)));
}

/**
 * An error as `last_error` shows it to the tenant: the message (or, for an AggregateError from trying each
 * address, its first inner one), never an IP address the target resolved to.
 */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return withoutAddresses(String(error));
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
  const inner = error instanceof AggregateError ? (error.errors[0] as unknown) : (error.cause ?? null);
  const code = (error as { code?: unknown }).code;
  const text =
    error.message ||
    (inner instanceof Error ? inner.message : '') ||
    (typeof code === 'string' ? code : '') ||
    error.name;
  return withoutAddresses(text);
}

type Outcome =
  | { kind: 'delivered'; status: number }
  | { kind: 'gone'; status: number }
  | { kind: 'refused'; error: string }
  | { kind: 'retry'; status: number | null; error: string | null; retryAfterMs: number | null };

async function send(
  deps: JobDependencies,
  agent: Agent,
  options: DeliveryOptions,
  url: string,
  delivery: WebhookDelivery,
  secrets: string[],
): Promise<Outcome> {
  const target = new URL(url);
  // One deadline for the whole attempt, DNS check included: a slow resolver cannot hold a worker slot longer.
  const signal = AbortSignal.timeout(options.timeoutMs);
  if (!deps.config.webhookAllowPrivateTargets) {
    try {
      await assertPublicTarget(target, { signal });
    } catch (error) {
      if (error instanceof TargetRefusedError) return { kind: 'refused', error: error.message };
      return { kind: 'retry', status: null, error: `DNS: ${describeError(error)}`, retryAfterMs: null };
    }
  }
  const timestamp = Math.floor(deps.clock.now() / SECOND);
  try {
    const response = await httpRequest(target, {
      method: 'POST',
      dispatcher: agent,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'entitlements-webhooks/1',
        'webhook-id': delivery.event_id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(secrets, delivery.event_id, timestamp, delivery.payload),
      },
      body: delivery.payload,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      signal,
      maxRedirections: 0,
    } as Parameters<typeof httpRequest>[1]);
    await response.body.dump().catch(() => undefined);
    const status = response.statusCode;
    if (status >= 200 && status < 300) return { kind: 'delivered', status };
    if (status === 410) return { kind: 'gone', status };
    return {
      kind: 'retry',
      status,
      error: null,
      retryAfterMs: retryAfterMs(response.headers['retry-after'], deps.clock.now()),
    };
  } catch (error) {
    if (
      error instanceof TargetRefusedError ||
      (error as { cause?: unknown }).cause instanceof TargetRefusedError
    ) {
      return { kind: 'refused', error: (error as Error).message };
    }
    return { kind: 'retry', status: null, error: describeError(error), retryAfterMs: null };
  }
}

async function finish(
  db: Kysely<Database>,
  deliveryId: string,
  values: Partial<
    Pick<
      WebhookDelivery,
      'status' | 'attempts' | 'last_status_code' | 'last_error' | 'next_attempt_at' | 'delivered_at'
    >
  >,
  now: Date,
): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ ...values, updated_at: now })
    .where('id', '=', deliveryId)
    .where('status', '=', 'pending')
    .execute();
}

/**
 * One attempt per job. A failed attempt schedules the next as a delayed job (exact schedule, Retry-After
 * honoured) instead of using BullMQ's own backoff; 410 disables the endpoint; a disabled or deleted webhook
 * cancels what is still pending.
 */
export function createWebhookDeliveryProcessor(
  overrides: Partial<DeliveryOptions> = {},
): JobProcessor<'webhook-delivery'> {
  const options: DeliveryOptions = { ...defaultDeliveryOptions, ...overrides };
  return (deps) => {
    const agent = new Agent({
      connect: deps.config.webhookAllowPrivateTargets ? {} : { lookup: publicOnlyLookup },
      keepAliveTimeout: 4 * SECOND,
    });
    const inFlight = new Map<string, number>();
    return async (job, token) => {
      const { db } = deps;
      const delivery = await db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('id', '=', job.data.deliveryId)
        .executeTakeFirst();
      if (!delivery || delivery.status !== 'pending' || isStaleAttempt(job.id, delivery)) return;
      const webhook = await db
        .selectFrom('webhooks')
        .selectAll()
        .where('organization_id', '=', delivery.organization_id)
        .executeTakeFirst();
      const startedAt = new Date(deps.clock.now());
      if (!webhook || webhook.disabled) {
        await finish(
          db,
          delivery.id,
          { status: 'canceled', last_error: 'webhook disabled', next_attempt_at: null },
          startedAt,
        );
        return;
      }
      const organizationId = delivery.organization_id;
      const organizationSending = inFlight.get(organizationId) ?? 0;
      if (organizationSending >= options.perOrganizationInFlight) {
        // Back to the delayed set, not an attempt: nothing was sent and nothing on the row changes. Real time,
        // not deps.clock: BullMQ's delays run on it.
        await job.moveToDelayed(Date.now() + jittered(options.organizationWaitMs, options), token);
        throw new DelayedError();
      }
      // Before taking a place: a secret that cannot be decrypted throws here, and must not keep the place.
      const secrets = signingSecrets(webhook, deps.config.secretsKey, startedAt);
      inFlight.set(organizationId, organizationSending + 1);
      let outcome: Outcome;
      try {
        outcome = await send(deps, agent, options, webhook.url, delivery, secrets);
      } finally {
        const left = (inFlight.get(organizationId) ?? 1) - 1;
        if (left > 0) inFlight.set(organizationId, left);
        else inFlight.delete(organizationId);
      }
      const attempts = delivery.attempts + 1;
      const now = new Date(deps.clock.now());
      switch (outcome.kind) {
        case 'delivered':
          await finish(
            db,
            delivery.id,
            {
              status: 'succeeded',
              attempts,
              last_status_code: outcome.status,
              last_error: null,
              next_attempt_at: null,
              delivered_at: now,
            },
            now,
          );
          return;
        case 'gone':
          await finish(
            db,
            delivery.id,
            {
              status: 'failed',
              attempts,
              last_status_code: outcome.status,
              last_error: 'endpoint answered 410 Gone; webhook disabled',
              next_attempt_at: null,
            },
            now,
          );
          await db
            .updateTable('webhooks')
            .set({ disabled: true, disabled_reason: 'endpoint answered 410 Gone', updated_at: now })
            .where('organization_id', '=', delivery.organization_id)
            .where('disabled', '=', false)
            .execute();
          return;
        case 'refused':
          await finish(
            db,
            delivery.id,
            {
              status: 'failed',
              attempts,
              last_status_code: null,
              last_error: outcome.error,
              next_attempt_at: null,
            },
            now,
          );
          return;
        case 'retry': {
          const error = (outcome.error ?? `endpoint answered ${outcome.status}`).slice(0, MAX_ERROR_LENGTH);
          const scheduled = options.schedule[attempts];
          if (scheduled === undefined) {
            await finish(
              db,
              delivery.id,
              {
                status: 'failed',
                attempts,
                last_status_code: outcome.status,
                last_error: error,
                next_attempt_at: null,
              },
              now,
            );
            return;
          }
          const retryAfter =
            outcome.retryAfterMs === null ? 0 : Math.min(outcome.retryAfterMs, options.maxRetryAfterMs);
          const delay = Math.max(jittered(scheduled, options), retryAfter);
          await finish(
            db,
            delivery.id,
            {
              attempts,
              last_status_code: outcome.status,
              last_error: error,
              next_attempt_at: new Date(now.getTime() + delay),
            },
            now,
          );
          await deps.queues['webhook-delivery'].add(
            'webhook-delivery',
            { deliveryId: delivery.id },
            { delay, jobId: deliveryJobId(delivery.id, attempts + 1) },
          );
          return;
        }
      }
    };
  };
}

export const webhookDeliveryJob: JobDefinition<'webhook-delivery'> = {
  queue: 'webhook-delivery',
  processor: createWebhookDeliveryProcessor(),
  concurrency: 16,
};
