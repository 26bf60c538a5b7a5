--[[
  A deleted group leaves the shard layout of its stream prefix; the layout of a prefix with no
  group left is removed, so the next group created on it sets the count afresh
  (docs/protocol.md#one-shard-layout-per-stream-prefix).

  KEYS[1]  layouts hash: field = stream prefix, value = JSON layout   kp:layouts:{kp:groups}
  ARGV[1]  stream prefix
  ARGV[2]  consumer group

  Returns {status}:
     0  OK  (also when the prefix had no layout or the group was not on it)
]]
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {0}
end
local layout = cjson.decode(raw)
layout.groups[ARGV[2]] = nil
if next(layout.groups) == nil then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(layout))
end
return {0}
