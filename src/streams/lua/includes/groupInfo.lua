--[[
  Included by the scripts that read where one consumer group stands on a shard stream (see
  lua-scripts.ts: a line `--- @include "groupInfo"` is replaced by this file).

  groupInfo(stream, group) -> the group's entry of XINFO GROUPS as a table of field -> value
    (`name`, `pending`, `last-delivered-id`, `lag`, ...), or nil when the stream has no such
    consumer group. The stream must exist (XINFO GROUPS fails on a missing key).
]]
local function groupInfo(stream, group)
  local info
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local fields = {}
    for i = 1, #g, 2 do fields[g[i]] = g[i + 1] end
    if fields['name'] == group then info = fields end
  end
  return info
end
