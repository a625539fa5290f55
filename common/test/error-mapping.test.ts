import { describe, expect, it } from 'vitest';
import { AppError } from '@ent/common/errors/app-error';
import { toAppError } from '@ent/common/http/error-handler';

const withCode = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});

describe('toAppError', () => {
  it.each([
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['Postgres shutting down', withCode('terminating connection due to administrator command', '57P01')],
    ['a dropped connection', withCode('Connection terminated unexpectedly')],
    ['a pool that cannot connect', withCode('timeout exceeded when trying to connect')],
  ])('answers %s with 503 SERVICE_UNAVAILABLE, not 500', (_name, error) => {
    const mapped = toAppError(error);
    expect(mapped.status).toBe(503);
    expect(mapped.code).toBe('SERVICE_UNAVAILABLE');
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
