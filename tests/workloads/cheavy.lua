-- cheavy.lua - time mostly inside C library functions: sorter() runs
-- table.sort, strings() runs string.rep, gsub and find. sorter()'s copy loop
-- is compiled: its time (copy) is the compiled state's.
--   luajit cheavy.lua [SECONDS]   (default 3.5)
-- At exit prints `truth NAME FRACTION` (os.clock time in NAME / process CPU time).
local clock = os.clock
local dur = tonumber(arg and arg[1]) or 3.5
math.randomseed(42)
local pool = {}
for i = 1, 20000 do pool[i] = math.random() end

local t_copy = 0
local function sorter()
  local t = {}
  local a = clock()
  for i = 1, #pool do t[i] = pool[i] end
  t_copy = t_copy + (clock() - a)
  table.sort(t)
  return t[1]
end

local function strings()
  local s = string.rep("abc ", 50000)
  local n
  s, n = s:gsub("b", "xy")
  local k = 0
  for _ = 1, 20 do k = k + (s:find("zz", 1, true) or 1) end
  return n + k
end

local t_sort, t_str, sink = 0, 0, 0
local start = clock()
while clock() - start < dur do
  local a = clock()
  sink = sink + sorter()
  local b = clock()
  sink = sink + strings()
  local c = clock()
  t_sort, t_str = t_sort + (b - a), t_str + (c - b)
end
local t = clock()
print(("truth sorter %.4f"):format(t_sort / t))
print(("truth strings %.4f"):format(t_str / t))
print(("truth copy %.4f"):format(t_copy / t))
print(("truth sink %d"):format(math.floor(sink) % 2))
