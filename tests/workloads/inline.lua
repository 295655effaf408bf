-- inline.lua - a compiled loop whose callees the JIT inlines into its trace:
-- loop() calls a(x) and b(x) in turn; a does three times b's arithmetic.
--   luajit inline.lua MODE [SECONDS]   (default 3)
-- MODE:
--   plain    one looping trace, a and b inlined into it
--   side     a branches on the iteration's parity: the branch the root
--            trace did not take becomes a side trace, half the iterations
--            run a's rest and b there
--   stitch   loop() calls os.time between a and b, a builtin the JIT does
--            not compile: the trace stops there and a stitched trace runs b
-- a and b are long (192 and 64 dependent multiply-adds), so that what the
-- transitions between traces cost next to them is small. Each function
-- starts with a comparison, which the JIT guards with a
-- snapshot inside that function: its code maps to it.
-- First times loops of a alone and of b alone (os.clock) and prints
-- `truth a FRACTION`: a's share of a + b, what a profile of loop() should
-- give a among a and b. Then runs loop() for SECONDS and prints `truth cpu`
-- and how many side traces (in a) and stitched traces (in loop) the JIT
-- started meanwhile.
local clock, time = os.clock, os.time
local mode = arg and arg[1] or "plain"
local dur = tonumber(arg and arg[2]) or 3
assert(mode == "plain" or mode == "side" or mode == "stitch", "mode: plain, side or stitch")

local function a(x, i)
  if x > 1e300 then x = 0 end
  if mode == "side" then
    if i % 2 == 0 then x = x + 1 else x = x - 1 end
  end
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  return x
end

local function b(x)
  if x > 1e300 then x = 0 end
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5; x = x * 0.999 + 0.5
  return x
end

local function loop(n, x)
  if mode == "stitch" then
    for i = 1, n do x = a(x, i); x = x + time() * 0; x = b(x) end
  else
    for i = 1, n do x = a(x, i); x = b(x) end
  end
  return x
end

-- The calibration: each function alone in a loop of its own, compiled too.
local function only_a(n, x) for i = 1, n do x = a(x, i) end return x end
local function only_b(n, x) for i = 1, n do x = b(x) end return x end

local N, sink = 250000, 0
sink = sink + only_a(N, 1) + only_b(N, 1)	-- compile them first
local ta, tb = 0, 0
for _ = 1, 3 do
  local t0 = clock()
  sink = sink + only_a(N, 1)
  local t1 = clock()
  sink = sink + only_b(N, 1)
  ta, tb = ta + (t1 - t0), tb + (clock() - t1)
end
print(("truth a %.4f"):format(ta / (ta + tb)))

-- Which traces the run makes: side traces starting in a, and stitched
-- traces starting in loop, counted as the JIT starts them (jit.attach, as
-- -jv sees them).
local sides, stitched = 0, 0
jit.attach(function(what, _, func, _, parent, exit)
  if what == "start" and parent then
    if exit == -1 and func == loop then stitched = stitched + 1 end
    if exit ~= -1 and func == a then sides = sides + 1 end
  end
end, "trace")

local start = clock()
while clock() - start < dur do
  sink = sink + loop(25000, 1)
end
print(("truth sidetraces %d"):format(sides))
print(("truth stitched %d"):format(stitched))
print(("truth sink %d"):format(sink % 2))
print(("truth cpu %.3f"):format(clock()))
