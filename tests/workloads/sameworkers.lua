-- sameworkers.lua - a master that forks N workers running one function, as
-- an nginx master's workers all run the same handlers: forked, they hold
-- the same code at the same addresses, so all their stacks are alike.
--   luajit sameworkers.lua N SECONDS [WAIT]
-- Each worker waits before it works, so that a profiler can find them all
-- first: WAIT seconds (default 0), or, when WAIT is not a number, until a
-- file of that name exists (at most a minute). It then spends SECONDS of CPU time in work(), then prints
-- `truth PID CPU-SECONDS` (its os.clock time, all of its own CPU time since
-- the fork but for an instant) and `window PID START END` (CLOCK_MONOTONIC
-- seconds around its work, so that a test can tell what the host did
-- meanwhile). The master prints `forked` once all run, waits for them, then
-- prints `workers done`.
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int getpid(void);
int waitpid(int pid, int *status, int options);
int usleep(unsigned usec);
void _exit(int status);
struct timespec { long tv_sec, tv_nsec; };
int clock_gettime(int clk, struct timespec *ts);
]]
local ts = ffi.new("struct timespec")
local function monotonic()
  ffi.C.clock_gettime(1, ts)		-- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local clock = os.clock
local n, seconds, wait = tonumber(arg[1]), tonumber(arg[2]), arg[3] or 0

local function wait_to_work()
  if tonumber(wait) then return ffi.C.usleep(tonumber(wait) * 1e6) end
  for _ = 1, 6000 do
    local f = io.open(wait)
    if f then return f:close() end
    ffi.C.usleep(10000)
  end
end

local function work(deadline)
  local s = 0
  repeat for i = 1, 20000 do s = (s + i) % 1000003 end until clock() > deadline
  return s
end

local pids = {}
for i = 1, n do
  io.stdout:flush()
  local pid = ffi.C.fork()
  assert(pid >= 0, "fork failed")
  if pid == 0 then
    wait_to_work()
    local t0 = monotonic()
    local sink = work(clock() + seconds)	-- a child's CPU time starts at 0
    local pid = ffi.C.getpid()
    io.stdout:write(("truth %d %.4f\nwindow %d %.4f %.4f\nsink %d\n"):format(
      pid, clock(), pid, t0, monotonic(), sink % 2))
    io.stdout:flush()
    ffi.C._exit(0)
  end
  pids[i] = pid
end
print("forked")
io.stdout:flush()
local status = ffi.new("int[1]")
for _, pid in ipairs(pids) do
  assert(ffi.C.waitpid(pid, status, 0) == pid and status[0] == 0, "a worker failed")
end
print("workers done")
