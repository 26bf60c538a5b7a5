--[[
  Moves one entry a consumer kept failing on to its consumer group's dead-letter stream of the
  shard and acknowledges it on the shard, in one step, so the entry is either still pending or
  dead-lettered, never both nor lost (docs/protocol.md#dead-letters). Run by the SDK's consumer.

  KEYS[1]  the shard stream                       <streamPrefix>:<shard>
  KEYS[2]  the group's dead-letter stream         <streamPrefix>:<shard>:dead:<group>
  ARGV[1]  the Redis consumer group (the coordinator's consumerGroup)
  ARGV[2]  the entry id
  ARGV[3]  the consumer that must hold it pending ('' for any: a shard taken over)
  ARGV[4]  the least delivery count that moves it (the consumer's maxDeliveries)
  ARGV[5]  the handler's last error ('' when unknown)

  The dead letter is `originalId <id> deliveries <n> error <text>` followed by the entry's own
  fields in their order; `deliveries` is the entry's delivery count in the pending list.

  Returns {outcome, deliveries, deadId}:
    outcome  'moved'; 'not-pending' (acknowledged, or held by another consumer: nothing done);
             'below' (delivered fewer times than ARGV[4]: nothing done); 'gone' (no longer in
             the stream, trimmed or deleted: acknowledged, nothing written)
    deadId   the dead letter's id ('' unless moved)
]]
local stream, dead = KEYS[1], KEYS[2]
local group, id, consumer = ARGV[1], ARGV[2], ARGV[3]
local pending = redis.call('XPENDING', stream, group, id, id, 1)[1]
if not pending or (consumer ~= '' and pending[2] ~= consumer) then
  return {'not-pending', 0, ''}
end
local deliveries = pending[4]
if deliveries < tonumber(ARGV[4]) then return {'below', deliveries, ''} end
local entry = redis.call('XRANGE', stream, id, id)[1]
if not entry then
  redis.call('XACK', stream, group, id)
  return {'gone', deliveries, ''}
end
local args = {'XADD', dead, '*', 'originalId', id, 'deliveries', tostring(deliveries), 'error', ARGV[5]}
for _, value in ipairs(entry[2]) do args[#args + 1] = value end
local deadId = redis.call(unpack(args))
redis.call('XACK', stream, group, id)
return {'moved', deliveries, deadId}
