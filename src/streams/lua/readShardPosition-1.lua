--[[
  Where one consumer group stands on one shard stream, read in one call before its position is
  moved (docs/operations.md#moving-a-groups-positions). Read-only.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  the Redis consumer group (the coordinator's consumerGroup)
  ARGV[2]  a time in epoch ms, or '' when none is asked for

  Returns {exists, lastGeneratedId, length, hasGroup, lastDeliveredId, lag, pending, beforeId}:
    exists           1, or 0 when the stream does not exist (the fields after it empty or 0)
    lastGeneratedId  the stream's last-generated-id ('0-0' when missing)
    hasGroup         1, or 0 when the stream has no such consumer group
    lastDeliveredId  the group's last-delivered-id ('' without a group)
    lag              Redis's own count of the entries after lastDeliveredId, -1 when Redis
                     cannot say it
    pending          delivered but unacknowledged entries of the group
    beforeId         the id of the last entry older than ARGV[2] ('0-0' when none; '' when
                     ARGV[2] is '')
]]
--- @include "groupInfo"

local stream, group, at = KEYS[1], ARGV[1], ARGV[2]
if redis.call('EXISTS', stream) == 0 then
  return {0, '0-0', 0, 0, '', -1, 0, at == '' and '' or '0-0'}
end
local fields = redis.call('XINFO', 'STREAM', stream)
local lastGenerated, length = '0-0', 0
for i = 1, #fields, 2 do
  if fields[i] == 'last-generated-id' then lastGenerated = fields[i + 1] end
  if fields[i] == 'length' then length = fields[i + 1] end
end
local info = groupInfo(stream, group)
local before = ''
if at ~= '' then
  before = '0-0'
  if at ~= '0' then
    local last = redis.call('XREVRANGE', stream, '(' .. at .. '-0', '-', 'COUNT', 1)[1]
    if last then before = last[1] end
  end
end
if not info then
  return {1, lastGenerated, length, 0, '', -1, 0, before}
end
local lag = info['lag']
if type(lag) ~= 'number' then lag = -1 end
return {1, lastGenerated, length, 1, info['last-delivered-id'], lag, info['pending'], before}
