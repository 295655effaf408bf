-- Error handling everywhere: pcall and xpcall around functions that raise
-- strings and tables, errors rethrown through levels, error() with levels.
local function risky(i)
  if i % 3 == 0 then error("string error " .. i) end
  if i % 3 == 1 then error({code = i}) end
  return i
end
local function layered(i)
  local ok, e = pcall(risky, i)
  if not ok then
    if type(e) == "table" then error(e, 0) end
    return #e
  end
  return e
end
local s, caught = 0, 0
for i = 1, 180000 do
  local ok, v = pcall(layered, i)
  if ok then s = s + v else caught = caught + 1 s = s + v.code end
  local ok2, msg = xpcall(function() error("x", 2) end, function(m) return "handled:" .. tostring(m) end)
  if not ok2 then s = s + #msg end
  s = s % 1000000007
end
print("pcall_error", s, caught)
