----------------------------------------------------------------------------
-- nupp.profile.trace: stable identities for trace aborts.
--
-- Shared by the runtime collector (profile.trace) and static trace checking,
-- so that both name an abort the same way.
--
-- Example usage:
--
--   local trace = require("nupp.profile.trace")
--   local reason, raw, ident = trace.describe(7, 51)
--   --> "NYI: bytecode FNEW", "NYI: bytecode 51", {reasonId = ..., ...}
--   print(trace.catalogId, trace.catalogVersion, trace.profile().id)
--
-- The reason catalog is the module nupp.profile.reasons (generated from
-- catalog/trace-reasons.tsv). This module expects it to return:
--   catalogId       string
--   catalogVersion  integer
--   reasons         table: key -> {reasonId, reasonClass, severity,
--                   explanation, advice}; reasonClass "blocker"|"risk"|"stop",
--                   severity "warn"|"info"
--   lookup          optional function(rawReason, reason, template) -> entry,
--                   used instead of reasons when present
--   luajitRevision, bytecodeSchema   optional: the recorder it was written
--                   against; TraceProfile.supported compares them
-- Keys are tried most specific first: the rendered reason ("NYI: bytecode
-- FNEW"), the VM's text ("NYI: bytecode 51"), then the jit.vmdef.traceerr
-- template ("NYI: bytecode %d").
--
-- Functions:
--   trace.describe(err, info) -> reason, rawReason, entry
--   trace.lookup(rawReason, reason, template) -> entry (never nil)
--   trace.profile() -> TraceProfile of the running VM
--   trace.setRecorder{luajitRevision = s, luajitVersion = n}  pin the build
--   trace.fnv1a32(s) -> 8 hex digits
--   trace.csv(sites) -> RFC 4180 text of AbortSite rows
----------------------------------------------------------------------------

local jit = require("jit")
local bit = require("bit")
local vmdef = require("jit.vmdef")
local bxor, band, tohex = bit.bxor, bit.band, bit.tohex
local byte, format, gsub, find, sub = string.byte, string.format, string.gsub, string.find, string.sub
local concat, sort = table.concat, table.sort
local type, tostring, tonumber, pcall, select = type, tostring, tonumber, pcall, select

local M = {}

local ok, catalog = pcall(require, "nupp.profile.reasons")
if not ok then
  error("nupp.profile.trace: reason catalog nupp.profile.reasons not found: "..
	tostring(catalog), 0)
end
M.catalog = catalog
M.catalogId = catalog.catalogId
M.catalogVersion = catalog.catalogVersion

-- Order of AbortSite.severity in a report.
M.severityRank = { blacklist = 1, warn = 2, info = 3 }

local TRERR_NYIBC = 7
local TRERR_RECERR = 0

-- The name of bytecode op, as jit.vmdef.bcnames spells it.
local function bcname(op)
  local s = sub(vmdef.bcnames, op * 6 + 1, op * 6 + 6)
  s = gsub(s, " +$", "")
  return s ~= "" and s or tostring(op)
end
M.bcname = bcname

-- Substitute info for the one %d or %s of a traceerr template.
local function fill(template, info)
  if info == nil then return template end
  return (gsub(template, "%%[ds]", function() return tostring(info) end, 1))
end

local unknown = { reasonId = "unknown", reasonClass = "risk", severity = "warn",
		  explanation = "", advice = "" }

function M.lookup(raw, reason, template)
  local e
  if type(catalog.lookup) == "function" then
    e = catalog.lookup(raw, reason, template)
  else
    local r = catalog.reasons or {}
    e = (reason and r[reason]) or r[raw] or (template and r[template])
  end
  return e or unknown
end

-- err is a jit.vmdef.traceerr index or the object a Lua error threw while
-- recording (that abort is RECERR); info is the error's info as jit.attach
-- passes it, a string for a function already named, or nil.
function M.describe(err, info)
  local template, raw, reason
  if type(err) == "number" then
    template = vmdef.traceerr[err] or ("trace error "..err)
    if type(info) == "function" then
      local fi = require("jit.util").funcinfo(info)
      info = fi.loc or (fi.ffid and vmdef.ffnames[fi.ffid]) or
	     (fi.addr and format("C:%x", fi.addr)) or "(?)"
    end
    raw = fill(template, info)
    if err == TRERR_NYIBC and type(info) == "number" then
      reason = fill(template, bcname(info))
    else
      reason = raw
    end
  else
    template = vmdef.traceerr[TRERR_RECERR]
    raw, reason = tostring(err), template
  end
  return reason, raw, M.lookup(raw, reason, template)
end

----------------------------------------------------------------------------
-- Recorder identity.

-- FNV-1a, 32 bits, as 8 lower-case hex digits.
local function fnv1a32(s)
  local h = 0x811c9dc5
  for i = 1, #s do
    h = bxor(h, byte(s, i))
    -- h * 16777619 mod 2^32 without losing bits in a double.
    h = band(h * 403 + band(h * 65536, 0xffffffff) * 256, 0xffffffff)
  end
  return tohex(h)
end
M.fnv1a32 = fnv1a32

local recorder = {}

-- Pin the build: the BPF backend knows it by content, in-process code can't.
function M.setRecorder(t)
  recorder.luajitRevision = t.luajitRevision
  recorder.luajitVersion = t.luajitVersion
  M.cached = nil
end

-- The snapshot timestamp of a "LuaJIT 2.1.<timestamp>" version string; 0
-- for the older "LuaJIT 2.1.0-beta3" form, which carries none.
local function snapshot(version)
  local n = tonumber(string.match(version, "^LuaJIT %d+%.%d+%.(%d+)$"))
  return (n and n >= 1e9) and n or 0
end

local function features()
  local t = { select(2, jit.status()) }
  sort(t)
  return t
end

function M.profile()
  if M.cached then return M.cached end
  local p = {
    luajitRevision = recorder.luajitRevision or
		     "external:"..gsub(jit.version, "^LuaJIT ", ""),
    luajitVersion = recorder.luajitVersion or snapshot(jit.version),
    architecture = jit.arch,
    operatingSystem = jit.os,
    enabledRecorderFeatures = features(),
    bytecodeSchema = fnv1a32(vmdef.bcnames),
  }
  p.supported = (catalog.luajitRevision == nil or
		 catalog.luajitRevision == p.luajitRevision) and
		(catalog.bytecodeSchema == nil or
		 catalog.bytecodeSchema == p.bytecodeSchema)
  p.id = concat({ p.luajitRevision, tostring(p.luajitVersion), p.architecture,
		  p.operatingSystem, concat(p.enabledRecorderFeatures, ","),
		  p.bytecodeSchema, tostring(p.supported) }, "|")
  M.cached = p
  return p
end

-- A copy, so that a report does not share its profile with the next one.
function M.profileCopy()
  local p, c = M.profile(), {}
  for k, v in pairs(p) do c[k] = v end
  local f = {}
  for i, v in ipairs(p.enabledRecorderFeatures) do f[i] = v end
  c.enabledRecorderFeatures = f
  return c
end

----------------------------------------------------------------------------
-- CSV (RFC 4180: CRLF line ends, fields quoted when they need it).

M.csvHeader = { "severity", "count", "reason", "reasonId", "reasonClass",
		"rawReason", "location", "zonePath" }

local function field(v)
  v = tostring(v)
  if find(v, '[,"\r\n]') then v = '"'..gsub(v, '"', '""')..'"' end
  return v
end

function M.csv(sites)
  local out = { concat(M.csvHeader, ",") }
  for i, s in ipairs(sites) do
    out[i + 1] = concat({ field(s.severity), field(s.count), field(s.reason),
      field(s.reasonId), field(s.reasonClass), field(s.rawReason),
      field(s.location), field(s.zonePath) }, ",")
  end
  return concat(out, "\r\n").."\r\n"
end

return M
