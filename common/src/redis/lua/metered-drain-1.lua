--[[
  One drain of an organization's dirty set, in one instant (admin/src/features/metered-usage/balance-scripts.ts,
  drainBalances): takes up to ARGV[2] members and reads what they name. One script call rather than a SPOP and a
  MULTI of one command per key: the worker then builds no command, and parses no hash reply into an object, per key.

  What a member names:
    '<subscriber>|<feature>|<period start>'            a balance
    'credit|<subscriber>|<feature>'                     the credit-spent hash of (subscriber, feature), named: its
                                                        figures go to the credits themselves (a write that moved spent
                                                        without a balance); it also names a balance when it reads as
                                                        one (subscriber 'credit', a feature key of digits)
    'credit|<subscriber>|<feature>|<period start>'      the balance and its owner's credit-spent hash, read together
    anything else                                       read as a balance (gone: nothing to persist)
  A balance that met credits (it holds k or ro) and whose owner no member named is read with its owner's hash too, and
  that hash's own member ('credit|<owner>') is taken out of the set here: Postgres must never hold a balance ahead of
  the spent figures of its credits. Each balance and each hash is read once, however many members named it.

  The keys it reads are not in KEYS: which balances and hashes they are is known only once the SPOP has taken their
  members. They are made from the prefixes given, all under the organization's hash tag, as the gateway's metered
  scripts make a balance's key from its member (Redis Cluster: one slot).

  KEYS[1]  the organization's dirty set
  ARGV[1]  the balances' key prefix '<prefix>:{<org>}:m:'
  ARGV[2]  how many members to take
  ARGV[3]  the credit-spent hashes' key prefix '<prefix>:{<org>}:credit-spent:'

  Returns {taken, balances, figures, owners, named, hashes, alsoTaken, remaining}:
    taken      the members taken out of the set by the SPOP
    balances   the balance members read, in the order taken
    figures    per balance six values: u, r, e, k, ro (nil: absent), then the 1-based place in owners of the hash
               read with it (0: none)
    owners     '<subscriber>|<feature>' of each credit-spent hash read: first those members named, then those of
               balances that met credits
    named      per owner: 1 when the SPOP took a 'credit|<owner>' member, 2 when this script took it out of the set for
               a balance that met credits, else 0 (only balances' credit members named the hash)
    hashes     per owner, its HGETALL (field, value, ...)
    alsoTaken  how many 'credit|<owner>' members were taken out of the set here
    remaining  the set's size afterwards
  A read that fails (a key of another type, a slot moved away mid-resharding) puts every member taken back, then
  fails the call: Redis does not undo a script's writes, and a member lost would leave its change out of Postgres.
]]
local rcall = redis.call
local taken = rcall('SPOP', KEYS[1], ARGV[2])
local balancePrefix, spentPrefix = ARGV[1], ARGV[3]

local balances, listed, balanceCount = {}, {}, 0
local function addBalance(member)
  if not listed[member] then
    listed[member] = true
    balanceCount = balanceCount + 1
    balances[balanceCount] = member
  end
end

local owners, named, ownerAt, ownerCount = {}, {}, {}, 0
-- balance member -> the place in owners of the hash its credit member named with it (the usual member of a balance
-- that met credits), so that the read below need not find the balance's owner again
local ownerOfBalance = {}
local function addOwner(owner, how)
  local at = ownerAt[owner]
  if not at then
    ownerCount = ownerCount + 1
    at = ownerCount
    owners[at], named[at], ownerAt[owner] = owner, 0, at
  end
  if how > named[at] then
    named[at] = how
  end
  return at
end

-- Plain finds of '|' (string.find with plain = true), not patterns: a pattern scans its member two or three times.
local find, sub = string.find, string.sub
for i = 1, #taken do
  local member = taken[i]
  if string.byte(member, 1) == 99 and sub(member, 1, 7) == 'credit|' then -- 99: 'c', no new string
    local first = find(member, '|', 8, true)
    local second = first and find(member, '|', first + 1, true)
    if first and not second then
      addOwner(sub(member, 8), 1)
      if first > 8 and find(member, '^%d+$', first + 1) then
        addBalance(member) -- also a balance: subscriber 'credit', a feature key of digits
      end
    elseif second and not find(member, '|', second + 1, true) and find(member, '^%d+$', second + 1) then
      local balance = sub(member, 8)
      addBalance(balance)
      ownerOfBalance[balance] = addOwner(sub(member, 8, second - 1), 0)
    else
      addBalance(member)
    end
  else
    addBalance(member)
  end
end

local ownersOfMembers = ownerCount
local alsoTaken = 0
local takenHere = {} -- the 'credit|<owner>' members the SREM below took
local figures, n = {}, 0
local hashes = {}

local function readTaken()
  for i = 1, balanceCount do
    local member = balances[i]
    local fields = rcall('HMGET', balancePrefix .. member, 'u', 'r', 'e', 'k', 'ro')
    local withHash = 0
    -- Whose balance it is matters only when a hash is read in this drain or the balance met credits.
    if fields[1] and fields[2] then
      withHash = ownerOfBalance[member] or 0
      if withHash == 0 and (ownerCount > 0 or fields[4] or fields[5]) then
        local owner = string.match(member, '^([^|]*|[^|]*)|')
        local at = owner and ownerAt[owner]
        if at and at <= ownersOfMembers then
          withHash = at
        elseif owner and (fields[4] or fields[5]) then
          if not at then
            at = addOwner(owner, 2)
            if rcall('SREM', KEYS[1], 'credit|' .. owner) == 1 then
              alsoTaken = alsoTaken + 1
              takenHere[alsoTaken] = 'credit|' .. owner
            end
          end
          withHash = at
        end
      end
    end
    figures[n + 1], figures[n + 2], figures[n + 3], figures[n + 4], figures[n + 5], figures[n + 6] =
      fields[1], fields[2], fields[3], fields[4], fields[5], withHash
    n = n + 6
  end

  for at = 1, ownerCount do
    hashes[at] = rcall('HGETALL', spentPrefix .. owners[at])
  end
end

local ok, failure = pcall(readTaken)
if not ok then
  for _, members in ipairs({taken, takenHere}) do
    for from = 1, #members, 1000 do -- unpack's stack is bounded (as meteredMarkDirty, metered-balance.fragment.lua)
      rcall('SADD', KEYS[1], unpack(members, from, math.min(from + 999, #members)))
    end
  end
  local reason = type(failure) == 'table' and failure.err or failure
  return redis.error_reply('drain failed, its members put back: ' .. tostring(reason))
end
return {taken, balances, figures, owners, named, hashes, alsoTaken, rcall('SCARD', KEYS[1])}
