--[[
  Writes a subscriber's versioned snapshot document and its version in the organization's index of subscriber
  versions (the gate script reads a batch's versions there with one HMGET), unless Redis already holds the same
  or a newer version; racing writers never regress either. A refused write still lifts an index entry that is
  behind the document (an index lost or never built), so republishing a subscriber always heals it.

  Every change of the index also moves the organization's subscriber-write stamp, the index's field `#w` (no
  subscriber id starts with `#`), in the same script: a gateway whose cached subscriber was verified at the stamp
  the index still holds knows its version is current without reading it (eval-gate-batch-8.lua). The stamp lives
  in the index so that losing one loses the other. A missing stamp is created at ARGV[4], a random value, never at
  a fixed one: after a flush (or an eviction) the new stamps must not repeat values gateways saw before.

  KEYS[1]  the subscriber's snapshot hash (fields `v` and `doc`), <prefix>:{<org>}:sub:<id>
  KEYS[2]  the organization's subscriber-version index (hash: subscriber id -> version), <prefix>:{<org>}:subv
  ARGV[1]  version (integer, >= 1)
  ARGV[2]  document (JSON; empty string = tombstone, a deleted subscriber)
  ARGV[3]  the subscriber id (the index's field)
  ARGV[4]  where the stamp starts if it is missing (a random integer in [1, 2^48))

  Returns 1 when written, 0 when the stored version was already >= ARGV[1].
]]
local rcall = redis.call

local function moveStamp()
  if rcall('HSETNX', KEYS[2], '#w', ARGV[4]) == 0 then
    rcall('HINCRBY', KEYS[2], '#w', 1)
  end
end

local current = tonumber(rcall('HGET', KEYS[1], 'v') or '0') or 0
local incoming = tonumber(ARGV[1])
if current >= incoming then
  local indexed = tonumber(rcall('HGET', KEYS[2], ARGV[3]) or '0') or 0
  if indexed < current then
    rcall('HSET', KEYS[2], ARGV[3], current)
    moveStamp()
  end
  return 0
end
rcall('HSET', KEYS[1], 'v', ARGV[1], 'doc', ARGV[2])
rcall('HSET', KEYS[2], ARGV[3], ARGV[1])
moveStamp()
return 1
