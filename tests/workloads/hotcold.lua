-- hotcold.lua - a hot function and a cold one, and trace aborts on request.
--   luajit hotcold.lua [SECONDS] [ABORT_AFTER]
-- hot and cold run the same loop; each round, hot runs it three times as
-- often as cold: hot holds 3/4 of the samples taken in the two. After
-- ABORT_AFTER seconds of wall time (default: never), each second loads a new chunk whose
-- loop creates closures (NYI: bytecode FNEW, which the JIT of every LuaJIT
-- 2.1 build aborts on): a few aborts each time, and a blacklisting. Prints
-- "ready" once running; runs SECONDS (default: until killed).
local clock, time = os.clock, os.time
local dur = tonumber(arg and arg[1]) or math.huge
local abort_after = tonumber(arg and arg[2]) or math.huge

local function hot(n)
  local x = 0
  for i = 1, n do x = (x + i * 7) % 1000003 end
  return x
end

local function cold(n)
  local x = 0
  for i = 1, n do x = (x + i * 7) % 1000003 end
  return x
end

local closures = [[
local s = 0
for i = 1, 300 do
  local f = function() return i end
  s = s + f()
end
return s
]]

print("ready")
io.stdout:flush()
local t0 = clock()
local next_abort = time() + abort_after
local sink = 0
while clock() - t0 < dur do
  sink = sink + hot(30000) + cold(10000)
  if time() >= next_abort then
    sink = sink + loadstring(closures, "=closures")()
    next_abort = next_abort + 1
  end
end
print(sink)
