-- execchurn.lua - starts N children (default 30) one after the other, each of
-- which waits 30 ms and then execs /bin/true; prints `done N`. Until its exec
-- each child is a copy of this LuaJIT process, as one that os.execute or
-- io.popen starts is for an instant: what a profiler that follows children
-- must not take for a LuaJIT process. For each child it prints
-- `child PID MS`: how long it lived, fork to reap, as this parent saw it (a
-- loaded host can delay a child's exec well past its 30 ms).
--   luajit execchurn.lua [N]
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int usleep(unsigned usec);
int execv(const char *path, char *const argv[]);
int waitpid(int pid, int *status, int options);
void _exit(int status);
struct timespec { long tv_sec, tv_nsec; };
int clock_gettime(int clk, struct timespec *ts);
]]
local ts = ffi.new("struct timespec")
local function monotonic()
  ffi.C.clock_gettime(1, ts)		-- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local n = tonumber(arg and arg[1]) or 30
local name = ffi.new("char[5]", "true")
local argv = ffi.new("char *[2]")
argv[0] = name
local status = ffi.new("int[1]")
for _ = 1, n do
  local t0 = monotonic()
  local pid = ffi.C.fork()
  assert(pid >= 0, "fork failed")
  if pid == 0 then
    ffi.C.usleep(30000)
    ffi.C.execv("/bin/true", argv)
    ffi.C._exit(127)
  end
  assert(ffi.C.waitpid(pid, status, 0) == pid and status[0] == 0, "a child failed")
  print(("child %d %.0f"):format(pid, (monotonic() - t0) * 1e3))
end
print("done " .. n)
