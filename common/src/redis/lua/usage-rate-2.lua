--[[
  The per-organization rate of usage events (reports and batch events, DESIGN.md §5): a one-second window that
  opens at its first event. A request's events are taken whole or not at all. Time comes from the app's clock.
  Reports are not evals: neither the burst nor the monthly block applies to them, only this rate.

  KEYS[1]  arrangement hash: its `usage_eps` field (events per second; absent = ARGV[3])
  KEYS[2]  window hash {count, since (epoch ms)}
  ARGV[1]  now (epoch ms)
  ARGV[2]  events in this request (>= 1)
  ARGV[3]  the default rate

  Returns 0 when taken, the milliseconds until the window closes (> 0) when the window is too full, or minus the
  rate (< 0) when the request holds more events than the rate: no window can ever take it.
]]
local now = tonumber(ARGV[1])
local events = tonumber(ARGV[2])
local limit = tonumber(redis.call('HGET', KEYS[1], 'usage_eps')) or tonumber(ARGV[3])
if events > limit then
  return -limit
end
local stored = redis.call('HMGET', KEYS[2], 'count', 'since')
local since = tonumber(stored[2])
local count = tonumber(stored[1]) or 0
if since == nil or now - since >= 1000 or now < since then
  since = now
  count = 0
end
if count + events > limit then
  return math.max(1, since + 1000 - now)
end
redis.call('HSET', KEYS[2], 'count', count + events, 'since', since)
redis.call('PEXPIRE', KEYS[2], 2000)
return 0
