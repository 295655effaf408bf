-- Objects with metatables: classes, inheritance through __index chains,
-- operators (__add, __eq, __lt, __tostring, __call) and methods.
local Vec = {}
Vec.__index = Vec
function Vec.new(x, y) return setmetatable({x = x, y = y}, Vec) end
function Vec.__add(a, b) return Vec.new(a.x + b.x, a.y + b.y) end
function Vec.__eq(a, b) return a.x == b.x and a.y == b.y end
function Vec.__lt(a, b) return a:len2() < b:len2() end
function Vec.__tostring(v) return ("(%d,%d)"):format(v.x, v.y) end
function Vec:len2() return self.x * self.x + self.y * self.y end

local Shape = {}
Shape.__index = Shape
function Shape.new(kind) return setmetatable({kind = kind}, Shape) end
function Shape:area() return 0 end
function Shape:describe() return self.kind .. ":" .. self:area() end

local Rect = setmetatable({}, {__index = Shape})
Rect.__index = Rect
function Rect.new(w, h) local r = Shape.new("rect") r.w, r.h = w, h return setmetatable(r, Rect) end
function Rect:area() return self.w * self.h end

local Square
Square = setmetatable({}, {__index = Rect, __call = function(_, s) return Square.new(s) end})
Square.__index = Square
function Square.new(s) local q = Rect.new(s, s) q.kind = "square" return setmetatable(q, Square) end

local acc, v, n = 0, Vec.new(0, 0), 0
for i = 1, 1000000 do
  v = v + Vec.new(i % 7, i % 5)
  local sh = (i % 3 == 0) and Square(i % 11) or Rect.new(i % 13, i % 17)
  acc = (acc + sh:area() + #sh:describe()) % 1000000007
  if Vec.new(1, 2) < Vec.new(2, 2) and Vec.new(i, 0) == Vec.new(i, 0) then n = n + 1 end
end
print("oop_meta", tostring(v), acc, n)
