-- dumpvms.lua - for `luahost dumpvms.lua --threads 3 SECONDS`, three VMs in
-- one process, each on its own thread, for `nupp-bpf dump`:
--   thread 1 blocks reading a line from stdin in wait_line (then "got LINE"),
--   thread 2 spins in the interpreter in spin for SECONDS (then "spun"),
--   thread 3 sleeps in os.execute("sleep SECONDS") in nap (then "slept").
-- Each thread first prints "thread INDEX tid TID".
local dur = tonumber(arg[1]) or 5
local f = io.open("/proc/thread-self/stat")
local tid = f:read("*n")
f:close()
io.stdout:write(("thread %d tid %d\n"):format(THREAD_INDEX, tid))
io.stdout:flush()

local function wait_line()
  local line = io.read("*l")  -- LINE read
  return line .. ""
end

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end  -- LINE spin
  return s
end

local function nap()
  local ok = os.execute("sleep " .. dur)  -- LINE nap
  return ok
end

if THREAD_INDEX == 1 then
  local line = wait_line()  -- LINE main1
  io.write("got ", line, "\n")
elseif THREAD_INDEX == 2 then
  jit.off()
  local start, sink = os.clock(), 0
  -- os.clock counts the whole process's CPU time: thread 2 alone uses any.
  while os.clock() - start < dur do
    sink = sink + spin(10000)  -- LINE main2
  end
  io.write("spun ", sink % 2, "\n")
else
  local ok = nap()  -- LINE main3
  io.write("slept ", tostring(ok), "\n")
end
