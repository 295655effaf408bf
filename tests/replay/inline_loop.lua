-- A compiled loop whose trace inlines a() (12 lines of float arithmetic, no
-- guard until its compare) and b() (4 lines).
local function a(x)
  x = x * 1.0000001 + 0.5
  x = x * 0.9999999 - 0.25
  x = x * 1.0000002 + 0.125
  x = x * 0.9999998 - 0.0625
  x = x * 1.0000003 + 0.03125
  x = x * 0.9999997 - 0.015625
  x = x * 1.0000001 + 0.5
  x = x * 0.9999999 - 0.25
  x = x * 1.0000002 + 0.125
  x = x * 0.9999998 - 0.0625
  x = x * 1.0000003 + 0.03125
  x = x * 0.9999997 - 0.015625
  if x > 1e300 then x = 0 end
  return x
end
local function b(x)
  x = x * 1.0000001 + 0.5
  x = x * 0.9999999 - 0.25
  x = x * 1.0000002 + 0.125
  x = x * 0.9999998 - 0.0625
  if x > 1e300 then x = 0 end
  return x
end
local function loop(n)
  local x = 0
  for i = 1, n do
    x = a(x)
    x = b(x)
  end
  return x
end
io.stdout:write("ready\n"); io.stdout:flush()
while true do loop(1e7) end
