--[[
  A correction of one balance (PUT /org/subscribers/{id}/usage/{feature}): used becomes the figure given, by the
  balance rule's `set` (metered-balance.fragment.lua, prepended at load time), so a correction spends and gives back
  as a report's set does: a raise spends the allowance, then the credits in spending order (overage beyond them); a
  drop gives back to the credits last spent first, then to the allowance. The revision moves past both copies (Redis
  and Postgres), and the member is marked dirty for the worker. Answers the figure it replaced, for the audit entry's
  from -> to. An equal figure changes nothing.

  Input:
    KEYS[1] the balance hash {org}:m:<member>   {u: used, r: revision, e: period end ms or '', k, ro}
    KEYS[2] the organization's dirty set {org}:mdirty

    ARGV[1] the member (<subscriber>|<feature>|<period start ms>)
    ARGV[2] used (integer >= 0)
    ARGV[3] used as Postgres holds it ('' when it holds no row): the figure replaced when Redis has none
    ARGV[4] revision as Postgres holds it ('' when it holds no row)
    then the balance's terms, as metered-correct-undo-2.lua takes them after its own:
    ARGV[5] period end (ms since the epoch; '' for reset "never")
    ARGV[6] how long the balance lives after a change (ms; '' for never)
    ARGV[7] the limit ('' = unlimited)
    ARGV[8] '1' when the limit is soft
    ARGV[9] the balance's credits, as metered-credits.fragment.lua takes them ('' = none)

  Output: { code, previous, revision }
    code 0  applied: used was `previous`, the balance is now at `revision`
    code 1  unchanged: used already was the figure given (nothing written)
]]
local rcall = redis.call
local key, member = KEYS[1], ARGV[1]

local current = rcall("HMGET", key, "u", "r")
local previous = tonumber(current[1])
local revision = tonumber(current[2]) or 0
local durableRevision = tonumber(ARGV[4]) or 0
local target = tonumber(ARGV[2])
if previous == nil then
  previous = tonumber(ARGV[3]) or 0
end
if previous == target then
  return {1, previous, revision}
end

if current[1] == false and ARGV[3] ~= "" then
  -- Redis lost the balance and Postgres holds it (before the refill): the correction starts from Postgres's figure.
  rcall("HSET", key, "u", ARGV[3], "r", string.format("%d", durableRevision), "e", ARGV[5])
  if ARGV[6] ~= "" then
    rcall("PEXPIRE", key, ARGV[6])
  end
elseif durableRevision > revision then
  rcall("HSET", key, "r", string.format("%d", durableRevision))
end

meteredApply(string.sub(key, 1, #key - #member), "", KEYS[2], {
  kind = "s", member = member, amount = target, limit = ARGV[7], soft = ARGV[8], periodEnd = ARGV[5],
  ttl = ARGV[6], idem = "", fingerprint = "", terms = "", buffer = false, credits = ARGV[9],
})
return {0, previous, tonumber(rcall("HGET", key, "r"))}
