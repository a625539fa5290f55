--[[
  Writes a versioned snapshot document unless Redis already holds the same or a newer version, so racing
  writers (write-through after a commit, the rebuild job, on-demand rebuilds) never regress a snapshot.

  KEYS[1]  the snapshot hash (fields `v` and `doc`), e.g. <prefix>:{<org>}:catalog
  ARGV[1]  version (integer, >= 1)
  ARGV[2]  document (JSON; empty string = tombstone, e.g. a revoked API key)

  Returns 1 when written, 0 when the stored version was already >= ARGV[1].
]]
local rcall = redis.call
local current = tonumber(rcall('HGET', KEYS[1], 'v') or '0')
local incoming = tonumber(ARGV[1])
if current ~= nil and current >= incoming then
  return 0
end
rcall('HSET', KEYS[1], 'v', ARGV[1], 'doc', ARGV[2])
return 1
