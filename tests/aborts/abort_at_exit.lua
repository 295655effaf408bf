-- The last abort comes right before the program ends (its harness exits
-- about 1 ms later): the location of code that is gone by the time a
-- collector could read the process must still be named.
local n = 0
for i = 1, 100000 do n = n + i % 7 end
local last = assert(loadstring([[
local s = 0
for i = 1, 60 do
  local g = function() return i end
  s = s + g()
end
return s
]], "=last"))
print(n + last())
