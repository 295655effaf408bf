-- unroll.lua - a short recursion called from a hot loop: the side trace that
-- follows the recursion back into the loop unrolls it until the recorder's
-- loop unroll limit ("loop unroll limit reached", benign).
local function r(n)
  if n == 0 then return 0 end
  return 1 + r(n - 1)
end
local s = 0
for _ = 1, 200 do s = s + r(3) end
print(s)
