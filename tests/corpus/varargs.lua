-- Varargs: select, forwarding, packing with {...} and unpack, tail calls
-- with varargs.
local function count(...) return select("#", ...) end
local function sum(...)
  local s = 0
  for i = 1, select("#", ...) do s = s + (select(i, ...)) end
  return s
end
local function forward(f, ...) return f(...) end
local function pack(...) return {n = select("#", ...), ...} end
local function rot(a, ...) if a == nil then return end return ... end
local s = 0
for i = 1, 1500000 do
  local t = pack(i, i + 1, i + 2, nil, i + 4)
  s = s + t.n + sum(unpack(t, 1, 3)) + forward(count, 1, 2, 3, i)
  s = s + count(rot(1, 2, 3, 4)) + forward(sum, i, 1)
  s = s % 1000000007
end
print("varargs", s)
