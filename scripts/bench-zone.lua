-- bench-zone.lua: ns per zone.enter + zone.leave pair inside a compiled loop,
-- with the gate closed and open, and the trace aborts the zone code caused.
--   LUA_PATH='build/lua/?.lua;;' LUA_CPATH='build/lua/?.so;;' luajit scripts/bench-zone.lua [pairs]
-- Targets: <= 5 ns closed, <= 50 ns open.

local zone = require("nupp.profile.zone")
local clock, format = os.clock, string.format
local N = tonumber(arg and arg[1]) or 2e7

local aborts = 0
local function on_trace(what) if what == "abort" then aborts = aborts + 1 end end

local function loop(n)
  local enter, leave, acc = zone.enter, zone.leave, 0
  for i = 1, n do
    enter("frame")
    enter("render")
    acc = acc + i
    leave()
    leave()
  end
  return acc
end

local function empty(n)
  local acc = 0
  for i = 1, n do acc = acc + i end
  return acc
end

-- Best of five runs, in ns per enter+leave pair (two pairs per iteration).
local function measure(fn, n)
  local best = math.huge
  for _ = 1, 5 do
    local t0 = clock()
    fn(n)
    local t = clock() - t0
    if t < best then best = t end
  end
  return best * 1e9 / (2 * n)
end

jit.attach(on_trace, "trace")
local base = measure(empty, N)
local off = measure(loop, N) - base
zone.hold()
local on = measure(loop, N) - base
zone.release()
jit.attach(on_trace)

print(format("zone_state.so loaded: %s", tostring(zone.usdt)))
print(format("gate closed: %6.2f ns per enter+leave", off))
print(format("gate open:   %6.2f ns per enter+leave", on))
print(format("trace aborts during the loops: %d", aborts))
