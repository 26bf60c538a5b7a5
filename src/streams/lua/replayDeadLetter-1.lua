--[[
  Replays one dead letter: appends the message it holds to a shard stream, for one consumer
  group, and deletes it from the dead-letter stream, in one step, so a replay repeated (a
  retried request, two operators at once) finds it gone and sends it no second time
  (docs/protocol.md#dead-letters). Run by the coordinator when both keys are in one slot (always
  on a single Redis).

  KEYS[1]  the dead-letter stream                 <streamPrefix>:<shard>:dead:<group>, or the
                                                  shard's shared <streamPrefix>:<shard>:dead
  KEYS[2]  the shard stream the message goes to   <streamPrefix>:<shard'>
  ARGV[1]  the dead letter's id
  ARGV[2]  the consumer group the replay is for

  The message is appended as `__coord_replay_for <group>` followed by its own fields in their
  order: consumers of every other group on the stream prefix acknowledge it without handling it.
  A marker the dead letter already carries (a replayed message dead-lettered again) is not
  copied.

  Returns {replayed, newId}:
    replayed  1, or 0 when the dead letter is gone (replayed or purged already) or is not a dead
              letter (nothing done)
    newId     the message's id in KEYS[2] ('' unless replayed)
]]
local dead, target, id, group = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local entry = redis.call('XRANGE', dead, id, id)[1]
if not entry then return {0, ''} end
local flat = entry[2]
-- originalId, deliveries and error come first; the message's own fields follow.
if flat[1] ~= 'originalId' or flat[3] ~= 'deliveries' or flat[5] ~= 'error' or #flat < 8 then
  return {0, ''}
end
local from = 7
if flat[7] == '__coord_replay_for' then from = 9 end
if #flat < from + 1 then return {0, ''} end
local args = {'XADD', target, '*', '__coord_replay_for', group}
for i = from, #flat do args[#args + 1] = flat[i] end
local newId = redis.call(unpack(args))
redis.call('XDEL', dead, id)
return {1, newId}
