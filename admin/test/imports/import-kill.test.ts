import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { snapshotStore } from '@ent/common/snapshots/store';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { healthy, serviceEnv, startNode, waitFor, type Started } from '../../../gateway/test/processes.ts';

/**
 * Admin killed (SIGKILL) in the middle of an import, with real processes: what is in Postgres is whole batches
 * only (every applied line's row, no row of a line not applied), and the next admin resumes the import from its
 * cursor once the lease has expired, to `succeeded` with every record applied once and published.
 */
let database: TestDatabase;
let db: ReturnType<typeof createDb>;
let env: Record<string, string>;
let adminUrl: string;
let admin: Started | undefined;
const prefix = testRedisPrefix();
const SUBSCRIBERS = 4000;

const startAdmin = async () => {
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
};

const killHard = async (process: Started | undefined) => {
  if (!process?.child.pid || process.child.exitCode !== null) return;
  const exited = new Promise((resolve) => process.child.once('exit', resolve));
  process.child.kill('SIGKILL');
  await exited;
};

const postImport = async (org: TestOrganization, lines: unknown[]) => {
  const res = await fetch(`${adminUrl}/org/imports`, {
    method: 'POST',
    headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
    body: lines.map((line) => JSON.stringify(line)).join('\n'),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { import_id: string }).import_id;
};

const importRow = (id: string) =>
  db.selectFrom('imports').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

const count = async (table: 'subscribers' | 'subscriptions', organizationId: string) =>
  Number(
    (
      await db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('organization_id', '=', organizationId)
        .executeTakeFirstOrThrow()
    ).n,
  );

beforeAll(async () => {
  database = await createTestDatabase();
  ({ env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix, logLevel: 'warn' }));
  // Small batches, so the kill lands between many of them; a short lease, so the restart resumes soon.
  env = { ...env, IMPORT_BATCH_SIZE: '100', IMPORT_LEASE_MS: '2000' };
  db = createDb(database.appUrl, { max: 2 });
  await startAdmin();
}, 90_000);

afterAll(async () => {
  await admin?.stop();
  const redis = new Redis(env.REDIS_URL!);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('admin killed (kill -9) in the middle of an import', () => {
  it('leaves whole batches only, and the next admin resumes the import to succeeded', async () => {
    const org = await createTestOrganization(db, 'Import killed');
    const catalog = await postImport(org, [
      { type: 'feature', key: 'seats', name: 'Seats', kind: 'limit' },
      {
        type: 'plan',
        key: 'pro',
        name: 'Pro',
        kind: 'catalog',
        grants: [{ feature: 'seats', kind: 'limit', limit: 5 }],
      },
    ]);
    await waitFor(async () => (await importRow(catalog)).status === 'succeeded', 'the catalog import');

    const people = Array.from({ length: SUBSCRIBERS }, (_, i) => [
      { type: 'subscriber', subscriber_id: `cus_${String(i).padStart(5, '0')}` },
      { type: 'subscription', subscriber_id: `cus_${String(i).padStart(5, '0')}`, plan_id: 'pro' },
    ]).flat();
    const id = await postImport(org, people);
    await waitFor(async () => (await importRow(id)).applied >= 400, 'some batches applied', 60_000);
    await killHard(admin);

    const killed = await importRow(id);
    expect(killed.status).toBe('running');
    expect(killed.applied).toBeLessThan(people.length);
    // Every applied line made exactly one row, and nothing else was written: no half of a batch.
    const rows =
      (await count('subscribers', org.organization_id)) + (await count('subscriptions', org.organization_id));
    expect(rows).toBe(killed.applied);
    expect(killed.applied % 100).toBe(0);

    await startAdmin();
    await waitFor(
      async () => (await importRow(id)).status !== 'running',
      'the import resumed and ended',
      90_000,
    );
    const done = await importRow(id);
    expect(done).toMatchObject({ status: 'succeeded', applied: people.length, unchanged: 0, failed: 0 });
    expect(await count('subscribers', org.organization_id)).toBe(SUBSCRIBERS);
    expect(await count('subscriptions', org.organization_id)).toBe(SUBSCRIBERS);
    // Published, the batches before the kill included (the outbox relay or the resumed runner).
    const redis = new Redis(env.REDIS_URL!);
    try {
      const store = snapshotStore(redis as never, redisKeys(prefix));
      await waitFor(async () => {
        const first = await store.readSubscriber(org.organization_id, 'cus_00000');
        const last = await store.readSubscriber(
          org.organization_id,
          `cus_${String(SUBSCRIBERS - 1).padStart(5, '0')}`,
        );
        return first?.doc.plans.length === 1 && last?.doc.plans.length === 1;
      }, 'the first and last subscribers published');
    } finally {
      redis.disconnect();
    }
  }, 240_000);
});
