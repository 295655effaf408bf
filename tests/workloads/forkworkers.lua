-- forkworkers.lua - a master that forks workers, as an OpenResty master forks
-- its nginx workers: the workers run Lua in the VM they inherit.
--   luajit forkworkers.lua [SECONDS]
-- Worker 1 spends SECONDS (default 1) of CPU time in work_a(), worker 2 in
-- work_b(), whose loop the JIT cannot compile (NYI: FNEW), at once. The master
-- prints `forked` once both run, waits for them, then prints `workers done`.
-- Each worker prints `truth work_X CPU-SECONDS` (its os.clock time, all of
-- its own CPU time since the fork but for an instant) before it exits.
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int waitpid(int pid, int *status, int options);
void _exit(int status);
]]
local clock = os.clock
local seconds = tonumber(arg and arg[1]) or 1

local function work_a(deadline)
  local s = 0
  repeat for i = 1, 20000 do s = (s + i) % 1000003 end until clock() > deadline
  return s
end

local function work_b(deadline)
  local s = 0
  repeat
    for i = 1, 20000 do
      local f = function() return i end	-- FNEW: the JIT aborts its traces here
      s = (s * 3 + f()) % 1000003
    end
  until clock() > deadline
  return s
end

local pids = {}
for i = 1, 2 do
  io.stdout:flush()
  local pid = ffi.C.fork()
  assert(pid >= 0, "fork failed")
  if pid == 0 then
    -- Called by name, so that each frame is named after its function.
    local deadline, sink = clock() + seconds	-- a child's CPU time starts at 0
    if i == 1 then sink = work_a(deadline) else sink = work_b(deadline) end
    io.stdout:write(("truth work_%s %.4f\nsink %d\n"):format(i == 1 and "a" or "b",
                                                            clock(), sink % 2))
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
