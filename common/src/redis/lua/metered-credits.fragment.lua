--[[
  The credits of a metered balance as the scripts take them (issue 35), prepended before metered-balance.fragment.lua
  at load time. A spec is text, lines joined by '\n' (gateway/src/metering/operation-credits.ts builds it):
    1 the owner, '<subscriber>|<feature>': the credit-spent hash of (subscriber, feature) is the balance prefix's
      '<prefix>:{<org>}:' then 'credit-spent:<owner>' (common/src/redis/keys.ts), {credit id -> spent; 'ro:<id>' ->
      a rollover credit's record for the worker: '<amount>|<source period start>|<start>|<end>'}, and the dirty-set
      member that names it is 'credit|<owner>'
    2 the live credits' ids in spending order, joined by ' ' (ids hold no spaces: CREDIT_ID_PATTERN)
    3 their amounts in the same order, joined by ' ' ('-' = this period's rollover, field 'ro' of the balance)
    then, only when the grant rolls over from a previous period the subscription covered, five more lines:
    4 the limit of the previous period ('' = unlimited: nothing rolls over), 5 rollover max, 6 the rollover credit's
    id, 7 the previous period's start ms, 8 this period's start ms
  The spec names no key: what the gateway sends (and the gate call's memory keeps) per consume is the ids and amounts
  and a short owner, not the organization's key prefix twice.
  A spec is parsed once per call, however many operations carry it (a subscriber's operations in one call share
  it), and only what an operation needs: the ids always (the spent figures are read for every answer), the amounts
  only to spend, the rollover lines only when the balance is created.
]]
local meteredCreditSpecs = {} -- spec text -> parsed, for this call

-- The words of text[from..to] split at single spaces, appended to list from its n + 1st place; returns the count.
-- string.find and string.sub: patterns (string.match, string.gmatch) cost this about twice as much Lua time.
local function meteredWords(text, from, to, list, n)
  while from <= to do
    local at = string.find(text, ' ', from, true)
    if not at or at > to then
      at = to + 1
    end
    n = n + 1
    list[n] = string.sub(text, from, at - 1)
    from = at + 1
  end
  return n
end

-- balancePrefix: the balances' key prefix '<prefix>:{<org>}:m:' the including script was given.
local function meteredCreditSpec(text, balancePrefix)
  local spec = meteredCreditSpecs[text]
  if spec then
    return spec
  end
  local ownerEnd = string.find(text, '\n', 1, true)
  local idsEnd = string.find(text, '\n', ownerEnd + 1, true)
  local amountsEnd = string.find(text, '\n', idsEnd + 1, true) or #text + 1
  local owner = string.sub(text, 1, ownerEnd - 1)
  local ids = {}
  spec = {
    text = text,
    owner = owner,
    hash = string.sub(balancePrefix, 1, -3) .. 'credit-spent:' .. owner,
    member = 'credit|' .. owner,
    ids = ids,
    count = meteredWords(text, ownerEnd + 1, idsEnd - 1, ids, 0),
    amountsFrom = idsEnd + 1,
    amountsTo = amountsEnd - 1,
  }
  meteredCreditSpecs[text] = spec
  return spec
end

local function meteredCreditAmounts(spec, ro)
  local words = spec.amountWords
  if not words then
    words = {}
    meteredWords(spec.text, spec.amountsFrom, spec.amountsTo, words, 0)
    spec.amountWords = words
  end
  local amounts = {}
  for i = 1, spec.count do
    amounts[i] = words[i] == '-' and ro or tonumber(words[i])
  end
  return amounts
end

-- The rollover as a list (nil: no rollover is made here): the previous period's balance member, then lines 4 to 8.
local function meteredCreditRollover(spec)
  local text = spec.text
  if spec.amountsTo + 1 >= #text then
    return nil
  end
  local lines = spec.rollover
  if not lines then
    lines = {}
    local n, from = 1, spec.amountsTo + 2
    while true do
      local at = string.find(text, '\n', from, true)
      n = n + 1
      lines[n] = string.sub(text, from, at and at - 1)
      if not at then
        break
      end
      from = at + 1
    end
    lines[1] = spec.owner .. '|' .. lines[5]
    spec.rollover = lines
  end
  return lines
end
