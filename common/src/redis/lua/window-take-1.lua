--[[
  Takes one place in a window that opens at its first taker, unless `limit` places are taken in it already (console
  sign-ins, sign-ups). The check and the count are one step: read first and counted after the work, 100 parallel
  sign-in guesses all passed a limit of 5. Time comes from the app (its clock), never from Redis TIME, so tests
  control it; the key expires with its window.

  KEYS[1]  counter hash   {count, since (epoch ms: when the window opened)}
  ARGV[1]  now (epoch ms)
  ARGV[2]  window (ms, > 0)
  ARGV[3]  limit: places per window (>= 0)

  Returns 0 when a place was taken, else the milliseconds until the window closes (> 0); a refusal takes nothing.
]]
local rcall = redis.call
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local stored = rcall('HMGET', KEYS[1], 'count', 'since')
local since = tonumber(stored[2] or '')
if since == nil or now - since >= window or now < since then
  if limit < 1 then
    return window
  end
  rcall('HSET', KEYS[1], 'since', ARGV[1], 'count', 1)
  rcall('PEXPIRE', KEYS[1], window)
  return 0
end
if (tonumber(stored[1] or '') or 0) >= limit then
  return since + window - now
end
rcall('HINCRBY', KEYS[1], 'count', 1)
return 0
