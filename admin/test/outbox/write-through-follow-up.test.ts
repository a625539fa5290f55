import { sql } from 'kysely';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '@ent/common/auth/api-key';
import { recordOutbox } from '@ent/common/outbox/record';
import { startOwnRedis, waitFor, type Started } from '../../../gateway/test/processes.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

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

describe('an entry leased by an admin killed mid-publish', () => {
  it('is published as the next admin starts listening, not once its lease runs out', async () => {
    const { keyId, apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    await ctx.app.snapshots.publishAuth(org.organization_id);
    const keyDoc = () => control.hget(ctx.app.redisKeys.apiKey(hashApiKey(apiKey)), 'doc');
    expect(await keyDoc()).not.toBe('');
    // What the killed admin left: the revocation committed with its outbox entry, leased for 30 s by its relay pass.
    await ctx.db.transaction().execute(async (trx) => {
      await sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId}`.execute(trx);
      const { rows } = await sql<{ auth_version: number }>`
        UPDATE organizations SET auth_version = auth_version + 1 WHERE id = ${org.organization_id}
        RETURNING auth_version`.execute(trx);
      await recordOutbox(trx, {
        organizationId: org.organization_id,
        kind: 'auth',
        version: rows[0]!.auth_version,
      });
      await sql`UPDATE outbox SET next_attempt_at = now() + interval '30 seconds' WHERE done_at IS NULL`.execute(
        trx,
      );
    });

    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    await waitFor(async () => (await keyDoc()) === '', 'the revoked key tombstoned', 5000);
  });
});
