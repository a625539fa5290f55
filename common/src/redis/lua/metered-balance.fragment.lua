--[[
  Metered balances (DESIGN.md §5), shared by eval-gate-batch-8.lua and usage-apply-4.lua: commands.ts prepends this
  file to both at load time, so a consume, a report and a read follow one rule wherever they run.

  A balance is the hash `<balance prefix><member>`: u (used), r (revision, +1 per change), e (period end ms, '' for
  "never"). Every change adds the member to the organization's dirty set, for the worker: at once when dirtyKey is
  given, else (dirtyKey false) in one SADD when the including script calls meteredMarkDirty(dirtyKey).

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

-- One metered operation as the gate call receives it: thirteen arguments from ARGV[base + 1] (ARGV[base + 1], + 9 and
-- + 10 are read by the script for its own checks). usage-apply-4.lua sends what a batch's operations share once.
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

-- The members meteredApply changed when it was given no dirty key (false): the including script adds them to the
-- dirty set in one SADD (meteredMarkDirty) rather than one per change.
local meteredDirtyMembers = {}

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
  local held = redis.call('HMGET', key, 'u', 'r', 'e')
  local used = tonumber(held[1]) or 0
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
  if after ~= used then
    redis.call('HSET', key, 'u', meteredInteger(after), 'e', op.periodEnd, 'r', meteredInteger((tonumber(held[2]) or 0) + 1))
    -- The expiry is the period end + 35 days, the same instant at every change of the balance: set as it is made
    -- (every script that makes a balance sets it) or when its period end changes (a reset changed from "never" on an
    -- anchored period keeps the member).
    if op.ttl ~= '' and held[3] ~= op.periodEnd then
      redis.call('PEXPIRE', key, op.ttl)
    end
    if dirtyKey then
      redis.call('SADD', dirtyKey, op.member)
    else
      meteredDirtyMembers[#meteredDirtyMembers + 1] = op.member
    end
  end
  if idemKey then
    redis.call('SET', idemKey, op.fingerprint .. '\n' .. status .. '\n' .. meteredInteger(after) .. '\n' .. op.terms,
      'PX', METERED_IDEMPOTENCY_MS)
  end
  return status, after
end

-- Adds the members changed since the last call to the dirty set, 1,000 a command.
local function meteredMarkDirty(dirtyKey)
  for from = 1, #meteredDirtyMembers, 1000 do
    redis.call('SADD', dirtyKey, unpack(meteredDirtyMembers, from, math.min(from + 999, #meteredDirtyMembers)))
  end
  meteredDirtyMembers = {}
end

-- Statuses the including scripts answer without calling meteredApply.
local METERED_STALE = 2
local METERED_NOT_READY = 3
local METERED_SKIPPED = 4
