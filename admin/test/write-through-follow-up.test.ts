import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '@ent/common/auth/api-key';
import { startOwnRedis, waitFor, type Started } from '../../gateway/test/processes.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../test-support/api-keys.ts';

// A Redis of this file's own: it is paused here, which would stall every other file's writes on the shared one.
let redisServer: Started;
let control: Redis;
let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  const own = await startOwnRedis();
  redisServer = own.server;
  const redisUrl = `redis://127.0.0.1:${own.port}`;
  control = new Redis(redisUrl);
  ctx = await createAdminContext({ config: { redisUrl } });
  org = await createTestOrganization(ctx.db, 'Follow-up org');
});
afterAll(async () => {
  await ctx?.close();
  control?.disconnect();
  await redisServer?.stop();
});

const authVersion = async () =>
  Number((await control.hget(ctx.app.redisKeys.auth(org.organization_id), 'v')) ?? 0);

describe('a write-through that times out on a hung Redis, with no worker running', () => {
  it('is delivered by admin itself once Redis answers: a revoked key is tombstoned and the auth version moves', async () => {
    const { serviceAccountId, keyId, apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, [
      'check',
    ]);
    await ctx.app.snapshots.publishAuth(org.organization_id);
    const before = await authVersion();
    expect(before).toBeGreaterThan(0);

    // Every write (and every script) waits while the pause lasts: the write-through's commands time out.
    await control.call('CLIENT', 'PAUSE', '2500', 'WRITE');
    const revoke = await ctx.app.inject({
      method: 'DELETE',
      url: `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`,
      headers: org.headers,
    });
    expect(revoke.statusCode).toBe(204);

    await waitFor(
      async () => (await authVersion()) > before,
      'the auth version published after the pause',
      15_000,
    );
    const tombstone = await control.hget(ctx.app.redisKeys.apiKey(hashApiKey(apiKey)), 'doc');
    expect(tombstone).toBe('');
    await waitFor(
      async () =>
        (await ctx.db.selectFrom('outbox').select('id').where('done_at', 'is', null).execute()).length === 0,
      'every outbox entry done',
      15_000,
    );
  });
});
