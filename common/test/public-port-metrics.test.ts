import Fastify, { type FastifyInstance } from 'fastify';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { errorHandling } from '@ent/common/http/error-handler';
import { servePublicPortMetrics, type PublicPortMetrics } from '@ent/common/http/public-port-metrics';
import { loadConfig } from '@ent/common/config';

let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function publicApp(mode: PublicPortMetrics): Promise<FastifyInstance> {
  const registry = new Registry();
  new Counter({
    name: 'probe_total',
    help: 'a counter that proves the registry was read',
    registers: [registry],
  }).inc();
  app = Fastify();
  await app.register(errorHandling);
  servePublicPortMetrics(app, registry, mode);
  await app.ready();
  return app;
}

const metricsFrom = (target: FastifyInstance, remoteAddress: string, headers: Record<string, string> = {}) =>
  target.inject({ method: 'GET', url: '/metrics', remoteAddress, headers });

describe('/metrics on a public port', () => {
  it.each(['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1'])(
    'answers a direct peer at %s',
    async (peer) => {
      const res = await metricsFrom(await publicApp('loopback'), peer);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('text/plain');
      expect(res.body).toMatch(/^probe_total 1$/m);
    },
  );

  it.each(['203.0.113.9', '10.0.0.5', '::ffff:10.0.0.5', '2001:db8::1'])(
    'is a route that does not exist for a peer at %s',
    async (peer) => {
      const res = await metricsFrom(await publicApp('loopback'), peer);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'NOT_FOUND', message: 'No route GET /metrics.' } });
      expect(res.body).not.toContain('probe_total');
    },
  );

  it.each([
    ['x-forwarded-for', '203.0.113.9'],
    ['forwarded', 'for=203.0.113.9'],
    ['x-real-ip', '203.0.113.9'],
    ['via', '1.1 proxy'],
  ])('refuses a request a proxy on this machine relayed (%s)', async (name, value) => {
    const res = await metricsFrom(await publicApp('loopback'), '127.0.0.1', { [name]: value });
    expect(res.statusCode).toBe(404);
    expect(res.body).not.toContain('probe_total');
  });

  it('is not served at all when switched off', async () => {
    const res = await metricsFrom(await publicApp('off'), '127.0.0.1');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('is configured by PUBLIC_PORT_METRICS, off by default (npm start sets loopback), anything else refused', () => {
    expect(loadConfig({}).publicPortMetrics).toBe('off');
    expect(loadConfig({ PUBLIC_PORT_METRICS: 'loopback' }).publicPortMetrics).toBe('loopback');
    expect(loadConfig({ PUBLIC_PORT_METRICS: 'off' }).publicPortMetrics).toBe('off');
    expect(() => loadConfig({ PUBLIC_PORT_METRICS: 'everyone' })).toThrow(
      'PUBLIC_PORT_METRICS must be one of loopback, off, got "everyone"',
    );
  });
});
