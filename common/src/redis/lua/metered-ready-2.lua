--[[
  Marks an organization's balances ready at the end of a refill's gathering (metered-balances.ts), only while Redis
  still holds the gathering's start: a Redis that lost the organization again during the gathering (restarted empty)
  holds no start, or another gathering's, and none of this gateway's figures; marked ready, it would answer from
  nothing. The gateway then refills again at the next "not ready".

  KEYS[1]  the organization's readiness marker
  KEYS[2]  the organization's gathering start ({org}:mrefill)
  ARGV[1]  the gathering start as the gateway read it when the gathering began

  Returns 1 when marked ready, 0 when the gathering is not Redis's any more (nothing changed).
]]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], '1')
return 1
