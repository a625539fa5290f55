import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import { recordDeliveries } from '../../src/features/webhook/dispatch.ts';
import { TARGET_REFUSED_MESSAGE } from '../../src/features/webhook/targets.ts';
import type { JobDependencies } from '../../src/jobs/job.ts';
import { createWebhookDeliveryProcessor } from '../../src/features/webhook/delivery.job.ts';
import { caller } from '../../../test-support/identity-context.ts';

/** An IPv4 or IPv6 address, with or without a port, anywhere in the text. */
const ANY_ADDRESS = /\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]*::[0-9a-f:]*|(?:[0-9a-f]{1,4}:){3,}/i;

let ctx: AdminTestContext;
let closedPort: number;

beforeAll(async () => {
  ctx = await createAdminContext();
  const closed = createServer();
  closedPort = await new Promise<number>((resolve) =>
    closed.listen(0, '127.0.0.1', () => resolve((closed.address() as AddressInfo).port)),
  );
  await new Promise((resolve) => closed.close(resolve));
});
afterAll(async () => {
  await ctx?.close();
});

/** One attempt of one delivery to `url`, run by the processor directly; returns the row afterwards. */
async function attemptOnce(name: string, url: string, allowPrivateTargets: boolean) {
  const org = await createTestOrganization(ctx.db, name);
  // Stored with private targets allowed, as an operator who later turned the setting off would have it.
  const put = await caller(ctx, org.api_key).put('/org/webhook', { url });
  expect(put.statusCode).toBe(201);
  const [deliveryId] = await recordDeliveries(
    ctx.db,
    org.organization_id,
    [{ type: 'test.event', data: {} }],
    new Date(),
  );
  const deps: JobDependencies = {
    config: { ...ctx.config, webhookAllowPrivateTargets: allowPrivateTargets },
    clock: ctx.clock,
    db: ctx.db,
    redis: ctx.redis,
    queues: ctx.app.queues,
  };
  await createWebhookDeliveryProcessor({ schedule: [0], timeoutMs: 2000 })(deps)({
    data: { deliveryId },
  } as Job<{ deliveryId: string }>);
  return ctx.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId!)
    .executeTakeFirstOrThrow();
}

describe('webhook delivery last_error never shows an address', () => {
  it.each([
    ['loopback literal', () => `http://127.0.0.1:${closedPort}/hook`],
    ['mapped loopback literal', () => `http://[::ffff:127.0.0.1]:${closedPort}/hook`],
    ['6to4 of a private address', () => 'http://[2002:a00:1::1]/hook'],
    ['name resolving to loopback', () => `http://localhost:${closedPort}/hook`],
  ])('a refused target (%s) fails with the fixed message', async (name, url) => {
    const row = await attemptOnce(`Refused ${name}`, url(), false);
    expect(row.status).toBe('failed');
    expect(row.last_error).toBe(TARGET_REFUSED_MESSAGE);
    expect(row.last_error).not.toMatch(ANY_ADDRESS);
  });

  it('a connection error names no address (private targets allowed, nobody listening)', async () => {
    const row = await attemptOnce('Connection refused', `http://127.0.0.1:${closedPort}/hook`, true);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, last_status_code: null });
    expect(row.last_error).toMatch(/ECONNREFUSED/);
    expect(row.last_error).not.toMatch(ANY_ADDRESS);
    expect(row.last_error).not.toContain(String(closedPort));
  });
});
