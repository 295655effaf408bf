-- Start-up like a larger program: modules defined through package.preload
-- and required, each building lookup tables when it loads.
local names = {}
for m = 1, 60 do
  local name = "mod" .. m
  names[#names+1] = name
  package.preload[name] = function()
    local M, tbl = {}, {}
    for i = 1, 4000 do tbl[i] = (i * m) % 251 end
    function M.get(i) return tbl[i % 4000 + 1] end
    return M
  end
end
local mods = {}
for _, n in ipairs(names) do mods[#mods+1] = require(n) end
local s = 0
for r = 1, 300000 do for i = 1, #mods do s = (s + mods[i].get(r)) % 1000000007 end end
print("module_init", #mods, s)
