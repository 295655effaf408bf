-- c_heavy.lua: time in C library functions: table.sort (default order),
-- string.format, gsub, find with patterns, table.concat.
return function(scale)
  local seed, sum = 12345, 0
  local function rnd()
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed
  end
  for r = 1, math.floor(180 * scale) do
    local t = {}
    for i = 1, 20000 do t[i] = rnd() end
    table.sort(t)
    sum = (sum + t[1] + t[#t]) % 1000003
    local parts = {}
    for i = 1, 2000 do parts[i] = string.format("%08x:%d", t[i], i) end
    local s = table.concat(parts, ",")
    local n = select(2, s:gsub("%x+:(%d+)", "%1"))
    local a, b = s:find("(%d+),[^,]*$")
    sum = (sum + n + (a or 0) + (b or 0)) % 1000003
  end
  return sum
end
