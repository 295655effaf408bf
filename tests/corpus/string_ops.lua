-- Text processing: word counts over generated text, reversing, case,
-- byte-level hashing and string comparisons.
local words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
local parts = {}
local seed = 7
for i = 1, 1200000 do seed = (seed * 69069 + 1) % 4294967296 parts[i] = words[seed % #words + 1] end
local text = table.concat(parts, " ")
local counts = {}
for w in text:gmatch("%a+") do counts[w] = (counts[w] or 0) + 1 end
local keys = {}
for k in pairs(counts) do keys[#keys+1] = k end
table.sort(keys)
local h = 0
for _, k in ipairs(keys) do h = (h * 31 + counts[k]) % 1000000007 end
for i = 1, 1200000 do
  local w = parts[i]
  h = (h + #w:reverse() + (w:upper() < "M" and 1 or 2) + w:byte(1)) % 1000000007
end
print("string_ops", #keys, h)
