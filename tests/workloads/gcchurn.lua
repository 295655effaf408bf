-- gcchurn.lua - allocation churn: churn() fills a ring of short-lived tables
-- (the collector runs inside it, in steps the allocations trigger), calm()
-- does arithmetic only.
--   luajit gcchurn.lua [SECONDS [jit|interp]]   (default 3.5 jit)
-- With "interp" the JIT is off. At exit prints `truth NAME FRACTION`
-- (os.clock time in NAME / process CPU time).
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 3.5
if arg and arg[2] == "interp" then jit.off() end

local ring = {}
local function churn(n)
  for i = 1, n do
    ring[i % 4096 + 1] = { i, i + 1, i + 2, x = i, y = { i } }
  end
  return #ring
end

local function calm(n)
  local s = 0
  for i = 1, n do s = s + i % 13 end
  return s
end

local t_churn, t_calm, sink = 0, 0, 0
local start = clock()
while clock() - start < dur do
  local a = clock()
  sink = sink + churn(30000)
  local b = clock()
  sink = sink + calm(1000000)
  local c = clock()
  t_churn, t_calm = t_churn + (b - a), t_calm + (c - b)
end
local t = clock()
print(("truth churn %.4f"):format(t_churn / t))
print(("truth calm %.4f"):format(t_calm / t))
print(("truth sink %d"):format(sink % 2))
