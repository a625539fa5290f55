--[[
  The credits of a metered balance as the scripts take them (issue 35), prepended before metered-balance.fragment.lua
  at load time. A spec is text, lines joined by '\n' (gateway/src/metering/operation-credits.ts builds it):
    1 the credit-spent hash of (subscriber, feature) {credit id -> spent; 'ro:<id>' -> a rollover credit's record
      for the worker: '<amount>|<source period start>|<start>|<end>'}
    2 the dirty-set member that names it ('credit|<subscriber>|<feature>')
    3 the live credits' ids in spending order, joined by ' ' (ids hold no spaces: CREDIT_ID_PATTERN)
    4 their amounts in the same order, joined by ' ' ('-' = this period's rollover, field 'ro' of the balance)
    then, only when the grant rolls over from a previous period the subscription covered, six more lines:
    5 the previous period's member, 6 the limit then ('' = unlimited: nothing rolls over), 7 rollover max,
    8 the rollover credit's id, 9 the previous period's start ms, 10 this period's start ms
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

local function meteredCreditSpec(text)
  local spec = meteredCreditSpecs[text]
  if spec then
    return spec
  end
  local hashEnd = string.find(text, '\n', 1, true)
  local memberEnd = string.find(text, '\n', hashEnd + 1, true)
  local idsEnd = string.find(text, '\n', memberEnd + 1, true)
  local amountsEnd = string.find(text, '\n', idsEnd + 1, true) or #text + 1
  local ids = {}
  spec = {
    text = text,
    hash = string.sub(text, 1, hashEnd - 1),
    member = string.sub(text, hashEnd + 1, memberEnd - 1),
    ids = ids,
    count = meteredWords(text, memberEnd + 1, idsEnd - 1, ids, 0),
    amountsFrom = idsEnd + 1,
    amountsTo = amountsEnd - 1,
  }
  meteredCreditSpecs[text] = spec
  return spec
end

-- The credits' amounts in spending order, the period's rollover counting as `ro`.
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

-- Lines 5 to 10 of the spec as a list (nil: no rollover is made here).
local function meteredCreditRollover(spec)
  local text = spec.text
  if spec.amountsTo + 1 >= #text then
    return nil
  end
  local lines = spec.rollover
  if not lines then
    lines = {}
    local n, from = 0, spec.amountsTo + 2
    while true do
      local at = string.find(text, '\n', from, true)
      n = n + 1
      lines[n] = string.sub(text, from, at and at - 1)
      if not at then
        break
      end
      from = at + 1
    end
    spec.rollover = lines
  end
  return lines
end
