-- A program that ends after about a tenth of a second of work.
local t0 = os.clock()
local s, i = 0, 0
while os.clock() - t0 < 0.1 do
  for j = 1, 10000 do s = (s + j * j) % 1000003 end
  i = i + 1
end
-- The checksum must not depend on how many rounds the clock allowed.
local c = 0
for j = 1, 10000 do c = (c + j * j) % 1000003 end
print("short_run", c, i > 0)
