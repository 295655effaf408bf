-- fib.lua - doubly recursive calls (class stop): the recorder unrolls the
-- calls up to its limit ("call unroll limit reached") in every run; how many
-- times varies with LuaJIT's randomized penalties, the reason does not.
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end
print(fib(20))
