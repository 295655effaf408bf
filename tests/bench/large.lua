-- large.lua: a large program's shape for scripts/bench-large.py. Generates
-- N functions (loadstring, one chunk each, as a templating or RPC layer
-- does) and calls them round-robin for SECONDS, so that a profile meets
-- thousands of distinct stacks, most of them only a few times.
--   luajit tests/bench/large.lua [N] [SECONDS]   (default 20000, 12)
-- Prints "ready" once the functions exist, then a checksum at the end.
local n = tonumber(arg and arg[1]) or 20000
local seconds = tonumber(arg and arg[2]) or 12
local fns = {}
for i = 1, n do
  fns[i] = assert(loadstring(([[
local function handler_%d(x)
  local s = x
  for j = 1, 40 do s = (s * 31 + j) %% 1000003 end
  return s
end
return handler_%d]]):format(i, i), "=gen/handler_" .. i .. ".lua"))()
end
io.write("ready\n") io.flush()
local clock, sum, i = os.clock, 0, 0
local deadline = clock() + seconds
while clock() < deadline do
  for _ = 1, 200 do
    i = i % n + 1
    sum = (sum + fns[i](i)) % 1000003
  end
end
io.write("checksum ", sum, "\n")
