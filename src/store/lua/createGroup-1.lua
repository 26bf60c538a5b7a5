--[[
  Creates the metadata hash of a new group at storeRevision 1, with a new fence (fenceSeed):
  the creator writes with that fence until a claim increments it.
  The registry entry (ZADD kp:groups) is a separate command the store sends right after this
  script succeeds: in Redis Cluster the registry and the metadata key live in different slots,
  so no script may touch both. Order: metadata first, then registry, so a registered group
  always has metadata in the normal path (the store also checks the registry before).

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  JSON object field -> string value: the encoded GroupState (no storeRevision/fence)

  Returns {status, storeRevision, fields}:
     0  OK            storeRevision is 1; fields is {'fence', <the new fence>}
    -4  GROUP_EXISTS  the metadata key already exists; nothing written
]]
--- @include "hsetFields"
--- @include "fenceSeed"

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {-4, tonumber(redis.call('HGET', KEYS[1], 'storeRevision')) or 0}
end
hsetFields(KEYS[1], cjson.decode(ARGV[1]))
local fence = fenceSeed()
redis.call('HSET', KEYS[1], 'fence', fence, 'storeRevision', 1)
return {0, 1, {'fence', fence}}
