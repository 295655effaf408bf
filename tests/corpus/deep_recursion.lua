-- Deep recursion: a non-tail recursive sum thousands of frames deep, and
-- Ackermann's function.
local function depth(n) if n == 0 then return 0 end return 1 + depth(n - 1) end
local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
local s = 0
for i = 1, 6000 do s = s + depth(5000 + i) end
for i = 1, 120 do s = s + ack(2, 300 + i) + ack(3, 5) end
print("deep_recursion", s)
