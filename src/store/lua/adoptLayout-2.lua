--[[
  A group joins the shard layout of its stream prefix (docs/protocol.md#one-shard-layout-per-stream-prefix):
  the layout is made when the prefix has none; otherwise the group takes the layout's count,
  and an exact count that differs is refused while other groups are on the prefix. A group
  alone on its prefix sets the count again with mode `reset` (a recreate), or with mode `exact`
  when it is not registered yet (a create; an existing group's create changes nothing and is
  refused as GROUP_EXISTS by the store after this). The layouts hash and the registry share a Redis Cluster slot (the layouts key is
  hash-tagged with the registry's name), so "which groups are on the prefix" is read here,
  atomically with the change.

  A group counts as on the prefix while it is registered, or for ARGV[7] ms after it joined
  (its create is still writing its metadata and registry entry); a name left by a create that
  never finished is dropped after that.

  KEYS[1]  layouts hash: field = stream prefix, value = JSON layout   kp:layouts:{kp:groups}
  KEYS[2]  registry of groups (sorted set of JSON pairs)             kp:groups
  ARGV[1]  stream prefix
  ARGV[2]  consumer group
  ARGV[3]  shard count asked for
  ARGV[4]  mode: 'adopt' (take the layout's count), 'exact' (create) or 'reset' (recreate)
  ARGV[5]  now (epoch ms)
  ARGV[6]  id for a new layout (uuid)
  ARGV[7]  grace of a joining group (ms)

  Returns {status, layoutJson}:
     0  OK                     layoutJson is the layout as stored now
    -6  SHARD_COUNT_MISMATCH   other groups hold the layout with another count; nothing written
]]
local sp, cg = ARGV[1], ARGV[2]
local count, mode, now = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local exact = mode ~= 'adopt'
local grace = tonumber(ARGV[7])
local raw = redis.call('HGET', KEYS[1], sp)
local layout
local others = 0
if raw then
  layout = cjson.decode(raw)
  local kept = {}
  for name, joinedAt in pairs(layout.groups) do
    if name ~= cg then
      local registered = redis.call('ZSCORE', KEYS[2], cjson.encode({sp, name}))
      if registered or now - joinedAt < grace then
        kept[name] = joinedAt
        others = others + 1
      end
    end
  end
  layout.groups = kept
end
if not layout then
  layout = {id = ARGV[6], version = 1, shardCount = count, groups = {}, updatedAt = now}
elseif others == 0 and exact and layout.shardCount ~= count then
  if mode == 'exact' and redis.call('ZSCORE', KEYS[2], cjson.encode({sp, cg})) then
    return {0, raw}
  end
  layout.shardCount = count
  layout.version = layout.version + 1
  layout.updatedAt = now
elseif others > 0 and exact and layout.shardCount ~= count then
  return {-6, raw}
end
layout.groups[cg] = now
local encoded = cjson.encode(layout)
redis.call('HSET', KEYS[1], sp, encoded)
return {0, encoded}
