--[[
  Records that a group's metadata key is lost (docs/operations.md#lost-metadata): a replica
  that held the group, or a client that reported its lifecycle or a version, remembers it, but
  the key is gone (Redis restarted empty, flushed, the key deleted). Writes the group's failure
  record so every replica, and every later process, refuses the group as failed closed. Never
  touches the metadata key: a lost group is not re-created from what anyone remembers.
  The registry entry (ZADD kp:groups) is a separate command the store sends right after this
  script recorded: in Redis Cluster the registry lives in another slot.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  KEYS[2]  failure record of the group     kp:{sp:cg}:failure
  ARGV[1]  JSON failure record: reason, at, knownRevision, storeRevision, lifecycleId,
           metadataVersion, highestVersionSeen, assignmentEpoch, memberEpochSeq

  An earlier failure record is merged, not replaced: its reason, time and lifecycle are kept
  (the lifecycle is taken from ARGV[1] when the earlier one did not know it), and every number
  is the highest of both, so what recovery must stay above only goes up.

  Returns {status, storeRevision}:
     0  OK      recorded; storeRevision is 0
     1  EXISTS  the metadata key exists (restored or created meanwhile); nothing written;
                storeRevision is the stored one
]]

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {1, tonumber(redis.call('HGET', KEYS[1], 'storeRevision')) or 0}
end
local record = cjson.decode(ARGV[1])
local earlier = redis.call('GET', KEYS[2])
if earlier then
  local kept = cjson.decode(earlier)
  local numbers = {
    'knownRevision', 'metadataVersion', 'highestVersionSeen', 'assignmentEpoch', 'memberEpochSeq',
  }
  for _, field in ipairs(numbers) do
    kept[field] = math.max(tonumber(kept[field]) or 0, tonumber(record[field]) or 0)
  end
  if type(kept.lifecycleId) ~= 'string' or kept.lifecycleId == 'unknown' then
    kept.lifecycleId = record.lifecycleId
  end
  record = kept
end
redis.call('SET', KEYS[2], cjson.encode(record))
return {0, 0}
