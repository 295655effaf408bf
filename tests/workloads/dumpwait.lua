-- dumpwait.lua - a program whose Lua stack is known exactly while it waits,
-- for `nupp-bpf dump`.
--   luajit dumpwait.lua MODE [SECONDS]
-- MODE read: blocks reading a line from stdin (a pipe) in wait_line, called
--   from handle, called from the main chunk; then prints "got LINE".
-- MODE spin: spins in the interpreter (jit.off) in spin, called from loop,
--   for SECONDS (default 5); then prints "spun".
-- MODE sleep: sleeps in os.execute("sleep SECONDS") in nap, called from
--   the main chunk; then prints "slept".
-- MODE ffi: waits in poll(2), an FFI call made from compiled code (pause,
--   inlined into the trace of ffi_loop's loop), 5 ms at a time for SECONDS;
--   then prints "polled".
-- First prints "ready PID", where PID is its process id.
local mode = arg[1]
local dur = tonumber(arg[2]) or 5
local f = io.open("/proc/self/stat")
io.stdout:write("ready ", f:read("*n"), "\n")
f:close()
io.stdout:flush()

local function wait_line()
  local line = io.read("*l")  -- LINE read
  return line .. ""
end

local function handle()
  local line = wait_line()  -- LINE handle
  io.write("got ", line, "\n")
end

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end  -- LINE spin
  return s
end

local function loop()
  local start, sink = os.clock(), 0
  while os.clock() - start < dur do
    sink = sink + spin(10000)  -- LINE loop
  end
  return sink
end

local function nap()
  local ok = os.execute("sleep " .. dur)  -- LINE nap
  return ok
end

local function ffi_loop(n)
  local ffi = require("ffi")
  ffi.cdef("int poll(void *fds, unsigned long nfds, int timeout);")
  local C = ffi.C
  local function pause() C.poll(nil, 0, 5) end
  for _ = 1, n do pause() end  -- LINE ffi
end

if mode == "read" then
  handle()  -- LINE main_read
elseif mode == "spin" then
  jit.off()
  local sink = loop()  -- LINE main_spin
  io.write("spun ", sink % 2, "\n")
elseif mode == "sleep" then
  local ok = nap()  -- LINE main_sleep
  io.write("slept ", tostring(ok), "\n")
elseif mode == "ffi" then
  ffi_loop(dur * 200)  -- LINE main_ffi
  io.write("polled\n")
end
