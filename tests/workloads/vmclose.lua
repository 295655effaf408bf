-- vmclose.lua - runs code in a second VM of its own, made through the FFI,
-- closes that VM and goes on in the first: lua_close frees the second VM's
-- code (its allocator unmaps it) while the process lives on. Waits for the
-- file FLAG before it makes the second VM; says "closed" once it is.
-- The interpreter only (jit.off), in both VMs.
--   luajit vmclose.lua FLAG [SECONDS [AFTER]]   (default 0.3 s in each)
jit.off()
local ffi = require("ffi")
ffi.cdef[[
typedef struct lua_State lua_State;
lua_State *luaL_newstate(void);
void luaL_openlibs(lua_State *L);
int luaL_loadstring(lua_State *L, const char *s);
int lua_pcall(lua_State *L, int nargs, int nresults, int errfunc);
void lua_close(lua_State *L);
]]
local flag, secs, after = arg[1], tonumber(arg[2]) or 0.3, tonumber(arg[3]) or 0.3
local clock = os.clock

local function spin(seconds)
  local deadline, x = clock() + seconds, 1
  repeat for j = 1, 200 do x = (x * 17 + j) % 1000003 end until clock() > deadline
  return x
end

io.write("ready\n") io.flush()
repeat spin(0.01) until io.open(flag)
local L = ffi.C.luaL_newstate()
ffi.C.luaL_openlibs(L)
-- The call of inner() comes after 80 instructions of the chunk: what names
-- it lies further back than a call at a function's start.
local src = ([[
jit.off()
local function inner(seconds)
  local deadline, x = os.clock() + seconds, 1
  repeat for j = 1, 200 do x = (x * 31 + j) %% 1000003 end until os.clock() > deadline
  return x
end
local n = 0
%s
inner(%g + n * 0)
]]):format(("n = n + 1\n"):rep(80), secs)
assert(ffi.C.luaL_loadstring(L, src) == 0 and ffi.C.lua_pcall(L, 0, 0, 0) == 0)
ffi.C.lua_close(L)
io.write("closed\n") io.flush()
spin(after)
print("done")
