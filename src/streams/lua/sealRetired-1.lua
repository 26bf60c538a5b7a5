--[[
  Seals a retiring shard that no member reads (its group has none) and says whether the group
  left anything in it unread (docs/architecture.md#migrations). The seal is the entry the SDK's
  consumers write at the end of a retiring shard: a producer whose routing is older than it is
  refused and routes again, so nothing lands behind it. A seal of the same identity already at
  the end of the stream is reused, so checking again adds no entry.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  the Redis consumer group (the coordinator's consumerGroup)
  ARGV[2]  the seal's first field (`__coord_seal`)
  ARGV[3]  the seal's identity (the stream prefix's layout id)
  ARGV[4]  the seal's version (the layout version)
  ARGV[5]  where the group would start on the shard, as an XRANGE start (`-`, or `(<id>` for a
           group that starts at its creation): while the group has no Redis consumer group
           there, only entries after that are its to read (docs/protocol.md#start-position)

  Returns {drained, sealId}:
    drained  1 when every entry before the seal was delivered to the group and acknowledged
             (or the stream held nothing before it that is the group's), else 0
    sealId   the seal's entry id
]]
--- @include "groupInfo"

local stream, group = KEYS[1], ARGV[1]
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
local sealId
if last and last[2][1] == ARGV[2] and last[2][2] == ARGV[3] and last[2][4] == ARGV[4] then
  sealId = last[1]
else
  sealId = redis.call('XADD', stream, '*', ARGV[2], ARGV[3], 'version', ARGV[4])
end
local info = groupInfo(stream, group)
local first
if info then
  if info['pending'] > 0 then return {0, sealId} end
  first = redis.call('XRANGE', stream, '(' .. info['last-delivered-id'], '+', 'COUNT', 1)[1]
else
  first = redis.call('XRANGE', stream, ARGV[5], '+', 'COUNT', 1)[1]
end
-- Nothing but the seal (and, at most, older seals) is left to deliver.
while first and first[2][1] == ARGV[2] and first[1] ~= sealId do
  first = redis.call('XRANGE', stream, '(' .. first[1], '+', 'COUNT', 1)[1]
end
if first and first[1] == sealId then return {1, sealId} end
return {0, sealId}
