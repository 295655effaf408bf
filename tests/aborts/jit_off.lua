-- JIT compilation disabled for a called function, then blacklisted code reached.
local function f(x) return x + 1 end
jit.off(f)
local s = 0
for i = 1, 300000 do s = s + f(i) end
print(s)
