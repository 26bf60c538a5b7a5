--[[
  `storeRevision` and `lifecycleId` of many groups in one call (any number of keys), for the
  verify loop (docs/architecture.md#failure-detection): every held group is read each
  `verify-interval`, and 10,000 HMGETs every 5 s cost a replica at the capacity goal more than
  the reads themselves (a command object, a promise and a reply each). Read-only.

  KEYS[i]  metadata hash of a group        kp:{sp:cg}:metadata

  Returns a flat list: storeRevision and lifecycleId of KEYS[1], then of KEYS[2], ...; nil
  where the field (or the key) is missing.
]]
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('hmget', key, 'storeRevision', 'lifecycleId')
  out[2 * i - 1] = fields[1]
  out[2 * i] = fields[2]
end
return out
