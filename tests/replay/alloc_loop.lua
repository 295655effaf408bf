-- A compiled loop that makes a table per iteration and keeps the last 64:
-- the tables escape, so the trace allocates each, calling the table
-- allocator and the GC's step (C code of the LuaJIT file).
local keep = {}
local function make(i) return { i, i + 1, i + 2, x = i } end
local function loop(n)
  local s = 0
  for i = 1, n do
    local t = make(i)
    keep[i % 64 + 1] = t
    s = s + t[2] + t.x
  end
  return s
end
io.stdout:write("ready\n"); io.stdout:flush()
while true do loop(1e6) end
