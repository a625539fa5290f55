--[[
  Where the metered balance rule (metered-balance.fragment.lua, which follows this file at load time) reads and
  writes hashes and idempotency records: straight to Redis, or, after the including script calls meteredBuffer(),
  through the call's own memory until meteredFlush().

  Buffered, a hash is read once (only the fields not yet known are asked for), every later operation on it reads
  and changes the copy, and meteredFlush() writes each changed hash once: one HSET of the fields that changed, then
  its PEXPIRE when one was asked for. An idempotency record is looked up once (meteredPrefetchRecords reads a
  batch's keys with one MGET) and written once, as the same string with the same 24 h expiry. Nothing else runs
  while a script runs, so what the flush leaves is what a command per change leaves; a batch's events on one balance
  cost one read and one write, however many there are (usage-apply-4.lua). The gate call does not buffer.
]]
local meteredHashes = nil -- buffered: hash key -> {values = {field -> value, false when absent}, changed, ttl}
local meteredChangedHashes = nil -- the keys of the buffered hashes changed, in the order of their first change
local meteredRecords = nil -- buffered: idempotency key -> its record, false when it has none
local meteredWrittenRecords = nil -- the idempotency keys whose records this call made, in order

local function meteredBuffer()
  meteredHashes, meteredChangedHashes, meteredRecords, meteredWrittenRecords = {}, {}, {}, {}
end

-- HMGET key fields...: the values in the order asked, false for a field the hash lacks.
local function meteredHashRead(key, ...)
  if not meteredHashes then
    return redis.call('HMGET', key, ...)
  end
  local fields = {...}
  local hash = meteredHashes[key]
  if not hash then
    local read = redis.call('HMGET', key, ...)
    local values = {}
    for i = 1, #fields do
      values[fields[i]] = read[i]
    end
    meteredHashes[key] = {values = values}
    return read
  end
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

-- HSET key field value [field value ...], the pairs given as one list.
local function meteredHashWrite(key, fieldValues)
  if not meteredHashes then
    redis.call('HSET', key, unpack(fieldValues))
    return
  end
  local hash = meteredHashes[key]
  if not hash then
    hash = {values = {}}
    meteredHashes[key] = hash
  end
  if not hash.changed then
    hash.changed = {}
    meteredChangedHashes[#meteredChangedHashes + 1] = key
  end
  local values, changed = hash.values, hash.changed
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
  if not meteredHashes then
    redis.call('PEXPIRE', key, ms)
    return
  end
  meteredHashes[key].ttl = ms
end

-- Reads the records of idempotency keys not yet known (a batch's keys) with one MGET per 1,000.
local function meteredPrefetchRecords(keys)
  local wanted, n = {}, 0
  for i = 1, #keys do
    if meteredRecords[keys[i]] == nil then
      n = n + 1
      wanted[n] = keys[i]
      meteredRecords[keys[i]] = false
    end
  end
  for from = 1, n, 1000 do
    local to = math.min(from + 999, n)
    local read = redis.call('MGET', unpack(wanted, from, to))
    for k = from, to do
      meteredRecords[wanted[k]] = read[k - from + 1]
    end
  end
end

-- GET idempotencyKey: its record, or false.
local function meteredRecordOf(idempotencyKey)
  if not meteredRecords then
    return redis.call('GET', idempotencyKey)
  end
  local record = meteredRecords[idempotencyKey]
  if record == nil then
    record = redis.call('GET', idempotencyKey)
    meteredRecords[idempotencyKey] = record
  end
  return record
end

-- SET idempotencyKey record PX ms (a key gets one record: a second operation under it finds the first's).
local function meteredKeepRecord(idempotencyKey, record, ms)
  if not meteredRecords then
    redis.call('SET', idempotencyKey, record, 'PX', ms)
    return
  end
  meteredRecords[idempotencyKey] = record
  meteredWrittenRecords[#meteredWrittenRecords + 1] = idempotencyKey
end

-- Writes what the buffered operations changed and stops buffering.
local function meteredFlush(recordMs)
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
  for _, key in ipairs(meteredWrittenRecords) do
    redis.call('SET', key, meteredRecords[key], 'PX', recordMs)
  end
  meteredHashes, meteredChangedHashes, meteredRecords, meteredWrittenRecords = nil, nil, nil, nil
end
