-- gcburst.lua - a start-up that allocates hard, then steady work: burst()
-- churns short-lived tables on a small heap (hundreds of GC cycles a second)
-- for BURST seconds of CPU, then calm() does arithmetic only for CALM seconds.
--   luajit gcburst.lua [BURST [CALM]]   (default 0.5 3)
-- At exit prints `truth NAME FRACTION` (os.clock time in NAME / process CPU).
local clock = os.clock
local burst_s = tonumber(arg and arg[1]) or 0.5
local calm_s = tonumber(arg and arg[2]) or 3

local function burst(n)
  local keep
  for i = 1, n do keep = { i, { i } } end
  return keep[1]
end

local function calm(n)
  local s = 0
  for i = 1, n do s = s + i % 17 end
  return s
end

local sink, t0 = 0, clock()
while clock() - t0 < burst_s do sink = sink + burst(10000) end
local t1 = clock()
while clock() - t1 < calm_s do sink = sink + calm(100000) end
local t = clock()
print(("truth burst %.4f"):format((t1 - t0) / t))
print(("truth calm %.4f"):format((t - t1) / t))
print(("truth sink %d"):format(sink % 2))
