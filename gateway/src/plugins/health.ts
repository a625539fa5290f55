import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { probe } from '@ent/common/http/probe';
import { createLifecycle, type Lifecycle } from '@ent/common/process/graceful-shutdown';

declare module 'fastify' {
  interface FastifyInstance {
    /** server.ts hands it to the graceful shutdown, which flips it before anything else. */
    lifecycle: Lifecycle;
  }
}

/** A hung dependency makes the probe answer 503 within this, inside the 2 s probe timeout deploy/ sets. */
const PROBE_TIMEOUT_MS = 1000;

/**
 * `/healthz`: the process is alive. `/readyz`: the gateway can answer evals, which needs Redis only (DESIGN.md).
 * Admin's state is reported for the operator but never decides: taking every gateway out of rotation because
 * admin is down would also stop the evals, which do not need it.
 */
export const health = fp(
  async function health(app: FastifyInstance) {
    app.decorate('lifecycle', createLifecycle());
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async (_request, reply) => {
      if (app.lifecycle.shuttingDown) return reply.code(503).send({ status: 'shutting_down' });
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
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', redis, admin });
    });
  },
  { name: 'health', dependencies: ['infrastructure', 'admin-client'] },
);
