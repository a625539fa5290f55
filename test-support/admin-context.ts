import type { Kysely } from 'kysely';
import { ManualClock, systemClock, type Clock } from '@ent/common/clock';
import { loadConfig, type Config } from '@ent/common/config';
import { createDb } from '@ent/common/db/connect';
import type { Database } from '@ent/common/db/database';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { buildAdminApp, type AdminApp, type AdminAppOptions } from '../admin/src/app.ts';
import {
  createOrganization,
  type CreatedOrganization,
} from '../admin/src/features/provisioning/create-organization.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';
import { deleteKeys, testRedisPrefix } from './redis-keys.ts';

export interface AdminTestContext {
  app: AdminApp;
  config: Config;
  database: TestDatabase;
  /** Connected as the services' restricted role. */
  db: Kysely<Database>;
  /** Connected as the owner: for assertions the services' role may not make. */
  ownerDb: Kysely<Database>;
  redis: RedisClient;
  clock: Clock;
  /** Queries run so far on `db`, the pool admin serves requests with (and the test sets data up with). */
  queriesRun(): number;
  close(): Promise<void>;
}

/**
 * scrypt's N = 2^10 instead of 2^15 (PASSWORD_HASH_COST): tests sign up and in hundreds of times, and at the
 * production cost one file of them ran near its timeout. Startup refuses it outside NODE_ENV=test.
 */
export const TEST_PASSWORD_HASH_COST = 10;

export function testConfig(database: TestDatabase, overrides: Partial<Config> = {}): Config {
  return {
    ...loadConfig({}),
    databaseUrl: database.appUrl,
    databaseOwnerUrl: database.ownerUrl,
    redisKeyPrefix: testRedisPrefix(),
    logLevel: 'silent',
    webhookAllowPrivateTargets: true,
    passwordHashCost: TEST_PASSWORD_HASH_COST,
    ...overrides,
  };
}

/** One admin app on its own database and Redis prefix; call `close()` in afterAll. */
export async function createAdminContext(
  options: {
    clock?: Clock;
    config?: Partial<Config>;
    consoleDistDir?: string;
    relayFollowUp?: AdminAppOptions['relayFollowUp'];
    imports?: AdminAppOptions['imports'];
    /**
     * The statement timeout of admin's pool (the default's 10 s is long to wait out in a test), which is also its
     * idle-in-transaction limit, as in the pools admin makes (common/src/db/connect.ts).
     */
    statementTimeoutMs?: number;
    /** Silent unless a test reads what admin logs. */
    logger?: AdminAppOptions['logger'];
  } = {},
): Promise<AdminTestContext> {
  const database = await createTestDatabase();
  const config = testConfig(database, options.config);
  let queries = 0;
  const db = createDb(config.databaseUrl, {
    max: 5,
    ...(options.statementTimeoutMs === undefined
      ? {}
      : {
          statementTimeoutMillis: options.statementTimeoutMs,
          idleInTransactionTimeoutMillis: options.statementTimeoutMs,
          // Postgres cancels first: a client read timeout would not be the error a test of the timeout waits for.
          queryTimeoutMillis: options.statementTimeoutMs + 5_000,
        }),
    log: (event) => {
      if (event.level === 'query') queries += 1;
    },
  });
  const ownerDb = createDb(config.databaseOwnerUrl, { max: 2 });
  const redis = createRedis(config);
  const clock = options.clock ?? systemClock;
  const app = await buildAdminApp({
    config,
    clock,
    db,
    redis,
    logger: options.logger ?? false,
    consoleDistDir: options.consoleDistDir,
    relayFollowUp: options.relayFollowUp,
    imports: options.imports,
  });
  await app.ready();
  return {
    app,
    config,
    database,
    db,
    ownerDb,
    redis,
    clock,
    queriesRun: () => queries,
    async close() {
      await app.close();
      await db.destroy();
      await ownerDb.destroy();
      await deleteKeys(redis, `${config.redisKeyPrefix}:*`);
      redis.disconnect();
      await database.drop();
    },
  };
}

export { ManualClock };

export interface TestOrganization extends CreatedOrganization {
  /** Headers for `app.inject` with this organization's full-access key. */
  headers: Record<string, string>;
}

export async function createTestOrganization(
  db: Kysely<Database>,
  name = 'Test org',
): Promise<TestOrganization> {
  const created = await createOrganization(db, name);
  return { ...created, headers: { 'x-api-key': created.api_key } };
}

/** A subscriber's snapshot version as Postgres holds it (bumped by every write to it). */
export async function subscriberVersion(
  db: Kysely<Database>,
  organizationId: string,
  subscriberId: string,
): Promise<number> {
  const row = await db
    .selectFrom('subscribers')
    .select('version')
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .executeTakeFirstOrThrow();
  return row.version;
}
