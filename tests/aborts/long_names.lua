-- Chunk names longer than the probe keeps (256 bytes): a file name at the
-- end of a long path (named from the name's end), one without a '/' in its
-- end (read whole from the target), and a long source string (named by its
-- proto's address).
local body = [[
local s = 0
for i = 1, 200 do
  local g = function() return i end
  s = s + g()
end
return s
]]
local dir = "@" .. string.rep("deep/", 80)
local total = 0
for _, name in ipairs({dir .. "name.lua", "@" .. string.rep("x", 300) .. ".lua",
                       "return " .. string.rep("1 + ", 20) .. "1 -- a long chunk string"}) do
  total = total + assert(loadstring(body, name))()
end
print(total)
