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
           keeps and sends with the settle. eval-settle-4.lua gives them back when the call failed on the gateway's
           side (decisions.md, "A usage call answered 503 is given back when it ran"); "settled" = settled before this
           call ran: it applies nothing. The same memory as usage-apply-5.lua's.
  ARGV[1]  balance key prefix ('<prefix>:{org}:m:')
  ARGV[2]  idempotency key prefix ('<prefix>:{org}:idem:')
  ARGV[3]  the number of term sets that follow
  then 7 per term set (what the operations on one feature's period share, sent once): catalog version, member tail
    ('|<feature>|<period start ms>'), limit ('' = unlimited), soft ('1'/'0'), period end ('' = never), ttl ('' =
    none), terms
  then five arguments for every operation of the call (a thousand arguments cost the gateway about as much to write
    as the rest of a batch's call; decisions.md, "usage-apply-6.lua"):
    the subscriber-write stamp (KEYS[2]'s field '#w', subscriber-put-2.lua) the trusted versions were read at ('' =
    none);
    one character per subscriber below: '1' when the gateway read its version from the index at that stamp: while
    the index still holds the stamp, no subscriber's version has moved since, and it is not read again (as in
    eval-gate-batch-8.lua);
    the subscribers, each once, joined by byte 31 (subscriber ids never hold it: SUBSCRIBER_ID_PATTERN);
    the version the gateway read of each, in that order, joined by byte 31;
    the operations, one record each, joined by byte 30, a record's values joined by byte 31: its subscriber's place
    among the subscribers (from 1), term set (from 1), kind ('r'/'c'/'d'/'s'), amount, '1' when another operation
    of the call may touch the same balance (it is buffered: metered-store.fragment.lua) else '0', fingerprint ('' =
    no key), credits ('' = none; the subscriber's own, so per operation), '1' when it has an idempotency key else '0'
  then the idempotency keys of the operations that have one, in their order, one argument each (a key may hold any
    byte)
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
local find, sub, match = string.find, string.sub, string.match
local out = {}
local TERM_ARITY = 7
local termCount = tonumber(ARGV[3])
local at = 4 + termCount * TERM_ARITY
local stampSeen, trusted = ARGV[at], ARGV[at + 1]
local subscriberText, versionText, records = ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
local nextKey = at + 5

-- The text's values between the separator, in order (string.find, not a pattern: half the Lua time).
local function split(text, separator)
  local list, n, from = {}, 0, 1
  while true do
    local stop = find(text, separator, from, true)
    n = n + 1
    if not stop then
      list[n] = sub(text, from)
      return list, n
    end
    list[n] = sub(text, from, stop - 1)
    from = stop + 1
  end
end

local RECORD = '^(%d+)\31(%d+)\31(%a)\31([^\31]*)\31(%d)\31([^\31]*)\31([^\31]*)\31(%d)()'
if redis.call('EXISTS', KEYS[4]) == 0 then
  local from, i = 1, 0
  while from <= #records do
    local stop = find(records, '\30', from, true) or #records + 1
    i = i + 1
    out[2 * i - 1] = METERED_NOT_READY
    out[2 * i] = 0
    from = stop + 1
  end
  return out
end
local catalogVersion = tonumber(redis.call('HGET', KEYS[1], 'v')) or 0
-- By the set's place as the records name it (text: no tonumber per operation).
local termSets = {}
for t = 1, termCount do
  local base = 3 + (t - 1) * TERM_ARITY
  termSets[tostring(t)] = {
    current = tonumber(ARGV[base + 1]) == catalogVersion,
    tail = ARGV[base + 2],
    limit = ARGV[base + 3],
    soft = ARGV[base + 4],
    periodEnd = ARGV[base + 5],
    ttl = ARGV[base + 6],
    terms = ARGV[base + 7],
  }
end
-- A subscriber read at the stamp the index still holds is current; every other one's version is read (one HMGET per
-- 1,000) and compared once: as text first (both are written as integers), as numbers when the texts differ (a
-- missing version reads as 0).
local ids, subscriberCount = split(subscriberText, '\31')
local expected = split(versionText, '\31')
local fresh = {}
local unread, unreadCount = {}, 0
local stamp = redis.call('HGET', KEYS[2], '#w')
local stampHolds = stamp and stamp == stampSeen
for k = 1, subscriberCount do
  if stampHolds and string.byte(trusted, k) == 49 then -- '1'
    fresh[tostring(k)] = true
  else
    unreadCount = unreadCount + 1
    unread[unreadCount] = k
  end
end
for from = 1, unreadCount, 1000 do
  local to = math.min(from + 999, unreadCount)
  local asked = {}
  for j = from, to do
    asked[j - from + 1] = ids[unread[j]]
  end
  local read = redis.call('HMGET', KEYS[2], unpack(asked))
  for j = from, to do
    local k = unread[j]
    local version = read[j - from + 1]
    fresh[tostring(k)] = version == expected[k] or (tonumber(version) or 0) == tonumber(expected[k])
  end
end
local byPlace = {}
for k = 1, subscriberCount do
  byPlace[tostring(k)] = ids[k]
end
meteredBuffer()
-- One table for every operation: meteredApply keeps none of it. A term set's values are set when the set changes.
local op = {}
local opSet = nil
-- Per operation, what its give-back needs (the memory above); anyApplied: whether the memory is written at all.
local applied, anyApplied = {}, false
-- A change's text, made once per value: table.concat would write each number with '%.14g'.
local changeTexts = {}
local from, i = 1, 0
while from <= #records do
  local place, setPlace, kind, amount, buffer, fingerprint, credits, keyed, stop = match(records, RECORD, from)
  if not place then
    return redis.error_reply('usage-apply: operation ' .. (i + 1) .. ' is malformed')
  end
  from = stop + 1
  i = i + 1
  local set = termSets[setPlace]
  local key = ''
  if keyed == '1' then
    key = ARGV[nextKey]
    nextKey = nextKey + 1
  end
  local status, value
  if not set.current or not fresh[place] then
    status, value = METERED_STALE, 0
    applied[i] = 'x'
  else
    if set ~= opSet then
      opSet = set
      op.limit = set.limit
      op.soft = set.soft
      op.periodEnd = set.periodEnd
      op.ttl = set.ttl
      op.terms = set.terms
    end
    op.kind = kind
    op.member = byPlace[place] .. set.tail
    op.amount = tonumber(amount)
    op.idem = key
    op.fingerprint = fingerprint
    op.credits = credits
    op.buffer = buffer == '1'
    meteredApplied = 0
    status, value = meteredApply(ARGV[1], ARGV[2], false, op)
    -- A change of used, or an idempotency record written (a refused consume's too).
    local change = meteredApplied
    if status > 1 or kind == 'r' or (change == 0 and key == '') then
      applied[i] = 'x'
    else
      anyApplied = true
      local text = changeTexts[change]
      if not text then
        text = meteredFormat('%d', change)
        changeTexts[change] = text
      end
      applied[i] = text
    end
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
