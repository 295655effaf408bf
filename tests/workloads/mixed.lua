-- mixed.lua - half interpreted, half compiled: outer() calls interpreted()
-- (JIT disabled for it) and compiled() in turn, for SECONDS (default 2).
--   luajit mixed.lua [SECONDS]
-- Prints "ready" once running, so a test can attach to it, and at exit
-- `truth cpu SECONDS`, the process's CPU time.
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 2

local function interpreted(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(interpreted)

local function compiled(n)
  local s = 0
  for i = 1, n do s = s + bit.band(i, 63) end
  return s
end

local function outer()
  return interpreted(100000) + compiled(2000000)
end

io.stdout:write("ready\n")
io.stdout:flush()
local start, sink = clock(), 0
while clock() - start < dur do
  sink = sink + outer()
end
print(("truth sink %d"):format(sink % 2))
print(("truth cpu %.3f"):format(clock()))
