import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { buildOperationsApp } from '@ent/common/http/operations-app';
import { REQUEST_RECEIVE_TIMEOUT_MS } from '@ent/common/http/server-options';
import type { AdminTestContext, TestOrganization } from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';
import { gatewayWithCatalog, type catalogClient } from '../helpers.ts';

const START = Date.UTC(2031, 4, 10, 12, 0, 0, 0);
const clock = new ManualClock(START);
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

const check = (subscriber: string, feature: string, headers = org.headers) =>
  gateway.inject({
    method: 'POST',
    url: `/org/subscribers/${subscriber}/entitlements/check`,
    headers,
    payload: { feature },
  });

beforeAll(async () => {
  ({ ctx, gateway, org, api } = await gatewayWithCatalog(clock));
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

/** The listening gateway's port (it is listened on once, for the cases that need real sockets). */
async function gatewayPort(): Promise<number> {
  if (!gateway.server.listening) await gateway.listen({ host: '127.0.0.1', port: 0 });
  return (gateway.server.address() as AddressInfo).port;
}

/** An HTTP/1.1 request as raw text, with the organization's key. */
const rawRequest = (method: string, target: string, body = '') =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${org.headers['x-api-key']}\r\n` +
  `${body === '' ? '' : 'Content-Type: application/json\r\n'}Content-Length: ${body.length}\r\n\r\n${body}`;

/** A raw connection to the gateway: `write` sends bytes as given, `received` is the text once `complete` says so. */
async function rawConnection(complete: (text: string) => boolean) {
  const socket = connect(await gatewayPort(), '127.0.0.1');
  let text = '';
  const received = new Promise<string>((resolve) => {
    socket.on('data', (chunk) => {
      text += chunk.toString();
      if (complete(text)) resolve(text);
    });
  }).finally(() => socket.destroy());
  return { write: (data: string) => void socket.write(data), received };
}

describe('one base URL', () => {
  it('forwards every other route to admin with the same request id', async () => {
    const res = await gateway.inject({ method: 'GET', url: '/org/features?limit=2', headers: org.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json().features).toHaveLength(2);
    const missing = await gateway.inject({ method: 'GET', url: '/org/features/nope', headers: org.headers });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.request_id).toBe(missing.headers['x-request-id']);
    const unauthenticated = await gateway.inject({ method: 'GET', url: '/org/features' });
    expect(unauthenticated.statusCode).toBe(401);
  });

  it('reads an empty body under a JSON content type as none, on forwarded routes and its own', async () => {
    await api.plan('bodiless', []);
    const empty = (method: 'POST' | 'DELETE', url: string) =>
      gateway.inject({
        method,
        url,
        headers: { ...org.headers, 'content-type': 'application/json' },
        payload: '',
      });
    expect((await empty('POST', '/org/plans/bodiless/archive')).statusCode).toBe(200);
    expect((await empty('DELETE', '/org/plans/bodiless')).statusCode).toBe(204);
    for (const url of ['/org/features', '/org/subscribers/alice/entitlements/check']) {
      const needsOne = await empty('POST', url);
      expect(needsOne.statusCode).toBe(422);
      expect(needsOne.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'body' } });
    }
  });

  it('refuses a body over the limit with 413 itself, every time, where admin closing mid-upload made some 503', async () => {
    const port = await gatewayPort();
    const body = JSON.stringify({
      key: 'big',
      name: 'x'.repeat(ctx.config.bodyLimitBytes * 2),
      kind: 'catalog',
    });
    const answers: [number, string][] = [];
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/org/plans`, {
        method: 'POST',
        headers: { ...org.headers, 'content-type': 'application/json' },
        body,
      });
      answers.push([res.status, ((await res.json()) as { error: { code: string } }).error.code]);
    }
    expect(answers).toEqual(Array(8).fill([413, 'PAYLOAD_TOO_LARGE']));
  });

  it("records a write refused for its body's size in the audit log, as admin does for one sent to it", async () => {
    const port = await gatewayPort();
    const res = await fetch(`http://127.0.0.1:${port}/org/features`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'huge', name: 'x'.repeat(ctx.config.bodyLimitBytes * 2), kind: 'flag' }),
    });
    expect(res.status).toBe(413);
    const refused = (await res.json()) as { error: { code: string; request_id: string } };
    expect(refused.error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(refused.error.request_id).toBe(res.headers.get('x-request-id'));
    const entries = await gateway.inject({
      method: 'GET',
      url: `/org/audit-events?request_id=${refused.error.request_id}`,
      headers: org.headers,
    });
    expect(entries.json().audit_events).toMatchObject([
      { method: 'POST', route: '/org/features', outcome: 'responded', status: 413, details: null },
    ]);
    // The mark is the gateway's alone: a client's own is dropped, and its write is made.
    const marked = await gateway.inject({
      method: 'POST',
      url: '/org/features',
      headers: { ...org.headers, 'x-gateway-body-over-limit': '1' },
      payload: { key: 'marked', name: 'Marked', kind: 'flag' },
    });
    expect(marked.statusCode).toBe(201);
  });

  it('passes an import larger than the body limit on to admin as it arrives, announced or chunked', async () => {
    const port = await gatewayPort();
    const padding = 'p'.repeat(200);
    const lineCount = Math.ceil((ctx.config.bodyLimitBytes * 1.5) / 260);
    const ndjson = Array.from({ length: lineCount }, (_, i) =>
      JSON.stringify({ type: 'subscriber', subscriber_id: `bulk_${i}`, name: `${padding}${i}` }),
    ).join('\n');
    expect(ndjson.length).toBeGreaterThan(ctx.config.bodyLimitBytes);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(ndjson));
        controller.close();
      },
    });
    for (const body of [chunked, ndjson]) {
      const res = await fetch(`http://127.0.0.1:${port}/org/imports?dry_run=true`, {
        method: 'POST',
        headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
        body,
        duplex: 'half',
      } as RequestInit);
      expect(res.status, await res.clone().text()).toBe(202);
      const { import_id: importId } = (await res.json()) as { import_id: string };
      await ctx.app.imports.runner.idle();
      const done = await gateway.inject({
        method: 'GET',
        url: `/org/imports/${importId}`,
        headers: org.headers,
      });
      expect(done.json()).toMatchObject({ status: 'succeeded', lines: lineCount, failed: 0 });
    }
  });

  it('leaves nothing waiting after an import admin refuses at its start: the rest is read, or the connection closed', async () => {
    // The client writes its whole body, then a second request, before reading anything.
    const body = 'x'.repeat(20 * 1024 * 1024);
    const socket = connect(await gatewayPort(), '127.0.0.1');
    let text = '';
    const settled = new Promise<'closed' | 'answered'>((resolve) => {
      socket.on('data', (chunk) => {
        text += chunk.toString();
        if (/HTTP\/1\.1 200 [\s\S]*"status":"ok"/.test(text)) resolve('answered');
      });
      socket.on('close', () => resolve('closed'));
    });
    socket.on('error', () => {});
    socket.write(
      `POST /org/imports HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${org.headers['x-api-key']}\r\n` +
        `Content-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    );
    const gaveUp = new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 15_000));
    const outcome = await Promise.race([settled, gaveUp]);
    socket.destroy();
    expect(['closed', 'answered'], JSON.stringify(text.slice(0, 400))).toContain(outcome);
    expect(text).toMatch(/^HTTP\/1\.1 415 /);
    expect(text).toContain('application/x-ndjson');
    // Closed only after saying so (the answer is read whole first).
    if (outcome === 'closed') expect(text).toMatch(/\r\nconnection: close\r\n/i);
  }, 30_000);

  it('reads a body whole before asking admin: a trickled upload holds no connection to admin meanwhile', async () => {
    await api.feature('trickled', 'flag');
    const body = JSON.stringify({ name: 'Trickled' });
    const connection = await rawConnection((text) => /"name":"Trickled"|"error"/.test(text));
    const request = rawRequest('PATCH', '/org/features/trickled', body);
    connection.write(request.slice(0, request.length - body.length + 5));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Half the body is in: admin has not been asked yet, so no pool connection is taken by this upload.
    expect(gateway.adminPool.stats.running).toBe(0);
    connection.write(body.slice(5));
    const response = await connection.received;
    expect(response).toMatch(/^HTTP\/1\.1 200/);
    expect(response).toContain('"name":"Trickled"');
    // And one never finished is cut off by the server (408), having reached nobody.
    expect(gateway.server.requestTimeout).toBe(REQUEST_RECEIVE_TIMEOUT_MS);
  });

  it('refuses a chunked body over the limit with 413 itself (no length announced)', async () => {
    const port = await gatewayPort();
    const big = JSON.stringify({
      key: 'big',
      name: 'x'.repeat(ctx.config.bodyLimitBytes * 2),
      kind: 'catalog',
    });
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big));
        controller.close();
      },
    });
    const res = await fetch(`http://127.0.0.1:${port}/org/plans`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('runs writes pipelined on one connection in order, and a read after them sees the last (RFC 9112 §9.3.2)', async () => {
    await api.feature('piped', 'flag');
    for (let round = 0; round < 5; round++) {
      const connection = await rawConnection(
        (text) => (text.match(/"updated_at":"[^"]*"}/g) ?? []).length === 4,
      );
      const rename = (name: string) => rawRequest('PATCH', '/org/features/piped', JSON.stringify({ name }));
      connection.write(
        rename(`first ${round}`) +
          rename(`second ${round}`) +
          rename(`last ${round}`) +
          rawRequest('GET', '/org/features/piped'),
      );
      const text = await connection.received;
      const names = [...text.matchAll(/"name":"([^"]*)"/g)].map((match) => match[1]);
      expect(names).toEqual([`first ${round}`, `second ${round}`, `last ${round}`, `last ${round}`]);
      const stored = await gateway.inject({
        method: 'GET',
        url: '/org/features/piped',
        headers: org.headers,
      });
      expect(stored.json().name).toBe(`last ${round}`);
    }
  });

  it("answers the asterisk request target (OPTIONS *, POST *) with 404, not admin's 503", async () => {
    for (const method of ['OPTIONS', 'GET', 'POST']) {
      const connection = await rawConnection((text) => /"error"[\s\S]*}}\s*$/.test(text));
      connection.write(rawRequest(method, '*', method === 'POST' ? '{}' : ''));
      const text = await connection.received;
      expect(text).toMatch(/^HTTP\/1\.1 404/);
      expect(text).toContain('"code":"NOT_FOUND"');
    }
  });

  it('never forwards the internal routes', async () => {
    const res = await gateway.inject({
      method: 'POST',
      url: '/internal/snapshots/organization',
      payload: { organization_id: org.organization_id },
    });
    expect(res.statusCode).toBe(404);
  });

  it('answers 503 with the error body when admin is unreachable', async () => {
    const lonely = await buildGatewayApp({
      config: { ...ctx.config, adminUrl: 'http://127.0.0.1:9' },
      clock,
      logger: false,
    });
    try {
      const res = await lonely.inject({ method: 'GET', url: '/org/features', headers: org.headers });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('SERVICE_UNAVAILABLE');
    } finally {
      await lonely.close();
    }
  });

  it('serves /healthz, /readyz and /metrics', async () => {
    expect((await gateway.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await gateway.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const operations = await buildOperationsApp({
      registry: gateway.gatewayMetrics.registry,
      readiness: gateway.readiness,
    });
    expect((await operations.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({
      status: 'ready',
      redis: 'ok',
      admin: 'ok',
    });
    await gateway.inject({ method: 'GET', url: '/no/such/route' });
    expect((await check('alice', 'seats')).statusCode).toBe(200); // an eval of this case's own, counted below
    const metrics = await operations.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(
      /^http_request_duration_seconds_count\{route="\/healthz",method="GET",status="200"\} [1-9]\d*$/m,
    );
    expect(metrics.body).toMatch(
      /^http_request_duration_seconds_count\{route="\/org\/subscribers\/:subscriber_id\/entitlements\/check",method="POST",status="200"\} [1-9]\d*$/m,
    );
    expect(metrics.body).toMatch(
      /^http_request_duration_seconds_bucket\{le="\+Inf",route="\/\*",method="GET",status="404"\} [1-9]\d*$/m,
    );
    expect(metrics.body).toContain('gateway_cache_requests_total');
    const adminOperations = await buildOperationsApp({
      registry: ctx.app.metrics.registry,
      readiness: ctx.app.readiness,
    });
    expect((await adminOperations.inject({ method: 'GET', url: '/metrics' })).body).toContain('queue_depth');
  });
});
