-- NYI bytecode UCLO: a goto out of a block whose local is captured.
local s = 0
for i = 1, 300000 do
  do
    local x = i
    if i > 0 then s = s + x goto skip end
    local g = function() return x end
  end
  ::skip::
end
print(s)
