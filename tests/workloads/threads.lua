-- threads.lua - for `luahost threads.lua --threads N SECONDS N`: every thread
-- runs its own VM and spins in a function chosen by THREAD_INDEX for about
-- SECONDS (default 2): thread 1 in spin_one, thread 2 in spin_two, any
-- other in spin_other. Each thread first prints "thread INDEX tid TID", at
-- the end "thread INDEX sink X cpu SECONDS" with its own CPU time. The second argument is N again: os.clock counts the
-- CPU time of the whole process, N threads at once.
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 2
local nthreads = tonumber(arg and arg[2]) or 1

local function spin_one(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function spin_two(n)
  local s = 0
  for i = 1, n do s = s + i % 11 end
  return s
end

local function spin_other(n)
  local s = 0
  for i = 1, n do s = s + i % 13 end
  return s
end

-- The kernel's id of this thread, so a test can tell the threads apart.
local f = io.open("/proc/thread-self/stat")
local tid = f and f:read("*n")
if f then f:close() end
io.stdout:write(("thread %d tid %s\n"):format(THREAD_INDEX, tostring(tid)))
io.stdout:flush()

local start, sink = clock(), 0
local limit = dur * nthreads
if THREAD_INDEX == 1 then
  while clock() - start < limit do sink = sink + spin_one(100000) end
elseif THREAD_INDEX == 2 then
  while clock() - start < limit do sink = sink + spin_two(100000) end
else
  while clock() - start < limit do sink = sink + spin_other(100000) end
end
-- This thread's own CPU time (os.clock counts the whole process).
f = io.open("/proc/thread-self/schedstat")
local ns = f and f:read("*n")
if f then f:close() end
io.write(("thread %d sink %d cpu %.3f\n"):format(THREAD_INDEX, sink % 2, (ns or 0) / 1e9))
