-- handler.lua - the Lua of the test server (tests/integration/nginx/nginx.conf); its
-- hot spots are known by construction.
local M = {}

-- /sum?n=N: all of the request's Lua time in one compiled loop.
local function checksum(n)
  local s = 0
  for i = 1, n do s = (s * 31 + i) % 1000003 end
  return s
end

function M.sum()
  ngx.say(checksum(tonumber(ngx.var.arg_n)))
end

-- /closures: a closure made in a loop, which the JIT cannot compile. Each
-- abort makes the loop wait twice as long before it is tried again; long
-- enough that a few dozen requests get it blacklisted.
function M.closures()
  local t = 0
  for i = 1, 2000 do
    local f = function() return i end	-- NYI: bytecode FNEW
    t = t + f()
  end
  ngx.say(t)
end

return M
