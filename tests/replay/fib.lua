-- Recursion in the interpreter (run with -joff): frames call and return
-- all the time, so a stop often finds one returning.
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end
io.stdout:write("ready\n"); io.stdout:flush()
while true do fib(25) end
