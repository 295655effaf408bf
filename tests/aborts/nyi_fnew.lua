-- NYI bytecode FNEW in a loop: 11 aborts, the 11th blacklists the FORL.
local s = 0
for i = 1, 300000 do
  local f = function() return i end
  s = s + f()
end
print(s)
