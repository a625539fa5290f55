/**
 * The gateway with metering bypassed, for `npm run bench` only. Its gate call is batched exactly like the
 * real one but its script only reads the three snapshot versions and counts nothing, so the difference
 * between the two gateways in the same run is what metering (burst, block, count) costs.
 */
import { loadConfig } from '@ent/common/config';
import type { EvalMeter } from '@ent/common/metering/contract';
import { createGateBatcher } from '@ent/common/metering/gate-batcher';
import { toGateResult } from '@ent/common/metering/meter';
import type { EvalGateBatchReply } from '@ent/common/metering/scripts';
import { redisKeys } from '@ent/common/redis/keys';
import { buildGatewayApp } from '../../gateway/src/app.ts';
import { createGatewayRedis } from '../../gateway/src/plugins/infrastructure.ts';

// KEYS[1] catalog, KEYS[2] auth, KEYS[3] the subscriber-version index, ARGV the evals' subscriber ids; replies in
// eval-gate-batch-7.lua's shape.
const VERSIONS_ONLY = `
local catalog = tonumber(redis.call("HGET", KEYS[1], "v")) or 0
local auth = tonumber(redis.call("HGET", KEYS[2], "v")) or 0
local versions = redis.call("HMGET", KEYS[3], unpack(ARGV))
local out = {0, -1, 0, catalog, auth}
for i = 1, #ARGV do
  out[#out + 1] = 0
  out[#out + 1] = 0
  out[#out + 1] = tonumber(versions[i]) or 0
end
return out`;

const config = loadConfig();
// The very client the real gateway uses, so the two differ only in what the gate script does.
const redis = createGatewayRedis(config);
const keys = redisKeys(config.redisKeyPrefix);
redis.defineCommand('versionsOnly', { numberOfKeys: 3, lua: VERSIONS_ONLY });
const versionsOnly = (redis as unknown as { versionsOnly(...args: (string | number)[]): Promise<EvalGateBatchReply> })
  .versionsOnly;

const batches = createGateBatcher(
  (batch) =>
    versionsOnly.call(
      redis,
      keys.catalog(batch.organizationId),
      keys.auth(batch.organizationId),
      keys.subscriberVersions(batch.organizationId),
      ...batch.evals.map((e) => e.subscriberId),
    ),
  toGateResult,
);

const unmetered: EvalMeter = {
  gate: (input) => batches.add(input),
  refund: async () => {},
  addOfflineCount: async () => {},
  settlePending: async () => {},
  pendingSettlements: () => 0,
};

const app = await buildGatewayApp({ config, redis, meter: unmetered });
await app.listen({ host: config.host, port: config.gatewayPort });
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
