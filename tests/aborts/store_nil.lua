-- store with nil key and missing metamethod, each caught by pcall.
local t = {}
local function set(k) t[k] = 1 end
local function add(a) return a + 1 end
for i = 1, 300000 do pcall(set, nil) end
for i = 1, 300000 do pcall(add, nil) end
print(#t)
