--[[
  Metered operations outside an eval (DESIGN.md §5): usage reports and batches (delta, set), reads, and a consume
  that the gate call refused as stale, applied again against the snapshot the gateway refreshed. One call per
  request or batch, in order. The balance rule is metered-balance.fragment.lua's (prepended at load time).

  KEYS[1]  catalog hash {v}
  KEYS[2]  subscriber-version index (subscriber id -> version)
  KEYS[3]  the organization's dirty set
  KEYS[4]  the organization's readiness marker
  KEYS[5]  the call's memory (string; the gate batch memory's key, eval-gate-batch-8.lua's KEYS[6]): absent = never
           ran; written at the end when the call changed a balance or wrote an idempotency record: '0' (no evals
           counted), '\n', then per operation, in order, separated by spaces: the change it made to used (after -
           before, negative for a report that lowered it; 0 when it changed nothing but wrote its idempotency record),
           or 'x' when it applied and recorded nothing. The rest (member, period end, ttl, credits, key) the gateway
           keeps and sends with the settle: one number per event here, not six strings (those cost Redis 0.5 µs more).
           eval-settle-4.lua gives them back when the call failed on the gateway's side (decisions.md, "A usage call
           answered 503 is given back when it ran"); "settled" = settled before this call ran: it applies nothing
  ARGV[1]  balance key prefix ('<prefix>:{org}:m:')
  ARGV[2]  idempotency key prefix ('<prefix>:{org}:idem:')
  ARGV[3]  the number of term sets that follow
  then 7 per term set (what the operations on one feature's period share, sent once): catalog version, member tail
    ('|<feature>|<period start ms>'), limit ('' = unlimited), soft ('1'/'0'), period end ('' = never), ttl ('' =
    none), terms
  then one per operation, its eight values joined by the unit separator (byte 31: a gateway spends about as much on
    each argument as on the operation, Redis a little more on one match than on eight arguments): subscriber id,
    subscriber version, term set (from 1), kind ('r'/'c'/'d'/'s'), amount, fingerprint ('' without a key), credits
    ('' = none; the subscriber's own, so per operation), idempotency key ('' = none; last: it may hold any byte)
  ARGV[#ARGV - 1]  how long the call's memory is kept (ms)
  ARGV[#ARGV]  always last: the deadline, the latest instant on Redis's clock (ms, as TIME) at which the call may
    still apply anything. Past it, the gateway may already have answered 503: nothing is applied, read or recorded
    (decisions.md, "A metered call that reaches Redis late applies nothing").

  Returns status, value per operation (the fragment's, or 2 stale: the catalog or the subscriber moved on since
  the versions given, nothing applied; 3 not ready: the readiness marker is missing, nothing applied), or the
  single number { 6 } when the deadline had passed, or { 4 } when the call was settled before it ran (never a reply of
  operations: those come in pairs); either changed nothing.
]]
local deadline = tonumber(ARGV[#ARGV])
if not deadline then
  return redis.error_reply('usage-apply: the last argument must be the deadline')
end
local time = redis.call('TIME')
if time[1] * 1000 + time[2] / 1000 > deadline then
  return {6}
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {4}
end
local out = {}
local TERM_ARITY = 7
local OPERATION = '^([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$'
local termCount = tonumber(ARGV[3])
local first = 3 + termCount * TERM_ARITY
local count = #ARGV - 2 - first
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
-- One pass over the operations: their values, their balances (counted: a balance that several share is kept in
-- memory until the end, metered-store.fragment.lua), the subscribers whose versions to read.
local match = string.match
local opIds, opVersions, opSets, opKinds, opAmounts, opFingerprints, opCredits, opKeys = {}, {}, {}, {}, {}, {}, {}, {}
local members = {}
local touches = {}
local ids = {}
local versions = {}
for i = 1, count do
  local id, version, set, kind, amount, fingerprint, credits, key = match(ARGV[first + i], OPERATION)
  set = termSets[tonumber(set)]
  opIds[i], opVersions[i], opSets[i], opKinds[i], opAmounts[i] = id, tonumber(version), set, kind, tonumber(amount)
  opFingerprints[i], opCredits[i], opKeys[i] = fingerprint, credits, key
  local member = id .. set.tail
  members[i] = member
  touches[member] = (touches[member] or 0) + 1
  if versions[id] == nil then
    versions[id] = 0
    ids[#ids + 1] = id
  end
end
-- The subscribers' current versions in one HMGET per 1,000 (a batch names up to 1,000), not one HGET each.
for from = 1, #ids, 1000 do
  local to = math.min(from + 999, #ids)
  local read = redis.call('HMGET', KEYS[2], unpack(ids, from, to))
  for k = from, to do
    versions[ids[k]] = tonumber(read[k - from + 1]) or 0
  end
end
meteredBuffer()
-- One table for every operation: meteredApply keeps none of it.
local op = {}
-- Per operation, what its give-back needs (the memory above); anyApplied: whether the memory is written at all.
local applied, anyApplied = {}, false
for i = 1, count do
  local set = opSets[i]
  local status, value
  if not set.current or opVersions[i] ~= versions[opIds[i]] then
    status, value = METERED_STALE, 0
    applied[i] = 'x'
  else
    local member = members[i]
    op.kind = opKinds[i]
    op.member = member
    op.amount = opAmounts[i]
    op.limit = set.limit
    op.soft = set.soft
    op.periodEnd = set.periodEnd
    op.ttl = set.ttl
    op.idem = opKeys[i]
    op.fingerprint = opFingerprints[i]
    op.terms = set.terms
    op.credits = opCredits[i]
    op.buffer = touches[member] > 1
    meteredApplied = 0
    status, value = meteredApply(ARGV[1], ARGV[2], false, op)
    -- A change of used, or an idempotency record written (a refused consume's too). A number as is (table.concat
    -- writes it as '%.14g': exact below 1e14), so most events cost one table store.
    local change = meteredApplied
    if status > 1 or op.kind == 'r' or (change == 0 and op.idem == '') then
      change = 'x'
    else
      anyApplied = true
      if change >= 1e14 or change <= -1e14 then
        change = meteredFormat('%d', change)
      end
    end
    applied[i] = change
  end
  out[2 * i - 1] = status
  out[2 * i] = value
end
meteredFlush()
meteredMarkDirty(KEYS[3])
if anyApplied then
  redis.call('SET', KEYS[5], '0\n' .. table.concat(applied, ' '), 'PX', ARGV[#ARGV - 1])
end
return out
