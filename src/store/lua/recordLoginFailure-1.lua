--[[
  Counts one failed login (docs/operations.md#login-throttling). Every replica on the store
  counts in the same key, so a caller refused on one replica is refused on all of them. The
  first failure opens the window (the key's TTL); later ones count in it without extending it.

  KEYS[1]  failed logins of one user and client address   kp:login-failures:<digest>
  ARGV[1]  the window, ms (integer, decimal string)

  Returns {failures, remainingMs}: the failures counted in the window (this one included) and
  the milliseconds left of it.
]]

local failures = redis.call('INCR', KEYS[1])
local remaining = redis.call('PTTL', KEYS[1])
if remaining < 0 then
  -- A new window (or, should one ever lack it, a key without its TTL): the window starts now.
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  remaining = tonumber(ARGV[1])
end
return {failures, remaining}
