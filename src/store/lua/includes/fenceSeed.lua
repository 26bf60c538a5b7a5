--[[
  Included by the scripts that start a fence (see lua-scripts.ts).

  fenceSeed() -> the first fence of a metadata hash, as a decimal string: the Redis server's
  clock in microseconds (TIME). Claims then count up by 1 from it. A group deleted and created
  again starts far above every fence its earlier lifecycle reached, so a paused writer of that
  lifecycle can never hold a fence that matches again. Built by string concatenation: a Lua
  number of this size would print in exponent notation.
]]
local function fenceSeed()
  local now = redis.call('TIME')
  return now[1] .. string.format('%06d', tonumber(now[2]))
end
