-- generator.lua N - a coroutine.wrap generator yielding N values to a for
-- loop: what --waits costs a program whose coroutines switch often (each
-- value is a yield and a resume in the VM's fast functions, both probed
-- under --waits). Prints the time per value.
local N = tonumber(arg[1]) or 200000
local gen = coroutine.wrap(function() for i = 1, N do coroutine.yield(i) end end)
local t = os.clock()
for _ = 1, N do gen() end
io.write(string.format("%.3f us a value\n", (os.clock() - t) / N * 1e6))
