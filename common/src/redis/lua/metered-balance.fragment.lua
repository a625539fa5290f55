--[[
  Metered balances (DESIGN.md §5), shared by eval-gate-batch-8.lua and usage-apply-4.lua: commands.ts prepends this
  file to both at load time, so a consume, a report and a read follow one rule wherever they run.

  A balance is the hash `<balance prefix><member>`: u (used), r (revision, +1 per change), e (period end ms, '' for
  "never"). Every change adds the member to the organization's dirty set, for the worker.

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
  Returns status, value:
    0, used   applied (a read, a consume that fitted, a delta, a set)
    1, used   a consume refused (did not fit a hard limit); nothing changed
    5, text   an idempotent replay: the first answer as '<status>\n<used>\n<terms>'
    6, 0      the idempotency key holds another request's fingerprint; nothing changed
  Versions and readiness are checked by the including script, before calling this.
]]
local METERED_IDEMPOTENCY_MS = 86400000

local function meteredInteger(n)
  return string.format('%d', n)
end

-- One metered operation as both scripts receive it: thirteen arguments from ARGV[base + 1], the same layout in the
-- gate call and the usage call (ARGV[base + 1], + 9 and + 10 are read by each script for its own checks).
local function meteredOperationAt(base)
  return {
    kind = ARGV[base + 2],
    member = ARGV[base + 3],
    amount = tonumber(ARGV[base + 4]),
    limit = ARGV[base + 5],
    soft = ARGV[base + 6],
    periodEnd = ARGV[base + 7],
    ttl = ARGV[base + 8],
    idem = ARGV[base + 11],
    fingerprint = ARGV[base + 12],
    terms = ARGV[base + 13],
  }
end

-- meteredApply without marking the balance dirty: also answers whether it changed, so a script applying many
-- operations adds their members to the dirty set with one SADD (each redis.call costs about as much as the rule).
-- A change is one HMGET and one HSET (u, r and, when it moved, e); the expiry is set only with a new hash or a new
-- period end: it is that period end plus 35 days on the app's clock, the same instant on every change of a period.
local function meteredApplyUnmarked(balancePrefix, idempotencyPrefix, op)
  local idemKey = nil
  if op.idem ~= '' and op.kind ~= 'r' then
    idemKey = idempotencyPrefix .. op.idem
    local stored = redis.call('GET', idemKey)
    if stored then
      local newline = string.find(stored, '\n', 1, true)
      if string.sub(stored, 1, newline - 1) ~= op.fingerprint then
        return 6, 0, false
      end
      return 5, string.sub(stored, newline + 1), false
    end
  end
  local key = balancePrefix .. op.member
  if op.kind == 'r' then
    return 0, tonumber(redis.call('HGET', key, 'u')) or 0, false
  end
  local current = redis.call('HMGET', key, 'u', 'r', 'e')
  local used = tonumber(current[1]) or 0
  local status = 0
  local after = used
  if op.kind == 'c' then
    local limit = tonumber(op.limit)
    if limit == nil or op.soft == '1' or used + op.amount <= limit then
      after = used + op.amount
    else
      status = 1
    end
  elseif op.kind == 'd' then
    after = used + op.amount
    if after < 0 then
      after = 0
    end
  elseif op.kind == 's' then
    after = op.amount
  end
  local changed = after ~= used
  if changed then
    local revision = meteredInteger((tonumber(current[2]) or 0) + 1)
    if current[3] == op.periodEnd then
      redis.call('HSET', key, 'u', meteredInteger(after), 'r', revision)
    else
      redis.call('HSET', key, 'u', meteredInteger(after), 'r', revision, 'e', op.periodEnd)
      if op.ttl ~= '' then
        redis.call('PEXPIRE', key, op.ttl)
      end
    end
  end
  if idemKey then
    redis.call('SET', idemKey, op.fingerprint .. '\n' .. status .. '\n' .. meteredInteger(after) .. '\n' .. op.terms,
      'PX', METERED_IDEMPOTENCY_MS)
  end
  return status, after, changed
end

local function meteredApply(balancePrefix, idempotencyPrefix, dirtyKey, op)
  local status, after, changed = meteredApplyUnmarked(balancePrefix, idempotencyPrefix, op)
  if changed then
    redis.call('SADD', dirtyKey, op.member)
  end
  return status, after
end

-- Adds members to a dirty set in chunks (unpack's stack is bounded).
local function meteredMarkDirty(dirtyKey, members)
  for first = 1, #members, 1000 do
    redis.call('SADD', dirtyKey, unpack(members, first, math.min(first + 999, #members)))
  end
end

-- Statuses the including scripts answer without calling meteredApply.
local METERED_STALE = 2
local METERED_NOT_READY = 3
local METERED_SKIPPED = 4
