----------------------------------------------------------------------------
-- nupp.profile.zone: gated profiler zones.
--
-- Example usage:
--
--   local zone = require("nupp.profile.zone")
--   zone.enter("frame")
--     zone.run("render", draw, scene)   -- enter, call, leave (also on error)
--     print(zone.get())                 --> "frame" (while a profiler listens)
--   zone.leave()
--
-- A zone path is the open zone names joined with "/", "frame/render". Samples
-- and trace aborts carry the path that was open when they happened.
--
-- The gate: while no profiler listens, zone.enter costs one FFI load and a
-- test, and zone.leave one upvalue test; the path stack is not kept. A
-- profiler opens the gate either by attaching to the USDT probe nupp:zone of
-- zone_state.so (the kernel counts it in the probe's semaphore; nupp-bpf
-- does this from outside) or, in-process, with zone.hold()/zone.release().
-- Both counters share one 32-bit word, see user/zone_state.h.
--
-- Zones entered while the gate was closed are not on the stack; leave()
-- with an empty stack does nothing, so a closed gate never unbalances it.
-- A zone opened before the gate closes is still popped by its leave().
--
-- Functions:
--   zone.enter(name)        open zone name below the current path
--   zone.leave()            close the innermost open zone
--   zone.run(name, fn, ...) fn(...) inside zone name; returns fn's first
--                           three results (all while the gate is closed)
--   zone.get()              the open path, "" when none is
--   zone.id()               its id, 0 when none: what profilers read
--   zone.path(id)           the path of an id, nil when unknown
--   zone.active()           true while the gate is open
--   zone.hold(), zone.release()   open/close the gate for an in-process session
--   zone.reset()            drop the open path stack
-- Fields: zone.usdt (true when zone_state.so was loaded), zone.library (its
-- file), zone.address (address of struct nupp_zone_state, a number).
----------------------------------------------------------------------------

local ffi = require("ffi")
local type, error, pcall, tonumber, select = type, error, pcall, tonumber, select
local searchpath = package.searchpath

ffi.cdef[[
typedef struct nupp_zone_view {
  volatile int32_t gate;	/* sem | local << 16: nonzero when listened to */
  volatile uint32_t current;	/* open zone path id, 0 none */
  uint32_t magic, version;
} nupp_zone_view;
uint32_t nupp_zone_register(const char *path, size_t len);
uint32_t nupp_zone_hold(void);
uint32_t nupp_zone_release(void);
]]

local M = { usdt = false }

-- Load zone_state.so from package.cpath; fall back to private memory, which
-- gates in-process sessions only.
local function open_state()
  local file = searchpath and searchpath("nupp.profile.zone_state", package.cpath)
  if file then
    local ok, lib = pcall(ffi.load, file)
    if ok then
      ffi.cdef("nupp_zone_view nupp_zone_state[1];")
      M.usdt, M.library = true, file
      return ffi.cast("nupp_zone_view *", lib.nupp_zone_state), lib
    end
  end
  local mem = ffi.new("nupp_zone_view[1]")
  M.anchor = mem
  return ffi.cast("nupp_zone_view *", mem), nil
end

local st, lib = open_state()
M.address = tonumber(ffi.cast("uintptr_t", st))

local depth = 0
local stack = { [0] = 0 }	-- stack[d]: path id open at depth d
local kids = { [0] = {} }	-- kids[id][name]: id of path .. "/" .. name
local paths = { [0] = "" }	-- paths[id]: the path string
local nextid = 1		-- ids handed out without zone_state.so

-- Id of path, registered in the shared table when zone_state.so is loaded.
local function register(parent, name)
  if type(name) ~= "string" or name == "" then
    error("nupp.profile.zone: zone name must be a non-empty string", 3)
  end
  local path = parent == 0 and name or paths[parent].."/"..name
  local id
  if lib then
    id = tonumber(lib.nupp_zone_register(path, #path))
    if id == 0 then error("nupp.profile.zone: cannot register "..path, 3) end
  else
    id, nextid = nextid, nextid + 1
  end
  kids[parent][name] = id
  paths[id] = path
  kids[id] = kids[id] or {}
  return id
end

-- LuaJIT ignores volatile: a trace would read the gate once before its loop
-- and never again. ffi.fill's barrier (IR XBAR, no machine code) plus a
-- one-byte store to private scratch makes every pass reload it.
local scratch = ffi.new("uint8_t[1]")
local fill = ffi.fill

local function enter(name)
  fill(scratch, 1)
  if st.gate == 0 then return end
  local id = kids[stack[depth]][name] or register(stack[depth], name)
  depth = depth + 1
  stack[depth] = id
  st.current = id
end

local function leave()
  if depth == 0 then return end
  depth = depth - 1
  st.current = stack[depth]
end

-- Close what run opened, also what fn left open.
local function leaveto(d, r1, r2, r3)
  if depth > d then
    depth = d
    st.current = stack[d]
  end
  return r1, r2, r3
end

-- Nothing here may make the JIT abort, which rules out two things. pcall:
-- a side trace that starts in fn cannot return through it (NYI: return to
-- lower frame). Forwarding `...` to a call or a return: a trace that starts
-- in a callee and returns into run records that as varargs of unknown count
-- (NYI: bytecode VARG). So up to three arguments go through fixed slots,
-- fn's first three results come back, and an error raised in fn leaves its
-- zones open until an enclosing run returns (or zone.reset()).
local function run(name, fn, ...)
  fill(scratch, 1)
  local n = select("#", ...)
  local a, b, c = ...
  if st.gate == 0 then
    if n == 0 then return fn() end
    if n == 1 then return fn(a) end
    if n == 2 then return fn(a, b) end
    if n == 3 then return fn(a, b, c) end
    return fn(...)
  end
  local d = depth
  enter(name)
  if n == 0 then return leaveto(d, fn()) end
  if n == 1 then return leaveto(d, fn(a)) end
  if n == 2 then return leaveto(d, fn(a, b)) end
  if n == 3 then return leaveto(d, fn(a, b, c)) end
  return leaveto(d, fn(...))
end

M.enter, M.leave, M.run = enter, leave, run

function M.get() return paths[stack[depth]] end
function M.id() return stack[depth] end
function M.path(id) return paths[id] end
function M.active() return st.gate ~= 0 end

function M.reset()
  depth = 0
  st.current = 0
end

function M.hold()
  if lib then return tonumber(lib.nupp_zone_hold()) end
  st.gate = st.gate + 65536
  return st.gate / 65536
end

function M.release()
  if lib then return tonumber(lib.nupp_zone_release()) end
  if st.gate >= 65536 then st.gate = st.gate - 65536 end
  return st.gate / 65536
end

return M
