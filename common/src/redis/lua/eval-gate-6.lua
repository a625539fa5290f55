--[[
  Meters one eval for an organization: burst window, monthly block, count, first_over_at, and the
  snapshot versions the gateway compares with its cache. One round trip per eval.

  Input:
    KEYS[1] arrangement hash   {limit ('' = unlimited), blocking ('1'/'0'), burst, plan}
    KEYS[2] usage hash of the UTC month   {count, first_over_at (ms)}
    KEYS[3] burst hash   {w (window: epoch second), n (requests admitted in it)}
    KEYS[4] catalog hash   {v}
    KEYS[5] subscriber hash   {v}
    KEYS[6] auth hash   {v}

    ARGV[1] now (ms since the epoch, from the application's clock; never Redis TIME)
    ARGV[2] usage time to live (ms): set when KEYS[2] is created, so old months expire on their own
    ARGV[3] grace period (ms) after first_over_at before a blocking arrangement stops evals

  Output: { code, count, limit (-1 = unlimited), blocking (0/1), first_over_at (0 = none),
            catalog version, subscriber version, auth version }
    code 0  counted
    code 1  rate limited (over the burst; not counted)
    code 2  blocked (blocking arrangement past its grace period; not counted)
    code 3  no arrangement in Redis (nothing changed; the caller publishes it and retries)
]]
local rcall = redis.call

local arrangement = rcall("HMGET", KEYS[1], "limit", "blocking", "burst")
if not arrangement[3] then
  return {3, 0, -1, 0, 0, 0, 0, 0}
end
local limit = tonumber(arrangement[1])
local blocking = arrangement[2] == "1"
local burst = tonumber(arrangement[3])

local now = tonumber(ARGV[1])
local graceMs = tonumber(ARGV[3])

local versionOf = function(key)
  return tonumber(rcall("HGET", key, "v")) or 0
end
local catalogVersion = versionOf(KEYS[4])
local subscriberVersion = versionOf(KEYS[5])
local authVersion = versionOf(KEYS[6])

local usage = rcall("HMGET", KEYS[2], "count", "first_over_at")
local count = tonumber(usage[1]) or 0
local firstOverAt = tonumber(usage[2])

local reply = function(code)
  return {code, count, limit or -1, blocking and 1 or 0, firstOverAt or 0,
    catalogVersion, subscriberVersion, authVersion}
end

-- Burst: a fixed one-second window per organization.
local window = math.floor(now / 1000)
local burstState = rcall("HMGET", KEYS[3], "w", "n")
local admitted = 0
if tonumber(burstState[1]) == window then
  admitted = tonumber(burstState[2]) or 0
end
if admitted >= burst then
  return reply(1)
end
rcall("HSET", KEYS[3], "w", tostring(window), "n", admitted + 1)
rcall("PEXPIRE", KEYS[3], 2000)

local over = limit ~= nil and count >= limit
if over and blocking and firstOverAt and now >= firstOverAt + graceMs then
  return reply(2)
end

count = rcall("HINCRBY", KEYS[2], "count", 1)
if count == 1 then
  rcall("PEXPIRE", KEYS[2], ARGV[2])
end

if limit ~= nil and count >= limit then
  if not firstOverAt then
    firstOverAt = now
    rcall("HSET", KEYS[2], "first_over_at", ARGV[1])
  end
elseif firstOverAt then
  -- The limit was raised (or removed) since the month went over it.
  firstOverAt = nil
  rcall("HDEL", KEYS[2], "first_over_at")
end

return reply(0)
