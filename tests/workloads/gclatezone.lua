-- gclatezone.lua - steady GC cycles, and a zone module loaded late: about 60
-- cycles a second (200,000 small tables live, short-lived ones allocated in
-- a loop), and nupp.profile.zone required only after WAIT seconds of CPU,
-- as a script that loads it on first use.
--   luajit gclatezone.lua SECONDS WAIT
-- Prints `zone loaded` once it has loaded the module; from then on each turn
-- of the loop runs inside the zone "late" (entered anew each turn: a zone
-- entered before a profiler opens the gate is not recorded).
local clock = os.clock
local seconds, wait = tonumber(arg[1]), tonumber(arg[2])

local keep = {}
for i = 1, 200000 do keep[i] = {i} end

local function churn(t)
  for i = 1, 1000 do t[i % 64] = {i, i} end
end

local t, zone = {}, nil
while clock() < seconds do
  if not zone and clock() >= wait then
    zone = require("nupp.profile.zone")
    print("zone loaded")
    io.stdout:flush()
  end
  if zone then zone.enter("late") end
  churn(t)
  if zone then zone.leave() end
end
