--[[
  Creates the metadata hash of a new group, owned by the caller's fence, at storeRevision 1.
  The registry entry (ZADD kp:groups) is a separate command the store sends right after this
  script succeeds: in Redis Cluster the registry and the metadata key live in different slots,
  so no script may touch both. Order: metadata first, then registry, so a registered group
  always has metadata in the normal path (the store also checks the registry before).

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  fence token of the creating owner
  ARGV[2]  JSON object field -> string value: the encoded GroupState (no storeRevision/fence)

  Returns {status, storeRevision}:
     0  OK            storeRevision is 1
    -4  GROUP_EXISTS  the metadata key already exists; nothing written
]]
--- @include "hsetFields"

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {-4, tonumber(redis.call('HGET', KEYS[1], 'storeRevision')) or 0}
end
hsetFields(KEYS[1], cjson.decode(ARGV[2]))
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'storeRevision', 1)
return {0, 1}
