-- A coroutine blocked in io.read inside two calls of its own, resumed from
-- inside a function of the main thread.
local function inner() local line = io.read("*l"); return line end
local function outer() local r = inner(); return r end
local co = coroutine.create(function() local r = outer(); return r end)
local function driver() local ok, r = coroutine.resume(co); return ok, r end
io.stdout:write("ready\n"); io.stdout:flush()
driver()
