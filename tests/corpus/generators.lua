-- Generators: coroutine.wrap iterators in generic for loops, nested and
-- chained (map, filter, take).
local function range(n) return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end) end
local function map(f, g) return coroutine.wrap(function() for v in g do coroutine.yield(f(v)) end end) end
local function filter(p, g) return coroutine.wrap(function() for v in g do if p(v) then coroutine.yield(v) end end end) end
local function take(n, g)
  return coroutine.wrap(function()
    local k = 0
    for v in g do k = k + 1 if k > n then return end coroutine.yield(v) end
  end)
end
local s = 0
for r = 1, 300 do
  for v in take(4000, filter(function(x) return x % 3 ~= 0 end, map(function(x) return x * r end, range(10000)))) do
    s = (s + v) % 1000000007
  end
end
print("generators", s)
