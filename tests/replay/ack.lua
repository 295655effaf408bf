-- Ackermann's function: recursion hundreds of frames deep, far below the
-- frames a walk keeps.
local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
io.stdout:write("ready\n"); io.stdout:flush()
while true do ack(2, 300) end
