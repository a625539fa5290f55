--[[
  Meters a batch of evals of one organization and one UTC month, in arrival order: burst window, monthly
  block, count, first_over_at, and the snapshot versions each eval's gateway compares with its cache.
  Every eval the gateway answers costs exactly one round trip; evals that arrive in the same event-loop
  turn share it, so the script's fixed cost is paid once per batch instead of once per eval.
  Each batch is remembered briefly under its batch id (how many evals it counted), so a gateway that lost
  the reply can settle the batch exactly with eval-settle-3.lua, and a batch that runs after it was
  settled (or runs twice) changes nothing.

  Input (7 keys; N >= 1 evals):
    KEYS[1]     arrangement hash   {limit ('' = unlimited), blocking ('1'/'0'), burst, plan}
    KEYS[2]     usage hash of the UTC month   {count, first_over_at (ms)}
    KEYS[3]     burst hash   {w (window: epoch second), n (requests admitted in it)}
    KEYS[4]     catalog hash   {v}
    KEYS[5]     auth hash   {v}
    KEYS[6]     batch memory (string): evals this batch counted, or "settled"; absent = never ran
    KEYS[7]     subscriber-version index (hash: subscriber id -> version, written by subscriber-put-2.lua)

    ARGV[1]     usage time to live (ms): set when KEYS[2] is created, so old months expire on their own
    ARGV[2]     grace period (ms) after first_over_at before a blocking arrangement stops evals
    ARGV[3]     how long the batch is remembered (ms)
    ARGV[3+i]   subscriber id of eval i (i = 1..N)
    ARGV[3+N+i] now of eval i (ms since the epoch, from the application's clock; never Redis TIME)

  Output: a header, then 3 numbers per eval, in order:
    { 0, limit (-1 = unlimited), blocking (0/1), catalog version, auth version,
      code_1, count_1, subscriber version_1, ..., code_N, count_N, subscriber version_N }
    code 0  counted
    code 1  rate limited (over the burst; not counted, does not use a burst slot)
    code 2  blocked (blocking arrangement past its grace period; not counted)
  or the single number { 3 } when Redis holds no arrangement (nothing changed; the caller publishes it
  and retries), or { 4 } when this batch id already ran or was settled (nothing changed).
]]
local rcall = redis.call

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

local usage = rcall("HMGET", KEYS[2], "count", "first_over_at")
local storedCount = tonumber(usage[1])
local count = storedCount or 0
local storedFirstOverAt = usage[2]
local firstOverAt = tonumber(storedFirstOverAt)
local firstOverAtArg = storedFirstOverAt

local burstState = rcall("HMGET", KEYS[3], "w", "n")
local window = tonumber(burstState[1])
local admitted = tonumber(burstState[2]) or 0
local admittedAny = false

local evals = (#ARGV - 3) / 2
-- One read for every subscriber version of the batch (a redis.call per eval was most of the script's cost).
local subscriberVersions = rcall("HMGET", KEYS[7], unpack(ARGV, 4, 3 + evals))

local out = {0, limitOut, blockingFlag, catalogVersion, authVersion}
local size = 5
for i = 1, evals do
  local nowArg = ARGV[3 + evals + i]
  local now = tonumber(nowArg)
  local subscriberVersion = tonumber(subscriberVersions[i]) or 0

  local evalWindow = math.floor(now / 1000)
  if evalWindow ~= window then
    window = evalWindow
    admitted = 0
  end

  local code = 0
  if admitted >= burst then
    code = 1
  else
    admitted = admitted + 1
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

  out[size + 1] = code
  out[size + 2] = count
  out[size + 3] = subscriberVersion
  size = size + 3
end

if admittedAny then
  rcall("HSET", KEYS[3], "w", window, "n", admitted)
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
rcall("SET", KEYS[6], count - (storedCount or 0), "PX", ARGV[3])

return out
