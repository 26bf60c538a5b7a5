--[[
  Fenced delete of a group's metadata hash. The store removes the registry entry (ZREM
  kp:groups) BEFORE running this script, after checkWriter-1 passed, and adds it back if this
  script refuses: in Redis Cluster the registry lives in another slot. Order: registry first,
  then metadata, so a registered group never lacks metadata in the normal path.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  fence of the caller (integer, decimal string)
  ARGV[2]  store revision the caller expects

  Returns {status, storeRevision}:
     0  OK                 deleted; storeRevision is the last stored revision
    -1  FENCE_MISMATCH     nothing deleted
    -2  REVISION_MISMATCH  nothing deleted; storeRevision is the stored one
    -3  GROUP_NOT_FOUND    the metadata key does not exist
]]
--- @include "checkWriter"

local status, revision = checkWriter(KEYS[1], ARGV[1], ARGV[2])
if status ~= 0 then
  return {status, revision}
end
redis.call('DEL', KEYS[1])
return {0, revision}
