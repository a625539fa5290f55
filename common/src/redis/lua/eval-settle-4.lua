--[[
  Settles, exactly once, what a gateway answered for evals whose gate call it could not confirm (the call
  failed or timed out, and may or may not have run), or a refund it could not deliver at once:
  adds (what the gateway stands for) - (what the batch counted, 0 if it never ran), then marks the batch
  settled so that a retried settle, or the batch itself arriving late, changes nothing.
  Keeps first_over_at exact as eval-adjust-2.lua does.
  Gives back, in the same step, the consumes the batch applied (the batch memory names them, the gateway
  sends the rest): the gateway answered each 503, "nothing applied" (decisions.md, "A consume answered 503
  is given back when its call ran"). Each is undone by the negative change of its amount with the credits and limit it
  was applied with, last first, which gives back the overage it made, then what credits covered (the last credit spent
  first), then the allowance (metered-balance.fragment.lua), and its idempotency record is deleted, so a retry under its key applies
  afresh instead of replaying "applied". A balance that is gone has nothing to give back.
  A failed usage call (usage-apply-6.lua) is settled the same way, with 0 evals answered: its memory counted none
  and holds each operation's change of used, the gateway sends the rest (ARGV[7...]). A change may be negative (a
  report that lowered used: given back as a rise with no limit, so credits keep what the lowering gave them) or 0
  (a record to delete, nothing to undo).

  Input:
    KEYS[1] arrangement hash   {limit ('' = unlimited), blocking, burst, plan}
    KEYS[2] usage hash of the batch's UTC month   {count, first_over_at (ms)}
    KEYS[3] batch memory (string) written by eval-gate-batch-8.lua: evals it counted (then, when it applied
            consumes, '\n#' and their places among its operations, from 1, separated by spaces), or written by
            usage-apply-6.lua: '0\n' and one change (or 'x') per operation, separated by spaces; or "settled".
            Only the gateway process that sent a batch settles it (settlements.ts keeps them in its memory), so
            the memory is always read by the same version of the scripts that wrote it (decisions.md, "A gate
            batch remembers the places of its consumes")
    KEYS[4] the organization's metered dirty set: the balances and credits given back are named in it

    ARGV[1] what the gateway stands for: the batch's evals it answered 2xx, or -1 for a refund
    ARGV[2] now (ms since the epoch, from the application's clock)
    ARGV[3] usage time to live (ms): set when KEYS[2] is created
    ARGV[4] how long the settled mark is kept (ms)
    ARGV[5] the organization's metered balance key prefix, ARGV[6] its idempotency key prefix
    ARGV[7...] the call's metered operations (a gate batch's or a usage call's), seven per operation in the call's
            order: member, amount, period end, ttl, credits, idempotency key, limit ('' = unlimited) (the gateway
            keeps them until settled; a usage call's change of used is its memory's, not the amount)

  Output: { code, count, delta applied, usage epoch (0 = none), consumes given back, places without an operation }
  (the last three only with code 0; the last is 0 unless the gateway sent fewer operations than the memory names,
  a fault of the gateway that it reports: those consumes cannot be given back)
    code 0  settled now
    code 3  no arrangement in Redis (nothing changed; the caller publishes it and retries)
    code 5  settled before (nothing changed)
]]
local rcall = redis.call

local memory = rcall("GET", KEYS[3])
if memory == "settled" then
  return {5, 0, 0}
end

local arrangement = rcall("HMGET", KEYS[1], "limit", "burst")
if not arrangement[2] then
  return {3, 0, 0}
end
local limit = tonumber(arrangement[1])

-- What to give back, in the order applied: seven strings each (member, amount, period end, ttl, credits, key, limit).
local counted, consumed = memory, nil
local unmatched = 0
-- The operation the gateway sent at ARGV[at..at+6], with `amount` as what to undo; none sent there: counted unmatched.
local function giveBack(at, amount)
  if not ARGV[at + 6] then
    unmatched = unmatched + 1
    return
  end
  local n = #consumed
  consumed[n + 1], consumed[n + 2], consumed[n + 3] = ARGV[at], amount, ARGV[at + 2]
  consumed[n + 4], consumed[n + 5], consumed[n + 6] = ARGV[at + 3], ARGV[at + 4], ARGV[at + 5]
  consumed[n + 7] = ARGV[at + 6]
end
if memory then
  local newline = string.find(memory, "\n", 1, true)
  if newline then
    counted = string.sub(memory, 1, newline - 1)
    local listed = string.sub(memory, newline + 1)
    consumed = {}
    if string.sub(listed, 1, 1) == "#" then
      -- A gate batch's: the places of the consumes it applied among its operations, which ARGV holds.
      for place in string.gmatch(listed, "%d+") do
        local at = 7 * tonumber(place)
        giveBack(at, ARGV[at + 1])
      end
    else
      -- A usage call's: each operation's change of used, or 'x' (nothing changed), in the order of ARGV's.
      local at = 7
      for change in string.gmatch(listed, "%S+") do
        if change ~= "x" then
          giveBack(at, change)
        end
        at = at + 7
      end
    end
  end
end

local count = tonumber(rcall("HGET", KEYS[2], "count")) or 0
local delta = tonumber(ARGV[1]) - (tonumber(counted) or 0)
if count + delta < 0 then
  delta = -count
end

rcall("SET", KEYS[3], "settled", "PX", ARGV[4])

local givenBack = 0
if consumed then
  local balancePrefix, idempotencyPrefix = ARGV[5], ARGV[6]
  for at = #consumed - 6, 1, -7 do
    local member, amount, periodEnd, ttl, credits, idem, limit = unpack(consumed, at, at + 6)
    -- Checked first: the change would otherwise create the balance (and its period's rollover) to take nothing.
    if amount ~= "0" and rcall("EXISTS", balancePrefix .. member) == 1 then
      -- A rise is given back with its limit, so the overage it made goes back first (then the credits, then the
      -- allowance); a lowering is given back as a rise with no limit, so credits keep what it gave them.
      meteredApply(balancePrefix, idempotencyPrefix, false, {
        kind = "d", member = member, amount = -tonumber(amount), limit = tonumber(amount) > 0 and limit or "",
        soft = "0", periodEnd = periodEnd,
        ttl = ttl, idem = "", fingerprint = "", terms = "", credits = credits,
      })
    end
    if idem ~= "" then
      rcall("DEL", idempotencyPrefix .. idem)
    end
    givenBack = givenBack + 1
  end
  meteredMarkDirty(KEYS[4])
end

-- The usage epoch (0 = none yet), so a gateway knows which hash its refund went into (eval-gate-batch-8.lua).
local epoch = tonumber(rcall("HGET", KEYS[2], "epoch")) or 0
if delta == 0 then
  return {0, count, 0, epoch, givenBack, unmatched}
end

local created = rcall("EXISTS", KEYS[2]) == 0
count = rcall("HINCRBY", KEYS[2], "count", delta)
if created then
  rcall("PEXPIRE", KEYS[2], ARGV[3])
end

if limit ~= nil and count >= limit then
  rcall("HSETNX", KEYS[2], "first_over_at", ARGV[2])
else
  rcall("HDEL", KEYS[2], "first_over_at")
end

return {0, count, delta, epoch, givenBack, unmatched}
