--[[
  Restores a group's metadata hash from a backup (coordctl restore): replaces the whole hash
  with the given fields, store-owned ones (storeRevision, fence) included. Not fenced: disaster
  recovery only. The store registers the group (ZADD kp:groups) right after this script, since
  in Redis Cluster the registry lives in another slot: metadata first, then registry.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  ARGV[1]  JSON object field -> string value: every field of the hash

  Returns {status, storeRevision}:
     0  OK  storeRevision is the imported one (0 when the backup has none)
]]
--- @include "hsetFields"

redis.call('DEL', KEYS[1])
hsetFields(KEYS[1], cjson.decode(ARGV[1]))
return {0, tonumber(redis.call('HGET', KEYS[1], 'storeRevision')) or 0}
