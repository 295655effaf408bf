-- genfinale.lua - calls a warm-up function through run() until the file FLAG
-- exists, then N functions generated with loadstring (one chunk each, named
-- "=gen/f_<i>.lua"), each for MS ms through the same run(), and exits: a
-- profiler that reads the process only when it names a stack finds nothing
-- left of the last ones. The interpreter only (jit.off): a compiled sample
-- is mapped through its trace, read from the process. No GC cycle after the
-- start: one would retire the names of call sites the profiler knows.
--   luajit genfinale.lua FLAG [N [MS]]      (default 40, 20)
jit.off()
local flag, n, ms = arg[1], tonumber(arg[2]) or 40, tonumber(arg[3]) or 20
local clock = os.clock

local function run(f, seconds)
  local deadline, x = clock() + seconds, 1
  repeat x = f(x) until clock() > deadline
  return x
end

local fns = {}
for i = 1, n do
  fns[i] = assert(loadstring("local x = ... for j = 1, 200 do x = (x * 31 + j) % 1000003 end return x",
                             "=gen/f_" .. i .. ".lua"))
end
local function warm(x)
  for j = 1, 200 do x = (x * 17 + j) % 1000003 end
  return x
end
collectgarbage("stop")
io.write("ready\n") io.flush()
-- One call site of run() for both phases: the names it gives are known
-- before the generated functions run.
local list, seconds, i, sum = { warm }, 0.01, 0, 0
while true do
  i = i + 1
  if i > #list then
    if list == fns then break end
    if io.open(flag) then list, seconds = fns, ms / 1000 end
    i = 1
  end
  sum = sum + run(list[i], seconds)
end
print(sum > 0)
