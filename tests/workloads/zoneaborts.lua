-- zoneaborts.lua - trace aborts inside a zone path: waits (busy) until a
-- profiler has opened the zone gate, then runs a loop that creates a closure
-- per iteration (11 aborts, the last one blacklisting) inside "frame/render",
-- and computes a little longer, as a program does after its hot loop.
local zone = require("nupp.profile.zone")
local t0 = os.clock()
while not zone.active() and os.clock() - t0 < 10 do end
print("gate " .. tostring(zone.active()))
local s = 0
zone.enter("frame")
zone.enter("render")
for i = 1, 300000 do local f = function() return i end s = s + f() end
zone.leave()
zone.leave()
print(s)
local t1 = os.clock()
while os.clock() - t1 < 0.2 do end
