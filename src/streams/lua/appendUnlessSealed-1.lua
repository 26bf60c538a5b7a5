--[[
  A producer's append to a shard stream, refused atomically when the stream ends in a seal newer
  than the routing the producer chose the shard with
  (docs/protocol.md#scale-in-and-the-end-of-a-retiring-shard): nothing a stale producer sends
  lands behind the seal of a retiring shard.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  ARGV[1]  the seal's first field (`__coord_seal`)
  ARGV[2]  the routing's seal identity (the stream prefix's layout id, or the group's
           lifecycle id from a coordinator without layouts)
  ARGV[3]  the routing's seal version (the layout version, or the metadata version)
  ARGV[4]  MAXLEN of the stream (approximate trimming), '' for none
  ARGV[5…] the entry's field/value pairs

  Returns {appended, value}:
    appended  1 when the entry was appended, 0 when a seal of that identity and a newer version
              ends the stream
    value     the new entry's id, or the version of the seal that refused it
]]
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if last then
  local f = last[2]
  if f[1] == ARGV[1] and f[2] == ARGV[2] and tonumber(ARGV[3]) < tonumber(f[4]) then
    return {0, f[4]}
  end
end
local args = {'XADD', KEYS[1]}
if ARGV[4] ~= '' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[4]
end
args[#args + 1] = '*'
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
return {1, redis.call(unpack(args))}
