-- root.lua - a program whose time is mostly in module rootmod.lua, reached
-- through two different callers (via_a, via_b), plus time in its own own().
--   luajit root.lua [SECONDS]   (default 2)
-- Interpreter only. At exit prints `truth NAME FRACTION` for via_a, via_b,
-- own (os.clock time / process CPU time).
jit.off()
package.path = (arg[0]:match("^(.*/)") or "./") .. "?.lua;" .. package.path
local mod = require("rootmod")
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 2

-- (not tail calls: those would replace the caller's frame)
local function via_a(s) local r = mod.run(s) return r end
local function via_b(s) local r = mod.run(s) return r end
local function own(seconds)
  local deadline, s = clock() + seconds, 0
  repeat for i = 1, 50000 do s = s + i % 5 end until clock() > deadline
  return s
end

local t = { via_a = 0, via_b = 0, own = 0 }
local start, sink = clock(), 0
while clock() - start < dur do
  local a = clock()
  sink = sink + via_a(0.01)
  local b = clock()
  sink = sink + via_b(0.005)
  local c = clock()
  sink = sink + own(0.005)
  local d = clock()
  t.via_a, t.via_b, t.own = t.via_a + (b - a), t.via_b + (c - b), t.own + (d - c)
end
local total = clock()
for _, k in ipairs({ "via_a", "via_b", "own" }) do
  print(("truth %s %.4f"):format(k, t[k] / total))
end
print(("truth sink %d"):format(sink % 2))
