import type { FastifyInstance, FastifySchema } from 'fastify';
import fp from 'fastify-plugin';
import { createLifecycle, type Lifecycle } from '../process/graceful-shutdown.ts';
import type { Readiness } from './operations-app.ts';
import { probe } from './probe.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** server.ts hands it to the graceful shutdown, which flips it before anything else. */
    lifecycle: Lifecycle;
    /** The detailed check: the operations port's `/readyz` shows it, the public one only its status. */
    readiness(): Promise<Readiness>;
  }
}

/** @fastify/swagger's flag: not part of admin's OpenAPI document (common does not load swagger's types). */
const HIDDEN_FROM_OPENAPI = { hide: true } as FastifySchema;

/** A hung dependency makes the probe answer 503 within this, inside the 2 s probe timeout deploy/ sets. */
export const PROBE_TIMEOUT_MS = 1000;

export interface HealthOptions {
  /** Each dependency's check, by the name the detailed `/readyz` body gives its state (in this order). */
  checks: Record<string, () => Promise<unknown>>;
  /** The dependencies the service cannot serve without; the others are reported but never decide. */
  decisive: readonly string[];
}

/**
 * `/healthz`: the process is alive. `/readyz`: the service can do its job, which only its decisive dependencies
 * decide (DESIGN.md): taking a service out of rotation for one it can do without would only add failures. The
 * public `/readyz` says only ready or not, for load balancers: which dependency is down is not the public's to
 * know (the operations port shows it). Both routes stay out of `/openapi.json`.
 */
export const health = fp<HealthOptions>(
  async function health(app: FastifyInstance, options) {
    const checks = Object.entries(options.checks);
    app.decorate('lifecycle', createLifecycle());
    app.get('/healthz', { schema: HIDDEN_FROM_OPENAPI }, async () => ({ status: 'ok' }));
    app.decorate('readiness', async (): Promise<Readiness> => {
      if (app.lifecycle.shuttingDown) return { ready: false, body: { status: 'shutting_down' } };
      const states = await Promise.all(checks.map(([, check]) => probe(check, PROBE_TIMEOUT_MS)));
      const ready = checks.every(([name], i) => !options.decisive.includes(name) || states[i] === 'ok');
      const body: Readiness['body'] = { status: ready ? 'ready' : 'not_ready' };
      checks.forEach(([name], i) => {
        body[name] = states[i]!;
      });
      return { ready, body };
    });
    app.get('/readyz', { schema: HIDDEN_FROM_OPENAPI }, async (_request, reply) => {
      const { ready, body } = await app.readiness();
      return reply.code(ready ? 200 : 503).send({ status: body.status });
    });
  },
  { name: 'health', dependencies: ['infrastructure'] },
);
