-- Trace formation (class stop): leaving loop, inner loop, loop unroll.
local s = 0
for i = 1, 2000 do
  for j = 1, 3 do s = s + j end
end
local t = { a = 1, b = 2, c = 3 }
for i = 1, 2000 do
  for _, v in pairs(t) do s = s + v end
end
print(s)
