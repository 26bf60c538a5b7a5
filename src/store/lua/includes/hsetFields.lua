--[[
  Included by scripts that write many fields (see lua-scripts.ts).

  hsetFields(key, fields): HSET of a Lua table field -> string value, in chunks, because
  unpack() of a large group (thousands of shard:/member: fields) would overflow the Lua stack.
]]
local function hsetFields(key, fields)
  local args = {}
  for name, value in pairs(fields) do
    args[#args + 1] = name
    args[#args + 1] = value
    if #args >= 1000 then
      redis.call('HSET', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('HSET', key, unpack(args))
  end
end
