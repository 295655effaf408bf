-- execself.lua - a LuaJIT program that executes another program in its own
-- process, as a launcher or a server upgrading itself in place does.
--   luajit execself.lua SECONDS [THEN]
-- Prints `started`, spends SECONDS of CPU time in before_exec(), prints
-- `truth before_exec CPU-SECONDS`, then replaces itself (execv) with:
--   THEN = "self" (default), or the path of another LuaJIT executable: that
--          LuaJIT running this script's `after` part, which spends SECONDS in
--          after_exec(), whose loop the JIT cannot compile (NYI: FNEW),
--          prints `truth after_exec CPU-SECONDS` and exits 0;
--   THEN = "sh": `sh -c 'sleep 1; exit 7'`.
-- A process keeps its CPU time across an exec: each part prints its own.
local ffi = require("ffi")
ffi.cdef[[
int execv(const char *path, const char *const argv[]);
long readlink(const char *path, char *buf, unsigned long size);
]]
local clock = os.clock
local seconds = tonumber(arg and arg[1]) or 1
local part = arg and arg[2] or "self"

local function before_exec(deadline)
  local s = 0
  repeat for i = 1, 20000 do s = (s + i) % 1000003 end until clock() > deadline
  return s
end

local function after_exec(deadline)
  local s = 0
  repeat
    for i = 1, 20000 do
      local f = function() return i end	-- FNEW: the JIT aborts its traces here
      s = (s * 3 + f()) % 1000003
    end
  until clock() > deadline
  return s
end

local function exec(args)
  local argv = ffi.new("const char *[?]", #args + 1, args)
  io.stdout:flush()
  ffi.C.execv(args[1], argv)
  error("execv " .. args[1] .. " failed")
end

local t0 = clock()
if part == "after" then
  local sink = after_exec(t0 + seconds)
  print(("truth after_exec %.4f\nsink %d"):format(clock() - t0, sink % 2))
  return
end
print("started")
io.stdout:flush()
-- Called by name, so that each frame is named after its function.
local sink = before_exec(t0 + seconds)
print(("truth before_exec %.4f\nsink %d"):format(clock() - t0, sink % 2))
if part == "sh" then
  exec({ "/bin/sh", "-c", "sleep 1; exit 7" })
end
local exe = part
if part == "self" then
  local buf = ffi.new("char[4096]")
  local n = ffi.C.readlink("/proc/self/exe", buf, 4096)
  assert(n > 0, "readlink /proc/self/exe")
  exe = ffi.string(buf, n)
end
exec({ exe, arg[0], tostring(seconds), "after" })
