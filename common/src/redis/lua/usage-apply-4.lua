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
  ARGV[3]  the number of term sets that follow
  then 7 per term set (what the operations on one feature's period share, sent once): catalog version, member tail
    ('|<feature>|<period start ms>'), limit ('' = unlimited), soft ('1'/'0'), period end ('' = never), ttl ('' =
    none), terms
  then 8 per operation: subscriber id, subscriber version, term set (from 1), kind ('r'/'c'/'d'/'s'), amount,
    idempotency key (''), fingerprint ('' without a key), credits ('' = none; the subscriber's own, so per operation)

  Returns status, value per operation (the fragment's, or 2 stale: the catalog or the subscriber moved on since
  the versions given, nothing applied; 3 not ready: the readiness marker is missing, nothing applied).
]]
local out = {}
local TERM_ARITY = 7
local ARITY = 8
local termCount = tonumber(ARGV[3])
local first = 3 + termCount * TERM_ARITY
local count = (#ARGV - first) / ARITY
if redis.call('EXISTS', KEYS[4]) == 0 then
  for i = 1, count do
    out[2 * i - 1] = METERED_NOT_READY
    out[2 * i] = 0
  end
  return out
end
local catalogVersion = tonumber(redis.call('HGET', KEYS[1], 'v')) or 0
local termSets = {}
for t = 1, termCount do
  local base = 3 + (t - 1) * TERM_ARITY
  termSets[t] = {
    current = tonumber(ARGV[base + 1]) == catalogVersion,
    tail = ARGV[base + 2],
    limit = ARGV[base + 3],
    soft = ARGV[base + 4],
    periodEnd = ARGV[base + 5],
    ttl = ARGV[base + 6],
    terms = ARGV[base + 7],
  }
end
-- The subscribers' current versions in one HMGET per 1,000 (a batch names up to 1,000), not one HGET each.
local ids = {}
local versions = {}
for i = 1, count do
  local id = ARGV[first + (i - 1) * ARITY + 1]
  if versions[id] == nil then
    versions[id] = 0
    ids[#ids + 1] = id
  end
end
for from = 1, #ids, 1000 do
  local to = math.min(from + 999, #ids)
  local read = redis.call('HMGET', KEYS[2], unpack(ids, from, to))
  for k = from, to do
    versions[ids[k]] = tonumber(read[k - from + 1]) or 0
  end
end
-- The batch's balances, credits and idempotency records are read once and written once each (metered-store).
meteredBuffer()
local idempotencyKeys = {}
for i = 1, count do
  local base = first + (i - 1) * ARITY
  if ARGV[base + 6] ~= '' and ARGV[base + 4] ~= 'r' then
    idempotencyKeys[#idempotencyKeys + 1] = ARGV[2] .. ARGV[base + 6]
  end
end
meteredPrefetchRecords(idempotencyKeys)
for i = 1, count do
  local base = first + (i - 1) * ARITY
  local subscriberId = ARGV[base + 1]
  local set = termSets[tonumber(ARGV[base + 3])]
  local status, value
  if not set.current or tonumber(ARGV[base + 2]) ~= versions[subscriberId] then
    status, value = METERED_STALE, 0
  else
    status, value = meteredApply(ARGV[1], ARGV[2], false, {
      kind = ARGV[base + 4],
      member = subscriberId .. set.tail,
      amount = tonumber(ARGV[base + 5]),
      limit = set.limit,
      soft = set.soft,
      periodEnd = set.periodEnd,
      ttl = set.ttl,
      idem = ARGV[base + 6],
      fingerprint = ARGV[base + 7],
      terms = set.terms,
      credits = ARGV[base + 8],
    })
  end
  out[2 * i - 1] = status
  out[2 * i] = value
end
meteredFlush(METERED_IDEMPOTENCY_MS)
meteredMarkDirty(KEYS[3])
return out
