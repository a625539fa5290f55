--[[
  The worker's drain of an organization's dirty set (admin/src/features/metered-usage/balance-scripts.ts): takes up to
  ARGV[1] members and reads what they name, all in one instant of Redis (one call, no MULTI of a command per member).

  KEYS[1]  the organization's dirty set
  ARGV[1]  how many members to take (SPOP count)
  ARGV[2]  the balance hash prefix ('<org>:m:'; a balance is prefix .. member)
  ARGV[3]  the credit-spent hash prefix ('<org>:credit-spent:'; a hash is prefix .. '<subscriber>|<feature>')

  A member is a balance ('<subscriber>|<feature>|<period start ms>'), a credit-spent hash ('credit|<subscriber>|
  <feature>'), or, when it can be read both ways (subscriber 'credit', a feature key of digits), both. The credit-spent
  hash of a (subscriber, feature) the drain took a member of is read when
    - its credit member was taken by this SPOP, or
    - its credit member is in the dirty set (one SMISMEMBER for the batch): it is taken too (SREM), and listed apart,
      to be put back with the rest should the write fail, or
    - a balance of it taken here has credits in play (k or ro not 0): reading it again costs nothing but Redis time.
  Every change of a hash marks its credit member dirty in the same script, so a hash whose member is not dirty holds
  what Postgres holds: a balance persisted without its hash is never persisted ahead of the spent figures (decisions.md,
  "The worker's drain: one script, credit-spent hashes only when dirty").

  Output, one flat array (nil never appears: a missing field is ''):
    remaining (members left), p, the p members popped,
    then per member popped 5 entries: u, r, e, k, ro of its balance ('-' and four '': a credit member only),
    h, then per hash read: '<subscriber>|<feature>', n, then n field/value pairs as 2n entries,
    x, the x credit members taken by SREM
]]
local rcall = redis.call
local find = string.find
local sub = string.sub
local dirtyKey = KEYS[1]
local balancePrefix = ARGV[2]
local creditPrefix = ARGV[3]
local popped = rcall('SPOP', dirtyKey, tonumber(ARGV[1]))
local count = #popped
if count == 0 then
  return {0, 0, 0, 0}
end

local reply = {0, count}
local n = 2
for i = 1, count do
  reply[n + i] = popped[i]
end
n = n + count

-- Owners ('<subscriber>|<feature>'): read[owner] true once listed in `wanted` (its hash is read), false while
-- undecided (listed in `undecided`).
local read = {}
local wanted = {}
local undecided = {}
local function want(owner)
  if not read[owner] then
    read[owner] = true
    wanted[#wanted + 1] = owner
  end
end
for i = 1, count do
  local member = popped[i]
  local first = find(member, '|', 1, true)
  local second = first and find(member, '|', first + 1, true)
  -- A credit member ('credit|<subscriber>|<feature>'): a balance's first bar is rarely the 7th byte, so most cost
  -- one comparison.
  local credit = first == 7 and second ~= nil and sub(member, 1, 7) == 'credit|'
    and not find(member, '|', second + 1, true)
  if credit then
    want(sub(member, first + 1))
  end
  if not credit or find(member, '^[^|]+|[^|]+|%d+$') then
    local figures = rcall('HMGET', balancePrefix .. member, 'u', 'r', 'e', 'k', 'ro')
    local k, ro = figures[4], figures[5]
    reply[n + 1] = figures[1] or ''
    reply[n + 2] = figures[2] or ''
    reply[n + 3] = figures[3] or ''
    reply[n + 4] = k or ''
    reply[n + 5] = ro or ''
    local owner = sub(member, 1, (second or 0) - 1)
    if (k and k ~= '0' and k ~= '') or (ro and ro ~= '0' and ro ~= '') then
      want(owner)
    elseif read[owner] == nil then
      read[owner] = false
      undecided[#undecided + 1] = owner
    end
  else
    reply[n + 1] = '-'
    reply[n + 2] = ''
    reply[n + 3] = ''
    reply[n + 4] = ''
    reply[n + 5] = ''
  end
  n = n + 5
end

-- Which undecided owners have their credit member dirty: one SMISMEMBER for 1,000 of them (a command per owner
-- costs Redis about as much as the balance's HMGET; unpack's stack is bounded).
local taken = {}
for from = 1, #undecided, 1000 do
  local to = math.min(from + 999, #undecided)
  local members = {}
  for j = from, to do
    members[j - from + 1] = 'credit|' .. undecided[j]
  end
  local dirty = rcall('SMISMEMBER', dirtyKey, unpack(members))
  for j = 1, #members do
    -- An owner wanted meanwhile (a later member of the batch) is read already.
    if dirty[j] == 1 and not read[undecided[from + j - 1]] then
      taken[#taken + 1] = members[j]
      want(undecided[from + j - 1])
    end
  end
end
for from = 1, #taken, 1000 do
  rcall('SREM', dirtyKey, unpack(taken, from, math.min(from + 999, #taken)))
end

local hashesAt = n + 1
local hashes = 0
n = n + 1
for _, owner in ipairs(wanted) do
  local fields = rcall('HGETALL', creditPrefix .. owner)
  if #fields > 0 then
    hashes = hashes + 1
    reply[n + 1] = owner
    reply[n + 2] = #fields / 2
    n = n + 2
    for j = 1, #fields do
      reply[n + j] = fields[j]
    end
    n = n + #fields
  end
end
reply[hashesAt] = hashes

reply[n + 1] = #taken
n = n + 1
for j = 1, #taken do
  reply[n + j] = taken[j]
end
reply[1] = rcall('SCARD', dirtyKey)
return reply
