-- Closures: counters, composition, upvalues shared between closures,
-- closures created in loops and called through tables.
local function counter(step)
  local n = 0
  return function() n = n + step return n end, function() return n end
end
local function compose(f, g) return function(x) return f(g(x)) end end
local function adder(k) return function(x) return x + k end end
local function twice(f) return compose(f, f) end
local s = 0
for i = 1, 700000 do
  local inc, get = counter(i % 5 + 1)
  for _ = 1, 10 do inc() end
  local f = twice(compose(adder(i), adder(1)))
  s = (s + get() + f(i)) % 1000000007
end
local handlers = {}
for i = 1, 100 do handlers[i] = function(x) return x * i % 97 end end
for r = 1, 700000 do s = (s + handlers[r % 100 + 1](r)) % 1000000007 end
print("closures", s)
