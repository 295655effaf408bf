-- A small JSON encoder and decoder, run over generated documents.
local concat, byte, sub, format = table.concat, string.byte, string.sub, string.format
local encode
local function encode_str(s) return '"' .. s:gsub('[%c"\\]', function(c) return format("\\u%04x", byte(c)) end) .. '"' end
function encode(v, out)
  local t = type(v)
  if t == "table" then
    if #v > 0 then
      out[#out+1] = "["
      for i = 1, #v do if i > 1 then out[#out+1] = "," end encode(v[i], out) end
      out[#out+1] = "]"
    else
      local keys = {}
      for k in pairs(v) do keys[#keys+1] = k end
      table.sort(keys)
      out[#out+1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out+1] = "," end
        out[#out+1] = encode_str(k) out[#out+1] = ":" encode(v[k], out)
      end
      out[#out+1] = "}"
    end
  elseif t == "string" then out[#out+1] = encode_str(v)
  else out[#out+1] = tostring(v) end
end
local decode
local function skip(s, i) return s:find("[^ \n\t]", i) end
function decode(s, i)
  i = skip(s, i)
  local c = sub(s, i, i)
  if c == "{" then
    local o = {} i = i + 1
    if sub(s, skip(s, i), skip(s, i)) == "}" then return o, skip(s, i) + 1 end
    while true do
      local k k, i = decode(s, i)
      i = skip(s, i) + 1
      o[k], i = decode(s, i)
      i = skip(s, i)
      if sub(s, i, i) == "}" then return o, i + 1 end
      i = i + 1
    end
  elseif c == "[" then
    local a = {} i = i + 1
    while true do
      a[#a+1], i = decode(s, i)
      i = skip(s, i)
      if sub(s, i, i) == "]" then return a, i + 1 end
      i = i + 1
    end
  elseif c == '"' then
    local j = s:find('"', i + 1, true)
    return sub(s, i + 1, j - 1), j + 1
  else
    local j = s:find("[,%]} ]", i) or #s + 1
    local w = sub(s, i, j - 1)
    if w == "true" then return true, j elseif w == "false" then return false, j end
    return tonumber(w), j
  end
end
local h = 0
for r = 1, 1200 do
  local doc = {}
  for i = 1, 60 do doc[i] = {id = i * r, name = "user" .. i, ok = i % 2 == 0, tags = {"a" .. i, "b", "c"}} end
  local out = {} encode(doc, out)
  local text = concat(out)
  local back = decode(text, 1)
  h = (h + #text + back[60].id + #back[7].tags) % 1000000007
end
print("json_codec", h)
