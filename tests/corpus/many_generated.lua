-- Many small generated functions, each loaded from its own source, called
-- round-robin; half of them dropped and collected midway, new ones loaded.
local function gen(k)
  local src = ("return function(x) local y = x * %d %% 1009 for i = 1, 30 do y = (y + i * %d) %% 65521 end return y end"):format(k, k + 1)
  return assert(loadstring(src, "=fn" .. k))()
end
local fs = {}
for k = 1, 400 do fs[k] = gen(k) end
local s = 0
for r = 1, 300 do
  for k = 1, #fs do s = (s + fs[k](r)) % 1000000007 end
  if r == 20 then
    for k = 1, 200 do fs[k] = gen(k + 5000) end
    collectgarbage()
  end
end
print("many_generated", s)
