--[[
  Meters a batch of evals of one organization and one UTC month, in arrival order: burst window, monthly
  block, count, first_over_at, and the snapshot versions each eval's gateway compares with its cache.
  Every eval the gateway answers costs exactly one round trip; evals that arrive in the same event-loop
  turn share it, so the script's fixed cost is paid once per batch instead of once per eval.
  Each batch is remembered briefly under its batch id (how many evals it counted, and the consumes it applied),
  so a gateway that lost the reply can settle the batch exactly with eval-settle-4.lua, and a batch that runs
  after it was settled (or runs twice) changes nothing.
  A usage hash is born with an epoch. A gateway passes the epoch and the count of the last reply it had for the
  month: when the hash's epoch is newer (a Redis that lost the hash: restarted empty, flushed), that count is a
  figure the lost hash had reached. The largest such figure is put back, each only by what it adds to the largest
  put back before, so no figure is counted twice, over one loss or several.

  Input (7 keys; N >= 1 evals):
    KEYS[1]     arrangement hash   {limit ('' = unlimited), blocking ('1'/'0'), burst, plan}
    KEYS[2]     usage hash of the UTC month   {count, first_over_at (ms), epoch (ms: when the hash was born),
                restored (the largest figure of a lost hash put back)}
    KEYS[3]     burst hash   {w (newest slot: epoch ms / 100), s0..s9 (requests admitted in slot w - k, at field
                s(slot % 10))}: a rolling second of ten 100 ms slots
    KEYS[4]     catalog hash   {v}
    KEYS[5]     auth hash   {v}
    KEYS[6]     batch memory (string): evals this batch counted, or "settled"; absent = never ran. When the batch
                applied consumes, the count is followed by '\n#' and their places among the batch's operations (from
                1), separated by spaces: the rest of what giving them back needs (member, amount, period end, ttl,
                credits, idempotency key) the gateway that sent the batch still holds, and sends with its settle
                (eval-settle-4.lua)
    KEYS[7]     subscriber-version index (hash: subscriber id -> version, written by subscriber-put-2.lua), and
                its field `#w`: the subscriber-write stamp, moved with every change of the index

    ARGV[1]     usage time to live (ms): set when KEYS[2] is created, so old months expire on their own
    ARGV[2]     grace period (ms) after first_over_at before a blocking arrangement stops evals
    ARGV[3]     how long the batch is remembered (ms)
    ARGV[4]     the usage epoch of the gateway's last reply for this month ('' = none)
    ARGV[5]     the month's count that reply showed, this batch's evals included (0 = none)
    ARGV[6]     the stamp the gateway last saw ('' = none)
    ARGV[7]     one character per eval: '1' when the gateway's cached version of that eval's subscriber was read
                from the index at stamp ARGV[6], else '0'; its length is N
    ARGV[7+i]   subscriber id of eval i (i = 1..N)
    ARGV[8+N..] the evals' instants as runs: a count of consecutive evals, then their now (ms since the epoch,
                from the application's clock; never Redis TIME); the counts add up to N
    then, only when some eval reads or consumes a metered feature: the balance key prefix, the idempotency key
                prefix, the dirty set, the readiness marker (all of this organization), the number of term sets,
                7 values per term set (what the operations on one period of one feature share, sent once: the
                catalog version its terms were resolved from, member tail '|<feature>|<period start ms>', limit
                ('' = unlimited), soft, period end, ttl, terms), the number of credit specs and each spec once (a
                subscriber's credits on one feature, metered-credits.fragment.lua), the operations' kinds as one
                string, a character each ('r' read, 'c' consume, and 'd', 's' as metered-balance.fragment.lua takes
                them; upper case when the operation sends an idempotency key: a keyed write, never a read), and 5 per
                operation: eval index (1..N), term set (from 1), amount, the subscriber version its terms were
                resolved from, credit spec (0 = none, else its place from 1), then, for an upper-case kind, its
                idempotency key and fingerprint. Its member is its eval's subscriber id followed by the set's tail. An operation of an eval not counted is skipped; one whose versions are not current applies
                nothing (stale).
    ARGV[#ARGV] always last: the deadline, the latest instant on Redis's clock (ms, as TIME) at which the batch may
                still apply anything ('' = none, sent when it carries no metered operation). Past it, the gateway
                may already have answered 503 for its consumes: the batch changes nothing and is not remembered,
                so a settle takes it for a batch that never ran (decisions.md, "A metered call that reaches
                Redis late applies nothing").

  While the stamp is still ARGV[6], no subscriber's version has changed since the gateway read the versions it
  marked '1': those are not read again (reading the index was most of the script's cost). Every other eval's
  version is read from the index, and all of them when the stamp has moved, is missing, or ARGV[6] is ''.

  Output: a header, then one number per eval, in order:
    { 0, limit (-1 = unlimited), blocking (0/1), catalog version, auth version, count before the batch,
      stamp (0 = none), usage epoch, e_1, ..., e_N }
    e_i = code_i                                  when the eval's version was not read (still the one marked '1')
    e_i = code_i + 4 * (subscriber version_i + 1)  when it was read (version 0: the index has no such subscriber)
    code 0  counted (the month's count after eval i is the count before the batch plus the counted evals so far)
    code 1  rate limited (the burst's rolling second is full; not counted, takes no place in it)
    code 2  blocked (blocking arrangement past its grace period; not counted)
    then, when the batch carries metered operations, two values per operation in their order: status, value
    (metered-balance.fragment.lua; 2 stale versions, 3 not ready, 4 skipped: its eval was not counted)
  or the single number { 3 } when Redis holds no arrangement (nothing changed; the caller publishes it
  and retries), { 4 } when this batch id already ran or was settled (nothing changed), or { 6 } when the
  deadline had passed (nothing changed).
]]
local rcall = redis.call

local deadline = tonumber(ARGV[#ARGV])
if deadline then
  local time = rcall("TIME")
  if time[1] * 1000 + time[2] / 1000 > deadline then
    return {6}
  end
end

if rcall("EXISTS", KEYS[6]) == 1 then
  return {4}
end

local arrangement = rcall("HMGET", KEYS[1], "limit", "blocking", "burst")
if not arrangement[3] then
  return {3}
end
local limit = tonumber(arrangement[1])
local blocking = arrangement[2] == "1"
local blockingFlag = blocking and 1 or 0
local burst = tonumber(arrangement[3])
local graceMs = tonumber(ARGV[2])
local limitOut = limit or -1

local catalogVersion = tonumber(rcall("HGET", KEYS[4], "v")) or 0
local authVersion = tonumber(rcall("HGET", KEYS[5], "v")) or 0

local usage = rcall("HMGET", KEYS[2], "count", "first_over_at", "epoch")
local storedCount = tonumber(usage[1])
local count = storedCount or 0
local storedFirstOverAt = usage[2]
local firstOverAt = tonumber(storedFirstOverAt)
local firstOverAtArg = storedFirstOverAt

local trusted = ARGV[7]
local evals = #trusted
local run = 8 + evals -- the first run's count; its now follows

local epoch = usage[3]
if not epoch then
  epoch = ARGV[run + 1]
  rcall("HSET", KEYS[2], "epoch", epoch)
  if storedCount == nil then
    rcall("PEXPIRE", KEYS[2], ARGV[1])
  end
end
-- Counts put back after a loss: not evals of this batch (the batch memory below leaves them out).
local restored = 0
-- Only a figure from an older hash: an older copy coming back (a restored backup) must not get newer figures on top.
local seenEpoch = tonumber(ARGV[4])
if seenEpoch and seenEpoch < (tonumber(epoch) or 0) then
  local seenCount = tonumber(ARGV[5]) or 0
  local putBack = tonumber(rcall("HGET", KEYS[2], "restored")) or 0
  if seenCount > putBack then
    restored = seenCount - putBack
    count = count + restored
    rcall("HSET", KEYS[2], "restored", seenCount)
  end
end

-- The burst counts admissions in the newest slot and the nine before it, so no run of evals shorter than 900 ms
-- gets more than `burst` through wherever it falls, and one that waits a whole second finds the window empty.
local SLOTS = 10
local burstState = rcall("HMGET", KEYS[3], "w", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9")
local newestSlot = tonumber(burstState[1])
local slotCounts = {}
local admitted = 0
local changedSlots = {} -- slot index (1..SLOTS) -> true: only these are written back
for k = 1, SLOTS do
  local n = tonumber(burstState[k + 1]) or 0
  slotCounts[k] = n
  admitted = admitted + n
end
if not newestSlot then
  admitted = 0
end
local admittedAny = false

local stamp = rcall("HGET", KEYS[7], "#w")
local stampOut = tonumber(stamp) or 0
-- Versions read from the index, by eval; a trusted eval's entry stays nil while the stamp has not moved.
local readVersions = {}
if stamp and stamp == ARGV[6] then
  local ids, at = {}, {}
  for i = 1, evals do
    if string.byte(trusted, i) ~= 49 then -- '1'
      ids[#ids + 1] = ARGV[7 + i]
      at[#at + 1] = i
    end
  end
  if #ids > 0 then
    local versions = rcall("HMGET", KEYS[7], unpack(ids))
    for j = 1, #ids do
      readVersions[at[j]] = tonumber(versions[j]) or 0
    end
  end
else
  local versions = rcall("HMGET", KEYS[7], unpack(ARGV, 8, 7 + evals))
  for i = 1, evals do
    readVersions[i] = tonumber(versions[i]) or 0
  end
end

local out = {0, limitOut, blockingFlag, catalogVersion, authVersion, count, stampOut, tonumber(epoch) or 0}
local size = 8
local runLeft = tonumber(ARGV[run])
local nowArg = ARGV[run + 1]
local now = tonumber(nowArg)
for i = 1, evals do
  if runLeft == 0 then
    run = run + 2
    runLeft = tonumber(ARGV[run])
    nowArg = ARGV[run + 1]
    now = tonumber(nowArg)
  end
  runLeft = runLeft - 1

  -- Evals from several gateways arrive slightly out of time order: one still inside the window counts in its own
  -- slot. One a whole window behind comes from a gateway whose clock is that far off: the window restarts at its
  -- slot rather than letting one fast clock freeze it for everyone (permissive, as the calendar second was).
  local slot = math.floor(now / 100)
  if not newestSlot or slot >= newestSlot + SLOTS or slot <= newestSlot - SLOTS then
    for k = 1, SLOTS do
      if slotCounts[k] ~= 0 then
        slotCounts[k] = 0
        changedSlots[k] = true
      end
    end
    admitted = 0
    newestSlot = slot
  elseif slot > newestSlot then
    for s = newestSlot + 1, slot do
      local k = s % SLOTS + 1
      if slotCounts[k] ~= 0 then
        admitted = admitted - slotCounts[k]
        slotCounts[k] = 0
        changedSlots[k] = true
      end
    end
    newestSlot = slot
  end

  local code = 0
  if admitted >= burst then
    code = 1
  else
    admitted = admitted + 1
    local k = slot % SLOTS + 1
    slotCounts[k] = slotCounts[k] + 1
    changedSlots[k] = true
    admittedAny = true
    if limit ~= nil and count >= limit and blocking and firstOverAt and now >= firstOverAt + graceMs then
      code = 2
    else
      count = count + 1
      if limit ~= nil and count >= limit then
        if not firstOverAt then
          firstOverAt = now
          firstOverAtArg = nowArg
        end
      elseif firstOverAt then
        -- The limit was raised (or removed) since the month went over it.
        firstOverAt = nil
        firstOverAtArg = nil
      end
    end
  end

  local version = readVersions[i]
  size = size + 1
  if version then
    out[size] = code + 4 * (version + 1)
  else
    out[size] = code
  end
end

if admittedAny then
  local fields = {"w", newestSlot}
  for k = 1, SLOTS do
    if changedSlots[k] then
      fields[#fields + 1] = "s" .. (k - 1)
      fields[#fields + 1] = slotCounts[k]
    end
  end
  rcall("HSET", KEYS[3], unpack(fields))
  rcall("PEXPIRE", KEYS[3], 2000)
end
if count ~= (storedCount or 0) then
  rcall("HINCRBY", KEYS[2], "count", count - (storedCount or 0))
  if storedCount == nil then
    rcall("PEXPIRE", KEYS[2], ARGV[1])
  end
end
if firstOverAtArg ~= storedFirstOverAt then
  if firstOverAtArg then
    rcall("HSET", KEYS[2], "first_over_at", firstOverAtArg)
  else
    rcall("HDEL", KEYS[2], "first_over_at")
  end
end
local counted = count - (storedCount or 0) - restored
-- The batch memory is written once, at the end, with the consumes applied (if any): nothing else runs meanwhile.
local memory = counted

-- Metered operations (metered-balance.fragment.lua), only when the batch carries any: after the last run.
local m = run + 2
if m < #ARGV then
  local ready = rcall("EXISTS", ARGV[m + 3]) == 1
  -- The places of the consumes applied, for a settle of this batch to give back: the gateway answers them all 503
  -- when the reply does not reach it (a Redis shut down before sending it).
  local applied, appliedSize = {}, 0
  local TERM_ARITY = 7
  local termCount = tonumber(ARGV[m + 4])
  -- One operation table per term set, its shared fields set once: meteredApply keeps no reference to it.
  local termSets = {}
  for t = 1, termCount do
    local at = m + 4 + (t - 1) * TERM_ARITY
    termSets[t] = {
      current = tonumber(ARGV[at + 1]) == catalogVersion,
      tail = ARGV[at + 2],
      op = {limit = ARGV[at + 3], soft = ARGV[at + 4], periodEnd = ARGV[at + 5], ttl = ARGV[at + 6],
        terms = ARGV[at + 7], idem = "", fingerprint = ""},
    }
  end
  -- The credit specs, each once: an operation names its own by place (0: none).
  local specsAt = m + 5 + termCount * TERM_ARITY
  local specCount = tonumber(ARGV[specsAt])
  -- Each argument costs Redis a Lua string: the kinds come as one, and only a keyed operation sends its key.
  local kinds = ARGV[specsAt + specCount + 1]
  local argv, byte = ARGV, string.byte
  -- A kind's character (its byte) -> the kind meteredApply takes; upper case: keyed.
  local KIND_OF = {[114] = "r", [99] = "c", [100] = "d", [115] = "s", [82] = "r", [67] = "c", [68] = "d", [83] = "s"}
  local balancePrefix, idempotencyPrefix = ARGV[m], ARGV[m + 1]
  local base = specsAt + specCount + 1
  local lastSetArgument, set = nil, nil
  for place = 1, #kinds do
    local kind = byte(kinds, place)
    local evalIndex = tonumber(argv[base + 1])
    local status, value
    if out[8 + evalIndex] % 4 ~= 0 then
      status, value = METERED_SKIPPED, 0
    elseif not ready then
      status, value = METERED_NOT_READY, 0
    else
      -- Interned strings: the same set as the operation before (the usual case) is one comparison, no tonumber.
      local setArgument = argv[base + 2]
      if setArgument ~= lastSetArgument then
        lastSetArgument, set = setArgument, termSets[tonumber(setArgument)]
      end
      if not set.current
        or (readVersions[evalIndex] ~= nil and readVersions[evalIndex] ~= tonumber(argv[base + 4])) then
        status, value = METERED_STALE, 0
      else
        local op = set.op
        op.member = argv[7 + evalIndex] .. set.tail
        op.amount = tonumber(argv[base + 3])
        local spec = argv[base + 5]
        op.credits = spec == "0" and "" or argv[specsAt + tonumber(spec)]
        op.kind = KIND_OF[kind]
        -- No dirty key: the members changed are marked with one SADD after the loop.
        local keyed = kind < 97 -- upper case
        if keyed then
          op.idem, op.fingerprint = argv[base + 6], argv[base + 7]
        end
        status, value = meteredApply(balancePrefix, idempotencyPrefix, false, op)
        if keyed then
          op.idem, op.fingerprint = "", ""
        end
        if status == 0 and (kind == 99 or kind == 67) then -- 'c', 'C'
          appliedSize = appliedSize + 1
          applied[appliedSize] = place
        end
      end
    end
    size = size + 1
    out[size] = status
    size = size + 1
    out[size] = value
    base = base + (kind < 97 and 7 or 5)
  end
  meteredMarkDirty(ARGV[m + 2])
  if appliedSize > 0 then
    memory = counted .. "\n#" .. table.concat(applied, " ")
  end
end
rcall("SET", KEYS[6], memory, "PX", ARGV[3])

return out
