import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildGatewayApp, type GatewayApp } from '../../../gateway/src/app.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import {
  PASSWORD,
  browserHeaders,
  sessionCookieOf,
  signUp,
  tokenOfCookie,
  uniqueAccount,
} from '../console-sessions/browser.ts';

const INTERNAL_TOKEN = 'internal-token-for-logging-0123456789';

/** Everything a process logs, as the lines it wrote. */
function capturedLog() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, stream, text: () => lines.join('\n') };
}

const adminLog = capturedLog();
const gatewayLog = capturedLog();
let ctx: AdminTestContext;
let gateway: GatewayApp;

beforeAll(async () => {
  ctx = await createAdminContext({
    config: { internalToken: INTERNAL_TOKEN },
    logger: { level: 'debug', stream: adminLog.stream },
  });
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({
    config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` },
    logger: { level: 'debug', stream: gatewayLog.stream },
  });
  await gateway.ready();
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

type Caller = (options: {
  method: string;
  url: string;
  headers?: Record<string, string>;
  payload?: object;
}) => Promise<{ statusCode: number; body: string; json(): any; headers: Record<string, unknown> }>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * Every kind of secret a request can carry or receive, used for real: an invite made, previewed, opened and
 * accepted; session cookies and CSRF tokens; a webhook secret made and rotated; an API key in both headers and
 * (by mistake) in a path. Returns the live values.
 */
async function useEverySecret(call: Caller): Promise<string[]> {
  const secrets: string[] = [INTERNAL_TOKEN];
  const admin = await signUp(ctx, 'logs');
  secrets.push(tokenOfCookie(admin.cookie), admin.csrf);
  const asAdmin = (method: string, url: string, payload?: object) =>
    call({
      method,
      url,
      headers: browserHeaders(method, {
        cookie: admin.cookie,
        'x-forwarded-for': admin.ip,
        ...(method === 'GET' ? {} : { 'x-csrf-token': admin.csrf }),
      }),
      ...(payload ? { payload } : {}),
    });

  const invite = await asAdmin('POST', '/org/invites', { role: 'developer' });
  expect(invite.statusCode).toBe(201);
  const encodedToken = invite.json().url.split('/').at(-1) as string;
  const token = decodeURIComponent(encodedToken);
  secrets.push(token, encodedToken);
  await call({ method: 'GET', url: `/console/join/${encodedToken}`, headers: browserHeaders('GET') });
  await call({
    method: 'GET',
    url: `/console/join/${encodedToken}?from=mail`,
    headers: browserHeaders('GET'),
  });
  expect(
    (
      await call({
        method: 'GET',
        url: `/console/api/invites/${encodedToken}`,
        headers: browserHeaders('GET'),
      })
    ).statusCode,
  ).toBe(200);
  const joined = await call({
    method: 'POST',
    url: `/console/api/invites/${encodedToken}/accept`,
    headers: browserHeaders('POST', { 'x-forwarded-for': uniqueAccount().ip }),
    payload: { password: PASSWORD, email: uniqueAccount().email },
  });
  expect(joined.statusCode).toBe(201);
  const joinedCookie = sessionCookieOf(joined as never);
  secrets.push(tokenOfCookie(joinedCookie), joined.json().csrf_token);
  expect(
    (
      await call({
        method: 'GET',
        url: '/console/api/session',
        headers: browserHeaders('GET', { cookie: joinedCookie }),
      })
    ).statusCode,
  ).toBe(200);

  const webhook = await asAdmin('PUT', '/org/webhook', { url: 'http://127.0.0.1:9/hooks' });
  expect(webhook.statusCode).toBe(201);
  const rotated = await asAdmin('POST', '/org/webhook/rotate');
  expect(rotated.statusCode).toBe(200);
  for (const secret of [webhook.json().secret, rotated.json().secret] as string[]) {
    secrets.push(secret, secret.slice('whsec_'.length));
  }

  const org = await createTestOrganization(ctx.db, 'Logged keys');
  secrets.push(org.api_key);
  expect((await call({ method: 'GET', url: '/org/features', headers: org.headers })).statusCode).toBe(200);
  await call({ method: 'GET', url: '/org/features', headers: { authorization: `Bearer ${org.api_key}` } });
  await call({ method: 'GET', url: `/org/features/${org.api_key}`, headers: org.headers });
  await call({
    method: 'POST',
    url: '/org/subscribers/ann/entitlements/check',
    headers: org.headers,
    payload: { feature: 'sso' },
  });
  return secrets;
}

describe('secrets never reach the logs', () => {
  it('admin logs requests that carry invite tokens, cookies, API keys and webhook secrets without any of them', async () => {
    const secrets = await useEverySecret((options) => ctx.app.inject(options as never) as never);
    const text = adminLog.text();
    expect(text).toContain('/console/join/[redacted]');
    expect(text).toContain('/console/api/invites/[redacted]/accept');
    for (const secret of secrets)
      expect(text, `a live secret was logged: ${secret.slice(0, 12)}…`).not.toContain(secret);
  });

  it("the same requests through a gateway leave no secret in its log or admin's", async () => {
    const secrets = await useEverySecret((options) => gateway.inject(options as never) as never);
    for (const text of [gatewayLog.text(), adminLog.text()]) {
      for (const secret of secrets)
        expect(text, `a live secret was logged: ${secret.slice(0, 12)}…`).not.toContain(secret);
    }
    // The gateway's own lookups reached admin (and were logged there), with their token in a header.
    expect(adminLog.text()).toContain('/internal/');
  });
});

describe('admin request lines', () => {
  it('logs one line per request, when it completes, with its status', async () => {
    const org = await createTestOrganization(ctx.db, 'One line');
    const res = await ctx.app.inject({ method: 'GET', url: '/org/features', headers: org.headers });
    const requestId = res.headers['x-request-id'] as string;
    const lines = adminLog.lines.map((line) => JSON.parse(line)).filter((line) => line.reqId === requestId);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { method: 'GET', url: '/org/features' },
      res: { statusCode: 200 },
    });
    expect(adminLog.text()).not.toContain('incoming request');
  });

  it('logs health probes at debug', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/healthz' });
    const requestId = res.headers['x-request-id'] as string;
    const lines = adminLog.lines.map((line) => JSON.parse(line)).filter((line) => line.reqId === requestId);
    expect(lines).toMatchObject([{ level: 20, msg: 'request completed', req: { url: '/healthz' } }]);
  });

  it("logs the gateways' /internal lookups at debug", async () => {
    const org = await createTestOrganization(ctx.db, 'Internal lookup');
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/internal/snapshots/organization',
      headers: { 'x-internal-token': INTERNAL_TOKEN },
      payload: { organization_id: org.organization_id },
    });
    expect(res.statusCode).toBe(200);
    const requestId = res.headers['x-request-id'] as string;
    const lines = adminLog.lines.map((line) => JSON.parse(line)).filter((line) => line.reqId === requestId);
    expect(lines).toMatchObject([
      { level: 20, msg: 'request completed', req: { url: '/internal/snapshots/organization' } },
    ]);
  });
});
