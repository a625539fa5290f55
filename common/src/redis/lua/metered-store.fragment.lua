--[[
  Where the metered balance rule (metered-balance.fragment.lua, which follows this file at load time) reads and
  writes hashes: straight to Redis, or, for a batch (usage-apply-6.lua), partly through the call's own memory.

  After meteredBuffer(), a hash the rule reads with `buffer` true (an operation on a balance that other operations of
  the batch also touch) is read once (only the fields not yet known are asked for), every later access to it, buffered
  or not, reads and changes the copy, and meteredFlush() writes each changed one once: one HSET of the fields that
  changed, then its PEXPIRE when one was asked for. A hash touched once goes straight to Redis, as before: a copy would
  only cost it. Nothing else runs while a script runs, so what the flush leaves is what a command per change leaves;
  a batch's events on one balance cost one read and one write, however many there are. Idempotency records are not
  buffered (reading a batch's keys with one MGET into a table cost more Lua than the GETs it saved). The gate call
  does not buffer: its commands are as before.
]]
local meteredHashes = nil -- buffered: hash key -> {values = {field -> value, false when absent}, changed, ttl}
local meteredChangedHashes = nil -- the keys of the buffered hashes changed, in the order of their first change

local function meteredBuffer()
  meteredHashes, meteredChangedHashes = {}, {}
end

-- HMGET key fields...: the values in the order asked, false for a field the hash lacks.
local function meteredHashRead(buffer, key, ...)
  local hash = meteredHashes and meteredHashes[key]
  if not hash then
    local read = redis.call('HMGET', key, ...)
    if buffer and meteredHashes then
      local values = {}
      for i = 1, select('#', ...) do
        values[(select(i, ...))] = read[i]
      end
      meteredHashes[key] = {values = values}
    end
    return read
  end
  local fields = {...}
  local values = hash.values
  local missing, n = nil, 0
  for i = 1, #fields do
    if values[fields[i]] == nil then
      n = n + 1
      missing = missing or {}
      missing[n] = fields[i]
    end
  end
  if n > 0 then
    local read = redis.call('HMGET', key, unpack(missing))
    for i = 1, n do
      values[missing[i]] = read[i]
    end
  end
  local out = {}
  for i = 1, #fields do
    out[i] = values[fields[i]]
  end
  return out
end

-- HSET key field value [field value ...]. The pairs come as arguments, not a list: a change that goes straight to
-- Redis (most of them) then builds no table.
local function meteredHashWrite(buffer, key, ...)
  local hash = meteredHashes and meteredHashes[key]
  if not hash then
    if not (buffer and meteredHashes) then
      redis.call('HSET', key, ...)
      return
    end
    -- Only written so far (a rollover's record): what Redis holds of its other fields is read when asked for.
    hash = {values = {}}
    meteredHashes[key] = hash
  end
  if not hash.changed then
    hash.changed = {}
    meteredChangedHashes[#meteredChangedHashes + 1] = key
  end
  local values, changed = hash.values, hash.changed
  local fieldValues = {...}
  for i = 1, #fieldValues, 2 do
    local field = fieldValues[i]
    if not changed[field] then
      changed[#changed + 1] = field
      changed[field] = true
    end
    values[field] = fieldValues[i + 1]
  end
end

-- PEXPIRE key ms, of a hash just written.
local function meteredHashExpire(key, ms)
  local hash = meteredHashes and meteredHashes[key]
  if hash then
    hash.ttl = ms
  else
    redis.call('PEXPIRE', key, ms)
  end
end

-- Writes what the buffered operations changed and stops buffering.
local function meteredFlush()
  for _, key in ipairs(meteredChangedHashes) do
    local hash = meteredHashes[key]
    local args = {}
    for i, field in ipairs(hash.changed) do
      args[2 * i - 1] = field
      args[2 * i] = hash.values[field]
    end
    redis.call('HSET', key, unpack(args))
    if hash.ttl then
      redis.call('PEXPIRE', key, hash.ttl)
    end
  end
  meteredHashes, meteredChangedHashes = nil, nil
end
