-- gc_heavy.lua: allocation churn: short-lived tables, closures and strings,
-- with a slowly replaced set of live objects for the collector to traverse.
return function(scale)
  local live, sum = {}, 0
  for i = 1, math.floor(4.6e6 * scale) do
    local t = { i, i + 1, name = "n" .. (i % 1000) }
    local f = function() return t[1] end
    live[i % 20000 + 1] = { t, f }
    sum = (sum + f() + #t.name) % 1000003
  end
  return sum
end
