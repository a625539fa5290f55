import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createDb } from '../src/db/connect.ts';
import {
  ADMIN_FORWARD_TIMEOUT_MS,
  ADMIN_SOCKET_TIMEOUT_MS,
  ADMIN_WRITE_WORST_CASE_MS,
} from '../src/http/server-options.ts';
import { createTestDatabase, type TestDatabase } from '../../test-support/databases.ts';

describe('shutdown settings', () => {
  it('default to no drain and a 10 s deadline', () => {
    expect(loadConfig({})).toMatchObject({ shutdownDrainDelayMs: 0, shutdownTimeoutMs: 10_000 });
  });

  it('are read from the environment', () => {
    expect(loadConfig({ SHUTDOWN_DRAIN_DELAY_MS: '5000', SHUTDOWN_TIMEOUT_MS: '30000' })).toMatchObject({
      shutdownDrainDelayMs: 5000,
      shutdownTimeoutMs: 30_000,
    });
  });

  it.each([
    [{ SHUTDOWN_TIMEOUT_MS: '0' }, 'SHUTDOWN_TIMEOUT_MS must be milliseconds between 1 and 3600000, got "0"'],
    [
      { SHUTDOWN_DRAIN_DELAY_MS: 'soon' },
      'SHUTDOWN_DRAIN_DELAY_MS must be milliseconds below SHUTDOWN_TIMEOUT_MS, got "soon"',
    ],
    // A drain as long as the deadline would leave no time to close.
    [
      { SHUTDOWN_DRAIN_DELAY_MS: '10000' },
      'SHUTDOWN_DRAIN_DELAY_MS must be milliseconds below SHUTDOWN_TIMEOUT_MS, got "10000"',
    ],
  ])('refuse %o at startup', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('admin request timeouts', () => {
  it('are ordered: admin answers its slowest committing write before it cuts the request off, and that before the gateway gives up', () => {
    expect(ADMIN_WRITE_WORST_CASE_MS).toBeLessThan(ADMIN_SOCKET_TIMEOUT_MS);
    expect(ADMIN_SOCKET_TIMEOUT_MS).toBeLessThan(ADMIN_FORWARD_TIMEOUT_MS);
  });
});

describe('createDb', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  }, 60_000);
  afterAll(async () => {
    await database?.drop();
  });

  const settingsOf = async (db: ReturnType<typeof createDb>) => {
    const { rows } = await sql<{ name: string; setting: string }>`
      SELECT name, setting FROM pg_settings WHERE name IN ('statement_timeout', 'idle_in_transaction_session_timeout')`.execute(
      db,
    );
    return Object.fromEntries(rows.map((row) => [row.name, Number(row.setting)]));
  };

  it('gives every session a statement and an idle-in-transaction timeout', async () => {
    const db = createDb(database.appUrl, { max: 1 });
    try {
      expect(await settingsOf(db)).toEqual({
        statement_timeout: 10_000,
        idle_in_transaction_session_timeout: 10_000,
      });
    } finally {
      await db.destroy();
    }
  });

  it('takes both from its options', async () => {
    const db = createDb(database.appUrl, {
      max: 1,
      statementTimeoutMillis: 1234,
      idleInTransactionTimeoutMillis: 4321,
    });
    try {
      expect(await settingsOf(db)).toEqual({
        statement_timeout: 1234,
        idle_in_transaction_session_timeout: 4321,
      });
    } finally {
      await db.destroy();
    }
  });

  it('lets Postgres end a transaction left idle, and the process survives it', async () => {
    const db = createDb(database.appUrl, { max: 1, idleInTransactionTimeoutMillis: 200 });
    try {
      const outcome = await db
        .transaction()
        .execute(async (trx) => {
          await sql`SELECT 1`.execute(trx);
          await new Promise((resolve) => setTimeout(resolve, 600));
          await sql`SELECT 1`.execute(trx);
          return 'committed';
        })
        .catch((error: Error) => error.message);
      expect(outcome).toMatch(/idle-in-transaction timeout|not queryable|Connection terminated/);
      // The pool dropped the ended session and serves on a new one.
      expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(db)).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.destroy();
    }
  });

  it('gives up on a server that does not answer (client-side query timeout)', async () => {
    const db = createDb(database.appUrl, { max: 1, statementTimeoutMillis: 5000, queryTimeoutMillis: 300 });
    try {
      // pg_sleep under the statement timeout: only the client-side bound can end the wait this early.
      const startedAt = Date.now();
      await expect(sql`SELECT pg_sleep(2)`.execute(db)).rejects.toThrow('Query read timeout');
      expect(Date.now() - startedAt).toBeLessThan(2000);
    } finally {
      await db.destroy();
    }
  });
});
