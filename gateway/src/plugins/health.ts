import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Readiness } from '@ent/common/http/operations-app';
import { probe } from '@ent/common/http/probe';
import { createLifecycle, type Lifecycle } from '@ent/common/process/graceful-shutdown';

declare module 'fastify' {
  interface FastifyInstance {
    /** server.ts hands it to the graceful shutdown, which flips it before anything else. */
    lifecycle: Lifecycle;
    /** The detailed check: the operations port's `/readyz` shows it, the public one only its status. */
    readiness(): Promise<Readiness>;
  }
}

/** A hung dependency makes the probe answer 503 within this, inside the 2 s probe timeout deploy/ sets. */
const PROBE_TIMEOUT_MS = 1000;

/**
 * `/healthz`: the process is alive. `/readyz`: the gateway can answer evals, which needs Redis only (DESIGN.md).
 * Admin's state is reported for the operator (on the operations port only) but never decides: taking every
 * gateway out of rotation because admin is down would also stop the evals, which do not need it. The public
 * `/readyz` says only ready or not, for load balancers: which dependency is down is not the public's to know.
 */
export const health = fp(
  async function health(app: FastifyInstance) {
    app.decorate('lifecycle', createLifecycle());
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.decorate('readiness', async (): Promise<Readiness> => {
      if (app.lifecycle.shuttingDown) return { ready: false, body: { status: 'shutting_down' } };
      const [redis, admin] = await Promise.all([
        probe(() => app.redis.ping(), PROBE_TIMEOUT_MS),
        probe(async () => {
          const res = await app.adminPool.request({
            method: 'GET',
            path: '/healthz',
            headersTimeout: PROBE_TIMEOUT_MS,
            bodyTimeout: PROBE_TIMEOUT_MS,
          });
          await res.body.dump();
          if (res.statusCode !== 200) throw new Error(`admin answered ${res.statusCode}`);
        }, PROBE_TIMEOUT_MS),
      ]);
      const ready = redis === 'ok';
      return { ready, body: { status: ready ? 'ready' : 'not_ready', redis, admin } };
    });
    app.get('/readyz', async (_request, reply) => {
      const { ready, body } = await app.readiness();
      return reply.code(ready ? 200 : 503).send({ status: body.status });
    });
  },
  { name: 'health', dependencies: ['infrastructure', 'admin-client'] },
);
