import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { enqueueDeliveries, recordDeliveries } from '../../src/features/webhook/dispatch.ts';
import type { JobDependencies } from '../../src/jobs/job.ts';
import { queueConnection } from '../../src/jobs/queues.ts';
import {
  createWebhookDeliveryProcessor,
  jittered,
  retryAfterMs,
  STANDARD_SCHEDULE_MS,
} from '../../src/features/webhook/delivery.job.ts';
import { caller } from '../../../test-support/identity-context.ts';
import { Receiver, until, verify } from './receiver.ts';

const FAST_SCHEDULE = [0, 100, 200, 300];

let ctx: AdminTestContext;
let receiver: Receiver;
let port: number;
let worker: Worker;
let deps: JobDependencies;

beforeAll(async () => {
  ctx = await createAdminContext();
  receiver = new Receiver();
  port = await receiver.listen();
  deps = { config: ctx.config, clock: ctx.clock, db: ctx.db, redis: ctx.redis, queues: ctx.app.queues };
  const { connection, prefix } = queueConnection(ctx.config);
  worker = new Worker(
    'webhook-delivery',
    createWebhookDeliveryProcessor({
      schedule: FAST_SCHEDULE,
      jitter: 0,
      perOrganizationInFlight: 2,
      organizationWaitMs: 200,
    })(deps),
    {
      connection,
      prefix,
      concurrency: 4,
    },
  );
});
afterAll(async () => {
  await worker?.close();
  await receiver?.close();
  await ctx?.close();
});

/** An organization with a webhook on its own receiver path; returns its secret. */
async function withWebhook(
  name: string,
): Promise<{ org: TestOrganization; path: string; secret: string; api: ReturnType<typeof caller> }> {
  const org = await createTestOrganization(ctx.db, name);
  const api = caller(ctx, org.api_key);
  const path = `/hooks/${name}`;
  const res = await api.put('/org/webhook', { url: `http://127.0.0.1:${port}${path}` });
  expect(res.statusCode).toBe(201);
  return { org, path, secret: res.json().secret, api };
}

type WebhookApi = ReturnType<typeof caller>;

/** One queued test event for `org`, its delivery id. */
const queueOne = async (org: TestOrganization): Promise<string> =>
  (await recordDeliveries(ctx.db, org.organization_id, [{ type: 'test.event', data: {} }], new Date()))[0]!;

/** Runs the delivery's attempt now (as the worker's job would), then reads its row. */
async function attemptNow(deliveryId: string) {
  await createWebhookDeliveryProcessor({ schedule: FAST_SCHEDULE })(deps)({ data: { deliveryId } } as Job<{
    deliveryId: string;
  }>);
  return ctx.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .executeTakeFirstOrThrow();
}

const deliveriesOf = async (api: ReturnType<typeof caller>) =>
  (await api.get('/org/webhook/deliveries')).json().deliveries;

describe('webhook delivery', () => {
  it('delivers feature.created for POST /org/features, signed per Standard Webhooks', async () => {
    const { org, path, secret, api } = await withWebhook('created');
    const write = await api.post('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
    expect(write.statusCode).toBe(201);
    const [message] = await until(() => receiver.at(path).length > 0 && receiver.at(path));
    const payload = verify(secret, message!) as Record<string, unknown>;
    expect(payload).toMatchObject({
      type: 'feature.created',
      organization_id: org.organization_id,
      data: { key: 'sso', name: 'SSO', kind: 'flag' },
    });
    expect(payload.id).toBe(message!.headers['webhook-id']);
    expect(payload.id).toMatch(/^evt_/);
    expect(message!.headers['content-type']).toBe('application/json');
    expect(String(message!.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const [delivery] = await until(async () => {
      const list = await deliveriesOf(api);
      return list[0]?.status === 'succeeded' && list;
    });
    expect(delivery).toMatchObject({
      event_id: payload.id,
      event_type: 'feature.created',
      attempts: 1,
      last_status_code: 200,
    });
    expect(delivery.delivered_at).not.toBeNull();
  });

  it('retries after the receiver answers 500, with the same webhook-id, and succeeds', async () => {
    const { path, secret, api } = await withWebhook('retry');
    receiver.replies.set(path, [{ status: 500 }, { status: 500 }]);
    await api.post('/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
    const messages = await until(() => receiver.at(path).length >= 3 && receiver.at(path));
    for (const message of messages) verify(secret, message);
    expect(new Set(messages.map((m) => m.headers['webhook-id'])).size).toBe(1);
    expect(messages[1]!.at - messages[0]!.at).toBeGreaterThanOrEqual(90);
    expect(messages[2]!.at - messages[1]!.at).toBeGreaterThanOrEqual(190);
    const [delivery] = await until(async () => {
      const list = await deliveriesOf(api);
      return list[0]?.status === 'succeeded' && list;
    });
    expect(delivery).toMatchObject({ attempts: 3, last_status_code: 200 });
  });

  it('honours Retry-After', async () => {
    const { path, api } = await withWebhook('retry-after');
    receiver.replies.set(path, [{ status: 503, headers: { 'retry-after': '1' } }]);
    await api.post('/org/features', { key: 'later', name: 'Later', kind: 'flag' });
    const messages = await until(() => receiver.at(path).length >= 2 && receiver.at(path));
    expect(messages[1]!.at - messages[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it('gives up after the last attempt of the schedule (failed, with the last status)', async () => {
    const { path, api } = await withWebhook('exhausted');
    receiver.replies.set(
      path,
      Array.from({ length: 10 }, () => ({ status: 500 })),
    );
    await api.post('/org/features', { key: 'never', name: 'Never', kind: 'flag' });
    const [delivery] = await until(async () => {
      const list = await deliveriesOf(api);
      return list[0]?.status === 'failed' && list;
    });
    expect(delivery).toMatchObject({
      attempts: FAST_SCHEDULE.length,
      last_status_code: 500,
      next_attempt_at: null,
    });
    expect(receiver.at(path)).toHaveLength(FAST_SCHEDULE.length);
  });

  it('disables the endpoint when it answers 410; nothing more is sent', async () => {
    const { path, api } = await withWebhook('gone');
    receiver.replies.set(path, [{ status: 410 }]);
    await api.post('/org/features', { key: 'gone', name: 'Gone', kind: 'flag' });
    const webhook = await until(async () => {
      const body = (await api.get('/org/webhook')).json();
      return body.disabled && body;
    });
    expect(webhook.disabled_reason).toMatch(/410/);
    expect((await deliveriesOf(api))[0]).toMatchObject({
      status: 'failed',
      last_status_code: 410,
      attempts: 1,
    });
    await api.post('/org/features', { key: 'after-gone', name: 'After', kind: 'flag' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(receiver.at(path)).toHaveLength(1);
    expect(await deliveriesOf(api)).toHaveLength(1);
  });

  it('a disabled webhook sends nothing and records nothing; re-enabled, it delivers again', async () => {
    const { path, api } = await withWebhook('disabled');
    await api.post('/org/webhook/disable');
    await api.post('/org/features', { key: 'quiet', name: 'Quiet', kind: 'flag' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(receiver.at(path)).toHaveLength(0);
    expect(await deliveriesOf(api)).toEqual([]);
    await api.post('/org/webhook/enable');
    await api.post('/org/features', { key: 'loud', name: 'Loud', kind: 'flag' });
    await until(() => receiver.at(path).length === 1);
  });

  it('cancels a pending delivery when the webhook was disabled before it was sent', async () => {
    const { org, path, api } = await withWebhook('canceled');
    const deliveryId = await queueOne(org);
    await api.post('/org/webhook/disable');
    expect((await attemptNow(deliveryId)).status).toBe('canceled');
    expect(receiver.at(path)).toHaveLength(0);
  });

  it.each([
    ['POST /org/webhook/enable', (api: WebhookApi) => api.post('/org/webhook/enable')],
    [
      'PUT /org/webhook with a new URL',
      (api: WebhookApi, url: string) => api.put('/org/webhook', { url, disabled: false }),
    ],
  ])(
    'cancels what was queued before a disable when the webhook is enabled again (%s): nothing old is sent',
    async (_how, enable) => {
      const { org, path, api } = await withWebhook(`reenabled-${Math.random().toString(36).slice(2, 8)}`);
      const deliveryId = await queueOne(org);
      await api.post('/org/webhook/disable');
      expect((await enable(api, `http://127.0.0.1:${port}${path}-moved`)).statusCode).toBe(200);
      expect(await attemptNow(deliveryId)).toMatchObject({
        status: 'canceled',
        last_error: 'webhook disabled',
        next_attempt_at: null,
      });
      expect(receiver.at(path)).toHaveLength(0);
      expect(receiver.at(`${path}-moved`)).toHaveLength(0);
    },
  );

  it('rotation: both signatures are sent during the overlap, each verifies with its own secret', async () => {
    const { org, path, secret: oldSecret, api } = await withWebhook('rotation');
    const rotated = await api.post('/org/webhook/rotate');
    const newSecret = rotated.json().secret as string;
    await api.post('/org/features', { key: 'rotated', name: 'Rotated', kind: 'flag' });
    const [message] = await until(() => receiver.at(path).length >= 1 && receiver.at(path));
    expect(String(message!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(oldSecret, message!)).toMatchObject({ type: 'feature.created' });
    expect(verify(newSecret, message!)).toMatchObject({ type: 'feature.created' });

    // Once the 24 hours have passed only the new secret signs.
    await ctx.ownerDb
      .updateTable('webhooks')
      .set({ previous_secret_expires_at: new Date(Date.now() - 1000) })
      .where('organization_id', '=', org.organization_id)
      .execute();
    await api.post('/org/features', { key: 'after-overlap', name: 'After', kind: 'flag' });
    const messages = await until(() => receiver.at(path).length >= 2 && receiver.at(path));
    const latest = messages[1]!;
    expect(String(latest.headers['webhook-signature']).split(' ')).toHaveLength(1);
    verify(newSecret, latest);
    expect(() => verify(oldSecret, latest)).toThrow();
  });

  it('refuses a private or loopback target when private targets are not allowed (no request made)', async () => {
    const { org, path } = await withWebhook('private');
    const [deliveryId] = await recordDeliveries(
      ctx.db,
      org.organization_id,
      [{ type: 'test.event', data: {} }],
      new Date(),
    );
    const strict: JobDependencies = { ...deps, config: { ...ctx.config, webhookAllowPrivateTargets: false } };
    await createWebhookDeliveryProcessor({ schedule: FAST_SCHEDULE })(strict)({
      data: { deliveryId },
    } as Job<{ deliveryId: string }>);
    const row = await ctx.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', deliveryId!)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('failed');
    expect(row.last_error).toMatch(/private or loopback/);
    expect(receiver.at(path)).toHaveLength(0);
  });

  it('a network error is retried like a non-2xx answer', async () => {
    const org = await createTestOrganization(ctx.db, 'Closed');
    const api = caller(ctx, org.api_key);
    const closed = createServer();
    const closedPort = await new Promise<number>((resolve) =>
      closed.listen(0, '127.0.0.1', () => resolve((closed.address() as AddressInfo).port)),
    );
    await new Promise((resolve) => closed.close(resolve));
    await api.put('/org/webhook', { url: `http://127.0.0.1:${closedPort}/nobody` });
    await api.post('/org/features', { key: 'nobody', name: 'Nobody', kind: 'flag' });
    const [delivery] = await until(async () => {
      const list = await deliveriesOf(api);
      return list[0]?.status === 'failed' && list;
    });
    expect(delivery.attempts).toBe(FAST_SCHEDULE.length);
    expect(delivery.last_status_code).toBeNull();
    expect(delivery.last_error).toBeTruthy();
  });

  it("one organization's hanging receiver holds at most its share of the worker; others are delivered meanwhile", async () => {
    const held: import('node:http').ServerResponse[] = [];
    const hanging = createServer((req, res) => {
      req.resume();
      held.push(res);
    });
    const hangingPort = await new Promise<number>((resolve) =>
      hanging.listen(0, '127.0.0.1', () => resolve((hanging.address() as AddressInfo).port)),
    );
    try {
      const slow = await createTestOrganization(ctx.db, 'Slow receiver');
      const slowApi = caller(ctx, slow.api_key);
      await slowApi.put('/org/webhook', { url: `http://127.0.0.1:${hangingPort}/hang` });
      const slowIds = await recordDeliveries(
        ctx.db,
        slow.organization_id,
        Array.from({ length: 6 }, () => ({ type: 'test.event', data: {} })),
        new Date(),
      );
      await enqueueDeliveries(ctx.app.queues, slowIds);
      await until(() => held.length === 2);

      const fast = await withWebhook('beside-a-slow-one');
      await enqueueDeliveries(ctx.app.queues, [await queueOne(fast.org)]);
      await until(() => receiver.at(fast.path).length === 1);
      // The worker has four slots; the slow organization never had more than two of them.
      expect(held).toHaveLength(2);

      for (let released = 0; released < 6; released++) {
        const res = await until(() => held.shift());
        res.writeHead(200).end('ok');
      }
      const settled = await until(async () => {
        const list = await deliveriesOf(slowApi);
        return list.length === 6 && list.every((d: { status: string }) => d.status === 'succeeded') && list;
      });
      // Waiting for a slot is not an attempt.
      expect(settled.map((d: { attempts: number }) => d.attempts)).toEqual([1, 1, 1, 1, 1, 1]);
    } finally {
      hanging.closeAllConnections();
      await new Promise((resolve) => hanging.close(resolve));
    }
  });
});

describe('schedule helpers', () => {
  it('follows the Standard Webhooks schedule', () => {
    expect(STANDARD_SCHEDULE_MS.map((ms) => ms / 1000)).toEqual([
      0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400,
    ]);
  });

  it('jitters by at most the given fraction and never the immediate attempt', () => {
    expect(jittered(0, { jitter: 0.1, random: () => 1 })).toBe(0);
    expect(jittered(1000, { jitter: 0.1, random: () => 0 })).toBe(900);
    expect(jittered(1000, { jitter: 0.1, random: () => 1 })).toBe(1100);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-11-22T12:00:00Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs('Sun, 22 Nov 2026 12:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs('soon', now)).toBeNull();
    expect(retryAfterMs(undefined, now)).toBeNull();
  });
});
