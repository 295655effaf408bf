-- zoneonly.lua - all its time inside two zones, 3:1 by construction: "a"
-- runs spin(3 n) and the clock check, "b" spin(n), the same compiled loop;
-- between them only a leave and an enter. Prints `ready` once the zone
-- module is loaded and the loop runs; runs for arg[1] seconds.
local zone = require("nupp.profile.zone")
local clock = os.clock
local seconds = tonumber(arg[1]) or 10

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local start, printed, done = clock(), false, false
repeat
  zone.enter("a") spin(30000) done = clock() - start >= seconds zone.leave()
  zone.enter("b") spin(10000) zone.leave()
  if not printed then
    print("ready")
    io.stdout:flush()
    printed = true
  end
until done
