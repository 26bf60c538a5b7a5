--[[
  A replica claims a group whose lease it holds (docs/architecture.md#replicas-leases-and-fences):
  checks the lease holder, increments the integer fence and bumps storeRevision in one step, so
  every write still in flight from the previous owner is refused by its fence check. The lease key
  shares the group's hash tag, so both keys live in one Cluster slot.

  KEYS[1]  metadata hash of the group      kp:{sp:cg}:metadata
  KEYS[2]  lease of the group              kp:{sp:cg}:lease
  ARGV[1]  the lease value the caller holds; '' for an unleased claim, allowed only while
           nobody holds the lease (see includes/checkLease.lua)

  Returns {status, storeRevision, fields}:
     0  OK               storeRevision is the new revision; fields is the whole hash as a flat
                         [field, value, ...] list (HGETALL), the new fence included, so the new
                         owner reads what it owns in the same step
    -3  GROUP_NOT_FOUND  the metadata key does not exist; nothing written
    -5  LEASE_NOT_HELD   the lease key does not hold the caller's value; nothing written
]]
--- @include "checkLease"
--- @include "fenceSeed"

if not checkLease(KEYS[2], ARGV[1]) then
  return {-5, tonumber(redis.call('HGET', KEYS[1], 'storeRevision')) or 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-3, 0}
end
local fence = redis.call('HGET', KEYS[1], 'fence')
if fence and string.match(fence, '^[1-9]%d*$') then
  redis.call('HINCRBY', KEYS[1], 'fence', 1)
else
  -- No fence yet: a hash restored without one, or from before fences were counters.
  redis.call('HSET', KEYS[1], 'fence', fenceSeed())
end
local revision = redis.call('HINCRBY', KEYS[1], 'storeRevision', 1)
return {0, revision, redis.call('HGETALL', KEYS[1])}
