-- large.lua: a large program's shape for scripts/bench-large.py. Generates
-- N functions (loadstring, PER_CHUNK to a chunk: 1, one each, as a
-- templating or RPC layer does; more, as modules hold many) and calls them
-- round-robin for SECONDS, so that a profile meets thousands of distinct
-- stacks, most of them only a few times.
--   luajit tests/bench/large.lua [N] [SECONDS] [PER_CHUNK]   (default 20000, 12, 1)
-- Prints "ready" once the functions exist, then a checksum at the end.
local n = tonumber(arg and arg[1]) or 20000
local seconds = tonumber(arg and arg[2]) or 12
local per_chunk = tonumber(arg and arg[3]) or 1
local fns = {}
for first = 1, n, per_chunk do
  local last, src = math.min(first + per_chunk - 1, n), { "return {" }
  for i = first, last do
    src[#src + 1] = ([[
function(x) -- handler_%d
  local s = x
  for j = 1, 40 do s = (s * 31 + j) %% 1000003 end
  return s
end,]]):format(i)
  end
  src[#src + 1] = "}"
  local chunk = assert(loadstring(table.concat(src, "\n"), "=gen/handler_" .. first .. ".lua"))()
  for i = first, last do fns[i] = chunk[i - first + 1] end
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
