--[[
  Included by every fenced write (see lua-scripts.ts: a line `--- @include "checkWriter"` is
  replaced by this file). One definition, so every script refuses a writer the same way.

  checkWriter(key, fence, expectedRevision) -> status, revision
    status   0 (OK), -1 (FENCE_MISMATCH), -2 (REVISION_MISMATCH) or -3 (GROUP_NOT_FOUND)
    revision the stored storeRevision (0 when the key is missing)

  The fence is an integer counter (claimGroup-2 increments it); both sides are its decimal
  string, so comparing the strings compares the integers exactly, with no float rounding.
  The fence is checked before the revision: a deposed owner must learn that it is deposed,
  not that it is merely behind.
]]
local function checkWriter(key, fence, expectedRevision)
  if redis.call('EXISTS', key) == 0 then
    return -3, 0
  end
  local stored = redis.call('HMGET', key, 'fence', 'storeRevision')
  local revision = tonumber(stored[2]) or 0
  if stored[1] ~= fence then
    return -1, revision
  end
  if revision ~= tonumber(expectedRevision) then
    return -2, revision
  end
  return 0, revision
end
