-- Traces that end by linking to a trace in a function they inlined (as
-- tests/fixtures/workloads/linktail.lua): leaf's own loop has a trace; a
-- side trace from its exit returns into mid (RETF: its base frame is then
-- mid's, which its last snapshot holds in slot 0), calls leaf again,
-- writes leaf's frame to the stack and jumps to leaf's loop trace.
local function leaf(x)
  local s = x
  for j = 1, 8 do s = (s * 31 + j) % 1000003 end
  return s
end
local function mid(x) return leaf(x) + leaf(x + 1) end
io.stdout:write("ready\n"); io.stdout:flush()
local s = 0
while true do
  for i = 1, 1000 do s = s + mid(i) end
end
