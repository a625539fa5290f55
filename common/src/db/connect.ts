import { Kysely, PostgresDialect, type LogConfig } from 'kysely';
import pg from 'pg';
import type { Database } from './database.ts';

// bigint columns (counts, versions, limits) stay well inside 2^53; read them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface DbOptions {
  max?: number;
  /** Fail fast when Postgres is unreachable instead of queueing requests behind a dead pool. */
  connectionTimeoutMillis?: number;
  statementTimeoutMillis?: number;
  /** Kysely's query log: levels to log, or a function called with every query and error. */
  log?: LogConfig;
}

export function createDb(connectionString: string, options: DbOptions = {}): Kysely<Database> {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 3000,
    statement_timeout: options.statementTimeoutMillis ?? 10_000,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
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
