/**
 * The gateway with metering bypassed, for `npm run bench` only. Its gate call is batched exactly like the
 * real one but its script only reads the three snapshot versions and counts nothing, so the difference
 * between the two gateways in the same run is what metering (burst, block, count) costs.
 * With BENCH_GATE=memory it also skips the round trip whenever it can: an eval whose subscriber was verified at the
 * organization's last known stamp is answered from the versions of the last reply, with no Redis call at all. The
 * difference between the two bench gateways is then what the round trip itself costs (client, kernel, Redis).
 */
import { loadConfig } from '@ent/common/config';
import type { EvalGateInput, EvalGateResult, EvalMeter } from '../../gateway/src/metering/contract.ts';
import { createGateBatcher } from '../../gateway/src/metering/gate-batcher.ts';
import { decodeGateReply, gateArguments } from '../../gateway/src/metering/meter.ts';
import type { EvalGateBatchReply } from '../../gateway/src/metering/scripts.ts';
import { redisKeys } from '@ent/common/redis/keys';
import { buildGatewayApp } from '../../gateway/src/app.ts';
import { createGatewayRedis } from '../../gateway/src/plugins/infrastructure.ts';

// KEYS[1] catalog, KEYS[2] auth, KEYS[3] the subscriber-version index; ARGV as eval-gate-batch-8.lua's from its
// sixth (gateArguments): the same reads of versions, skipped the same way, and a reply of the same shape.
const VERSIONS_ONLY = `
local catalog = tonumber(redis.call("HGET", KEYS[1], "v")) or 0
local auth = tonumber(redis.call("HGET", KEYS[2], "v")) or 0
local trusted = ARGV[2]
local evals = #trusted
local stamp = redis.call("HGET", KEYS[3], "#w")
local read = {}
local ids, at = {}, {}
for i = 1, evals do
  if not (stamp and stamp == ARGV[1]) or string.byte(trusted, i) ~= 49 then
    ids[#ids + 1] = ARGV[2 + i]
    at[#at + 1] = i
  end
end
if #ids > 0 then
  local versions = redis.call("HMGET", KEYS[3], unpack(ids))
  for j = 1, #ids do read[at[j]] = tonumber(versions[j]) or 0 end
end
local out = {0, -1, 0, catalog, auth, 0, tonumber(stamp) or 0, 0}
for i = 1, evals do
  out[8 + i] = read[i] and 4 * (read[i] + 1) or 0
end
return out`;

const config = loadConfig();
// The very client the real gateway uses, so the two differ only in what the gate script does.
const redis = createGatewayRedis(config);
const keys = redisKeys(config.redisKeyPrefix);
redis.defineCommand('versionsOnly', { numberOfKeys: 3, lua: VERSIONS_ONLY });
const versionsOnly = (redis as unknown as { versionsOnly(...args: (string | number)[]): Promise<EvalGateBatchReply> })
  .versionsOnly;
const knownStamps = new Map<string, number>();
/** The catalog and auth versions of each organization's last reply (memory mode answers with them). */
const lastVersions = new Map<string, { catalog: number; auth: number }>();
const skipRoundTrips = process.env.BENCH_GATE === 'memory';

const batches = createGateBatcher(async (batch) => {
  const reply = await versionsOnly.call(
    redis,
    keys.catalog(batch.organizationId),
    keys.auth(batch.organizationId),
    keys.subscriberVersions(batch.organizationId),
    ...gateArguments(batch.evals, knownStamps.get(batch.organizationId) ?? 0).args,
  );
  knownStamps.set(batch.organizationId, reply[6] ?? 0);
  lastVersions.set(batch.organizationId, { catalog: reply[3] ?? 0, auth: reply[4] ?? 0 });
  return reply;
}, decodeGateReply);

const fromMemory = (input: EvalGateInput): EvalGateResult | undefined => {
  const stamp = knownStamps.get(input.organizationId) ?? 0;
  const versions = lastVersions.get(input.organizationId);
  if (!skipRoundTrips || stamp === 0 || !versions || input.verified?.verifiedStamp !== stamp) return undefined;
  return {
    outcome: 'counted',
    // Built in decodeGateReply's property order, so the hot path sees the one object shape it always sees.
    versions: { catalog: versions.catalog, subscriber: input.verified.verifiedVersion, auth: versions.auth, subscriberStamp: stamp },
    usage: null,
  };
};

const unmetered: EvalMeter = {
  gate: (input) => {
    const known = fromMemory(input);
    return known ? Promise.resolve(known) : batches.add(input);
  },
  refund: async () => {},
  addOfflineCount: async () => {},
  settleLater: () => {},
  settlePending: async () => {},
  pendingSettlements: () => 0,
};

const app = await buildGatewayApp({ config, redis, meter: unmetered });
await app.listen({ host: config.host, port: config.gatewayPort });
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
