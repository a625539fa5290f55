--[[
  Which of an organization's subscribers Redis holds behind the given versions (the reconciler's comparison, one
  call per page instead of one HGET per subscriber): a subscriber is behind when its document's version or its entry
  in the subscriber-version index (the one the gate reads) is below the version Postgres has committed. Reads only.
  Called with a variable number of keys: the caller passes numkeys = 1 + the number of subscribers.

  KEYS[1]      the organization's subscriber-version index (hash: subscriber id -> version), <prefix>:{<org>}:subv
  KEYS[1 + i]  subscriber i's snapshot hash (field `v`), <prefix>:{<org>}:sub:<id>
  ARGV[2i - 1] subscriber i's id (the index's field)
  ARGV[2i]     subscriber i's snapshot version in Postgres (integer, >= 1)

  Returns the positions i (1-based) of the subscribers that are behind.
]]
local rcall = redis.call
local behind = {}

for i = 1, #KEYS - 1 do
  local expected = tonumber(ARGV[2 * i])
  local document = tonumber(rcall('HGET', KEYS[1 + i], 'v') or '0') or 0
  local indexed = tonumber(rcall('HGET', KEYS[1], ARGV[2 * i - 1]) or '0') or 0
  if math.min(document, indexed) < expected then
    behind[#behind + 1] = i
  end
end
return behind
