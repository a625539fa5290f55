--[[
  Gives back a place taken with window-take-1.lua for an attempt that turned out not to count (a correct password,
  a check that never reached a verdict). Nothing once the window has closed (its key expired with it).

  KEYS[1]  counter hash   {count, since}

  Returns the places still taken.
]]
local count = tonumber(redis.call('HGET', KEYS[1], 'count') or '')
if count == nil or count < 1 then
  return 0
end
return redis.call('HINCRBY', KEYS[1], 'count', -1)
