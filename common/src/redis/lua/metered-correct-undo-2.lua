--[[
  Takes back a correction whose transaction did not commit (its audit entry never says it happened). Untouched
  since (the revision the correction wrote): used goes back to the figure it replaced. Changed since (an eval or a
  report in between): only the correction's own difference is taken back, so what happened after it stays.

  Input:
    KEYS[1] the balance hash {org}:m:<member>   {u, r, e}
    KEYS[2] the organization's dirty set {org}:mdirty

    ARGV[1] the member (<subscriber>|<feature>|<period start ms>)
    ARGV[2] the figure the correction replaced (its `from`)
    ARGV[3] the figure it set (its `to`)
    ARGV[4] the revision it wrote

  Output: { code, used }
    code 0  restored: used is now `used`
    code 1  the balance is gone from Redis (nothing to take back)
]]
local rcall = redis.call

local current = rcall("HMGET", KEYS[1], "u", "r")
local used = tonumber(current[1])
local revision = tonumber(current[2])
if used == nil or revision == nil then
  return {1, 0}
end

local from = tonumber(ARGV[2])
local restored
if revision == tonumber(ARGV[4]) then
  restored = from
else
  restored = math.max(0, used + from - tonumber(ARGV[3]))
end
rcall("HSET", KEYS[1], "u", string.format("%d", restored), "r", string.format("%d", revision + 1))
rcall("SADD", KEYS[2], ARGV[1])
return {0, restored}
