import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '@ent/common/config';
import { withDatabase } from '@ent/common/db/connect';
import { AppError } from '@ent/common/errors/app-error';
import { toAppError } from '@ent/common/http/error-handler';

/** Any database will do: these clients only wait and break. */
const postgresUrl = withDatabase(loadConfig().databaseOwnerUrl, 'postgres');
const withCode = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});

describe('toAppError', () => {
  it.each([
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['Postgres shutting down', withCode('terminating connection due to administrator command', '57P01')],
    ['a dropped connection', withCode('Connection terminated unexpectedly')],
    ['a pool that cannot connect', withCode('timeout exceeded when trying to connect')],
    [
      'a statement cancelled by its timeout',
      withCode('canceling statement due to statement timeout', '57014'),
    ],
  ])('answers %s with 503 SERVICE_UNAVAILABLE, not 500', (_name, error) => {
    const mapped = toAppError(error);
    expect(mapped.status).toBe(503);
    expect(mapped.code).toBe('SERVICE_UNAVAILABLE');
  });

  it("answers node-postgres's own errors for a Postgres that stops answering with 503: the read timeout, then the client no longer queryable", async () => {
    const client = new pg.Client({ connectionString: postgresUrl, query_timeout: 100 });
    await client.connect();
    try {
      const timedOut = await client.query('SELECT pg_sleep(2)').then(
        () => null,
        (error: Error) => error,
      );
      expect(timedOut?.message).toMatch(/timeout/);
      expect(toAppError(timedOut!).status).toBe(503);
      // What a rollback then meets when the connection has gone (as on a stopped Postgres).
      const brokenClient = new pg.Client({ connectionString: postgresUrl });
      await brokenClient.connect();
      brokenClient.on('error', () => {});
      (
        brokenClient as unknown as { connection: { stream: { destroy(error: Error): void } } }
      ).connection.stream.destroy(new Error('socket gone'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const notQueryable = await brokenClient.query('ROLLBACK').then(
        () => null,
        (error: Error) => error,
      );
      expect(notQueryable?.message).toMatch(/not queryable/);
      expect(toAppError(notQueryable!)).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE' });
      await brokenClient.end().catch(() => {});
    } finally {
      await client.end();
    }
  });

  it("answers a client's own aborted upload as its 400, not a backing service's 503", () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
    expect(toAppError(aborted)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
  });

  it('keeps Postgres constraint errors as client errors', () => {
    expect(toAppError(withCode('duplicate key', '23505')).status).toBe(409);
    expect(toAppError(withCode('check violation', '23514')).status).toBe(422);
  });

  it('passes AppErrors through and hides anything else behind 500', () => {
    const own = new AppError(404, 'NOT_FOUND', 'nope');
    expect(toAppError(own)).toBe(own);
    const unknown = toAppError(new TypeError('x is undefined'));
    expect(unknown.status).toBe(500);
    expect(unknown.message).not.toContain('undefined');
  });
});
