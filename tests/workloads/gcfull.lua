-- gcfull.lua - compiled allocation loops with the automatic collector held
-- off (setpause 100000): all collection happens in full collections that
-- collect() asks for, so the GC's CPU time can be timed from inside.
--   luajit gcfull.lua [SECONDS]   (default 3.5)
-- At exit prints `truth NAME FRACTION` for alloc and collect (os.clock time
-- in NAME / process CPU time); the time in collect is the GC state's share.
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 3.5
collectgarbage("collect")
collectgarbage("setpause", 100000)

local keep = {}
local function alloc(n)
  local ring = {}
  for i = 1, n do
    ring[i % 1024 + 1] = { i, i + 1, x = i, y = { i } }
  end
  keep[1] = ring
  return #ring
end

-- Long-lived tables the collector has to traverse on every full cycle.
local live = {}
for i = 1, 20000 do live[i] = { i, tostring(i) } end

local function collect()
  collectgarbage("collect")
end

local t_alloc, t_collect, sink = 0, 0, 0
local start = clock()
while clock() - start < dur do
  local a = clock()
  sink = sink + alloc(100000)
  local b = clock()
  collect()
  local c = clock()
  t_alloc, t_collect = t_alloc + (b - a), t_collect + (c - b)
end
local t = clock()
print(("truth alloc %.4f"):format(t_alloc / t))
print(("truth collect %.4f"):format(t_collect / t))
print(("truth sink %d %d"):format(sink % 2, #live))
