--[[
  Adds a signed number of evals to an organization's month, outside the gate: -1 refunds an eval the
  gate counted that did not end in a 2xx; +N adds evals answered while Redis was unreachable. Keeps
  first_over_at exact: set when the count reaches the limit, cleared when it falls back below it.

  Input:
    KEYS[1] arrangement hash   {limit ('' = unlimited), blocking, burst, plan}
    KEYS[2] usage hash of the UTC month   {count, first_over_at (ms)}

    ARGV[1] delta (integer; the count never goes below zero)
    ARGV[2] now (ms since the epoch, from the application's clock)
    ARGV[3] usage time to live (ms): set when KEYS[2] is created

  Output: { code, count }
    code 0  applied
    code 3  no arrangement in Redis (nothing changed; the caller publishes it and retries)
]]
local rcall = redis.call

local arrangement = rcall("HMGET", KEYS[1], "limit", "burst")
if not arrangement[2] then
  return {3, 0}
end
local limit = tonumber(arrangement[1])

local delta = tonumber(ARGV[1])
local count = tonumber(rcall("HGET", KEYS[2], "count")) or 0
if count + delta < 0 then
  delta = -count
end
if delta == 0 then
  return {0, count}
end

local created = rcall("EXISTS", KEYS[2]) == 0
count = rcall("HINCRBY", KEYS[2], "count", delta)
if created then
  rcall("PEXPIRE", KEYS[2], ARGV[3])
end

if limit ~= nil and count >= limit then
  rcall("HSETNX", KEYS[2], "first_over_at", ARGV[2])
else
  rcall("HDEL", KEYS[2], "first_over_at")
end

return {0, count}
