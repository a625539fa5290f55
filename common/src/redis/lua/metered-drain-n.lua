--[[
  Takes balances out of an organization's dirty set for the worker to persist, and reads their figures in the
  same step: each member named is either still in the set or its figures are in this reply, never neither, so a
  change made after the reply marks the member dirty again and is persisted by a later drain. Workers that name
  the same member at once each get it only if their SREM removed it: no balance is handed out twice.

  Input (a variable number of keys, all under the organization's hash tag):
    KEYS[1]    the organization's dirty set {org}:mdirty
    KEYS[1+i]  the balance hash of the i-th member {org}:m:<member>   {u, r, e}

    ARGV[i]    the i-th member (<subscriber>|<feature>|<period start ms>)

  Output: { remaining, member, u, r, e, member, u, r, e, ... }
    remaining  members left in the dirty set after this call
    then, for each named member this call removed from the set, its used, revision and period end ('' when the
    balance is gone from Redis: expired, or lost with a Redis that came back empty; nothing to persist then)
]]
local rcall = redis.call

local reply = {0}
for i, member in ipairs(ARGV) do
  if rcall("SREM", KEYS[1], member) == 1 then
    local figures = rcall("HMGET", KEYS[1 + i], "u", "r", "e")
    reply[#reply + 1] = member
    reply[#reply + 1] = figures[1] or ""
    reply[#reply + 1] = figures[2] or ""
    reply[#reply + 1] = figures[3] or ""
  end
end
reply[1] = rcall("SCARD", KEYS[1])
return reply
