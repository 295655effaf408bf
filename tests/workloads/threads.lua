-- threads.lua - for `luahost threads.lua --threads N`: every thread runs its
-- own VM and spins in a function chosen by THREAD_INDEX, for SECONDS
-- (default 2): thread 1 in spin_one, thread 2 in spin_two, others spin_other.
--   luahost threads.lua --threads 2 [SECONDS]
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 2

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

local spin = THREAD_INDEX == 1 and spin_one or THREAD_INDEX == 2 and spin_two or spin_other
local start, sink = clock(), 0
-- os.clock is process-wide CPU time: with N threads it runs N times as fast.
local threads = tonumber(os.getenv("THREADS") or "1")
while clock() - start < dur * threads do
  sink = sink + spin(100000)
end
print(("thread %d sink %d"):format(THREAD_INDEX, sink % 2))
