-- Generated code: chunks made by loadstring, each aborting inside itself
-- where LuaJIT's search passes non-Lua frames (string.rep, recorded as an
-- __index metamethod through a continuation frame, and under pcall), then
-- dropped and collected, their memory reused by the next chunk's objects.
local template = [[
local mt = {__index = string.rep}
local t = setmetatable({}, mt)
local function get(t, i)
  return t[i]
end
local n = 0
for i = 1, 100 do
  if not pcall(get, t, i) then n = n + 1 end
end
for i = 1, 100 do
  if not pcall(string.rep, t, i) then n = n + 1 end
end
return n
]]

local total = 0
for k = 1, 8 do
  -- Each chunk's code starts k lines further down: its own locations.
  local f = assert(loadstring(string.rep("\n", k) .. template, "solver"))
  total = total + f()
  f = nil
  collectgarbage()
  collectgarbage()
  local junk = {}
  for i = 1, 2000 do junk[i] = {i, function() return i end, tostring(i)} end
end
print(total)
