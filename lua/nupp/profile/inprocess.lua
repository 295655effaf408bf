----------------------------------------------------------------------------
-- nupp.profile.inprocess: the backend that needs no BPF.
--
-- Sampling runs on jit.profile (ITIMER_PROF, the mechanism of jit.p) in its
-- "f" mode, so that a pending sample leaves compiled code at the next
-- function boundary ("l", the next line, with opts.lines), and aborts are collected with jit.attach(cb, "trace"),
-- the hook jit.v uses. It implements the backend interface documented in
-- nupp/profile.lua.
--
-- Blacklisting: LuaJIT blacklists a trace's start bytecode by patching it
-- (FORL -> IFORL, LOOP -> ILOOP, FUNCF -> IFUNCF, ITERN -> ITERC, ...)
-- before it sends the "abort" event. The "start" event's opcode is kept per
-- trace number; an abort after which the opcode at that pc differs is the
-- one that blacklisted it. Side traces are never blacklisted this way, and
-- stitched traces (blacklisted through their link) are not detected.
----------------------------------------------------------------------------

local jit = require("jit")
local jprofile = require("jit.profile")
local jutil = require("jit.util")
local vmdef = require("jit.vmdef")
local bit = require("bit")
local zone = require("nupp.profile.zone")
local band, format, gsub, sub = bit.band, string.format, string.gsub, string.sub
local gmatch, match = string.gmatch, string.match
local tonumber = tonumber

local M = { name = "inprocess" }

function M.available() return true end

-- "chunk:line" of func at pc, or its fast function name, as jit.v shows it.
local function location(func, pc)
  local fi = jutil.funcinfo(func, pc)
  if fi.loc then return fi.loc end
  if fi.ffid then return vmdef.ffnames[fi.ffid] end
  if fi.addr then return format("C:%x", fi.addr) end
  return "(?)"
end
M.location = location

local function ffname(n) return vmdef.ffnames[tonumber(n)] end

-- dumpstack renders builtins as [builtin#n] and ends with the separator.
local function clean(stack)
  stack = gsub(stack, "%[builtin#(%d+)%]", ffname)
  if sub(stack, -1) == ";" then stack = sub(stack, 1, -2) end
  return stack
end

-- The frames of stack (dumpstack's "F;") with the lines of the same frames
-- in at ("l;": "chunk:line" for a Lua function): "chunk:name:line". A
-- frame whose line is unknown (-1) or that has none keeps its name.
local function withlines(stack, at)
  local out, i, ls = {}, 0, {}
  for f in gmatch(at, "([^;]*);") do ls[#ls + 1] = f end
  for f in gmatch(stack, "([^;]*);") do
    i = i + 1
    local line = ls[i] and match(ls[i], "^[^@%[].*:(%d+)$")
      or ls[i] and match(ls[i], "^%[string%]:(%d+)$")
    out[i] = line and f..":"..line or f
  end
  return table.concat(out, ";")..";"
end

function M.sample(opts, add)
  local depth, paused, lines = -opts.stackDepth, false, opts.lines
  local dumpstack, zget = jprofile.dumpstack, zone.get
  local cache = {}
  local function cb(thread, n, vmstate)
    if paused then return end
    local raw = dumpstack(thread, "F;", depth)
    if lines then raw = withlines(raw, dumpstack(thread, "l;", depth)) end
    local stack = cache[raw]
    if not stack then
      stack = clean(raw)
      cache[raw] = stack
    end
    add(zget(), stack, vmstate, n)
  end
  zone.hold()
  jprofile.start((lines and "li" or "fi")..opts.intervalMs, cb)
  local h = {}
  function h.pause() paused = true end
  function h.resume() paused = false end
  function h.stop()
    jprofile.stop()
    zone.release()
  end
  return h
end

function M.trace(opts, add)
  local paused = false
  local startfn, startpc, startop = {}, {}, {}
  local funcbc, zget = jutil.funcbc, zone.get
  local function opat(func, pc)
    local ins = funcbc(func, pc)
    return ins and band(ins, 0xff)
  end
  local function cb(what, tr, func, pc, err, info)
    if what == "start" then
      startfn[tr], startpc[tr], startop[tr] = func, pc, opat(func, pc)
    elseif what == "abort" and not paused then
      local f = startfn[tr]
      local blacklisted = f ~= nil and opat(f, startpc[tr]) ~= startop[tr]
      if type(info) == "function" then info = location(info) end
      add(err, info, location(func, pc), blacklisted, zget())
    end
  end
  zone.hold()
  jit.attach(cb, "trace")
  local h = { callback = cb }
  function h.pause() paused = true end
  function h.resume() paused = false end
  function h.stop()
    jit.attach(cb)
    zone.release()
  end
  return h
end

return M
