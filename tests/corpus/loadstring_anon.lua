-- A generated 3,000-line function loaded with loadstring under no chunk
-- name: its chunk is named by its source text, 70 KB long.
local lines = {"local a, b = ...", "local s = 0"}
for i = 1, 2996 do
  local op = i % 4
  if op == 0 then lines[#lines+1] = ("s = s + a * %d"):format(i)
  elseif op == 1 then lines[#lines+1] = ("s = s - b + %d"):format(i % 97)
  elseif op == 2 then lines[#lines+1] = ("if s > %d then s = s %% 65521 end"):format(i * 13)
  else lines[#lines+1] = ("s = s + (a + %d) %% 7"):format(i) end
end
lines[#lines+1] = "return s"
local src = table.concat(lines, "\n")
local f = assert(loadstring(src))
local sum = 0
for i = 1, 30000 do sum = (sum + f(i, i % 13)) % 1000000007 end
print("loadstring_anon", #lines, sum)
