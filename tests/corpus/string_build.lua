-- String building: concatenation in loops, table.concat, rep, sub and byte.
local parts = {}
for i = 1, 200000 do parts[#parts+1] = tostring(i) .. "," end
local s = table.concat(parts)
local acc = ""
for i = 1, 8000 do acc = acc .. string.char(65 + i % 26) end
local h = 0
for i = 1, #s, 3 do h = (h * 31 + s:byte(i)) % 1000000007 end
for i = 1, #acc do h = (h * 17 + acc:byte(i)) % 1000000007 end
local r = ("abc"):rep(80000)
for i = 1, 80000 do h = (h + #r:sub(i, i + 5)) % 1000000007 end
print("string_build", #s, #acc, h)
