-- testutil.lua: what the Lua side of tests/lua_api/test_lua_api.py shares.
--   local T = require("testutil")
--   T.emit(value)        print value as one line of JSON for pytest
--   T.spin(seconds)      burn CPU in this frame (a sampled hot spot)
--   T.raises(fn, ...)    the error message of fn(...), or nil when it returned
local type, pairs, tostring, format, concat = type, pairs, tostring, string.format, table.concat
local gsub, clock, floor = string.gsub, os.clock, math.floor

local T = {}

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
		  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function str(s)
  return '"'..gsub(s, '[%c"\\]', function(c)
    return escapes[c] or format("\\u%04x", c:byte())
  end)..'"'
end

-- JSON of v; a value JSON lacks is described as {"luaType": type}.
local function json(v)
  local t = type(v)
  if t == "string" then return str(v) end
  if t == "boolean" then return tostring(v) end
  if t == "nil" then return "null" end
  if t == "number" then
    if v == floor(v) and v > -2^53 and v < 2^53 then return format("%d", v) end
    return format("%.17g", v)
  end
  if t ~= "table" then return '{"luaType":'..str(t)..'}' end
  local n, keys = #v, 0
  for _ in pairs(v) do keys = keys + 1 end
  local out = {}
  if n > 0 and keys == n then
    for i = 1, n do out[i] = json(v[i]) end
    return "["..concat(out, ",").."]"
  end
  for k, x in pairs(v) do out[#out + 1] = str(tostring(k))..":"..json(x) end
  return "{"..concat(out, ",").."}"
end
T.json = json

function T.emit(v) io.write(json(v), "\n") end

function T.spin(seconds)
  local t0, x = clock(), 0
  while clock() - t0 < seconds do
    for i = 1, 1000 do x = x + i % 7 end
  end
  return x
end

function T.raises(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then return nil end
  return tostring(err)
end

return T
