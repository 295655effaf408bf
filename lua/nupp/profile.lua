----------------------------------------------------------------------------
-- nupp.profile: where the time went, and whether it went there compiled.
--
-- Example usage:
--
--   local profile = require("nupp.profile")
--   local session = profile.sample({intervalMs = 5, zone = "frame/render"})
--   render()
--   local report = session:stop("render.collapsed")
--   print(report.samples, report.stacks)
--
--   local aborts = profile.trace()
--   render()
--   print(aborts:stop("aborts.csv"))   -- CSV, one row per abort site
--
-- profile.sample options: intervalMs (10), stackDepth (16), zone (a zone
-- path prefix kept at stop), root (the module the stacks are cut back to),
-- lines (false: each Lua frame named with its current line too,
-- "app.lua:update:42").
-- profile.trace options: includeBenign (false).
--
-- Backends. A session runs on BPF probes attached to this very process when
-- the C module nupp.profile.bpf loads and says it can, and on jit.profile
-- and jit.attach (nupp.profile.inprocess) otherwise. The environment
-- variable NUPP_BACKEND=bpf|inprocess forces one; a forced backend that
-- cannot run raises. session.backend and report.backend say which ran.
--
-- Backend interface (what nupp.profile.bpf must provide, as inprocess does):
--   backend.name               "bpf" | "inprocess"
--   backend.available()        true, or false plus a reason
--   backend.sample, backend.trace  either may be missing: that kind of
--                              session then runs in-process
--   backend.sample(opts, add) -> handle
--     opts = {intervalMs = integer, stackDepth = integer, lines = boolean},
--       validated.
--     add(zonePath, stack, state, n) records n samples:
--       zonePath  the open zone path, "" when none (a BPF sampler reads the
--                 id at nupp_zone_state.current and maps it with
--                 require("nupp.profile.zone").path(id))
--       stack     frames outermost first, ";" between them, no trailing ";",
--                 named as jit.profile.dumpstack's "F" format does
--                 ("<chunk basename>:<name>", builtins by jit.vmdef.ffnames);
--                 with opts.lines, a Lua frame whose current line is known
--                 gets ":<line>" after its name
--       state     "N" compiled, "I" interpreted, "C" C code, "G" GC,
--                 "J" compiler (the chars of jit.profile's vmstate)
--     handle.pause(), handle.resume()  drop samples while paused
--     handle.stop()   detach; every add for earlier samples has been made
--                     when it returns
--     handle.sync()   optional: add everything recorded so far again, from
--                     zero (the session empties its totals first); then
--                     stop() also adds the cumulative totals
--   backend.trace(opts, add) -> handle
--     add(err, info, location, blacklisted, zonePath[, n, desc]) records one
--     abort (n of them, already described by desc = {reason, rawReason,
--     reasonId, reasonClass, severity} when a collector has done it):
--       err       jit.vmdef.traceerr index, or the object a Lua error threw
--                 during recording
--       info      the error's info: a number (NYI bytecode or IR op), a
--                 string (a function, already named), or nil
--       location  "chunk:line" of the function being recorded, as
--                 jit.util.funcinfo(func, pc).loc renders it (chunk basename)
--       blacklisted  true when this abort blacklisted the trace's start
--     handle.pause(), handle.resume(), handle.stop() as above
--     handle.callback  the jit.attach handler, when there is one
--     handle.recorder  {luajitRevision, luajitVersion} when the backend knows
--                      the build by content (BPF: the registry)
-- Every abort goes to add; the benign filter and the reason identities are
-- applied here.
----------------------------------------------------------------------------

local trace = require("nupp.profile.trace")
local type, error, pairs, ipairs, pcall, require = type, error, pairs, ipairs, pcall, require
local tostring, setmetatable, floor = tostring, setmetatable, math.floor
local concat, sort = table.concat, table.sort
local sub, find, gmatch = string.sub, string.find, string.gmatch
local getenv, time, open = os.getenv, os.time, io.open

local M = {}

local running = {}	-- running.sample, running.trace: the live session

-- Raise at the caller of the API function level frames up (2: its caller).
local function raise(msg, level) error("nupp.profile: "..msg, (level or 2) + 1) end

-- The backend for a new session of kind ("sample" or "trace"): forced by
-- NUPP_BACKEND, else bpf when it loads, can run and implements that kind.
local function backend(kind)
  local want = getenv("NUPP_BACKEND")
  if want and want ~= "" and want ~= "bpf" and want ~= "inprocess" then
    raise("NUPP_BACKEND must be bpf or inprocess, not "..want, 3)
  end
  if want ~= "inprocess" then
    local ok, bpf = pcall(require, "nupp.profile.bpf")
    local why = bpf
    if ok then
      local can, reason = bpf.available()
      if can and type(bpf[kind]) == "function" then return bpf end
      why = can and "no "..kind.." sessions" or reason
    end
    if want == "bpf" then raise("bpf backend unavailable: "..tostring(why), 3) end
  end
  return require("nupp.profile.inprocess")
end

local function check(opts, name, kind, default)
  local v = opts[name]
  if v == nil then return default end
  if kind == "posint" then
    if type(v) ~= "number" or v < 1 or v ~= floor(v) then
      raise(name.." must be a positive integer", 3)
    end
  elseif type(v) ~= kind then
    raise(name.." must be a "..kind, 3)
  end
  return v
end

local function options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise("options must be a table", 3) end
  return opts
end

-- A report file is written as the CLI writes its outputs (user/base/output.h),
-- by the C module: to a new file of its own in the same directory, renamed
-- over the name (an existing file kept as NAME.old), so that a symlink
-- planted at the name is replaced, never followed. Where the C module is
-- not installed, io.open writes it.
local function writefile(filename, text)
  if filename == nil then return end
  if type(filename) ~= "string" then raise("filename must be a string", 3) end
  local ok, bpf = pcall(require, "nupp.profile.bpf")
  if ok and type(bpf) == "table" and bpf.writefile then
    -- "-" is stdout to the CLI; here it is a file of that name.
    local done, err = bpf.writefile(filename == "-" and "./-" or filename, text)
    if not done then raise(err, 3) end
    return
  end
  local f, err = open(filename, "wb")
  if not f then raise("cannot write "..err, 3) end
  f:write(text)
  f:close()
end

-- Fields that say what a session saw "so far" live in s._live. A backend
-- that aggregates outside Lua (BPF) has handle.sync(): reading such a field
-- of a running session first empties _live and lets the backend add its
-- cumulative totals again; handle.stop() ends the same way.
local function wipe(t) for k in pairs(t) do t[k] = nil end end

local function refresh(s, call)
  local live, h = rawget(s, "_live"), rawget(s, "handle")
  if not (h and h.sync) then if call then call() end return end
  live.reset()
  ;(call or h.sync)()
end

local function livefields(methods)
  methods.__index = function(s, k)
    local live = rawget(s, "_live")
    if live and live[k] ~= nil and k ~= "reset" then
      if not rawget(s, "stopped") then refresh(s) end
      return live[k]
    end
    return methods[k]
  end
  return methods
end

-- Shared lifecycle of both session kinds.
local function lifecycle(methods)
  function methods:pause()
    if self.stopped then raise("pause: the session has stopped") end
    if not self.paused then
      self.paused = true
      self.handle.pause()
    end
  end
  function methods:resume()
    if self.stopped then raise("resume: the session has stopped") end
    if self.paused then
      self.paused = false
      self.handle.resume()
    end
  end
  return methods
end

----------------------------------------------------------------------------
-- Sampling.

local statefield = { N = "compiled", I = "interpreted", C = "cCode",
		     G = "collecting", J = "compiling" }

local SampleSession = livefields(lifecycle({}))

local SampleReport = { __tostring = function(r) return r.text end }

-- Does zone path p lie in the subtree the filter names? A trailing "/"
-- names the same subtree (as user/profile/profile.c zone__under() reads it).
local function inzone(p, filter)
  if filter == nil or filter == "" then return true end
  if sub(filter, -1) == "/" then filter = sub(filter, 1, -2) end
  local n = #filter
  return sub(p, 1, n) == filter and (#p == n or sub(p, n + 1, n + 1) == "/")
end
M._inzone = inzone	-- for the tests: one rule with the CLI's

-- stack cut back to its outermost frame from module root. Frame names have
-- their ';' escaped: a root with one names no frame's module (as in C).
local function cut(stack, root)
  if root == nil or root == "" or find(root, ";", 1, true) then return stack end
  local prefix = root..":"
  if sub(stack, 1, #prefix) == prefix then return stack end
  local at = find(stack, ";"..prefix, 1, true)
  return at and sub(stack, at + 1) or stack
end

-- The session's stacks in its zone, cut at its root and merged: their
-- collapsed text, heaviest first (then by stack), and how many. weigh(rec)
-- is what one of its records counts for.
local function collapsed(s, weigh)
  local counts = {}
  for zp, bystack in pairs(s.aggregate) do
    if inzone(zp, s.zoneFilter) then
      for stack, rec in pairs(bystack) do
	local key = cut(stack, s.root)
	counts[key] = (counts[key] or 0) + weigh(rec)
      end
    end
  end
  local keys = {}
  for k in pairs(counts) do keys[#keys + 1] = k end
  sort(keys, function(a, b)
    local ca, cb = counts[a], counts[b]
    if ca ~= cb then return ca > cb end
    return a < b
  end)
  local lines = {}
  for i, k in ipairs(keys) do lines[i] = k.." "..floor(counts[k] + 0.5).."\n" end
  return concat(lines), #keys
end

local function samplereport(s)
  local samples = 0
  local text, stacks = collapsed(s, function(rec)
    samples = samples + rec.count
    return rec.count
  end)
  return setmetatable({ intervalMs = s.intervalMs, samples = samples,
    stacks = stacks, text = text, backend = s.backend }, SampleReport)
end

-- The stop method of a session of kind ("sample", "alloc"): its last
-- counts taken in, its report made and written.
local function stopper(kind, makereport)
  return function(self, filename)
    if self.stopped then raise("stop: the session has stopped") end
    refresh(self, self.handle.stop)
    self.stopped = true
    running[kind] = nil
    local report = makereport(self)
    writefile(filename, report.text)
    return report
  end
end

SampleSession.stop = stopper("sample", samplereport)

function M.sample(opts)
  opts = options(opts)
  local s = {
    intervalMs = check(opts, "intervalMs", "posint", 10),
    zoneFilter = check(opts, "zone", "string", nil),
    root = check(opts, "root", "string", nil),
    paused = false,
    stopped = false,
  }
  local agg = {}
  s._live = { aggregate = agg, reset = function() wipe(agg) end }
  local depth = check(opts, "stackDepth", "posint", 16)
  local lines = check(opts, "lines", "boolean", false)
  if s.root then s.root = s.root:gsub(":$", "") end
  if running.sample then raise("a sample session is already running") end
  local b = backend("sample")
  s.backend = b.name
  local function add(zp, stack, state, n)
    local bystack = agg[zp]
    if not bystack then bystack = {}; agg[zp] = bystack end
    local rec = bystack[stack]
    if not rec then
      rec = { zonePath = zp, stack = stack, count = 0, compiled = 0,
	      interpreted = 0, cCode = 0, collecting = 0, compiling = 0 }
      bystack[stack] = rec
    end
    local f = statefield[state] or "compiling"
    rec.count = rec.count + n
    rec[f] = rec[f] + n
  end
  s.handle = b.sample({ intervalMs = s.intervalMs, stackDepth = depth, lines = lines }, add)
  running.sample = s
  return setmetatable(s, SampleSession)
end

----------------------------------------------------------------------------
-- Allocations (the BPF backend alone: nupp-bpf record --alloc on this
-- process). profile.alloc options: meanBytes (524288: bytes between two
-- sampled allocations, on average), stackDepth (16), zone, root, lines, as
-- profile.sample's. The report: bytes and objects allocated, inuseBytes and
-- inuseObjects still in use at the stop, all estimates from the samples;
-- stacks; text, the collapsed stacks by bytes allocated (what stop writes).

local AllocSession = livefields(lifecycle({}))

local AllocReport = { __tostring = function(r) return r.text end }

local function allocreport(s)
  local totals = { bytes = 0, objects = 0, inuseBytes = 0, inuseObjects = 0 }
  local text, stacks = collapsed(s, function(rec)
    for k in pairs(totals) do totals[k] = totals[k] + rec[k] end
    return rec.bytes
  end)
  local r = { meanBytes = s.meanBytes, stacks = stacks, text = text, backend = s.backend }
  for k, v in pairs(totals) do r[k] = floor(v + 0.5) end
  return setmetatable(r, AllocReport)
end

AllocSession.stop = stopper("alloc", allocreport)

function M.alloc(opts)
  opts = options(opts)
  local s = {
    meanBytes = check(opts, "meanBytes", "posint", 524288),
    zoneFilter = check(opts, "zone", "string", nil),
    root = check(opts, "root", "string", nil),
    paused = false,
    stopped = false,
  }
  local depth = check(opts, "stackDepth", "posint", 16)
  local lines = check(opts, "lines", "boolean", false)
  if s.meanBytes > 2^30 then raise("meanBytes must be at most 2^30", 2) end
  if s.root then s.root = s.root:gsub(":$", "") end
  if running.alloc then raise("an alloc session is already running") end
  local b = backend("alloc")
  if b.name ~= "bpf" then
    raise("alloc sessions need the bpf backend (nupp.profile.bpf, as root)", 2)
  end
  s.backend = b.name
  local agg = {}
  s._live = { aggregate = agg, reset = function() wipe(agg) end }
  local function add(zp, stack, state, bytes, objects, inuseBytes, inuseObjects)
    local bystack = agg[zp]
    if not bystack then bystack = {}; agg[zp] = bystack end
    local rec = bystack[stack]
    if not rec then
      rec = { bytes = 0, objects = 0, inuseBytes = 0, inuseObjects = 0 }
      bystack[stack] = rec
    end
    rec.bytes = rec.bytes + bytes
    rec.objects = rec.objects + (objects or 0)
    rec.inuseBytes = rec.inuseBytes + (inuseBytes or 0)
    rec.inuseObjects = rec.inuseObjects + (inuseObjects or 0)
  end
  s.handle = b.alloc({ meanBytes = s.meanBytes, stackDepth = depth, lines = lines }, add)
  running.alloc = s
  return setmetatable(s, AllocSession)
end

----------------------------------------------------------------------------
-- Trace aborts.

local TraceSession = livefields(lifecycle({}))

local TraceReport = { __tostring = function(r) return trace.csv(r.sites) end }


function TraceSession:stop(filename)
  if self.stopped then raise("stop: the session has stopped") end
  refresh(self, self.handle.stop)
  self.stopped = true
  running.trace = nil
  local sites = {}
  for _, site in pairs(self.sites) do
    local c = {}
    for k, v in pairs(site) do c[k] = v end
    sites[#sites + 1] = c
  end
  sort(sites, trace.siteOrder)
  local report = setmetatable({
    durationSec = time() - self.startedAt,
    totalAborts = self.totalAborts,
    blacklisted = self.blacklisted,
    sites = sites,
    traceProfile = trace.profileCopy(),
    reasonCatalogId = trace.catalogId,
    reasonCatalogVersion = trace.catalogVersion,
    backend = self.backend,
  }, TraceReport)
  writefile(filename, tostring(report))
  return report
end

function M.trace(opts)
  opts = options(opts)
  local s = {
    includeBenign = check(opts, "includeBenign", "boolean", false),
    startedAt = time(),
    paused = false,
    stopped = false,
    traceProfile = trace.profile(),
  }
  local sites, benign = {}, s.includeBenign
  local live = { sites = sites, totalAborts = 0, blacklisted = 0 }
  function live.reset()
    wipe(sites)
    live.totalAborts, live.blacklisted = 0, 0
  end
  s._live = live
  if running.trace then raise("a trace session is already running") end
  local b = backend("trace")
  s.backend = b.name
  local function add(err, info, location, blacklisted, zp, n, desc)
    local reason, raw, id
    if desc then
      reason, raw, id = desc.reason, desc.rawReason, desc
    else
      reason, raw, id = trace.describe(err, info)
    end
    n = n or 1
    local severity = trace.siteSeverity(blacklisted, id)
    if not trace.siteCounted(severity, benign) then return end
    local key = severity.."\0"..reason.."\0"..location.."\0"..zp
    local site = sites[key]
    if not site then
      site = { severity = severity, count = 0, reason = reason,
	       reasonId = id.reasonId, reasonClass = id.reasonClass,
	       rawReason = raw, location = location, zonePath = zp }
      sites[key] = site
    end
    site.count = site.count + n
    live.totalAborts = live.totalAborts + n
    if blacklisted then live.blacklisted = live.blacklisted + n end
  end
  s.handle = b.trace({ includeBenign = s.includeBenign }, add)
  s.callback = s.handle.callback or function() end
  if s.handle.recorder then	-- the build as identified by content
    trace.setRecorder(s.handle.recorder)
    s.traceProfile = trace.profile()
  end
  running.trace = s
  return setmetatable(s, TraceSession)
end

-- profile.heap() -> a census of this VM's heap, read from outside the Lua
-- state by the C module (no privileges: a process reads its own memory):
-- gcTotal (collectgarbage("count") * 1024), counted, vmBytes, partial,
-- seconds, types (objects and bytes by type name), largestTables,
-- closuresByPrototype, stringsByPrefix, byPath, as `nupp-bpf heap --json` gives
-- them. It raises when the C module is not there or the build's layout
-- does not describe its heap.
function M.heap()
  local ok, bpf = pcall(require, "nupp.profile.bpf")
  if not ok or type(bpf.heap) ~= "function" then
    raise("heap needs the nupp.profile.bpf C module: "..tostring(ok and "too old" or bpf), 2)
  end
  local census, err = bpf.heap()
  if not census then raise(err, 2) end
  return census
end

return M
