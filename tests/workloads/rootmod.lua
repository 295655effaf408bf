-- rootmod.lua - the module root.lua requires, for --root rootmod.lua.
local M = {}
local clock = os.clock

local function work(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

-- Spin in work() for SECONDS of CPU time.
function M.run(seconds)
  local deadline, s = clock() + seconds, 0
  repeat s = s + work(50000) until clock() > deadline
  return s
end

return M
