--[[
  Takes back a correction whose transaction did not commit (its audit entry never says it happened): the
  correction's own difference, by the balance rule's delta (metered-balance.fragment.lua, prepended at load time),
  so what happened after it stays and the credits it spent or gave back are given back or spent again in the rule's
  order. Untouched since, that is exactly the figures before it.

  Input:
    KEYS[1] the balance hash {org}:m:<member>   {u, r, e, k, ro}
    KEYS[2] the organization's dirty set {org}:mdirty

    ARGV[1] the member (<subscriber>|<feature>|<period start ms>)
    ARGV[2] the figure the correction replaced (its `from`)
    ARGV[3] the figure it set (its `to`)
    ARGV[4] period end (ms; '' for never), ARGV[5] the balance's time to live (ms; '' for never)
    ARGV[6] the limit ('' = unlimited), ARGV[7] '1' when soft, ARGV[8] the balance's credits ('' = none)

  Output: { code, used }
    code 0  restored: used is now `used`
    code 1  the balance is gone from Redis (nothing to take back)
]]
local key, member = KEYS[1], ARGV[1]
if redis.call("EXISTS", key) == 0 then
  return {1, 0}
end
local _, used = meteredApply(string.sub(key, 1, #key - #member), "", KEYS[2], {
  kind = "d", member = member, amount = tonumber(ARGV[2]) - tonumber(ARGV[3]), limit = ARGV[6], soft = ARGV[7],
  periodEnd = ARGV[4], ttl = ARGV[5], idem = "", fingerprint = "", terms = "", buffer = false, credits = ARGV[8],
})
if type(used) == "string" then
  used = tonumber(string.match(used, "^%d+"))
end
return {0, used}
