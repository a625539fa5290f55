--[[
  Metered balances (DESIGN.md §5), shared by eval-gate-batch-8.lua and usage-apply-6.lua: commands.ts prepends this
  file to both at load time, so a consume, a report and a read follow one rule wherever they run. Its hash reads and
  writes go through metered-store.fragment.lua (prepended before it): straight to Redis, or buffered for a batch.

  A balance is the hash `<balance prefix><member>`: u (used), r (revision, +1 per change), e (period end ms, '' for
  "never"). Every change adds the member to the organization's dirty set, for the worker ('credit|' .. member once
  the balance has met credits: the worker then reads its credit-spent hash with it): at once when dirtyKey is
  given, else (dirtyKey false) in one SADD when the including script calls meteredMarkDirty(dirtyKey) at its end
  (each redis.call costs about as much as the rule around it). A change is one HMGET and one HSET (the revision
  computed here); the expiry (period end + 35 days on the app's clock, the same instant at every change of a
  period) is set only when the hash is made or its period end changes.

  meteredApply(balancePrefix, idempotencyPrefix, dirtyKey, op) with op a table:
    op.kind       'r' read, 'c' consume, 'd' delta (used never below 0), 's' set
    op.member     '<subscriber>|<feature>|<period start ms>'
    op.amount     number (consume: > 0; delta: != 0; set: >= 0; read: ignored)
    op.limit      '' = unlimited, else the limit the gateway resolved
    op.soft       '1' when the limit is soft
    op.periodEnd  period end ms, '' for "never"
    op.ttl        ms the balance lives after a change (period end + 35 days, from the app's clock); '' = forever
    op.idem       '' or the idempotency key (24 h): first answer replayed, another fingerprint refused
    op.fingerprint, op.terms   what the key's record holds besides the answer (terms: how the gateway renders it)
    op.buffer     true: other operations of the call touch the same balance, so its hashes are kept in the call's
                  memory until meteredFlush() (metered-store.fragment.lua); nil or false: straight to Redis
    op.credits    '' (no credits and no rollover: nothing more is read or written), or the credits of the balance
                  (issue 35) as metered-credits.fragment.lua describes them (prepended before this file)
  The balance also holds k (usage of the period that credits covered: the allowance used is u - k) and ro (the
  period's rollover amount, set once when a call first creates the hash). A positive change spends the allowance
  (limit - (u - k)) first, then the credits in the order given; a hard consume that does not fit both is refused
  whole, anything else beyond them is overage. Unlimited: credits are not touched. A negative change gives back in
  the reverse order: overage first, then what credits covered (to the credits in the reverse order), then the
  allowance.
  Returns status, value:
    0, used   applied (a read, a consume that fitted, a delta, a set)
    1, used   a consume refused (did not fit a hard limit); nothing changed
    5, text   an idempotent replay: the first answer as '<status>\n<used>\n<terms>'
    6, 0      the idempotency key holds another request's fingerprint; nothing changed
  With credits (op.credits not '', or k not 0) the value of 0 and 1 is the text of the figures used, k, ro and the
  spent of each credit given, in order, the trailing zeros left out, joined by spaces (not a table: the reply stays
  one flat array); when k, ro and every spent figure are 0 it is the integer used, as without credits (the gateway
  reads an operation with credits answered so as all of them 0). A replay's <used> is always that text ('used 0 0'
  when all are 0), whichever gateway version reads the record.
  Versions and readiness are checked by the including script, before calling this.
]]
local METERED_IDEMPOTENCY_MS = 86400000

-- What the last meteredApply that reached the balance rule changed used by (after - before; 0 when refused or
-- unchanged): the usage call remembers it so that a failed call can be given back (usage-apply-6.lua).
local meteredApplied = 0

-- '%d', not tostring or a number argument: Lua's '%.14g' (and Redis 7.2's conversion of numbers) write exponents.
local meteredFormat = string.format

local function meteredInteger(n)
  return meteredFormat('%d', n)
end

-- The members changed by calls given no dirty key, for meteredMarkDirty.
local meteredDirtyMembers = {}

local function meteredDirty(dirtyKey, member)
  if dirtyKey then
    redis.call('SADD', dirtyKey, member)
  else
    meteredDirtyMembers[#meteredDirtyMembers + 1] = member
  end
end

-- Adds the members changed since the last call to the dirty set, 1,000 a command (unpack's stack is bounded).
local function meteredMarkDirty(dirtyKey)
  for from = 1, #meteredDirtyMembers, 1000 do
    redis.call('SADD', dirtyKey, unpack(meteredDirtyMembers, from, math.min(from + 999, #meteredDirtyMembers)))
  end
  meteredDirtyMembers = {}
end

-- A period's first touch with a rollover grant: the hash is created here with ro = min(max, the previous period's
-- unused allowance). Lua creates a hash once, so the credit is made once, however many calls race to the boundary.
local function meteredRollover(dirtyKey, balancePrefix, key, op, spec, rollover)
  local ro = 0
  local previousLimit = tonumber(rollover[2])
  if previousLimit ~= nil then
    local previous = meteredHashRead(op.buffer, balancePrefix .. rollover[1], 'u', 'k')
    local unused = previousLimit - ((tonumber(previous[1]) or 0) - (tonumber(previous[2]) or 0))
    ro = math.max(0, math.min(tonumber(rollover[3]), unused))
  end
  -- ro only when something rolled over: an absent ro reads as 0 everywhere, and a balance holding neither k nor ro is
  -- drained without its credit-spent hash (metered-drain-1.lua), as the refill leaves one.
  if ro > 0 then
    meteredHashWrite(op.buffer, key, 'u', '0', 'ro', meteredInteger(ro), 'r', '1', 'e', op.periodEnd)
  else
    meteredHashWrite(op.buffer, key, 'u', '0', 'r', '1', 'e', op.periodEnd)
  end
  if op.ttl ~= '' then
    meteredHashExpire(key, op.ttl)
  end
  if ro > 0 then
    meteredHashWrite(op.buffer, spec.hash, 'ro:' .. rollover[4],
      meteredInteger(ro) .. '|' .. rollover[5] .. '|' .. rollover[6] .. '|' .. op.periodEnd)
    meteredDirty(dirtyKey, 'credit|' .. op.member)
  else
    meteredDirty(dirtyKey, op.member)
  end
  return ro
end

-- One HSET of a balance's change, its fields as arguments (no table): u and r always, k and e (false: unchanged)
-- only when they moved.
local function meteredWriteBalance(buffer, key, used, revision, covered, periodEnd)
  if covered then
    if periodEnd then
      return meteredHashWrite(buffer, key, 'u', used, 'r', revision, 'k', covered, 'e', periodEnd)
    end
    return meteredHashWrite(buffer, key, 'u', used, 'r', revision, 'k', covered)
  end
  if periodEnd then
    return meteredHashWrite(buffer, key, 'u', used, 'r', revision, 'e', periodEnd)
  end
  return meteredHashWrite(buffer, key, 'u', used, 'r', revision)
end

local function meteredApply(balancePrefix, idempotencyPrefix, dirtyKey, op)
  local idemKey = nil
  if op.idem ~= '' and op.kind ~= 'r' then
    idemKey = idempotencyPrefix .. op.idem
    local stored = redis.call('GET', idemKey)
    if stored then
      local newline = string.find(stored, '\n', 1, true)
      if string.sub(stored, 1, newline - 1) ~= op.fingerprint then
        return 6, 0
      end
      return 5, string.sub(stored, newline + 1)
    end
  end
  local key = balancePrefix .. op.member
  if op.kind == 'r' and op.credits == '' then
    local read = meteredHashRead(op.buffer, key, 'u', 'k')
    if (tonumber(read[2]) or 0) == 0 then
      return 0, tonumber(read[1]) or 0
    end
  end
  -- Each field asked for costs Redis about as much as a fifth of the HMGET: ro only where credits are spent.
  local withCredits = op.credits ~= ''
  local state
  if withCredits then
    state = meteredHashRead(op.buffer, key, 'u', 'k', 'r', 'e', 'ro')
  else
    state = meteredHashRead(op.buffer, key, 'u', 'k', 'r', 'e')
  end
  local used = tonumber(state[1]) or 0
  local covered = tonumber(state[2]) or 0
  local revision = tonumber(state[3]) or 0
  local periodEnd = state[4]
  local spec = nil
  local ro = 0
  local count = 0
  local spent = nil
  if withCredits then
    spec = meteredCreditSpec(op.credits, balancePrefix)
    ro = tonumber(state[5]) or 0
    if state[1] == false then
      local rollover = meteredCreditRollover(spec)
      if rollover and rollover[1] ~= '' then
        ro = meteredRollover(dirtyKey, balancePrefix, key, op, spec, rollover)
        revision, periodEnd = 1, op.periodEnd
      end
    end
    count = spec.count
    if count > 0 then
      spent = meteredCreditSpent(spec, op.buffer, covered)
    end
  end

  local change = 0
  if op.kind == 'c' or op.kind == 'd' then
    change = op.amount
  elseif op.kind == 's' then
    change = op.amount - used
  end
  local status = 0
  local after = used
  local afterCovered = covered
  -- The credits whose spent moved: mostly one (changedAt), the others (index -> true) only when a change spans several,
  -- so the usual spend builds no table.
  local changedAt, changedMore = nil, nil
  if change > 0 then
    local limit = tonumber(op.limit)
    local rest = change
    local takeAt, take, takes = nil, 0, nil -- the last credit taken from and its take; the earlier ones' (index -> take)
    if limit ~= nil then
      local allowanceLeft = limit - (used - covered)
      if allowanceLeft > 0 then
        rest = rest - math.min(rest, allowanceLeft)
      end
      if rest > 0 and count > 0 then
        for i = 1, count do
          local left = meteredCreditAmount(spec, i, ro) - meteredSpentAt(spent, i)
          if left > 0 then
            if takeAt then
              takes = takes or {}
              takes[takeAt] = take
            end
            takeAt, take = i, math.min(rest, left)
            rest = rest - take
            if rest == 0 then
              break
            end
          end
        end
      end
    end
    if op.kind == 'c' and limit ~= nil and op.soft ~= '1' and rest > 0 then
      status = 1
    else
      after = used + change
      if takeAt then
        changedAt, changedMore = takeAt, takes
        spent[takeAt] = spent[takeAt] + take
        afterCovered = afterCovered + take
        if takes then
          for i, earlier in pairs(takes) do
            spent[i] = spent[i] + earlier
            afterCovered = afterCovered + earlier
          end
        end
      end
    end
  elseif change < 0 then
    local back = math.min(-change, used)
    after = used - back
    -- In the reverse of the spending order: overage first (usage beyond the allowance and the credits, spent last),
    -- then the credits, last spent first, then the allowance.
    local limit = tonumber(op.limit)
    local overage = limit and math.max(0, used - covered - limit) or 0
    local give = math.min(math.max(0, back - overage), covered)
    local absorbed = 0
    for i = count, 1, -1 do
      if give == 0 then
        break
      end
      local take = math.min(give, meteredSpentAt(spent, i))
      if take > 0 then
        if changedAt then
          changedMore = changedMore or {}
          changedMore[i] = true
        else
          changedAt = i
        end
        spent[i] = spent[i] - take
        give = give - take
        absorbed = absorbed + take
      end
    end
    afterCovered = math.min(covered - absorbed, after)
  end

  meteredApplied = after - used
  if after ~= used or afterCovered ~= covered then
    local newEnd = periodEnd ~= op.periodEnd
    meteredWriteBalance(op.buffer, key, meteredFormat('%d', after), meteredFormat('%d', revision + 1),
      afterCovered ~= covered and meteredFormat('%d', afterCovered), newEnd and op.periodEnd)
    if newEnd and op.ttl ~= '' then
      meteredHashExpire(key, op.ttl)
    end
    -- A balance that met credits is named with its credit-spent hash ('credit|' .. member): the worker reads both in
    -- one step, and the spent figures this change moved (never without moving k) need no member of their own.
    if covered ~= 0 or afterCovered ~= 0 or ro ~= 0 then
      meteredDirty(dirtyKey, 'credit|' .. op.member)
    else
      meteredDirty(dirtyKey, op.member)
    end
  end
  if changedAt then
    local ids = meteredCreditIds(spec)
    if changedMore then
      local fields = {ids[changedAt], meteredInteger(spent[changedAt])}
      for i in pairs(changedMore) do
        fields[#fields + 1] = ids[i]
        fields[#fields + 1] = meteredInteger(spent[i])
      end
      meteredHashWrite(op.buffer, spec.hash, unpack(fields))
    else
      meteredHashWrite(op.buffer, spec.hash, ids[changedAt], meteredInteger(spent[changedAt]))
    end
  end

  local value = after
  -- Trailing credits that spent nothing are left out (the gateway reads a missing figure as 0): credits are spent in
  -- order, so a reply mostly carries the few spent ones, and none while only the allowance is used. A figure not
  -- read as a number is written as the hash holds it (an integer's text: the gateway reads the same number).
  local last = count
  while last > 0 do
    local figure = spent[last]
    if figure and figure ~= 0 and figure ~= '0' then
      break
    end
    last = last - 1
  end
  -- Every figure 0 (a consume of the allowance, no credit ever spent) keeps the integer, as without credits: a text
  -- costs Redis a string and a bulk reply, and the gateway a parse, per consume of a subscriber holding credits.
  if last > 0 or afterCovered ~= 0 or ro ~= 0 then
    if last == 1 and type(spent[1]) == 'number' then
      value = meteredFormat('%d %d %d %d', after, afterCovered, ro, spent[1]) -- the usual spend: one format
    else
      value = meteredFormat('%d %d %d', after, afterCovered, ro)
      for i = 1, last do
        local figure = spent[i]
        if type(figure) == 'number' then
          figure = meteredFormat('%d', figure)
        elseif not figure then
          figure = '0'
        end
        value = value .. ' ' .. figure
      end
    end
  end
  if idemKey then
    local recorded = value
    if recorded == after then
      -- With credits, the figures' text even when all are 0: records live 24 h and any gateway replays them, also
      -- one of the version before the integer answer, which reads an integer record as "no credits listed" (this
      -- version reads either). Once every gateway runs this version and a day has passed, '%d' alone will do.
      recorded = meteredFormat(spec and '%d 0 0' or '%d', after)
    end
    redis.call('SET', idemKey, op.fingerprint .. '\n' .. status .. '\n' .. recorded .. '\n' .. op.terms,
      'PX', METERED_IDEMPOTENCY_MS)
  end
  return status, value
end

-- Statuses the including scripts answer without calling meteredApply.
local METERED_STALE = 2
local METERED_NOT_READY = 3
local METERED_SKIPPED = 4
