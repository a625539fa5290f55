/** The baseline: a bare Fastify route answering the check route's path with the same JSON, nothing else. */
import Fastify from 'fastify';

const port = Number(process.env.BARE_PORT ?? 0);
const app = Fastify({ logger: false });
app.post('/org/subscribers/:subscriber_id/entitlements/check', async () => ({
  feature: 'seats',
  kind: 'limit',
  limit: 25,
  source: 'plan',
}));
app.get('/healthz', async () => ({ status: 'ok' }));
await app.listen({ host: '127.0.0.1', port });
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
