--[[
  Read-only fence and revision check, with no write. deleteGroup runs it before removing the
  registry entry, so a stale deleter is refused before anything changes (see redis-store.ts).

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  fence of the caller (integer, decimal string)
  ARGV[2]  store revision the caller expects

  Returns {status, storeRevision}:
     0  OK                 the caller may write; storeRevision is the stored one
    -1  FENCE_MISMATCH     another owner holds the group
    -2  REVISION_MISMATCH  storeRevision is the actual stored revision
    -3  GROUP_NOT_FOUND    the metadata key does not exist
]]
--- @include "checkWriter"

local status, revision = checkWriter(KEYS[1], ARGV[1], ARGV[2])
return {status, revision}
