-- early.lua - a program whose first EARLY seconds of CPU time (default 0.3)
-- are spent in early(), the next LATE seconds (default 0.7) in late().
--   luajit early.lua [EARLY [LATE]]
-- Interpreter only. At exit prints `truth NAME FRACTION` for early and late
-- (os.clock time / process CPU time): a profile of the whole run, from its
-- first instruction, must show the same split.
jit.off()
local clock = os.clock
local t_early = tonumber(arg and arg[1]) or 0.3
local t_late = tonumber(arg and arg[2]) or 0.7

local function early(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 20000 do s = s + i % 5 end until clock() > deadline
  return s
end

local function late(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 20000 do s = s + i % 3 end until clock() > deadline
  return s
end

local a = clock()
local sink = early(t_early)
local b = clock()
sink = sink + late(t_late)
local c = clock()
print(("truth early %.4f"):format((b - a) / c))
print(("truth late %.4f"):format((c - b) / c))
print(("truth sink %d"):format(sink % 2))
