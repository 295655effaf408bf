-- Garbage: many short-lived tables, strings and closures, with explicit
-- collection steps and full collections.
local keep, h = {}, 0
for i = 1, 1200000 do
  local t = {i, i + 1, name = "obj" .. (i % 1000)}
  if i % 100 == 0 then keep[#keep + 1] = t end
  if #keep > 500 then keep = {} end
  local f = function() return t[1] end
  h = (h + f() % 7 + #t.name) % 1000000007
  if i % 80000 == 0 then collectgarbage("step", 100) end
end
for _ = 1, 3 do collectgarbage() end
local weak = setmetatable({}, {__mode = "k"})
for i = 1, 20000 do weak[{}] = i end
collectgarbage()
local left = 0
for _ in pairs(weak) do left = left + 1 end
print("gc_heavy", h, left)
