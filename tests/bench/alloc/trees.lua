-- Allocation-heavy: complete binary trees of tables built and walked,
-- most dropped at once (the allocation pattern of the classic
-- binary-trees benchmark, written for this bench). Prints its own
-- loop's wall time: "seconds S".
-- Usage: luajit trees.lua [DEPTH]
local depth = tonumber(arg and arg[1]) or 14

local function make(d)
  if d == 0 then return { false, false } end
  d = d - 1
  return { make(d), make(d) }
end

local function check(t)
  if not t[1] then return 1 end
  return 1 + check(t[1]) + check(t[2])
end

local clock = os.clock
local t0 = clock()
local long_lived = make(depth)
local n = 0
for d = 4, depth, 2 do
  for _ = 1, 2 ^ (depth - d + 4) do n = n + check(make(d)) end
end
n = n + check(long_lived)
io.write(string.format("nodes %d\nseconds %.4f\n", n, clock() - t0))
