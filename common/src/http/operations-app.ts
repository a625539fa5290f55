import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** What a readiness check found: `ready` decides the status code; `body` names each dependency's state. */
export interface Readiness {
  ready: boolean;
  body: { status: 'ready' | 'not_ready' | 'shutting_down'; [dependency: string]: string };
}

export interface OperationsSource {
  registry: Registry;
  readiness(): Promise<Readiness>;
}

/**
 * The operator's port (GATEWAY_METRICS_PORT, ADMIN_METRICS_PORT): `/metrics` and the detailed `/readyz`, which
 * say how the service and its dependencies are doing and so stay off the public port. Its own Fastify instance,
 * so nothing here is reachable through the public listener (or forwarded by the gateway to admin).
 */
export async function buildOperationsApp(source: OperationsSource): Promise<FastifyInstance> {
  const ops = Fastify({ logger: false });
  ops.get('/healthz', async () => ({ status: 'ok' }));
  ops.get('/readyz', async (_request, reply) => {
    const { ready, body } = await source.readiness();
    return reply.code(ready ? 200 : 503).send(body);
  });
  ops.get('/metrics', async (_request, reply) => reply.type(source.registry.contentType).send(await source.registry.metrics()));
  await ops.ready();
  return ops;
}
