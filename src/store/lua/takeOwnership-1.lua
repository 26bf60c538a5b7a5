--[[
  A new owner takes over a group (DESIGN.md §8): replaces the fence token and bumps
  storeRevision in one step, so every write still in flight from the previous owner is refused
  by its fence check. Not fenced itself: the lease decides who may call it.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  the new owner's fence token

  Returns {status, storeRevision, fields}:
     0  OK               storeRevision is the new revision; fields is the whole hash as a flat
                         [field, value, ...] list (HGETALL), so the new owner reads what it owns
    -3  GROUP_NOT_FOUND  the metadata key does not exist; nothing written
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-3, 0}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
local revision = redis.call('HINCRBY', KEYS[1], 'storeRevision', 1)
return {0, revision, redis.call('HGETALL', KEYS[1])}
