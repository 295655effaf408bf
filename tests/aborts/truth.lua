-- truth.lua - in-process ground truth for the trace-abort collector.
--
--   luajit tests/aborts/truth.lua OUT.csv [--benign] PROGRAM.lua [args...]
--
-- Attaches a jit.attach "trace" handler, runs PROGRAM, and writes the abort
-- sites it saw to OUT.csv exactly as nupp-bpf trace reports them (same
-- catalog, same rendering, same order). Environment:
--   NUPP_TRACE_SYNC  FIFO read before PROGRAM starts (a collector attaches first)
--   NUPP_TRACE_DONE  FIFO read after PROGRAM ends (the collector drains first)
--   NUPP_TRACE_NOHOOK=1  run PROGRAM without the handler (overhead baseline)
local jit = require("jit")
local jutil = require("jit.util")
local vmdef = require("jit.vmdef")
local format, sub, gsub, concat = string.format, string.sub, string.gsub, table.concat
local funcinfo, funcbc = jutil.funcinfo, jutil.funcbc

local here = gsub(arg[0], "[^/]*$", "")
package.path = here .. "../../build/lua/?.lua;" .. package.path
local reasons = require("nupp.profile.reasons")

local out = table.remove(arg, 1)
local benign = false
if arg[1] == "--benign" then benign = true; table.remove(arg, 1) end
local prog = table.remove(arg, 1)

local function wait_fifo(var)
  local path = os.getenv(var)
  if path then
    local f = assert(io.open(path, "r"))
    f:read("*a")
    f:close()
  end
end

-- jit/v.lua fmtfunc
local function fmtfunc(func, pc)
  local fi = funcinfo(func, pc)
  if fi.loc then return fi.loc
  elseif fi.ffid then return vmdef.ffnames[fi.ffid]
  elseif fi.addr then return format("C:%x", fi.addr)
  else return "(?)" end
end

local function bcname(op) return (gsub(sub(vmdef.bcnames, op*6+1, op*6+6), " ", "")) end
local function irname(op) return (gsub(sub(vmdef.irnames, op*6+1, op*6+6), " ", "")) end

local sites, total, blacklisted = {}, 0, 0
local starts = {}

local function count(severity, reason, id, class, raw, loc)
  local key = concat({severity, reason, loc, ""}, "\0")
  local s = sites[key]
  if not s then
    s = {severity = severity, count = 0, reason = reason, reasonId = id, reasonClass = class,
         rawReason = raw, location = loc, zonePath = ""}
    sites[key] = s
  end
  s.count = s.count + 1
end

local function on_trace(what, tr, func, pc, a1, a2)
  if what == "start" then
    local op = bcname(funcbc(func, pc) % 256)
    starts[tr] = {func = func, pc = pc, op = op, root = (a1 == nil)}
  elseif what == "abort" then
    local err, info = a1, a2
    local raw, reason, tmpl, detail
    if type(err) == "number" then
      -- 2023+ builds write "NYI: bytecode %s" (jit.v fills in the name);
      -- the rows keep the number's form, as on older builds.
      tmpl = gsub(vmdef.traceerr[err], "bytecode %%s", "bytecode %%d")
      local arg = info
      if type(info) == "function" then arg = fmtfunc(info) end
      raw = format(tmpl, arg)
      reason = raw
      if tmpl:find("bytecode %d", 1, true) then detail = bcname(info)
      elseif tmpl:find("IR instruction %d", 1, true) then detail = irname(info)
      elseif tmpl:find("%s", 1, true) then detail = arg end
      if detail then reason = format((gsub(tmpl, "%%d", "%%s")), detail) end
    else
      tmpl = vmdef.traceerr[0]
      raw = type(err) == "string" and err or "(error object)"
      reason = tmpl
    end
    local r = reasons.byText[tmpl]
    local id, class, severity = "trace.unknown", "risk", "warn"
    if r then
      id = r.id .. (detail and ("." .. detail) or "")
      class, severity = r.class, r.severity
    end
    local st, bl = starts[tr], false
    if st and st.root and type(err) == "number" and err ~= 6 then
      local now = bcname(funcbc(st.func, st.pc) % 256)
      bl = (st.op == "ITERN" and now == "ITERC") or (now ~= st.op and now == "I" .. st.op)
    end
    if bl or benign or class ~= "stop" then
      if bl then severity = "blacklist"; blacklisted = blacklisted + 1 end
      total = total + 1
      count(severity, reason, id, class, raw, fmtfunc(func, pc))
    end
  end
end

local function csvfield(s)
  s = tostring(s)
  if s:find('[,"\r\n]') then return '"' .. gsub(s, '"', '""') .. '"' end
  return s
end

local rank = {blacklist = 0, warn = 1, info = 2}
local function write_csv(path)
  local list = {}
  for _, s in pairs(sites) do list[#list+1] = s end
  table.sort(list, function(a, b)
    if a.severity ~= b.severity then return rank[a.severity] < rank[b.severity] end
    if a.count ~= b.count then return a.count > b.count end
    if a.reason ~= b.reason then return a.reason < b.reason end
    if a.location ~= b.location then return a.location < b.location end
    return a.zonePath < b.zonePath
  end)
  local f = assert(io.open(path, "w"))
  f:write("severity,count,reason,reasonId,reasonClass,rawReason,location,zonePath\r\n")
  for _, s in ipairs(list) do
    f:write(concat({csvfield(s.severity), csvfield(s.count), csvfield(s.reason), csvfield(s.reasonId),
                    csvfield(s.reasonClass), csvfield(s.rawReason), csvfield(s.location),
                    csvfield(s.zonePath)}, ","), "\r\n")
  end
  f:close()
  f = assert(io.open(path .. ".totals", "w"))
  f:write(format("totalAborts=%d blacklisted=%d\n", total, blacklisted))
  f:close()
end

wait_fifo("NUPP_TRACE_SYNC")
local hook = os.getenv("NUPP_TRACE_NOHOOK") ~= "1"
if hook then jit.attach(on_trace, "trace") end
local chunk = assert(loadfile(prog))
arg[0] = prog
local ok, err = xpcall(function() return chunk(unpack(arg)) end, debug.traceback)
if hook then jit.attach(on_trace) end
-- The recording has ended; the harness's own loops below must not start
-- traces (LuaJIT's hot counters are shared by pc hash, so a loop here can
-- inherit a program loop's count) that nupp-bpf, still listening, would see.
jit.off()
write_csv(out)
wait_fifo("NUPP_TRACE_DONE")
if not ok then
  io.stderr:write("luajit: ", tostring(err), "\n")
  os.exit(1)
end
