--[[
  The failed logins counted in an open window (docs/operations.md#login-throttling), read in
  one round trip with the time left of the window. Writes nothing. Attempts are counted by
  reserveLoginAttempt-1.lua before their password is checked.

  KEYS[1]  failed logins of one user and client address   kp:login-failures:<digest>

  Returns {failures, remainingMs}: {0, 0} when no window is open.
]]

local failures = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local remaining = redis.call('PTTL', KEYS[1])
if failures == 0 or remaining < 0 then
  return {0, 0}
end
return {failures, remaining}
