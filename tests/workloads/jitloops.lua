-- jitloops.lua - JIT-compiled loops: hot() about 70 % of the CPU time, warm()
-- about 30 %, alternating in chunks of a few milliseconds.
--   luajit jitloops.lua [SECONDS]   (default 3.5)
-- At exit prints `truth NAME FRACTION` (os.clock time in NAME / process CPU time).
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 3.5

local function hot(n)
  local s = 0
  for i = 1, n do s = s + bit.band(i * 3, 255) end
  return s
end

local function warm(n)
  local s = 1
  for i = 1, n do s = s * 1.0000001 + 1e-9 end
  return s
end

local t_hot, t_warm, sink = 0, 0, 0
local start = clock()
while clock() - start < dur do
  local a = clock()
  sink = sink + hot(4000000)
  local b = clock()
  sink = sink + warm(1200000)
  local c = clock()
  t_hot, t_warm = t_hot + (b - a), t_warm + (c - b)
end
local t = clock()
print(("truth hot %.4f"):format(t_hot / t))
print(("truth warm %.4f"):format(t_warm / t))
print(("truth sink %d"):format(sink % 2))
