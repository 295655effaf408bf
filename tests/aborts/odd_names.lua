-- Locations that need CSV quoting: a chunk name with a comma, a quote and a newline.
local src = "local s = 0 for i = 1, 3000 do local f = function() return i end s = s + f() end return s"
print(loadstring(src, "=odd, \"name\"\nline")())
