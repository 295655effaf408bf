-- table.sort with comparators: records by several keys, reversed order,
-- and strings.
local seed = 42
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n end
local h = 0
for round = 1, 12 do
  local recs = {}
  for i = 1, 20000 do recs[i] = {age = rnd(90), name = "n" .. rnd(5000), id = i} end
  table.sort(recs, function(a, b)
    if a.age ~= b.age then return a.age < b.age end
    if a.name ~= b.name then return a.name < b.name end
    return a.id < b.id
  end)
  for i = 1, #recs, 97 do h = (h * 31 + recs[i].id) % 1000000007 end
  local nums = {}
  for i = 1, 20000 do nums[i] = rnd(1000000) end
  table.sort(nums, function(a, b) return a > b end)
  h = (h + nums[1] + nums[#nums] + round) % 1000000007
end
print("sort_cmp", h)
