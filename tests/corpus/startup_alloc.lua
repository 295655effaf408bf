-- Big table allocations before anything else, then a little work on them.
local N = 2000000
local big = {}
for i = 1, N do big[i] = i end
local hash = {}
for i = 1, 200000 do hash["k" .. i] = i end
local pre = table.concat({}, "", 1, 0)
local arr2 = {}
for i = 1, 400 do arr2[i] = {} for j = 1, 400 do arr2[i][j] = i * j end end
local s = 0
for i = 1, N, 7 do s = (s + big[i]) % 1000003 end
for i = 1, 200000, 13 do s = (s + hash["k" .. i]) % 1000003 end
for i = 1, 400 do s = (s + arr2[i][i]) % 1000003 end
print("startup_alloc", s, pre == "")
