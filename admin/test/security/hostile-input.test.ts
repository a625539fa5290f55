import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDateTime, parseDateTime } from '@ent/common/http/date-time';
import { MAX_JSON_DEPTH, exceedsJsonDepth } from '@ent/common/http/json-depth';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Hostile');
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  await ctx.app.inject({
    method: 'POST',
    url: '/org/features',
    headers: org.headers,
    payload: { key: 'sso', name: 'SSO', kind: 'flag' },
  });
  await ctx.app.inject({
    method: 'POST',
    url: '/org/subscribers',
    headers: org.headers,
    payload: { subscriber_id: 'alice' },
  });
});
afterAll(() => ctx.close());

const expectErrorBody = (body: string, status: number, code?: string) => {
  const { error } = JSON.parse(body) as { error: Record<string, unknown> };
  expect(status).toBeLessThan(500);
  expect(typeof error.type).toBe('string');
  expect(typeof error.message).toBe('string');
  expect(error.request_id).toMatch(/^req_/);
  expect(error.details).toBeTypeOf('object');
  expect(error.details).not.toBeNull();
  if (code) expect(error.code).toBe(code);
  return error;
};

describe('JSON nesting depth', () => {
  it('reads depth in one pass, skipping brackets inside strings and escapes', () => {
    expect(exceedsJsonDepth('[[1]]', 2)).toBe(false);
    expect(exceedsJsonDepth('[[[1]]]', 2)).toBe(true);
    expect(exceedsJsonDepth('{"a":"[[[[[[\\"[[["}', 1)).toBe(false);
    expect(exceedsJsonDepth('['.repeat(1_000_000))).toBe(true);
    expect(exceedsJsonDepth(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`)).toBe(false);
  });

  const deepArray = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
  const deepObject = `${'{"a":'.repeat(8000)}1${'}'.repeat(8000)}`;
  const deepInField = `{"id":"bob","name":${deepArray}}`;
  const writes: Array<[string, string]> = [
    ['POST', '/org/features'],
    ['PATCH', '/org/features/sso'],
    ['POST', '/org/plans'],
    ['POST', '/org/subscribers'],
    ['PATCH', '/org/subscribers/alice'],
    ['PUT', '/org/subscribers/alice/overrides/sso'],
    ['POST', '/org/subscribers/alice/subscriptions'],
    ['PATCH', '/org'],
    ['PUT', '/org/webhook'],
    ['POST', '/org/service-accounts'],
    ['POST', '/org/invites'],
  ];
  it.each(writes)(
    '%s %s answers a 40 KB deeply nested body with 422 naming the body',
    async (method, url) => {
      for (const payload of [deepArray, deepObject, deepInField]) {
        const res = await ctx.app.inject({
          method: method as 'POST',
          url,
          headers: { ...org.headers, 'content-type': 'application/json' },
          payload,
        });
        expect(res.statusCode).toBe(422);
        expect(expectErrorBody(res.body, res.statusCode, 'VALIDATION_ERROR').details).toMatchObject({
          field: 'body',
          max_depth: MAX_JSON_DEPTH,
        });
      }
    },
  );

  it('still refuses prototype poisoning and accepts ordinary bodies', async () => {
    const poisoned = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"key":"x","name":"x","kind":"flag","__proto__":{"polluted":true}}',
    });
    const refused = expectErrorBody(poisoned.body, poisoned.statusCode, 'VALIDATION_ERROR');
    expect(refused.message).toMatch(/__proto__/);
    const ok = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: org.headers,
      payload: { key: 'deep_ok', name: '[[{{', kind: 'flag' },
    });
    expect(ok.statusCode).toBe(201);
  });
});

describe('date-time values', () => {
  it.each([
    ['2026-06-30T23:59:60Z', false],
    ['2026-02-30T00:00:00Z', false],
    ['2026-02-29T00:00:00Z', false],
    ['2028-02-29T00:00:00Z', true],
    ['2026-01-01T00:00:00+24:00', false],
    ['2026-01-01T00:00:00+23:59', true],
    ['2026-01-01T00:00:00-00:00', true],
    ['2026-01-01T24:00:00Z', false],
    ['2026-13-01T00:00:00Z', false],
    ['2026-01-01T00:00:00.123456789Z', true],
    ['2026-01-01T00:00:00.1234567891Z', false],
    [`2026-01-01T00:00:00.${'1'.repeat(5000)}Z`, false],
    ['2026-01-01T00:00:00', false],
    ['2026-01-01t00:00:00z', true],
    ['٢٠٢٦-01-01T00:00:00Z', false],
    // The offset carries these instants out of the UTC years 0000-9999, which no answer could show.
    ['9999-12-31T23:59:59-01:00', false],
    ['0000-01-01T00:00:00+01:00', false],
    ['9999-12-31T22:59:59-01:00', true],
    ['0000-01-01T01:00:00+01:00', true],
    // With a space V8's legacy parser read these as 1950 and 2001.
    ['0050-01-01 00:00:00Z', true],
    ['0001-01-01 00:00:00z', true],
  ])('%s is accepted: %s', (value, accepted) => {
    expect(isDateTime(value)).toBe(accepted);
  });

  const odd = [
    '2026-06-30T23:59:60Z',
    '2026-02-30T00:00:00Z',
    '2026-01-01T00:00:00+24:00',
    '9999-99-99T99:99:99Z',
    '2'.repeat(5000),
    '2026-01-01T00:00:00\u202EZ',
    '2026-01-01T00:00:00Z\u0000',
  ];
  // A lone surrogate cannot be percent-encoded from a JS string; these are the raw bytes a client could send.
  const rawOdd = ['%ED%A0%80', '2026-01-01T00:00:00%ED%B0%80Z', '%FF%FE', '%'];
  it.each(['occurred_after', 'occurred_before'])(
    'the audit filter %s answers odd values with 422 naming it',
    async (field) => {
      for (const value of [...odd.map(encodeURIComponent), ...rawOdd]) {
        const res = await ctx.app.inject({
          method: 'GET',
          url: `/org/audit-events?${field}=${value}`,
          headers: org.headers,
        });
        expect(res.statusCode, value.slice(0, 40)).toBe(422);
        expect(expectErrorBody(res.body, res.statusCode, 'VALIDATION_ERROR').details).toMatchObject({
          field,
        });
      }
    },
  );

  it('accepts -00:00 as UTC and the extremes of the calendar on the audit filter', async () => {
    for (const value of [
      '2026-01-01T00:00:00-00:00',
      '0000-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999999999+23:59',
    ]) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: `/org/audit-events?occurred_after=${encodeURIComponent(value)}`,
        headers: org.headers,
      });
      expect(res.statusCode, value).toBe(200);
    }
  });

  it('an override expires_at with a leap second, an impossible date or an instant past year 9999 is 422 naming expires_at', async () => {
    for (const expires_at of [
      '2030-06-30T23:59:60Z',
      '2030-02-30T00:00:00Z',
      '2030-01-01T00:00:00+24:00',
      '9999-12-31T23:59:59-01:00',
      '0000-01-01T00:00:00+01:00',
    ]) {
      const res = await ctx.app.inject({
        method: 'PUT',
        url: '/org/subscribers/alice/overrides/sso',
        headers: org.headers,
        payload: { kind: 'flag', allowed: true, expires_at },
      });
      expect(res.statusCode).toBe(422);
      expect(expectErrorBody(res.body, res.statusCode, 'VALIDATION_ERROR').details).toMatchObject({
        field: 'expires_at',
      });
    }
  });
});

describe('date-time instants', () => {
  it('reads a space-separated RFC 3339 value as the year it names, also before year 100', () => {
    expect(new Date(parseDateTime('0050-01-01 00:00:00Z')).toISOString()).toBe('0050-01-01T00:00:00.000Z');
    expect(new Date(parseDateTime('2026-03-01 12:00:00+01:00')).toISOString()).toBe(
      '2026-03-01T11:00:00.000Z',
    );
  });

  it('stores an override expires_at given with a space as that instant', async () => {
    const res = await ctx.app.inject({
      method: 'PUT',
      url: '/org/subscribers/alice/overrides/sso',
      headers: org.headers,
      payload: { kind: 'flag', allowed: true, expires_at: '0050-01-01 00:00:00Z' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().expires_at).toBe('0050-01-01T00:00:00.000Z');
  });
});

describe('odd unicode and long path values', () => {
  const values = ['\u202Eevil', '😀', 'a\u200Bb', 'x'.repeat(5000), '..', '\uFEFF', '\u0000'].map(
    encodeURIComponent,
  );
  const raw = [
    '%ED%A0%80',
    '%ED%B0%80',
    '%F0%9F',
    '%2F',
    '%',
    '%ZZ',
    '%C0%AF',
    `${'%F0%9F%98%80'.repeat(400)}`,
  ];
  it.each([
    ['GET', '/org/features/'],
    ['GET', '/org/plans/'],
    ['GET', '/org/subscribers/'],
    ['GET', '/org/members/'],
    ['GET', '/org/service-accounts/'],
    ['DELETE', '/org/invites/'],
  ])('%s %s<odd value> answers 4xx with the error body', async (method, prefix) => {
    for (const value of [...values, ...raw]) {
      const res = await ctx.app.inject({
        method: method as 'GET',
        url: `${prefix}${value}`,
        headers: org.headers,
      });
      expectErrorBody(res.body, res.statusCode);
    }
  });

  it('a lone surrogate in a body string never 500s', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/subscribers',
      headers: { ...org.headers, 'content-type': 'application/json' },
      payload: '{"id":"lone","name":"\\ud800 \\u202e \\ud83d\\ude00"}',
    });
    expect(res.statusCode).toBeLessThan(500);
  });
});

describe('error.details', () => {
  it('is an object even when there is nothing to add', async () => {
    const unauthenticated = await ctx.app.inject({ method: 'GET', url: '/org/features' });
    expect(unauthenticated.statusCode).toBe(401);
    expect(expectErrorBody(unauthenticated.body, 401).details).toEqual({});
    const missing = await ctx.app.inject({ method: 'GET', url: '/nowhere', headers: org.headers });
    expect(missing.statusCode).toBe(404);
    expect(expectErrorBody(missing.body, 404).details).toEqual({});
  });
});

/** One raw exchange with the listening server: what it writes back before closing. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer within 5 s'));
    }, 5000);
    socket.on('data', (chunk) => (received += chunk.toString('utf8')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
    socket.on('error', () => undefined);
    socket.write(request);
  });
}

describe('requests Node refuses before Fastify', () => {
  it.each([
    [
      'headers over 16 KB',
      `GET /org/features HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'REQUEST_HEADERS_TOO_LARGE',
    ],
    ['bytes that are not HTTP', 'HELLO\u0000 /\r\n\r\n', 400, 'BAD_REQUEST'],
  ])('%s get the error body', async (_name, request, status, code) => {
    const { port } = ctx.app.server.address() as AddressInfo;
    const answer = await rawExchange(port, request);
    expect(answer.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    const error = expectErrorBody(body, status, code);
    expect(error.details).toEqual({});
  });
});
