--[[
  Puts an organization's balances back after Redis came back without them (DESIGN.md §5), then marks it ready when
  told to (a gateway merges its figures first, and marks the organization ready once the other gateways had time to
  merge theirs).
  Each balance becomes the largest figure known: what Redis holds now (changes applied since another gateway
  refilled), what Postgres last persisted and what this gateway last saw. The figure's source gives the whole
  balance: used, what credits covered (k) and the rollover (ro) of one instant, never a mix. A balance raised here
  gets a revision past the persisted one and is marked dirty, so the worker persists the figure. Each credit's spent
  (issue 35) becomes the largest known likewise: a figure never lower than the truth, so nothing is spent twice.

  KEYS[1]  the organization's readiness marker
  KEYS[2]  the organization's dirty set
  ARGV[1]  balance key prefix ('<prefix>:{org}:m:')
  ARGV[2]  '1': mark the organization ready after the merge; '0': merge only
  ARGV[3]  n, the number of balances
  then 7 per balance: member, used, revision (0 = unknown), period end ms ('' = never), ttl ms ('' = none),
    covered (k), rollover (ro)
  then per credit-spent hash: its key, its dirty-set member, m, then m pairs: credit id, spent

  Returns the number of balances raised.
]]
local rcall = redis.call
local raised = 0
local at = 4
for _ = 1, tonumber(ARGV[3]) do
  local key = ARGV[1] .. ARGV[at]
  local used = tonumber(ARGV[at + 1])
  local revision = tonumber(ARGV[at + 2])
  local covered = tonumber(ARGV[at + 5])
  local rollover = tonumber(ARGV[at + 6])
  local current = rcall('HMGET', key, 'u', 'r', 'k', 'ro')
  local currentUsed = tonumber(current[1])
  local currentRevision = tonumber(current[2]) or 0
  if currentUsed == nil or currentUsed < used then
    local nextRevision = math.max(currentRevision, revision) + 1
    local fields = {'u', string.format('%d', used), 'r', string.format('%d', nextRevision), 'e', ARGV[at + 3]}
    -- A balance that never met credits keeps its two fields (the fragment reads a missing k as 0).
    if covered > 0 or current[3] then
      fields[#fields + 1] = 'k'
      fields[#fields + 1] = string.format('%d', covered)
    end
    if rollover > 0 or current[4] then
      fields[#fields + 1] = 'ro'
      fields[#fields + 1] = string.format('%d', rollover)
    end
    rcall('HSET', key, unpack(fields))
    if ARGV[at + 4] ~= '' then
      rcall('PEXPIRE', key, ARGV[at + 4])
    end
    rcall('SADD', KEYS[2], ARGV[at])
    raised = raised + 1
  elseif currentRevision < revision then
    rcall('HSET', key, 'r', string.format('%d', revision))
  end
  at = at + 7
end
while at <= #ARGV do
  local key, member, count = ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])
  at = at + 3
  local ids = {}
  for i = 1, count do
    ids[i] = ARGV[at + 2 * (i - 1)]
  end
  local current = rcall('HMGET', key, unpack(ids))
  local fields = {}
  for i = 1, count do
    local spent = tonumber(ARGV[at + 2 * i - 1])
    if (tonumber(current[i]) or -1) < spent then
      fields[#fields + 1] = ids[i]
      fields[#fields + 1] = string.format('%d', spent)
    end
  end
  if #fields > 0 then
    rcall('HSET', key, unpack(fields))
    rcall('SADD', KEYS[2], member)
  end
  at = at + 2 * count
end
if ARGV[2] == '1' then
  rcall('SET', KEYS[1], '1')
end
return raised
