--[[
  A correction of one balance (PUT /org/subscribers/{id}/usage/{feature}): used becomes the figure given, the
  revision moves past both copies (Redis and Postgres), and the member is marked dirty for the worker. Answers the
  figure it replaced, for the audit entry's from -> to. An equal figure changes nothing.

  Input:
    KEYS[1] the balance hash {org}:m:<member>   {u: used, r: revision, e: period end ms or ''}
    KEYS[2] the organization's dirty set {org}:mdirty

    ARGV[1] the member (<subscriber>|<feature>|<period start ms>)
    ARGV[2] used (integer >= 0)
    ARGV[3] period end (ms since the epoch; '' for reset "never")
    ARGV[4] when the balance expires (ms since the epoch; '' for never)
    ARGV[5] used as Postgres holds it ('' when it holds no row): the figure replaced when Redis has none
    ARGV[6] revision as Postgres holds it ('' when it holds no row)
    ARGV[7] the credit-spent hash of (subscriber, feature) ('' or absent: no credits; issue 35)
    ARGV[8] its dirty-set member ('credit|<subscriber>|<feature>')
    ARGV[9..] the ids of the live credits in spending order

  Credits keep what they spent, unless the figure drops below k (the usage credits covered): then k becomes the
  figure, and what it lost goes back to the credits in the reverse of the spending order.

  Output: { code, previous, revision }
    code 0  applied: used was `previous`, the balance is now at `revision`
    code 1  unchanged: used already was the figure given (nothing written)
]]
local rcall = redis.call

local current = rcall("HMGET", KEYS[1], "u", "r", "k")
local previous = tonumber(current[1])
local revision = tonumber(current[2]) or 0
local covered = tonumber(current[3]) or 0
local durableRevision = tonumber(ARGV[6]) or 0
if previous == nil then
  previous = tonumber(ARGV[5]) or 0
end
if previous == tonumber(ARGV[2]) then
  return {1, previous, revision}
end

if durableRevision > revision then
  revision = durableRevision
end
revision = revision + 1
rcall("HSET", KEYS[1], "u", ARGV[2], "r", string.format("%d", revision), "e", ARGV[3])
local used = tonumber(ARGV[2])
if covered > used then
  rcall("HSET", KEYS[1], "k", ARGV[2])
  local give = covered - used
  if ARGV[7] and ARGV[7] ~= "" and #ARGV >= 9 then
    local spent = rcall("HMGET", ARGV[7], unpack(ARGV, 9, #ARGV))
    local fields = {}
    for i = #ARGV - 8, 1, -1 do
      if give == 0 then
        break
      end
      local figure = tonumber(spent[i]) or 0
      local take = math.min(give, figure)
      if take > 0 then
        give = give - take
        fields[#fields + 1] = ARGV[8 + i]
        fields[#fields + 1] = string.format("%d", figure - take)
      end
    end
    if #fields > 0 then
      rcall("HSET", ARGV[7], unpack(fields))
      rcall("SADD", KEYS[2], ARGV[8])
    end
  end
end
if ARGV[4] == "" then
  rcall("PERSIST", KEYS[1])
else
  rcall("PEXPIREAT", KEYS[1], ARGV[4])
end
rcall("SADD", KEYS[2], ARGV[1])
return {0, previous, revision}
