--[[
  The credits of a metered balance as the scripts take them (issue 35), prepended before metered-balance.fragment.lua
  at load time. A spec is text, lines joined by '\n' (gateway/src/metering/operation-credits.ts builds it):
    1 the owner, '<subscriber>|<feature>': the credit-spent hash of (subscriber, feature) is the balance prefix's
      '<prefix>:{<org>}:' then 'credit-spent:<owner>' (common/src/redis/keys.ts), {credit id -> spent; 'ro:<id>' ->
      a rollover credit's record for the worker: '<amount>|<source period start>|<start>|<end>'}; a change that
      moves it is marked dirty as 'credit|<balance member>', the balance and this hash together
    2 how many live credits there are
    3 their ids in spending order, joined by ' ' (ids hold no spaces: CREDIT_ID_PATTERN)
    4 their amounts in the same order, joined by ' ' ('-' = this period's rollover, field 'ro' of the balance)
    then, only when the grant rolls over from a previous period the subscription covered, five more lines:
    5 the limit of the previous period ('' = unlimited: nothing rolls over), 6 rollover max, 7 the rollover credit's
    id, 8 the previous period's start ms, 9 this period's start ms
  The spec names no key: what the gateway sends (and the gate call's memory keeps) per consume is the ids and amounts
  and a short owner, not the organization's key prefix twice.
  A spec is parsed once per call, however many operations carry it (a subscriber's operations in one call share
  it), and only what an operation needs: the ids when the credit-spent hash may exist (the spent figures are read for
  every answer; a hash that does not exist holds none) or a credit is spent, the amounts only to spend and only as
  far as spent, the rollover lines only when the balance is created.
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

-- The credit-spent hashes' key prefix '<prefix>:{<org>}:credit-spent:', made once per call from the balance prefix.
local meteredSpentPrefix, meteredSpentPrefixOf = nil, nil

-- balancePrefix: the balances' key prefix '<prefix>:{<org>}:m:' the including script was given.
local function meteredCreditSpec(text, balancePrefix)
  local spec = meteredCreditSpecs[text]
  if spec then
    return spec
  end
  if balancePrefix ~= meteredSpentPrefixOf then
    meteredSpentPrefix, meteredSpentPrefixOf = string.sub(balancePrefix, 1, -3) .. 'credit-spent:', balancePrefix
  end
  -- The owner, the count and where the ids start in one match (a fifth less Lua time than finding and cutting them).
  local owner, count, idsFrom = string.match(text, '^([^\n]*)\n(%d+)\n()')
  local idsEnd = string.find(text, '\n', idsFrom, true)
  local amountsEnd = string.find(text, '\n', idsEnd + 1, true) or #text + 1
  -- Every field the call may set later is made here (false: not yet): a table grown field by field is rehashed.
  spec = {
    text = text,
    owner = owner,
    hash = meteredSpentPrefix .. owner,
    count = tonumber(count),
    idsFrom = idsFrom,
    idsTo = idsEnd - 1,
    amountsTo = amountsEnd - 1,
    ids = false,
    amounts = false,
    amountsRead = 0,
    amountsAt = idsEnd + 1,
    rollover = false,
  }
  meteredCreditSpecs[text] = spec
  return spec
end

-- count -> the pattern matching that many ids, for this call. One string.match takes them all (about half the Lua time
-- of finding and cutting them one by one); Lua allows 32 captures, so more ids are split word by word.
local meteredIdPatterns = {}

-- The credits' ids in spending order (split once per call, when first asked for).
local function meteredCreditIds(spec)
  local ids = spec.ids
  if ids then
    return ids
  end
  local count = spec.count
  if count >= 1 and count <= 32 then
    local pattern = meteredIdPatterns[count]
    if not pattern then
      pattern = '^([^ \n]+)' .. string.rep(' ([^ \n]+)', count - 1)
      meteredIdPatterns[count] = pattern
    end
    ids = {string.match(spec.text, pattern, spec.idsFrom)}
  end
  if not ids or #ids ~= count then
    ids = {}
    meteredWords(spec.text, spec.idsFrom, spec.idsTo, ids, 0)
  end
  spec.ids = ids
  return ids
end

-- What each credit has spent, in spending order, as the hash holds it: a string, or false or nil for none (0). The
-- figures are read as numbers only as far as the rule reaches (meteredSpentAt); the answer's text repeats the others
-- as stored. A credit-spent hash that does not exist (no credit of the subscriber's feature was ever spent, the common
-- case while the allowance lasts) is one EXISTS: splitting the ids to ask for each cost several times that. That
-- check is left out when the balance has covered usage (`covered` not 0: a spent figure moved with it, so the hash is
-- there; and were it not, the HMGET of a missing hash reads none either). A hash the call buffers is read through the
-- buffer.
local function meteredCreditSpent(spec, buffer, covered)
  if covered == 0 and not (meteredHashes and meteredHashes[spec.hash]) and redis.call('EXISTS', spec.hash) == 0 then
    return {}
  end
  return meteredHashRead(buffer, spec.hash, unpack(meteredCreditIds(spec)))
end

-- The i-th credit's spent as a number, kept so in the list once read.
local function meteredSpentAt(spent, i)
  local figure = spent[i]
  if type(figure) ~= 'number' then
    figure = figure and tonumber(figure) or 0
    spent[i] = figure
  end
  return figure
end

-- The amount of the i-th credit in spending order, the period's rollover counting as `ro`. The amounts are read as
-- numbers from the text only as far as asked, and kept for the call: a consume beyond the allowance mostly reaches
-- the first credit with something left, so it reads one amount, not all of them.
local function meteredCreditAmount(spec, i, ro)
  local amounts = spec.amounts
  if not amounts then
    amounts = {}
    spec.amounts = amounts
  end
  local text, to = spec.text, spec.amountsTo
  while spec.amountsRead < i do
    local from = spec.amountsAt
    local at = string.find(text, ' ', from, true)
    if not at or at > to then
      at = to + 1
    end
    local n = spec.amountsRead + 1
    amounts[n] = tonumber(string.sub(text, from, at - 1)) or false -- '-': the rollover
    spec.amountsRead, spec.amountsAt = n, at + 1
  end
  return amounts[i] or ro
end

-- The rollover as a list (nil: no rollover is made here): the previous period's balance member, then lines 5 to 9.
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
