-- trace too long: a loop body longer than maxrecord, from a string chunk.
local src = { "local s = 0 for i = 1, 200 do" }
for j = 1, 3000 do src[#src + 1] = "s = s + i * " .. j end
src[#src + 1] = "end return s"
print(loadstring(table.concat(src, "\n"), "=long")())
