import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { sql } from 'kysely';
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
 * `/healthz`: the process is alive. `/readyz`: admin can serve, which needs Postgres (DESIGN.md). Redis is
 * reported (on the operations port only) but never decides: writes still commit and answer without it (the
 * outbox brings Redis up to date), so taking admin out of rotation for it would only add failed writes.
 */
export const health = fp(
  async function health(app: FastifyInstance) {
    app.decorate('lifecycle', createLifecycle());
    app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
    app.decorate('readiness', async (): Promise<Readiness> => {
      if (app.lifecycle.shuttingDown) return { ready: false, body: { status: 'shutting_down' } };
      const [postgres, redis] = await Promise.all([
        probe(() => sql`SELECT 1`.execute(app.db), PROBE_TIMEOUT_MS),
        probe(() => app.redis.ping(), PROBE_TIMEOUT_MS),
      ]);
      const ready = postgres === 'ok';
      return { ready, body: { status: ready ? 'ready' : 'not_ready', postgres, redis } };
    });
    app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
      const { ready, body } = await app.readiness();
      return reply.code(ready ? 200 : 503).send({ status: body.status });
    });
  },
  { name: 'health', dependencies: ['infrastructure'] },
);
