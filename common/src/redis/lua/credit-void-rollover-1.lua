--[[
  Voids a period's rollover credit in Redis (issue 35): the balance's `ro` becomes 0, so the gateway does not fall
  back to the implicit credit once the snapshot stops listing the voided row. Only a balance that exists (has `u`)
  is touched: a hash made here would look to the gateway like a period never touched, which makes its rollover.

  KEYS[1]  the balance hash {org}:m:<subscriber>|<feature>|<period start ms>
  Output: 1 when `ro` was set to 0, 0 when the balance is not in Redis
]]
if redis.call("HEXISTS", KEYS[1], "u") == 0 then return 0 end
redis.call("HSET", KEYS[1], "ro", "0")
return 1
