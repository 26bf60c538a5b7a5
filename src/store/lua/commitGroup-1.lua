--[[
  The fenced write of a group (docs/architecture.md#writes): applies only the changed fields if the
  caller still owns the group at the revision it read, and bumps storeRevision.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  fence of the caller (integer, decimal string)
  ARGV[2]  store revision the caller expects
  ARGV[3]  JSON patch {"set": {field: value}, "del": [field]} (never storeRevision/fence)

  Returns {status, storeRevision}:
     0  OK                 storeRevision is the new revision (expected + 1)
    -1  FENCE_MISMATCH     nothing written; storeRevision is the stored one
    -2  REVISION_MISMATCH  nothing written; storeRevision is the stored one
    -3  GROUP_NOT_FOUND    the metadata key does not exist; nothing written
]]
--- @include "checkWriter"
--- @include "hsetFields"

local status, revision = checkWriter(KEYS[1], ARGV[1], ARGV[2])
if status ~= 0 then
  return {status, revision}
end
local patch = cjson.decode(ARGV[3])
hsetFields(KEYS[1], patch.set)
local del = patch.del
for i = 1, #del, 1000 do
  redis.call('HDEL', KEYS[1], unpack(del, i, math.min(i + 999, #del)))
end
return {0, redis.call('HINCRBY', KEYS[1], 'storeRevision', 1)}
