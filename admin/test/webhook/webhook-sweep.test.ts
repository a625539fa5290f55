import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { Worker, type Job } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import { deliveryJobId, recordDeliveries } from '../../src/features/webhook/dispatch.ts';
import type { JobDependencies } from '../../src/jobs/job.ts';
import { queueConnection } from '../../src/jobs/queues.ts';
import { createWebhookDeliveryProcessor } from '../../src/features/webhook/delivery.job.ts';
import { sweepStaleDeliveries } from '../../src/features/webhook/sweep.job.ts';
import { caller } from '../../../test-support/identity-context.ts';
import { Receiver, until, verify } from './receiver.ts';

let ctx: AdminTestContext;
let receiver: Receiver;
let port: number;
let deps: JobDependencies;
const workers: Worker[] = [];

beforeAll(async () => {
  ctx = await createAdminContext();
  receiver = new Receiver();
  port = await receiver.listen();
  deps = { config: ctx.config, clock: ctx.clock, db: ctx.db, redis: ctx.redis, queues: ctx.app.queues };
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.close()));
});
afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});

/** A delivery worker on this file's queue, closed after the test. */
function deliveryWorker(workerDeps: JobDependencies = deps): Worker {
  const { connection, prefix } = queueConnection(ctx.config);
  const worker = new Worker('webhook-delivery', createWebhookDeliveryProcessor({ jitter: 0 })(workerDeps), {
    connection,
    prefix,
  });
  workers.push(worker);
  return worker;
}

const queue = () => ctx.app.queues['webhook-delivery'];

/** An organization with a webhook on its own receiver path and one delivery due ten minutes ago. */
async function staleDelivery(name: string, attempts = 0) {
  const org = await createTestOrganization(ctx.db, name);
  const path = `/hooks/${name}`;
  const res = await caller(ctx, org.api_key).put('/org/webhook', { url: `http://127.0.0.1:${port}${path}` });
  expect(res.statusCode).toBe(201);
  const [deliveryId] = await recordDeliveries(
    ctx.db,
    org.organization_id,
    [{ type: 'test.swept', data: { name } }],
    new Date(Date.now() - 10 * 60_000),
  );
  if (attempts) {
    await ctx.db.updateTable('webhook_deliveries').set({ attempts }).where('id', '=', deliveryId!).execute();
  }
  return { deliveryId: deliveryId!, path, secret: res.json().secret as string };
}

const rowOf = (deliveryId: string) =>
  ctx.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirstOrThrow();

const closedPort = async () => {
  const server = createServer();
  const free = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
  await new Promise((resolve) => server.close(resolve));
  return free;
};

/** The job of the delivery's first attempt, run by a worker whose Postgres is unreachable: it fails. */
async function failFirstAttempt(deliveryId: string): Promise<void> {
  const unreachable = createDb(`postgres://nobody@127.0.0.1:${await closedPort()}/none`, {
    connectionTimeoutMillis: 500,
  });
  const crashing = deliveryWorker({ ...deps, db: unreachable });
  const jobId = deliveryJobId(deliveryId, 1);
  await queue().add('webhook-delivery', { deliveryId }, { jobId, attempts: 1 });
  await until(async () => (await queue().getJobState(jobId)) === 'failed');
  await crashing.close();
  await unreachable.destroy();
}

// The sweep looks at every pending delivery: each case starts with none but its own, so the counts are its own.
beforeEach(async () => {
  await ctx.db.updateTable('webhook_deliveries').set({ status: 'canceled' }).where('status', '=', 'pending').execute();
});

describe('the webhook sweep', () => {
  it('re-queues a delivery whose enqueue was lost (no job at all), found by its Postgres state', async () => {
    const { deliveryId, path, secret } = await staleDelivery('lost');
    deliveryWorker();
    expect(await sweepStaleDeliveries(deps)).toMatchObject({ requeued: 1, gaveUp: 0 });
    const [message] = await until(() => receiver.at(path).length >= 1 && receiver.at(path));
    expect(verify(secret, message!)).toMatchObject({ type: 'test.swept', data: { name: 'lost' } });
    await until(async () => (await rowOf(deliveryId)).status === 'succeeded');
  });

  it('a delivery whose job failed (its worker lost Postgres) is counted as an attempt and delivered', async () => {
    const { deliveryId, path } = await staleDelivery('failed-job');
    await failFirstAttempt(deliveryId);
    expect(receiver.at(path)).toHaveLength(0);
    expect((await rowOf(deliveryId)).status).toBe('pending');

    deliveryWorker();
    expect(await sweepStaleDeliveries(deps)).toMatchObject({ requeued: 1, gaveUp: 0 });
    await until(() => receiver.at(path).length >= 1);
    const row = await until(async () => {
      const current = await rowOf(deliveryId);
      return current.status === 'succeeded' && current;
    });
    expect(row.attempts).toBe(2);
    expect(receiver.at(path)).toHaveLength(1);
  });

  it('a completed job of the same id does not swallow the re-queue', async () => {
    const { deliveryId, path } = await staleDelivery('completed-job');
    const jobId = deliveryJobId(deliveryId, 1);
    // The job ran while the row was not pending (so it sent nothing); the row is pending again, as after a lost update.
    await ctx.db.updateTable('webhook_deliveries').set({ status: 'canceled' }).where('id', '=', deliveryId).execute();
    deliveryWorker();
    await queue().add('webhook-delivery', { deliveryId }, { jobId });
    await until(async () => (await queue().getJobState(jobId)) === 'completed');
    await ctx.db.updateTable('webhook_deliveries').set({ status: 'pending' }).where('id', '=', deliveryId).execute();

    expect(await sweepStaleDeliveries(deps)).toMatchObject({ requeued: 1 });
    await until(async () => (await rowOf(deliveryId)).status === 'succeeded');
    expect(receiver.at(path)).toHaveLength(1);
  });

  it('leaves a late delivery whose job is still delayed alone: no second job, nothing sent', async () => {
    const { deliveryId, path } = await staleDelivery('delayed-job');
    deliveryWorker();
    const jobId = deliveryJobId(deliveryId, 1);
    await queue().add('webhook-delivery', { deliveryId }, { jobId, delay: 60_000 });
    const before = await queue().getJobCounts('delayed', 'waiting', 'active');
    const result = await sweepStaleDeliveries(deps);
    expect(result.checked).toBeGreaterThanOrEqual(1);
    expect(result.requeued).toBe(0);
    expect(await queue().getJobState(jobId)).toBe('delayed');
    expect(await queue().getJobCounts('delayed', 'waiting', 'active')).toEqual(before);
    expect(await queue().getJob(deliveryJobId(deliveryId, 2))).toBeUndefined();
    expect(receiver.at(path)).toHaveLength(0);
    expect(await rowOf(deliveryId)).toMatchObject({ status: 'pending', attempts: 0 });
    await queue().remove(jobId);
    await ctx.db.updateTable('webhook_deliveries').set({ status: 'canceled' }).where('id', '=', deliveryId).execute();
  });

  it('two sweeps at once count a failed job once and deliver once', async () => {
    const { deliveryId, path } = await staleDelivery('two-sweepers');
    await failFirstAttempt(deliveryId);
    deliveryWorker();
    const results = await Promise.all([sweepStaleDeliveries(deps), sweepStaleDeliveries(deps)]);
    expect(results.reduce((sum, result) => sum + result.requeued, 0)).toBe(1);
    await until(async () => (await rowOf(deliveryId)).status === 'succeeded');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.at(path)).toHaveLength(1);
    expect((await rowOf(deliveryId)).attempts).toBe(2);
  });

  it('a failed job on the last attempt ends the delivery as failed, with the reason', async () => {
    const { deliveryId, path } = await staleDelivery('last-attempt');
    await failFirstAttempt(deliveryId);
    const result = await sweepStaleDeliveries(deps, { maxAttempts: 1 });
    expect(result).toMatchObject({ requeued: 0, gaveUp: 1 });
    const row = await rowOf(deliveryId);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: null });
    expect(row.last_error).toMatch(/the worker's attempt failed: .+/);
    expect(receiver.at(path)).toHaveLength(0);
  });

  it('bounds a run by batch size and batch count, and the next run goes on', async () => {
    const rows = await Promise.all(['bounded-1', 'bounded-2', 'bounded-3'].map((name) => staleDelivery(name)));
    const first = await sweepStaleDeliveries(deps, { batchSize: 1, maxBatches: 2 });
    expect(first.checked).toBe(2);
    const second = await sweepStaleDeliveries(deps, { batchSize: 10, maxBatches: 1 });
    expect(second.requeued).toBeGreaterThanOrEqual(1);
    for (const { deliveryId } of rows) expect(await queue().getJob(deliveryJobId(deliveryId, 1))).toBeDefined();
    await Promise.all(rows.map(({ deliveryId }) => queue().remove(deliveryJobId(deliveryId, 1))));
  });
});

describe('the delivery processor', () => {
  it('sends nothing for a job of an attempt that is no longer the delivery next', async () => {
    const { deliveryId, path } = await staleDelivery('stale-attempt', 2);
    const process = createWebhookDeliveryProcessor({ jitter: 0 })(deps);
    await process({ id: deliveryJobId(deliveryId, 1), data: { deliveryId } } as Job<{ deliveryId: string }>);
    await process({ id: deliveryJobId(deliveryId, 2), data: { deliveryId } } as Job<{ deliveryId: string }>);
    expect(receiver.at(path)).toHaveLength(0);
    expect(await rowOf(deliveryId)).toMatchObject({ status: 'pending', attempts: 2 });
    await process({ id: deliveryJobId(deliveryId, 3), data: { deliveryId } } as Job<{ deliveryId: string }>);
    expect(receiver.at(path)).toHaveLength(1);
    expect(await rowOf(deliveryId)).toMatchObject({ status: 'succeeded', attempts: 3 });
  });
});
