import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** `/healthz`: the process is alive. `/readyz`: Redis and admin answer (evals degrade without them). */
export const health = fp(
  async function health(app: FastifyInstance) {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async (_request, reply) => {
      const [redis, admin] = await Promise.all([
        app.redis.ping().then(() => 'ok', () => 'unreachable'),
        app.adminPool
          .request({ method: 'GET', path: '/healthz', headersTimeout: 2000, bodyTimeout: 2000 })
          .then(
            async (res) => {
              await res.body.dump();
              return res.statusCode === 200 ? 'ok' : 'unreachable';
            },
            () => 'unreachable',
          ),
      ]);
      const ready = redis === 'ok' && admin === 'ok';
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', redis, admin });
    });
  },
  { name: 'health', dependencies: ['infrastructure', 'admin-client'] },
);
