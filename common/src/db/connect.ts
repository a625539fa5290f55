import { Kysely, PostgresDialect, type LogConfig } from 'kysely';
import pg from 'pg';
import type { Database } from './database.ts';

// bigint columns (counts, versions, limits) stay well inside 2^53; read them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface DbOptions {
  max?: number;
  /** Fail fast when Postgres is unreachable instead of queueing requests behind a dead pool. */
  connectionTimeoutMillis?: number;
  /** Server side: Postgres cancels a statement running longer (a lock wait included). */
  statementTimeoutMillis?: number;
  /**
   * Client side, for a server that stops answering altogether (partition, frozen host), which the statement
   * timeout cannot catch. Defaults to the statement timeout plus a margin, so Postgres normally cancels first.
   */
  queryTimeoutMillis?: number;
  /** Server side: a statement waiting longer than this for a lock fails (unset: only the statement timeout). */
  lockTimeoutMillis?: number;
  /** Postgres ends a session left idle inside a transaction this long, releasing the locks it holds. */
  idleInTransactionTimeoutMillis?: number;
  /** TCP keepalive probes start after this much silence, so a dead peer is noticed on idle pooled connections. */
  keepAliveInitialDelayMillis?: number;
  /** Kysely's query log: levels to log, or a function called with every query and error. */
  log?: LogConfig;
}

const DB_TIMEOUT_DEFAULTS = {
  connectionTimeoutMillis: 3000,
  statementTimeoutMillis: 10_000,
  /** Above the statement timeout: only a silent server reaches it. */
  queryTimeoutMarginMillis: 500,
  idleInTransactionTimeoutMillis: 10_000,
  keepAliveInitialDelayMillis: 10_000,
} as const;

export function createDb(connectionString: string, options: DbOptions = {}): Kysely<Database> {
  const statementTimeout = options.statementTimeoutMillis ?? DB_TIMEOUT_DEFAULTS.statementTimeoutMillis;
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? DB_TIMEOUT_DEFAULTS.connectionTimeoutMillis,
    statement_timeout: statementTimeout,
    ...(options.lockTimeoutMillis === undefined ? {} : { lock_timeout: options.lockTimeoutMillis }),
    query_timeout:
      options.queryTimeoutMillis ?? statementTimeout + DB_TIMEOUT_DEFAULTS.queryTimeoutMarginMillis,
    idle_in_transaction_session_timeout:
      options.idleInTransactionTimeoutMillis ?? DB_TIMEOUT_DEFAULTS.idleInTransactionTimeoutMillis,
    keepAlive: true,
    keepAliveInitialDelayMillis:
      options.keepAliveInitialDelayMillis ?? DB_TIMEOUT_DEFAULTS.keepAliveInitialDelayMillis,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // Nor a checked-out one, which the pool leaves without an error listener: Postgres ends its session (the
  // idle-in-transaction timeout, a restart), its caller gets the error from the query, and the pool drops it.
  pool.on('connect', (client) => client.on('error', () => {}));
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: options.log });
}

/** Returns the URL with its database name replaced (same server, same credentials). */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

export function databaseNameOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
}

export function userOf(url: string): string {
  return decodeURIComponent(new URL(url).username) || 'postgres';
}
