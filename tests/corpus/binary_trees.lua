-- Binary trees: allocate, check and drop many trees.
local function bottomUp(d)
  if d == 0 then return {} end
  d = d - 1
  return {bottomUp(d), bottomUp(d)}
end
local function check(t)
  if t[1] then return 1 + check(t[1]) + check(t[2]) end
  return 1
end
local maxd = 14
local long = bottomUp(maxd)
local s = 0
for d = 4, maxd, 2 do
  local iters = 2 ^ (maxd - d + 4)
  local c = 0
  for _ = 1, iters do c = c + check(bottomUp(d)) end
  s = s + c
end
print("binary_trees", s, check(long))
