--[[
  How far one consumer group is behind on one shard stream, read in one call so a whole
  group's lag costs one round trip per Redis node (docs/operations.md#lag). Read-only.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  the Redis consumer group (the coordinator's consumerGroup)
  ARGV[2]  most entries counted one by one when Redis cannot say the lag itself

  Returns {exists, length, lastEntryId, hasGroup, lastDeliveredId, lagEntries, lagExact,
           pending, oldestUndeliveredId, oldestPendingIdleMs, serverTimeMs}:
    exists               1, or 0 when the stream does not exist (every other field empty)
    hasGroup             1, or 0 when the stream has no such consumer group yet
    lagEntries           Redis's own lag when it knows it (lagExact 1), else the entries after
                         last-delivered-id counted up to ARGV[2] (lagExact 0 when the count
                         reached that bound)
    oldestUndeliveredId  the first entry after last-delivered-id (the first entry when there is
                         no consumer group; '' when none)
    oldestPendingIdleMs  idle time of the oldest delivered-but-unacknowledged entry (-1: none)
    serverTimeMs         the Redis server's clock, for the age of oldestUndeliveredId
]]
--- @include "groupInfo"

local stream, group, bound = KEYS[1], ARGV[1], tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if redis.call('EXISTS', stream) == 0 then
  return {0, 0, '', 0, '', 0, 1, 0, '', -1, now}
end
local length = redis.call('XLEN', stream)
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
local lastId = last and last[1] or ''
local info = groupInfo(stream, group)
if not info then
  -- Nobody read it yet: every entry is behind, the oldest being the first.
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  return {1, length, lastId, 0, '', length, 1, 0, first and first[1] or '', -1, now}
end
local delivered = info['last-delivered-id']
local after = redis.call('XRANGE', stream, '(' .. delivered, '+', 'COUNT', 1)[1]
local lag, exact = info['lag'], 1
if type(lag) ~= 'number' then
  lag = #redis.call('XRANGE', stream, '(' .. delivered, '+', 'COUNT', bound)
  if lag >= bound then exact = 0 end
end
local idle = -1
if info['pending'] > 0 then
  local oldest = redis.call('XPENDING', stream, group, '-', '+', 1)[1]
  if oldest then idle = oldest[3] end
end
return {1, length, lastId, 1, delivered, lag, exact, info['pending'], after and after[1] or '', idle, now}
