--[[
  Moves the shard layout of a stream prefix to a new count (a scale or rollback of any group on
  it), if it is still at the version the caller read: every group on the prefix then follows
  it (docs/protocol.md#one-shard-layout-per-stream-prefix).

  KEYS[1]  layouts hash: field = stream prefix, value = JSON layout   kp:layouts:{kp:groups}
  ARGV[1]  stream prefix
  ARGV[2]  layout version the caller read
  ARGV[3]  new shard count
  ARGV[4]  now (epoch ms)

  Returns {status, layoutJson}:
     0  OK                 layoutJson is the layout as stored now (version + 1)
    -2  REVISION_MISMATCH  the layout moved on meanwhile; layoutJson is the stored one
    -3  GROUP_NOT_FOUND    the prefix has no layout; nothing written
]]
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {-3, ''}
end
local layout = cjson.decode(raw)
if layout.version ~= tonumber(ARGV[2]) then
  return {-2, raw}
end
layout.version = layout.version + 1
layout.shardCount = tonumber(ARGV[3])
layout.updatedAt = tonumber(ARGV[4])
-- cjson turns an empty table into an object, which is what `groups` is.
local encoded = cjson.encode(layout)
redis.call('HSET', KEYS[1], ARGV[1], encoded)
return {0, encoded}
