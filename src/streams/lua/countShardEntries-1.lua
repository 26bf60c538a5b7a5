--[[
  Counts the entries of one shard stream, or the pending entries of one consumer group on it,
  whose ids lie after ARGV[3] and up to ARGV[4], reading at most ARGV[5] of them in 1,000-entry
  chunks so one call stays short; the caller calls again from the last id counted
  (docs/operations.md#moving-a-groups-positions). Read-only.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  'entries' (the stream's entries) or 'pending' (the group's pending entries)
  ARGV[2]  the Redis consumer group (used by 'pending')
  ARGV[3]  count after this id (exclusive; '0-0' counts from the start)
  ARGV[4]  count up to this id (inclusive)
  ARGV[5]  most entries counted in this call

  Returns {count, lastId}: lastId is the id of the last entry counted ('' when none). A count
  below ARGV[5] means the range held no more. A missing stream or group counts 0.
]]
local stream, mode, group, after, upTo = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local most = tonumber(ARGV[5])
if redis.call('EXISTS', stream) == 0 then return {0, ''} end
if mode == 'pending' then
  local found = false
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] == group then found = true end
    end
  end
  if not found then return {0, ''} end
end
local start = after == '0-0' and '-' or '(' .. after
local count, last = 0, ''
while count < most do
  local n = math.min(1000, most - count)
  local got
  if mode == 'pending' then
    got = redis.call('XPENDING', stream, group, start, upTo, n)
  else
    got = redis.call('XRANGE', stream, start, upTo, 'COUNT', n)
  end
  count = count + #got
  if #got > 0 then
    last = got[#got][1]
    start = '(' .. last
  end
  if #got < n or last == upTo then break end
end
return {count, last}
