--[[
  Writes an organization's eval arrangement unless Redis already holds the same or a newer version, so the
  outbox relay, the reconciler, a gateway's on-demand publish and `entctl org arrangement` never regress it.

  KEYS[1]  arrangement hash   {v, limit ('' = unlimited), blocking ('1'/'0'), burst, plan ('' = none)}
  ARGV[1]  version (integer >= 1), or 0 = unversioned: written unconditionally (tests and tools that set one
           directly)
  ARGV[2]  limit   ARGV[3] blocking   ARGV[4] burst   ARGV[5] plan

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
rcall('HSET', KEYS[1], 'limit', ARGV[2], 'blocking', ARGV[3], 'burst', ARGV[4], 'plan', ARGV[5])
return 1
