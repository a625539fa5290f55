--[[
  Writes an organization's eval arrangement unless Redis already holds the same or a newer version, so the
  outbox relay, the reconciler, a gateway's on-demand publish and `entctl org arrangement` never regress it.
  When it writes, it also settles the current month's first_over_at against the new limit, as the gate script
  does on every eval: cleared while the count is under the limit (a raised or removed limit), set to now when a
  lowered limit puts a count already there at or over it. Without this a limit raised and lowered again before
  any eval brought back the old first_over_at, and with it a grace period that had already run out.

  KEYS[1]  arrangement hash   {v, limit ('' = unlimited), blocking ('1'/'0'), burst, plan ('' = none)}
  KEYS[2]  usage hash of the current UTC month   {count, first_over_at (ms)}; absent = no evals yet
  ARGV[1]  version (integer >= 1), or 0 = unversioned: written unconditionally (tests and tools that set one
           directly)
  ARGV[2]  limit   ARGV[3] blocking   ARGV[4] burst   ARGV[5] plan
  ARGV[6]  now (ms since the epoch, from the application's clock)
  ARGV[7]  usage time to live (ms): set when this creates KEYS[2] (a limit of 0 is reached with no eval at all)
  ARGV[8]  usage events per second (metered reports, usage-rate-2.lua)

  Returns 1 when written, 0 when the stored version was already >= ARGV[1].
]]
local rcall = redis.call
local incoming = tonumber(ARGV[1])
if incoming > 0 then
  local current = tonumber(rcall('HGET', KEYS[1], 'v') or '0') or 0
  if current >= incoming then
    return 0
  end
  rcall('HSET', KEYS[1], 'v', ARGV[1])
end
rcall('HSET', KEYS[1], 'limit', ARGV[2], 'blocking', ARGV[3], 'burst', ARGV[4], 'plan', ARGV[5], 'usage_eps', ARGV[8])

local usage = rcall('HMGET', KEYS[2], 'count', 'first_over_at')
local stored = tonumber(usage[1])
local count = stored or 0
local limit = tonumber(ARGV[2])
if limit == nil or count < limit then
  if usage[2] then
    rcall('HDEL', KEYS[2], 'first_over_at')
  end
elseif not usage[2] then
  rcall('HSET', KEYS[2], 'count', count, 'first_over_at', ARGV[6])
  if stored == nil then
    rcall('PEXPIRE', KEYS[2], ARGV[7])
  end
end
return 1
