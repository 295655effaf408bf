-- shapes.lua - one stack shape per run, for comparing sampled stacks with
-- jit.profile.dumpstack. Interpreter only (jit.off).
--   luajit shapes.lua SHAPE [SECONDS]   (default 1)
-- At the spin point of SHAPE it prints one line
--   stack <dumpstack("F;", -50) of that point>
-- whose last frame is dumpstack itself, then spins there for SECONDS:
-- every sample of the spin lands on exactly that stack (minus dumpstack).
-- Each spin point calls dumpstack and spins in its own frame, inline.
jit.off()
local profile = require("jit.profile")
local clock = os.clock
local shape = arg and arg[1] or "nested"
local dur = tonumber(arg and arg[2]) or 1
local sink = 0
local shapes = {}

-- Inline at every spin point:
--   io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
--   local deadline = clock() + dur
--   repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline

-- main chunk -> run -> a -> b -> c
local function c()
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
end
local function b() c() return 1 end
local function a() b() return 1 end
function shapes.nested() a() end

-- obj:method()
local Obj = {}
Obj.__index = Obj
function Obj:method()
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
end
function shapes.method() local o = setmetatable({}, Obj) o:method() end

-- pcall(f)
function shapes.pcall()
  assert(pcall(function()
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  end))
end

-- t.missing with an __index function
function shapes.index()
  local t = setmetatable({}, { __index = function(t, k)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
    return 1
  end })
  return t.missing
end

-- t.missing = v with a __newindex function
function shapes.newindex()
  local t = setmetatable({}, { __newindex = function(t, k, v)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  end })
  t.missing = 1
end

-- a + b with __add
function shapes.add()
  local mt = { __add = function(x, y)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
    return 1
  end }
  local x = setmetatable({}, mt)
  return x + 1
end

-- a .. b with __concat
function shapes.concat()
  local mt = { __concat = function(x, y)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
    return "x"
  end }
  local x = setmetatable({}, mt)
  return x .. "y"
end

-- a < b with __lt
function shapes.lt()
  local mt = { __lt = function(x, y)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
    return true
  end }
  local x, y = setmetatable({}, mt), setmetatable({}, mt)
  return x < y
end

-- obj() with __call
function shapes.call()
  local obj = setmetatable({}, { __call = function(self, v)
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  end })
  obj(1)
end

-- spin inside a coroutine, two calls deep in it
local function co_inner()
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
end
local function co_body(x) co_inner() coroutine.yield(x) return 2 end
function shapes.coroutine()
  local co = coroutine.create(co_body)
  assert(coroutine.resume(co, 1))
  assert(coroutine.resume(co))
end

-- varargs, two vararg frames deep
local function va_inner(...)
  local n = select("#", ...)
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  return n
end
local function va_outer(...) va_inner(1, ...) return 1 end
function shapes.varargs() va_outer(1, 2, 3) end

-- tail calls: tail1 -> tail2 -> tail_leaf, each by `return f()`
local function tail_leaf()
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  return 1
end
local function tail2() return tail_leaf() end
local function tail1() return tail2() end
function shapes.tailcall() tail1() end

-- a Lua function called from a C function (gsub's replacement callback)
function shapes.from_c()
  string.gsub("a", "a", function()
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  end)
end

-- a generic-for iterator
function shapes.iterator()
  local done = false
  for _ in function()
    if done then return nil end
    done = true
    io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
    local deadline = clock() + dur
    repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
    return 1
  end do end
end

-- recursion, ten levels
local function rec(n)
  if n > 0 then rec(n - 1) return n end
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  return 0
end
function shapes.recursion() rec(10) end
-- deeper than the default --depth 16
function shapes.deep() rec(30) end

-- as deep, through a vararg function: each level adds a vararg pseudo-frame,
-- which a walk steps over without keeping
local function va_rec(n, ...)
  if n > 0 then va_rec(n - 1, n, ...) return n end
  io.write("stack ", profile.dumpstack("F;", -50), "\n") io.flush()
  local deadline = clock() + dur
  repeat for i = 1, 20000 do sink = sink + i end until clock() > deadline
  return select("#", ...)
end
function shapes.deep_varargs() va_rec(30) end

local run = assert(shapes[shape], "unknown shape " .. shape)
run()
print(("sink %d"):format(sink % 2))
