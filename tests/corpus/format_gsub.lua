-- string.format, gsub with patterns, captures and replacement functions,
-- gmatch and find.
local words = {}
for i = 1, 3000 do words[i] = ("item%04d=%5.2f;"):format(i, i / 7) end
local text = table.concat(words)
local h, n = 0, 0
for _ = 1, 50 do
  local t2 = text:gsub("item(%d+)=", function(d) return "k" .. (tonumber(d) % 100) .. ":" end)
  t2 = t2:gsub("%s+", "")
  for k, v in t2:gmatch("k(%d+):([%d%.]+);") do h = (h + tonumber(k) + math.floor(tonumber(v))) % 1000000007 n = n + 1 end
  local up = text:upper():gsub("ITEM", "I")
  h = (h + #up) % 1000000007
  for i = 1, 3000 do
    local s = string.format("%08x|%-6s|%3d%%|%g", i * 2654435761 % 4294967296, "ab" .. i % 10, i % 100, i / 3)
    h = (h + #s + (s:find("|", 1, true) or 0)) % 1000000007
  end
end
print("format_gsub", n, h)
