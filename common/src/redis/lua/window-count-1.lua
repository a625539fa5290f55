--[[
  Counts one event (a failed console sign-in, a sign-up) in a window that opens at the first one. Time comes from
  the app (its clock), never from Redis TIME, so tests control it; the key expires with its window.

  KEYS[1]  counter hash   {count, since (epoch ms: when the window opened)}
  ARGV[1]  now (epoch ms)
  ARGV[2]  window (ms, > 0)

  Returns the events counted in the current window, this one included.
]]
local rcall = redis.call
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local since = tonumber(rcall('HGET', KEYS[1], 'since') or '')
local count
if since == nil or now - since >= window or now < since then
  since = now
  count = 1
  rcall('HSET', KEYS[1], 'since', ARGV[1], 'count', 1)
else
  count = rcall('HINCRBY', KEYS[1], 'count', 1)
end
rcall('PEXPIRE', KEYS[1], since + window - now)
return count
