-- demo.lua - a small workload with a known shape, for `make example`.
--
-- A "frame loop" that spends its time in three places: a JIT-friendly
-- physics loop, a string-heavy text layout (C code), and a particle update
-- that creates a closure per particle (FNEW is not compiled by LuaJIT 2.1,
-- so that loop aborts its traces and is blacklisted into the interpreter).
--   luajit examples/demo.lua [seconds]

local seconds = tonumber(arg and arg[1]) or 3

local function physics(bodies)
  for i = 1, #bodies do
    local b = bodies[i]
    b.vy = b.vy - 9.81 * 0.016
    b.y = b.y + b.vy * 0.016
    if b.y < 0 then b.y, b.vy = 0, -b.vy * 0.8 end
  end
end

local function layout(words)
  local lines = {}
  for i = 1, #words do
    lines[#lines + 1] = string.format("%-12s|%s", words[i], string.rep("=", i % 17))
  end
  table.sort(lines)
  return table.concat(lines, "\n")
end

local function particles(ps)
  local alive = 0
  for i = 1, #ps do
    local p = ps[i]
    local step = function(dt) return p + dt end   -- a closure per particle
    ps[i] = step(0.5) % 1000
    alive = alive + 1
  end
  return alive
end

local bodies, words, ps = {}, {}, {}
for i = 1, 2000 do bodies[i] = { y = i % 100, vy = 0 } end
for i = 1, 300 do words[i] = ("w" .. i * 7919 % 1000) end
for i = 1, 3000 do ps[i] = i end

local frames, t0 = 0, os.clock()
while os.clock() - t0 < seconds do
  for _ = 1, 20 do physics(bodies) end
  layout(words)
  particles(ps)
  frames = frames + 1
end
print(("demo: %d frames in %.1f s"):format(frames, os.clock() - t0))
