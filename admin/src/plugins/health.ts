import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { sql } from 'kysely';

/** `/healthz`: the process is alive. `/readyz`: Postgres and Redis answer. */
export const health = fp(
  async function health(app: FastifyInstance) {
    app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
    app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
      const [postgres, redis] = await Promise.all([
        sql`SELECT 1`.execute(app.db).then(() => 'ok', () => 'unreachable'),
        app.redis.ping().then(() => 'ok', () => 'unreachable'),
      ]);
      const ready = postgres === 'ok' && redis === 'ok';
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', postgres, redis });
    });
  },
  { name: 'health', dependencies: ['infrastructure'] },
);
