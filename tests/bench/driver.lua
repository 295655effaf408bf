-- driver.lua: runs one benchmark workload of scripts/bench-sampler.py.
--   luajit tests/bench/driver.lua WORKLOAD [--hold] [--scale=X] [--jp=MODE]
-- WORKLOAD names tests/bench/WORKLOAD.lua, a chunk returning function(scale)
-- that does a fixed amount of work and returns a checksum.
--   --hold      wait for a line on stdin first (the profiler attaches meanwhile)
--   --scale=X   multiply the amount of work by X (default 1)
--   --jp=MODE   run under jit.p as `luajit -jp=MODE,/dev/null` would, and
--               print the number of samples it took to stderr ("jp_samples N")

local name = assert(arg[1], "usage: driver.lua WORKLOAD [--hold] [--scale=X] [--jp=MODE]")
local hold, scale, jp_mode = false, 1, nil
for i = 2, #arg do
  local a = arg[i]
  if a == "--hold" then hold = true
  elseif a:match("^%-%-scale=") then scale = assert(tonumber(a:sub(9)), "bad --scale")
  elseif a:match("^%-%-jp=") then jp_mode = a:sub(6)
  else error("unknown option " .. a) end
end

local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local work = assert(loadfile(dir .. "/" .. name .. ".lua"))()

-- jit.p keeps its sample count to itself: count the callbacks it receives.
local jp, jp_samples = nil, 0
if jp_mode then
  local profile = require("jit.profile")
  local start = profile.start
  profile.start = function(mode, cb)
    return start(mode, function(th, samples, vmmode)
      jp_samples = jp_samples + samples
      return cb(th, samples, vmmode)
    end)
  end
  jp = require("jit.p")
end

if hold then io.read("*l") end
if jp then jp.start(jp_mode, "/dev/null") end
local sum = work(scale)
if jp then jp.stop() end
io.stdout:write(string.format("%s %s\n", name, tostring(sum)))
if jp then io.stderr:write(string.format("jp_samples %d\n", jp_samples)) end
