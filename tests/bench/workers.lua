-- workers.lua - a master and N forked workers, as an OpenResty server at a
-- light load: each worker does ~1 ms of Lua work every 100 ms.
--   luajit workers.lua N SECONDS
-- The master prints `forked` once all run, then waits for them.
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int waitpid(int pid, int *status, int options);
int usleep(unsigned usec);
void _exit(int status);
]]
local n, seconds = tonumber(arg[1]), tonumber(arg[2])

local function handle(k)
  local s = 0
  for i = 1, 100000 do s = (s + i * k) % 1000003 end
  return s
end

local function serve(deadline)
  local s = 0
  while os.time() < deadline do
    s = s + handle(s % 7 + 1)
    ffi.C.usleep(99000)
  end
  return s
end

local deadline = os.time() + seconds
for _ = 1, n do
  local pid = ffi.C.fork()
  assert(pid >= 0, "fork failed")
  if pid == 0 then
    serve(deadline)
    ffi.C._exit(0)
  end
end
print("forked")
io.stdout:flush()
for _ = 1, n do ffi.C.waitpid(-1, nil, 0) end
