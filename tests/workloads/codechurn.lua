-- codechurn.lua - code that is loaded, run and freed over and over, so that
-- new bytecode lands where freed bytecode was. Two chunks of the same shape
-- alternate: `churnA` and `churnB` hold the same instructions in the same
-- places, except that their call to leaf() uses a different base register
-- (mid takes one parameter in A, two in B). A walker that trusted what it
-- learnt of A's call site after B took its memory would put B's frames in
-- the wrong slots. Interpreter only (jit.off).
--   luajit codechurn.lua [SECONDS [PHASE]]   (default 2 s, 0.3 s a chunk)
-- Prints "phases N, reused R" at the end: R of N chunks had their mid()
-- prototype at an address an earlier chunk's had used.
jit.off()
local ffi = require("ffi")
ffi.cdef("int usleep(unsigned int usec);")
local clock = os.clock
local secs = tonumber(arg and arg[1]) or 2
local phase = tonumber(arg and arg[2]) or 0.3

local src = {
  A = [[
local function leaf(n) local x = 0 for i = 1, n do x = x + i end return x end
local function mid(a) return leaf(a) + a end
return function(n) local t = 0 for _ = 1, n do t = t + mid(300) end return t end, mid
]],
  B = [[
local function leaf(n) local x = 0 for i = 1, n do x = x + i end return x end
local function mid(z, a) return leaf(a) + a end
return function(n) local t = 0 for _ = 1, n do t = t + mid(0, 300) end return t end, mid
]],
}

local seen, phases, reused, sink = {}, 0, 0, 0
local deadline = clock() + secs
while clock() < deadline do
  local name = phases % 2 == 0 and "A" or "B"
  local outer, mid = assert(loadstring(src[name], "=churn" .. name))()
  local where = tostring(mid)	-- the closure; its proto follows the same pattern
  if seen[where] then reused = reused + 1 end
  seen[where] = true
  local until_ = clock() + phase
  repeat sink = sink + outer(50) until clock() > until_
  -- Idle until the profiler has named this chunk's stacks (it polls every
  -- 0.1 s): a stack seen only after its code is gone cannot be named right.
  ffi.C.usleep(250000)
  outer, mid = nil, nil
  collectgarbage("collect")	-- frees the chunk's prototypes
  phases = phases + 1
end
print(("phases %d, reused %d"):format(phases, reused))
