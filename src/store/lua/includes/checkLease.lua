--[[
  Included by scripts that only the lease holder may run (see lua-scripts.ts).

  checkLease(leaseKey, leaseValue) -> true when the caller may proceed:
    leaseValue ~= ''  the lease key holds exactly leaseValue (the caller's Redlock lock value)
    leaseValue == ''  an unleased caller (one replica, no ownership layer): allowed only while no
                      replica holds the lease, so it can never take a group from a lease holder
]]
local function checkLease(leaseKey, leaseValue)
  local held = redis.call('GET', leaseKey)
  if leaseValue == '' then
    return held == false
  end
  return held == leaseValue
end
