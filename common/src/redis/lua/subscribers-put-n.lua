--[[
  subscriber-put-2.lua for many subscribers of one organization in one call (an import batch, a relay or rebuild
  pass): each document and its index entry are written under exactly the same rule as there, and the organization's
  subscriber-write stamp moves once if any index entry changed (gateways only ask whether it moved since they looked).
  Called with a variable number of keys: the caller passes numkeys = 1 + the number of subscribers.

  KEYS[1]      the organization's subscriber-version index (hash: subscriber id -> version), <prefix>:{<org>}:subv
  KEYS[1 + i]  subscriber i's snapshot hash (fields `v` and `doc`), <prefix>:{<org>}:sub:<id>
  ARGV[1]      where the stamp starts if it is missing (a random integer in [1, 2^48))
  ARGV[3i - 1] subscriber i's version (integer, >= 1)
  ARGV[3i]     subscriber i's document (JSON; empty string = tombstone, a deleted subscriber)
  ARGV[3i + 1] subscriber i's id (the index's field)

  Returns the number of documents written (those whose stored version was below the given one).
]]
local rcall = redis.call
local index = KEYS[1]
local written = 0
local indexMoved = false

for i = 1, #KEYS - 1 do
  local key = KEYS[1 + i]
  local version = ARGV[3 * i - 1]
  local id = ARGV[3 * i + 1]
  local current = tonumber(rcall('HGET', key, 'v') or '0') or 0
  local incoming = tonumber(version)
  if current >= incoming then
    local indexed = tonumber(rcall('HGET', index, id) or '0') or 0
    if indexed < current then
      rcall('HSET', index, id, current)
      indexMoved = true
    end
  else
    rcall('HSET', key, 'v', version, 'doc', ARGV[3 * i])
    rcall('HSET', index, id, version)
    indexMoved = true
    written = written + 1
  end
end

if indexMoved and rcall('HSETNX', index, '#w', ARGV[1]) == 0 then
  rcall('HINCRBY', index, '#w', 1)
end
return written
