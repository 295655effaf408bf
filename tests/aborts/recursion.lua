-- Recursion (class stop): down-recursion and call unrolling.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function sum(n) if n == 0 then return 0 end return n + sum(n - 1) end
local s = 0
for i = 1, 200 do s = s + sum(50) end
print(fib(24), s)
