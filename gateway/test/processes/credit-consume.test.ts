import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { CatalogDoc, CreditDoc, MeteredGrant } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import {
  healthy,
  httpClient,
  serviceEnv,
  startGateways,
  startNode,
  startOwnRedis,
  type Started,
} from '../processes.ts';

/**
 * Consumes of one balance with credits spread over two gateway processes (issue 35): what is spent never passes the
 * allowance plus the live credits, and nothing that fitted is refused. Credits not yet effective or already expired
 * count for nothing. Catalog and subscriber documents are written to Redis as the snapshot builder publishes them, at
 * versions past admin's.
 */
let database: TestDatabase;
let redisServer: Started;
let redisPort: number;
let admin: Started;
let gateways: Started[] = [];
let urls: string[];
let db: ReturnType<typeof createDb>;
let redis: Redis;
let org: TestOrganization;
const prefix = testRedisPrefix();
const keys = redisKeys(prefix);
let catalogVersion = 1000;
let subscriberVersion = 1000;
const plans: Record<string, { archived: boolean; grants: Record<string, MeteredGrant> }> = {};

const store = () => snapshotStore(redis as unknown as ReturnType<typeof createRedis>, keys);

async function publishCatalog(): Promise<void> {
  const doc = { features: { calls: 'metered', sso: 'flag' }, plans } as unknown as CatalogDoc;
  await store().putCatalog(org.organization_id, { version: ++catalogVersion, doc });
}
async function publishSubscriber(id: string, plan: string, credits: CreditDoc[]): Promise<void> {
  await store().putSubscriber(org.organization_id, id, {
    version: ++subscriberVersion,
    doc: { exists: true, plans: [plan], overrides: {}, credits: { calls: credits } },
  });
}

let subscriberCount = 0;
/** A new subscriber on a plan of its own granting `calls` with these terms, holding these credits. */
async function subscriberWith(limit: number, credits: CreditDoc[]): Promise<string> {
  const id = `s${subscriberCount++}`;
  const res = await httpClient(urls[0]!)({
    method: 'POST',
    url: '/org/subscribers',
    headers: org.headers,
    payload: { subscriber_id: id, name: id },
  });
  if (res.statusCode !== 201) throw new Error(`subscriber: ${res.statusCode}`);
  plans[`p_${id}`] = {
    archived: false,
    grants: {
      calls: { kind: 'metered', limit, reset: 'never', anchor: 'calendar', soft: false, rollover: null },
    },
  };
  await publishCatalog();
  await publishSubscriber(id, `p_${id}`, credits);
  return id;
}

const consume = (url: string, subscriber: string, n: number, idempotencyKey?: string) =>
  httpClient(url)({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers: { ...org.headers, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    payload: n === 0 ? { feature: 'calls' } : { feature: 'calls', consume: n },
  });

beforeAll(async () => {
  database = await createTestDatabase();
  ({ server: redisServer, port: redisPort } = await startOwnRedis());
  const { env, adminUrl } = await serviceEnv({ database, redisPort, prefix });
  redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
  ({ gateways, urls } = await startGateways(env, 2));
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Metered processes');
  await saveArrangement(db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
}, 90_000);

afterAll(async () => {
  await Promise.all([...gateways, admin].filter(Boolean).map((p) => p.stop()));
  await redisServer?.stop();
  redis?.disconnect();
  await db?.destroy();
  await database?.drop();
}, 60_000);

const HOUR = 3_600_000;
/** When a credit counts, against the gateways' clocks: live now, not effective yet, or expired a minute ago. */
const timing = fc.constantFrom('live', 'live', 'live-forever', 'scheduled', 'expired');

describe('consumes with credits on two gateway processes', () => {
  it('never spends more than the allowance plus the live credits, and refuses only what did not fit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 6 }),
        fc.array(
          fc.record({
            amount: fc.integer({ min: 1, max: 5 }),
            priority: fc.integer({ min: 1, max: 3 }),
            timing,
          }),
          {
            maxLength: 5,
          },
        ),
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 24 }),
        async (limit, specs, sizes) => {
          const now = Date.now();
          const credits: CreditDoc[] = specs.map((spec, i) => ({
            id: `cr_${subscriberCount}_${i}`,
            amount: spec.amount,
            priority: spec.priority,
            effectiveAt: spec.timing === 'scheduled' ? now + HOUR : now - HOUR,
            expiresAt:
              spec.timing === 'expired' ? now - 60_000 : spec.timing === 'live-forever' ? null : now + HOUR,
            createdAt: now - 2 * HOUR + i,
          }));
          const live = specs.reduce(
            (sum, spec) => sum + (spec.timing === 'live' || spec.timing === 'live-forever' ? spec.amount : 0),
            0,
          );
          const subscriber = await subscriberWith(limit, credits);
          const answers = await Promise.all(sizes.map((n, i) => consume(urls[i % 2]!, subscriber, n)));
          for (const answer of answers) expect(answer.statusCode).toBe(200);
          const allowed = answers.map((answer) => answer.json().allowed as boolean);
          const granted = sizes.reduce((sum, n, i) => sum + (allowed[i] ? n : 0), 0);
          expect(granted).toBeLessThanOrEqual(limit + live);
          sizes.forEach((n, i) => {
            if (!allowed[i]) expect(granted + n).toBeGreaterThan(limit + live);
          });
          if (sizes.every((n) => n === 1)) expect(granted).toBe(Math.min(sizes.length, limit + live));
          const final = (await consume(urls[1]!, subscriber, 0)).json();
          expect(final).toMatchObject({ used: granted, remaining: limit + live - granted });
          const spent = await redis.hgetall(keys.creditSpent(org.organization_id, subscriber, 'calls'));
          const spentInAll = Object.values(spent).reduce((sum, figure) => sum + Number(figure), 0);
          expect(spentInAll).toBe(Math.max(0, granted - limit));
          for (const [i, spec] of specs.entries()) {
            const figure = Number(spent[credits[i]!.id] ?? 0);
            if (spec.timing === 'scheduled' || spec.timing === 'expired') expect(figure).toBe(0);
            else expect(figure).toBeLessThanOrEqual(spec.amount);
          }
        },
      ),
      { numRuns: 10 },
    );
  }, 120_000);
});
