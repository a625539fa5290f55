/**
 * The floor under any gateway DESIGN.md allows: the bare Fastify route (bare-server.ts) plus the one thing §2.2
 * requires of every eval, a Redis round trip, batched by the gateway's own batcher on the gateway's own client.
 * Its script only adds the batch to a counter: no auth, cache, resolution, burst, block or usage headers. What it
 * costs over the bare route is what the round trip alone costs; the gateway can only be dearer.
 */
import Fastify from 'fastify';
import { loadConfig } from '@ent/common/config';
import type { EvalGateResult } from '../../gateway/src/metering/contract.ts';
import { createGateBatcher } from '../../gateway/src/metering/gate-batcher.ts';
import type { EvalGateBatchReply } from '../../gateway/src/metering/scripts.ts';
import { createGatewayRedis } from '../../gateway/src/plugins/infrastructure.ts';

const config = loadConfig();
const redis = createGatewayRedis(config);
redis.defineCommand('countBatch', { numberOfKeys: 1, lua: 'return {redis.call("INCRBY", KEYS[1], #ARGV)}' });
const countBatch = (redis as unknown as { countBatch(...args: string[]): Promise<EvalGateBatchReply> })
  .countBatch;
const counted: EvalGateResult = {
  outcome: 'counted',
  versions: { catalog: 0, subscriber: 0, auth: 0, subscriberStamp: 0 },
  usage: null,
};
const batches = createGateBatcher(
  (batch) =>
    countBatch.call(
      redis,
      `${config.redisKeyPrefix}:floor:{${batch.organizationId}}`,
      ...batch.evals.map((input) => input.subscriberId),
    ),
  (_reply, evals) => evals.map(() => counted),
);

const answer = { feature: 'seats', kind: 'limit', limit: 25, source: 'plan' };
const app = Fastify({ logger: false });
app.post<{ Params: { subscriber_id: string } }>(
  '/org/subscribers/:subscriber_id/entitlements/check',
  async (request) => {
    await batches.add({
      organizationId: 'floor',
      subscriberId: request.params.subscriber_id,
      nowMs: Date.now(),
    });
    return answer;
  },
);
app.get('/healthz', async () => ({ status: 'ok' }));
await app.listen({ host: '127.0.0.1', port: Number(process.env.BARE_PORT ?? 0) });
process.once(
  'SIGTERM',
  () =>
    void app
      .close()
      .then(() => redis.quit())
      .then(() => process.exit(0)),
);
