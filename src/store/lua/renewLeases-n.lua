--[[
  Renews a batch of group leases in one call (docs/decisions.md, batched lease renewals): as
  redlock's extend script does for one key, without its per-call overhead. A lease is renewed
  only while it still holds this replica's value.

  KEYS[i]    lease of a group                kp:{sp:cg}:lease
  ARGV[1]    new expiry (ms)
  ARGV[i+1]  the value KEYS[i] must hold

  Returns a list: 1 (renewed) or 0 (held by another value, or gone) per key, in order.
]]
local ttl = ARGV[1]
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i + 1] then
    redis.call('pexpire', key, ttl)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
