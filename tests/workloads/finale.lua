-- finale.lua - spins in work() for WORK seconds (default 0.5), then in a
-- function not run before, finale(), for FINALE seconds (default 0.05), and
-- exits at once: the stacks of finale() are new in the profiler's last
-- moments, with the process gone right after.
--   luajit finale.lua [WORK [FINALE]]
jit.off()
local clock = os.clock

local function work(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 20000 do s = s + i % 5 end until clock() > deadline
  return s
end

local function finale(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 20000 do s = s + i % 3 end until clock() > deadline
  return s
end

work(tonumber(arg and arg[1]) or 0.5)
finale(tonumber(arg and arg[2]) or 0.05)
os.exit(0)
