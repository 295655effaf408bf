-- Allocation-heavy: strings built by concatenation and string.format, as a
-- template or a log line is, each a new interned string. Prints its own
-- loop's wall time: "seconds S".
-- Usage: luajit strings.lua [N]
local n = tonumber(arg and arg[1]) or 300000
local fmt, concat = string.format, table.concat
local t0 = os.clock()
local bytes = 0
for i = 1, n do
  local line = fmt("%d GET /item/%d?user=%s HTTP/1.1", i, i % 977, "u" .. (i % 31))
  local parts = { "<li>", line, "</li>" }
  bytes = bytes + #concat(parts)
end
io.write(string.format("bytes %d\nseconds %.4f\n", bytes, os.clock() - t0))
