--[[
  Deletes a shard's whole dead-letter stream and says how many dead letters it held, in one
  step (docs/protocol.md#dead-letters). A key of that name that is not a stream (another
  application's) is left alone: XLEN fails with WRONGTYPE before anything is deleted.

  KEYS[1]  the dead-letter stream                 <streamPrefix>:<shard>:dead

  Returns the number of entries deleted (0 when there was no such key).
]]
local count = redis.call('XLEN', KEYS[1])
redis.call('DEL', KEYS[1])
return count
