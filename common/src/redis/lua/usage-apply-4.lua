--[[
  Metered operations outside an eval (DESIGN.md §5): usage reports and batches (delta, set), reads, and a consume
  that the gate call refused as stale, applied again against the snapshot the gateway refreshed. One call per
  request or batch, in order. The balance rule is metered-balance.fragment.lua's (prepended at load time).

  KEYS[1]  catalog hash {v}
  KEYS[2]  subscriber-version index (subscriber id -> version)
  KEYS[3]  the organization's dirty set
  KEYS[4]  the organization's readiness marker
  ARGV[1]  balance key prefix ('<prefix>:{org}:m:')
  ARGV[2]  idempotency key prefix ('<prefix>:{org}:idem:')
  then 14 per operation: subscriber id, kind ('r'/'c'/'d'/'s'), member, amount, limit ('' = unlimited),
    soft ('1'/'0'), period end ('' = never), ttl ('' = none), catalog version, subscriber version, idempotency
    key (''), fingerprint, terms, credits ('' = none)

  Returns status, value per operation (the fragment's, or 2 stale: the catalog or the subscriber moved on since
  the versions given, nothing applied; 3 not ready: the readiness marker is missing, nothing applied).
]]
local out = {}
local ARITY = 14
local count = (#ARGV - 2) / ARITY
if redis.call('EXISTS', KEYS[4]) == 0 then
  for i = 1, count do
    out[2 * i - 1] = METERED_NOT_READY
    out[2 * i] = 0
  end
  return out
end
local catalogVersion = tonumber(redis.call('HGET', KEYS[1], 'v')) or 0
local subscriberVersions = {}
for i = 1, count do
  local base = 2 + (i - 1) * ARITY
  local subscriberId = ARGV[base + 1]
  local version = subscriberVersions[subscriberId]
  if version == nil then
    version = tonumber(redis.call('HGET', KEYS[2], subscriberId)) or 0
    subscriberVersions[subscriberId] = version
  end
  local status, value
  if tonumber(ARGV[base + 9]) ~= catalogVersion or tonumber(ARGV[base + 10]) ~= version then
    status, value = METERED_STALE, 0
  else
    status, value = meteredApply(ARGV[1], ARGV[2], KEYS[3], meteredOperationAt(base))
  end
  out[2 * i - 1] = status
  out[2 * i] = value
end
return out
