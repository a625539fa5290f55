--[[
  Settles, exactly once, what a gateway answered for evals whose gate call it could not confirm (the call
  failed or timed out, and may or may not have run), or a refund it could not deliver at once:
  adds (what the gateway stands for) - (what the batch counted, 0 if it never ran), then marks the batch
  settled so that a retried settle, or the batch itself arriving late, changes nothing.
  Keeps first_over_at exact as eval-adjust-2.lua does.

  Input:
    KEYS[1] arrangement hash   {limit ('' = unlimited), blocking, burst, plan}
    KEYS[2] usage hash of the batch's UTC month   {count, first_over_at (ms)}
    KEYS[3] batch memory (string) written by eval-gate-batch.lua: evals it counted, or "settled"

    ARGV[1] what the gateway stands for: the batch's evals it answered 2xx, or -1 for a refund
    ARGV[2] now (ms since the epoch, from the application's clock)
    ARGV[3] usage time to live (ms): set when KEYS[2] is created
    ARGV[4] how long the settled mark is kept (ms)

  Output: { code, count, delta applied, usage epoch (0 = none; only with code 0) }
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

local count = tonumber(rcall("HGET", KEYS[2], "count")) or 0
local delta = tonumber(ARGV[1]) - (tonumber(memory) or 0)
if count + delta < 0 then
  delta = -count
end

rcall("SET", KEYS[3], "settled", "PX", ARGV[4])
-- The usage epoch (0 = none yet), so a gateway knows which hash its refund went into (eval-gate-batch-8.lua).
local epoch = tonumber(rcall("HGET", KEYS[2], "epoch")) or 0
if delta == 0 then
  return {0, count, 0, epoch}
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

return {0, count, delta, epoch}
