-- zonecost.lua - zone work in a compiled loop, and what a zone costs.
--
-- Every 0.2 s (of CPU) it prints one line:
--   window <n> active <true|false> ns <ns per enter+leave pair>
-- and spends its time inside the zone path "frame/render" (spin) and
-- "frame/physics" (twice as long), so a profiler attached from outside sees
-- both paths. Runs for arg[1] seconds (default 6).
local zone = require("nupp.profile.zone")
local clock = os.clock
local seconds = tonumber(arg[1]) or 6

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

-- ns per enter+leave pair, over a compiled loop of n pairs.
local function cost(n)
  local t0 = clock()
  for _ = 1, n do zone.enter("tick") zone.leave() end
  return (clock() - t0) * 1e9 / n
end

local start, window = clock(), 0
while clock() - start < seconds do
  local w0 = clock()
  while clock() - w0 < 0.2 do
    zone.enter("frame")
    zone.enter("render") spin(20000) zone.leave()
    zone.enter("physics") spin(40000) zone.leave()
    zone.leave()
  end
  window = window + 1
  io.write(("window %d active %s ns %.2f\n"):format(window, tostring(zone.active()), cost(2e6)))
  io.flush()
end
