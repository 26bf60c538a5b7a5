--[[
  Reserves one login attempt (docs/operations.md#login-throttling): counts it as a failed login
  before its password is checked, unless the window already holds the most the window allows,
  in one step, so attempts sent at once (to any replica on the store) cannot all pass the
  check. A login that proves its password clears the key. The first attempt opens the window
  (the key's TTL); later ones count in it without extending it. A refused attempt counts
  nothing.

  KEYS[1]  failed logins of one user and client address   kp:login-failures:<digest>
  ARGV[1]  the most attempts a window allows (login-max-failures; integer, decimal string)
  ARGV[2]  the window, ms (integer, decimal string)

  Returns {allowed, failures, remainingMs}: allowed 1 when this attempt was counted and may
  check its password, 0 when it is refused; the failures counted in the window (this attempt
  included when allowed) and the milliseconds left of it.
]]

local limit = tonumber(ARGV[1])
local failures = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local allowed = 0
if failures < limit then
  failures = redis.call('INCR', KEYS[1])
  allowed = 1
end
local remaining = redis.call('PTTL', KEYS[1])
if remaining < 0 then
  -- A new window (or, should one ever lack it, a key without its TTL): the window starts now.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  remaining = tonumber(ARGV[2])
end
return {allowed, failures, remaining}
