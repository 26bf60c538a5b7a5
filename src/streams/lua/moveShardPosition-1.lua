--[[
  Moves one consumer group's position on one shard stream, and acknowledges a batch of its
  pending entries at or before the new position (docs/operations.md#moving-a-groups-positions).
  Running it again with the same arguments ends in the same state: the group is created only
  when missing, set only when elsewhere, and what was acknowledged stays acknowledged.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  the Redis consumer group (the coordinator's consumerGroup)
  ARGV[2]  the new last-delivered-id (an exact id)
  ARGV[3]  '1' to move the group there (XGROUP SETID, or XGROUP CREATE … MKSTREAM when the
           stream or group is missing), '0' to only acknowledge
  ARGV[4]  most pending entries with id <= ARGV[2] acknowledged in this call (0: none)
  ARGV[5]  the move's marker, a consumer name ('' for none): a move whose marker the group has
           already is not made again (below)

  Returns {created, acknowledged, more, repeated}:
    created       1 when this call created the group (and the stream, if missing)
    acknowledged  pending entries this call acknowledged
    more          1 when the batch was full: more pending entries may be left to acknowledge
    repeated      1 when the group had the marker: this move was made before, nothing changed

  The marker makes a move happen once. A move is made by the group's owner; an owner that lost
  the group while its move was under way (a slow streams Redis, a paused process) may send it
  after the new owner made the same move, reported it and granted the shard again. Setting the
  position then would take back what members read since (they would read it again). The first
  move leaves an empty consumer named by the marker in the group (no entry is ever delivered
  to it); a move that finds it changes nothing. Markers of earlier moves are deleted with it.
]]
local stream, group, to = KEYS[1], ARGV[1], ARGV[2]
local move, most, marker = ARGV[3] == '1', tonumber(ARGV[4]), ARGV[5] or ''
local MARKERS = 'coord-move:'
local info
if redis.call('EXISTS', stream) == 1 then
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == group then info = f end
  end
end
if not info then
  if not move then return {0, 0, 0, 0} end
  redis.call('XGROUP', 'CREATE', stream, group, to, 'MKSTREAM')
  if marker ~= '' then redis.call('XGROUP', 'CREATECONSUMER', stream, group, marker) end
  return {1, 0, 0, 0}
end
if move and marker ~= '' then
  if redis.call('XGROUP', 'CREATECONSUMER', stream, group, marker) == 0 then
    return {0, 0, 0, 1}
  end
  for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
    local f = {}
    for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
    local name = f['name']
    if name ~= marker and string.sub(name, 1, #MARKERS) == MARKERS and f['pending'] == 0 then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
    end
  end
end
if move and info['last-delivered-id'] ~= to then
  redis.call('XGROUP', 'SETID', stream, group, to)
end
if most <= 0 or info['pending'] == 0 then return {0, 0, 0, 0} end
local pending = redis.call('XPENDING', stream, group, '-', to, most)
if #pending == 0 then return {0, 0, 0, 0} end
local ids = {}
for i, entry in ipairs(pending) do ids[i] = entry[1] end
local acknowledged = redis.call('XACK', stream, group, unpack(ids))
return {0, acknowledged, #pending == most and 1 or 0, 0}
