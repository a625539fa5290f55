import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../src/app.ts';
import { freePort } from '../processes.ts';

/**
 * What the gateway answers when admin fails under a forwarded request: refused before it was sent (nothing
 * ran), or gone after it was sent (admin killed mid-write: it may have committed, and the answer says so).
 */
let ctx: AdminTestContext;
let dyingAdmin: Server;
let viaDyingAdmin: GatewayApp;
let viaNoAdmin: GatewayApp;
const headers = { 'x-api-key': 'svc-mk-1-anything', 'content-type': 'application/json' };

beforeAll(async () => {
  ctx = await createAdminContext();
  // Reads the whole request, then drops the connection without an answer, as a killed process does.
  dyingAdmin = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.socket?.destroy());
  });
  await new Promise<void>((resolve) => dyingAdmin.listen(0, '127.0.0.1', resolve));
  const { port } = dyingAdmin.address() as AddressInfo;
  viaDyingAdmin = await buildGatewayApp({ config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` }, logger: false });
  viaNoAdmin = await buildGatewayApp({ config: { ...ctx.config, adminUrl: `http://127.0.0.1:${await freePort()}` }, logger: false });
  for (const gateway of [viaDyingAdmin, viaNoAdmin]) await gateway.listen({ host: '127.0.0.1', port: 0 });
});

/** Over real HTTP: the forwarded body is the client's own socket stream. */
async function send(gateway: GatewayApp, method: string, url: string, payload?: unknown) {
  const { port } = gateway.server.address() as AddressInfo;
  const res = await fetch(`http://127.0.0.1:${port}${url}`, {
    method,
    headers,
    body: payload === undefined ? undefined : JSON.stringify(payload),
  });
  return { statusCode: res.status, body: (await res.json()) as { error: { code: string; type: string; message: string; details?: Record<string, unknown> } } };
}

afterAll(async () => {
  await viaDyingAdmin?.close();
  await viaNoAdmin?.close();
  await new Promise((resolve) => dyingAdmin?.close(resolve));
  await ctx?.close();
});

describe('a forwarded request whose admin fails', () => {
  it('a write admin received and never answered: 503 whose details say the outcome is unknown', async () => {
    const res = await send(viaDyingAdmin, 'POST', '/org/features', { key: 'x', name: 'x', kind: 'flag' });
    expect(res.statusCode).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', type: 'api_error', details: { outcome: 'unknown' } });
    expect(res.body.error.message).toMatch(/may or may not have been applied/);
  });

  it('a read admin never answered: a plain 503 (reading twice is harmless)', async () => {
    const res = await send(viaDyingAdmin, 'GET', '/org/features');
    expect(res.statusCode).toBe(503);
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.body.error.details?.outcome).toBeUndefined();
  });

  it('a write admin never received (connection refused): a plain 503, nothing ran', async () => {
    const res = await send(viaNoAdmin, 'POST', '/org/features', { key: 'x', name: 'x', kind: 'flag' });
    expect(res.statusCode).toBe(503);
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(res.body.error.details?.outcome).toBeUndefined();
  });
});
