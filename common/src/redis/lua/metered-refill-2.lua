--[[
  Puts an organization's balances back after Redis came back without them (DESIGN.md §5), then marks it ready.
  Each balance becomes the largest figure known: what Redis holds now (changes applied since another gateway
  refilled), what Postgres last persisted and what this gateway last saw. A balance raised here gets a revision
  past the persisted one and is marked dirty, so the worker persists the figure.

  KEYS[1]  the organization's readiness marker
  KEYS[2]  the organization's dirty set
  ARGV[1]  balance key prefix ('<prefix>:{org}:m:')
  then 5 per balance: member, used, revision (0 = unknown), period end ms ('' = never), ttl ms ('' = none)

  Returns the number of balances raised.
]]
local raised = 0
for i = 2, #ARGV - 1, 5 do
  local key = ARGV[1] .. ARGV[i]
  local used = tonumber(ARGV[i + 1])
  local revision = tonumber(ARGV[i + 2])
  local current = redis.call('HMGET', key, 'u', 'r')
  local currentUsed = tonumber(current[1])
  local currentRevision = tonumber(current[2]) or 0
  if currentUsed == nil or currentUsed < used then
    local nextRevision = math.max(currentRevision, revision) + 1
    redis.call('HSET', key, 'u', string.format('%d', used), 'r', string.format('%d', nextRevision), 'e', ARGV[i + 3])
    if ARGV[i + 4] ~= '' then
      redis.call('PEXPIRE', key, ARGV[i + 4])
    end
    redis.call('SADD', KEYS[2], ARGV[i])
    raised = raised + 1
  elseif currentRevision < revision then
    redis.call('HSET', key, 'r', string.format('%d', revision))
  end
end
redis.call('SET', KEYS[1], '1')
return raised
