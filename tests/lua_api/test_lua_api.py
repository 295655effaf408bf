"""The nupp.profile Lua API against its documented behaviour.

Runs /usr/bin/luajit on small target programs whose hot spots are known by
construction, with the modules from build/lua. Backend: NUPP_BACKEND
(default "inprocess", which needs no root); NUPP_BACKEND=bpf runs the same
assertions on the BPF backend; NUPP_PIDNS=1 runs the programs in a PID
namespace of their own.
    make test-lua        or        /usr/bin/python3 -m pytest tests/lua_api/test_lua_api.py
"""
import csv
import ctypes
import io
import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_LUA = os.path.join(TOP, "build", "lua")
LUAJIT = os.environ.get("LUAJIT", "/usr/bin/luajit")
BACKEND = os.environ.get("NUPP_BACKEND") or "inprocess"
# NUPP_PIDNS=1: every program runs in a PID namespace of its own, as in a
# container (make test runs the BPF backend's tests so too).
IN_PIDNS = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] \
    if os.environ.get("NUPP_PIDNS") == "1" else []
STATES = ("compiled", "interpreted", "cCode", "collecting", "compiling")


def read_pins():
    """tree -> pinned Debian source version, from luajit/pins."""
    pins = {}
    with open(os.path.join(TOP, "luajit", "pins")) as f:
        for line in f:
            words = line.split()
            if words and not words[0].startswith("#"):
                pins[words[0]] = words[2]
    return pins


PINNED = read_pins()


@pytest.fixture(scope="session", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", TOP, "lua"], check=True)


def lua_env(extra=None):
    env = dict(os.environ)
    env["LUA_PATH"] = ";".join([
        BUILD_LUA + "/?.lua",
        os.path.join(TOP, "tests", "helpers", "lua", "?.lua")]) + ";;"
    env["LUA_CPATH"] = BUILD_LUA + "/?.so;;"
    env["NUPP_BACKEND"] = BACKEND
    env.update(extra or {})
    return env


def run_lua(tmp_path, source, name="prog.lua", extra_env=None, files=None):
    """Run source as tmp_path/name; return the JSON its last line printed."""
    for fname, text in (files or {}).items():
        (tmp_path / fname).write_text(textwrap.dedent(text))
    (tmp_path / name).write_text(textwrap.dedent(source))
    p = subprocess.run([*IN_PIDNS, LUAJIT, name], cwd=tmp_path, env=lua_env(extra_env),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def line_of(source, needle):
    """1-based line of the first line of source containing needle."""
    for i, line in enumerate(textwrap.dedent(source).splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def text_lines(text):
    """(stack, count) of every line of a collapsed-stack text."""
    rows = []
    for line in text.splitlines():
        m = re.fullmatch(r"(\S(?:.*\S)?) (\d+)", line)
        assert m, "bad collapsed line %r" % line
        rows.append((m.group(1), int(m.group(2))))
    return rows


def at_zone_boundary(stack):
    """Whether a sample's stack stops in zone.lua's own code after its last
    zone.run: the store of the current zone (st.current, a cdata store that
    runs __newindex) at a zone's entry or exit, where the zone is already
    (or still) set while the stack is zone.lua's."""
    f = stack.split(";")
    runs = [k for k, x in enumerate(f) if x == "zone.lua:run"]
    return bool(runs) and all(x.startswith("zone.lua:") or ".lua:" not in x
                              for x in f[runs[-1] + 1:])


def assert_all_under(rows, frame):
    """Every sample of a zone filter's rows lies under frame, but for at
    most 2 at the zone's boundaries (at_zone_boundary). Model: the two
    stores of a zone's entry and exit take under 1 us of CPU each; at one
    sample per 5 ms a run has one such sample with probability < 4e-4
    (seen once in ~30 CI runs), three with < 1e-10."""
    off = [(s, c) for s, c in rows if frame not in s.split(";")]
    assert all(at_zone_boundary(s) for s, _ in off), rows
    assert sum(c for _, c in off) <= 2, rows


def check_sample_report(rep, interval):
    assert rep["intervalMs"] == interval
    assert rep["backend"] == BACKEND
    rows = text_lines(rep["text"])
    assert rep["tostring"] == rep["text"]
    assert rep["samples"] == sum(c for _, c in rows)
    assert rep["stacks"] == len(rows) == len({s for s, _ in rows})
    assert rep["text"] == "" or rep["text"].endswith("\n")
    order = sorted(rows, key=lambda r: (-r[1], r[0]))
    assert rows == order, "not ordered by count, then stack"
    return rows


def check_aggregate(agg):
    total = 0
    for zp, bystack in agg.items():
        for stack, rec in bystack.items():
            assert set(rec) == {"zonePath", "stack", "count"} | set(STATES)
            assert rec["zonePath"] == zp and rec["stack"] == stack
            assert all(isinstance(rec[k], int) and rec[k] >= 0 for k in STATES)
            assert rec["count"] >= 1
            assert sum(rec[k] for k in STATES) == rec["count"]
            total += rec["count"]
    return total


# Reports are emitted with their tostring, sessions with their fields.
PRELUDE = """\
local T = require("testutil")
local profile = require("nupp.profile")
local zone = require("nupp.profile.zone")
local function rep(r)
  local t = {}
  for k, v in pairs(r) do t[k] = v end
  t.tostring = tostring(r)
  return t
end
"""


# --- the API's usage examples (README, lua/nupp/profile.lua) ---------------

def test_spec_example_sample(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local function render() T.spin(0.3) end

        local session = profile.sample({intervalMs = 5})
        render()
        local report = session:stop("profile.out")
        print(report.samples, report.stacks)
        T.emit({rep = rep(report), file = io.open("profile.out"):read("*a")})
    """)
    rows = check_sample_report(out["rep"], 5)
    assert out["file"] == out["rep"]["text"]
    assert out["rep"]["samples"] >= 20, "0.3 s at 5 ms should give ~60 samples"
    hot = sum(c for s, c in rows if s.endswith("testutil.lua:spin")
              or ";testutil.lua:spin;" in s)
    assert hot >= 0.9 * out["rep"]["samples"]
    # The session's own start and stop are not the program's time.
    assert not [s for s, _ in rows if "profile.lua:" in s], rows


def test_spec_example_sample_zone(tmp_path):
    src = PRELUDE + """
        local function draw() local spin_draw = T.spin; spin_draw(0.25) end
        local function update() local spin_update = T.spin; spin_update(0.25) end
        local function render()
          zone.run("frame", function()
            zone.run("render", draw)
            zone.run("update", update)
          end)
        end

        local session = profile.sample({intervalMs = 5, zone = "frame/render"})
        render()
        local report = session:stop("render.collapsed")
        print(report.samples, report.stacks)
        T.emit({rep = rep(report), agg = session.aggregate,
                file = io.open("render.collapsed"):read("*a")})
    """
    out = run_lua(tmp_path, src)
    rows = check_sample_report(out["rep"], 5)
    assert out["file"] == out["rep"]["text"]
    agg = out["agg"]
    check_aggregate(agg)
    assert set(agg) <= {"", "frame", "frame/render", "frame/update"}
    in_render = sum(r["count"] for r in agg.get("frame/render", {}).values())
    assert out["rep"]["samples"] == in_render >= 20
    assert sum(r["count"] for r in agg.get("frame/update", {}).values()) >= 20
    # zone.run calls them as its fn: the leaves are named by the local they
    # were called through.
    assert_all_under(rows, "testutil.lua:spin_draw")
    assert not any("spin_update" in s for s, _ in rows)


def test_spec_example_trace(tmp_path):
    src = PRELUDE + """
        local function render()
          local n = 0
          for i = 1, 200000 do
            local f = function() return i end
            n = n + 1
          end
          return n
        end

        local session = profile.trace()
        render()
        local report = session:stop("aborts.csv")
        print(report.blacklisted, report.totalAborts)
        T.emit({rep = rep(report), file = io.open("aborts.csv", "rb"):read("*a")})
    """
    out = run_lua(tmp_path, src)
    rep = out["rep"]
    assert rep["blacklisted"] == 1
    assert rep["totalAborts"] == 11, "LuaJIT blacklists on the 11th abort"
    assert out["file"] == rep["tostring"]
    sites = rep["sites"]
    assert [(s["severity"], s["count"]) for s in sites] == [("blacklist", 1), ("warn", 10)]
    for s in sites:
        assert s["reason"] == "NYI: bytecode FNEW"
        assert s["rawReason"] == "NYI: bytecode 51"
        assert s["reasonId"] == "trace.nyi-bytecode.FNEW"
        assert s["reasonClass"] == "blocker"
        assert s["location"] == "prog.lua:%d" % line_of(src, "local f = function")
        assert s["zonePath"] == ""


# --- SampleSession and SampleReport ----------------------------------------

def test_sample_session_fields_and_defaults(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local s = profile.sample()
        local fields = {intervalMs = s.intervalMs, zoneFilter = s.zoneFilter,
          root = s.root, paused = s.paused, stopped = s.stopped,
          aggregateType = type(s.aggregate), backend = s.backend,
          pause = type(s.pause), resume = type(s.resume), stop = type(s.stop)}
        T.spin(0.2)
        local r = s:stop()
        fields.stoppedAfter = s.stopped
        local s2 = profile.sample({zone = "a", root = "m.lua"})
        fields.zone2, fields.root2 = s2.zoneFilter, s2.root
        s2:stop()
        T.emit({fields = fields, rep = rep(r), agg = s.aggregate})
    """)
    f = out["fields"]
    assert f == {"intervalMs": 10, "paused": False, "stopped": False,
                 "aggregateType": "table", "backend": BACKEND, "pause": "function",
                 "resume": "function", "stop": "function", "stoppedAfter": True,
                 "zone2": "a", "root2": "m.lua"}
    rows = check_sample_report(out["rep"], 10)
    assert out["rep"]["samples"] == check_aggregate(out["agg"]) >= 8
    assert set(out["agg"]) == {""}
    # Default depth 16: the stacks here are far shallower, so whole.
    assert all(s.startswith("@0x") or s.startswith("prog.lua:0") for s, _ in rows)


def test_vm_states(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local function loop(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
        local s = profile.sample({intervalMs = 2})
        jit.off()
        T.spin(0.2)
        jit.on()
        local t0 = os.clock()
        while os.clock() - t0 < 0.3 do loop(1e7) end
        s:stop()
        local by = {compiled = 0, interpreted = 0}
        for _, bystack in pairs(s.aggregate) do
          for _, rec in pairs(bystack) do
            by.compiled = by.compiled + rec.compiled
            by.interpreted = by.interpreted + rec.interpreted
          end
        end
        T.emit(by)
    """)
    assert out["interpreted"] >= 20 and out["compiled"] >= 20, out


def test_text_order_ties_by_stack(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local s = profile.sample()
        s:stop()
        -- Feed the stop path known records: counts 3, 5, 3, 1.
        local s2 = profile.sample({zone = ""})
        s2.handle.stop()
        s2.handle.stop = function() end
        s2.aggregate = {[""] = {}, z = {}}
        local function put(zp, stack, n)
          s2.aggregate[zp][stack] = {zonePath = zp, stack = stack, count = n,
            compiled = n, interpreted = 0, cCode = 0, collecting = 0, compiling = 0}
        end
        put("", "m:b", 3); put("", "m:a", 5); put("", "m:c", 3); put("z", "m:b", 1)
        T.emit({text = s2:stop().text})
    """)
    assert out["text"] == "m:a 5\nm:b 4\nm:c 3\n"


def test_empty_session_text_is_empty(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local s = profile.sample({zone = "nothing/here"})
        T.spin(0.1)
        T.emit(rep(s:stop()))
    """)
    assert out["text"] == "" and out["tostring"] == ""
    assert out["samples"] == 0 and out["stacks"] == 0


def test_zone_filter_is_a_subtree(tmp_path):
    src = PRELUDE + """
        local function a() local spin_a = T.spin; spin_a(0.15) end
        local function b() local spin_b = T.spin; spin_b(0.15) end
        local function c() local spin_c = T.spin; spin_c(0.15) end
        local s = profile.sample({intervalMs = 5, zone = "frame/render"})
        zone.run("frame", function()
          zone.run("render", function() zone.run("text", a) end)
          zone.run("renderer", b)
          c()
        end)
        local r = s:stop()
        T.emit({rep = rep(r), agg = s.aggregate})
    """
    out = run_lua(tmp_path, src)
    rows = check_sample_report(out["rep"], 5)
    agg = out["agg"]
    check_aggregate(agg)
    assert set(agg) <= {"", "frame", "frame/render", "frame/render/text",
                        "frame/renderer"}
    want = sum(r["count"] for zp in ("frame/render", "frame/render/text")
               for r in agg.get(zp, {}).values())
    assert out["rep"]["samples"] == want >= 15
    assert sum(r["count"] for r in agg.get("frame/renderer", {}).values()) >= 15
    assert_all_under(rows, "testutil.lua:spin_a")


def test_root_cuts_and_merges(tmp_path):
    mod = """\
        local T = require("testutil")
        local M = {}
        function M.hot() T.spin(0.15) end
        return M
    """
    out = run_lua(tmp_path, PRELUDE + """
        local app = require("app")
        local function first() app.hot() end
        local function second() app.hot() end
        local function outside() T.spin(0.15) end
        local s = profile.sample({intervalMs = 5, root = "app.lua"})
        first(); second(); outside()
        local r = s:stop()
        T.emit({rep = rep(r), agg = s.aggregate})
    """, files={"app.lua": mod})
    rows = dict(check_sample_report(out["rep"], 5))
    raw = out["agg"][""]
    via_app = {s: r["count"] for s, r in raw.items() if ";app.lua:" in s}
    assert any(":first;" in s for s in via_app) and any(":second;" in s for s in via_app)
    cut = {}
    for s, n in via_app.items():
        i = s.index("app.lua:")
        cut[s[i:]] = cut.get(s[i:], 0) + n
    assert cut == {k: v for k, v in rows.items() if k.startswith("app.lua:")}
    assert "app.lua:hot;testutil.lua:spin" in cut
    # app.hot spins 0.3 CPU seconds at 5 ms: 60 samples expected, split
    # between spin and the os.clock it calls. Counted as Poisson, at least
    # 25 fail once in 10^7 runs (30 on spin's own row failed one run in 3).
    assert sum(n for s, n in cut.items() if s.startswith("app.lua:hot;testutil.lua:spin")) >= 25
    kept = {s: r["count"] for s, r in raw.items() if "app.lua:" not in s}
    assert kept and all(rows[s] == n for s, n in kept.items()), "kept whole"
    assert any(":outside" in s for s in kept)


def test_stack_depth_limits_frames(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local function down(n)
          if n == 0 then T.spin(0.15) return 0 end
          return 1 + down(n - 1)
        end
        local s = profile.sample({intervalMs = 5, stackDepth = 4})
        down(30)
        local a = s:stop()
        s = profile.sample({intervalMs = 5})
        down(30)
        local b = s:stop()
        T.emit({a = rep(a), b = rep(b)})
    """)
    for key, depth in (("a", 4), ("b", 16)):
        rows = check_sample_report(out[key], 5)
        frames = [s.split(";") for s, _ in rows]
        assert all(len(f) <= depth for f in frames)
        hot = [f for f in frames if "testutil.lua:spin" in f]
        assert sum(c for s, c in rows if "testutil.lua:spin" in s) >= 20
        assert all(len(f) == depth for f in hot), "deep stacks cut at depth"
        for f in hot:
            i = f.index("testutil.lua:spin")
            assert f[:i] == ["prog.lua:down"] * i


LINES_PROG = PRELUDE + """
    local function work(n, x)
      for _ = 1, n do
        if x > 1e300 then x = 0 end %s -- HOT
        if x > 1e300 then x = 0 end x = x * 0.999 + 0.5; x = x * 0.999 + 0.5 -- COLD
      end
      return x
    end
    local function run(f)
      local t0, sink = os.clock(), 0
      while os.clock() - t0 < 1 do sink = sink + f(2000, 1) end -- CALL
      return sink
    end
    local s = profile.sample({intervalMs = 1, lines = true})
    local sink = run(work)
    local compiled = s:stop()
    jit.off()
    jit.flush()
    s = profile.sample({intervalMs = 1, lines = true})
    sink = sink + run(work)
    local interpreted = s:stop()
    s = profile.sample({intervalMs = 1})
    sink = sink + run(work)
    T.emit({compiled = rep(compiled), interpreted = rep(interpreted), plain = rep(s:stop()),
            sink = sink})
""" % "; ".join(["x = x * 0.999 + 0.5"] * 24)


def test_lines_name_the_hot_line(tmp_path):
    """lines = true: each Lua frame carries its current line. work() spends
    ~90 % of its time on the line marked HOT (one chain of dependent
    arithmetic runs through both lines), compiled, then interpreted (after
    jit.off() and jit.flush()): both times at least 80 % of its samples are on
    prog.lua:f:HOT (run() calls it as f), the COLD line shows up, and the
    frame below carries the line of its call (run's CALL line). Without
    lines, frames keep their plain names."""
    out = run_lua(tmp_path, LINES_PROG)
    hot, coldl, call = (line_of(LINES_PROG, tag) for tag in ("-- HOT", "-- COLD", "-- CALL"))
    for phase in ("compiled", "interpreted"):
        rows = check_sample_report(out[phase], 1)
        mine = [(s, c) for s, c in rows if ";prog.lua:run:%d;prog.lua:f:" % call in s]
        work = sum(c for s, c in mine if re.search(r";prog\.lua:f:\d+$", s))
        on_hot = sum(c for s, c in mine if s.endswith(";prog.lua:f:%d" % hot))
        assert work >= 0.8 * out[phase]["samples"], (phase, rows)
        assert on_hot >= 0.8 * work, (phase, hot, rows)
        assert any(s.endswith(";prog.lua:f:%d" % coldl) for s, _ in mine), (phase, coldl, rows)
    plain = check_sample_report(out["plain"], 1)
    assert any(s.endswith(";prog.lua:run;prog.lua:f") for s, _ in plain), plain
    assert not any(re.search(r":\d+$", s) for s, _ in plain if s.endswith(":f")), plain


def test_pause_keeps_setup_out(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local function setup() T.spin(0.2) end
        local function work() T.spin(0.2) end
        local s = profile.sample({intervalMs = 5})
        s:pause(); s:pause()
        local p1 = s.paused
        setup()
        s:resume(); s:resume()
        local p2 = s.paused
        work()
        s:pause()
        setup()
        local r = s:stop()
        T.emit({rep = rep(r), p1 = p1, p2 = p2})
    """)
    assert out["p1"] is True and out["p2"] is False
    rows = check_sample_report(out["rep"], 5)
    assert not any(":setup" in s for s, _ in rows)
    assert sum(c for s, c in rows if ":work" in s) >= 20


# --- raises ------------------------------------------------------------------

def test_every_raise(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local e = {}
        local s = profile.sample()
        e.secondSample = T.raises(function() profile.sample() end)
        s:stop()
        e.stopTwice = T.raises(function() s:stop() end)
        e.pauseStopped = T.raises(function() s:pause() end)
        e.resumeStopped = T.raises(function() s:resume() end)
        local again = profile.sample()
        e.restart = again.stopped
        again:stop()
        local t = profile.trace()
        e.secondTrace = T.raises(function() profile.trace() end)
        e.sampleBesideTrace = profile.sample():stop().samples
        t:stop()
        e.traceStopTwice = T.raises(function() t:stop() end)
        e.tracePauseStopped = T.raises(function() t:pause() end)
        e.traceResumeStopped = T.raises(function() t:resume() end)
        e.badInterval = T.raises(function() profile.sample({intervalMs = 0}) end)
        e.badInterval2 = T.raises(function() profile.sample({intervalMs = 2.5}) end)
        e.badDepth = T.raises(function() profile.sample({stackDepth = "4"}) end)
        e.badZone = T.raises(function() profile.sample({zone = 1}) end)
        e.badRoot = T.raises(function() profile.sample({root = true}) end)
        e.badOptions = T.raises(function() profile.sample(5) end)
        e.badBenign = T.raises(function() profile.trace({includeBenign = 1}) end)
        e.stillFree = profile.sample():stop().samples
        T.emit(e)
    """)
    for k in ("secondSample", "stopTwice", "pauseStopped", "resumeStopped",
              "secondTrace", "traceStopTwice", "tracePauseStopped",
              "traceResumeStopped", "badInterval", "badInterval2", "badDepth",
              "badZone", "badRoot", "badOptions", "badBenign"):
        assert out.get(k) and out[k].startswith("prog.lua:"), (k, out.get(k))
        assert "nupp.profile: " in out[k]
    assert "already running" in out["secondSample"]
    assert "already running" in out["secondTrace"]
    assert out["restart"] is False
    assert out["sampleBesideTrace"] >= 0 and out["stillFree"] >= 0


def test_forced_unknown_backend_raises(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        T.emit({e = T.raises(function() profile.sample() end)})
    """, extra_env={"NUPP_BACKEND": "nonsense"})
    assert "NUPP_BACKEND must be bpf or inprocess" in out["e"]


# --- trace sessions ----------------------------------------------------------

FNEW_LOOP = """
    local function hot(n)
      local k = 0
      for i = 1, n do
        local f = function() return i end
        k = k + 1
      end
      return k
    end
"""


def test_trace_session_fields(tmp_path):
    out = run_lua(tmp_path, PRELUDE + FNEW_LOOP + """
        local before = os.time()
        local s = profile.trace()
        local f = {includeBenign = s.includeBenign, startedAt = s.startedAt,
          paused = s.paused, stopped = s.stopped, callback = type(s.callback),
          sites = type(s.sites), totalAborts = s.totalAborts,
          blacklisted = s.blacklisted, backend = s.backend, before = before,
          profile = s.traceProfile}
        zone.run("loop", hot, 200000)
        f.liveTotal, f.liveBlacklisted = s.totalAborts, s.blacklisted
        f.liveSites = s.sites
        local r = s:stop()
        f.stopped2 = s.stopped
        local status = {select(2, jit.status())}
        table.sort(status)
        T.emit({f = f, rep = rep(r), status = status, version = jit.version,
                bcnames = require("jit.vmdef").bcnames,
                includeBenign = profile.trace({includeBenign = true}):stop() and true})
    """)
    f, rep = out["f"], out["rep"]
    assert f["includeBenign"] is False and f["paused"] is False and f["stopped"] is False
    assert f["callback"] == "function" and f["sites"] == "table"
    assert f["totalAborts"] == 0 and f["blacklisted"] == 0
    assert f["backend"] == BACKEND and rep["backend"] == BACKEND
    assert isinstance(f["startedAt"], int) and abs(f["startedAt"] - f["before"]) <= 1
    assert f["stopped2"] is True
    assert f["liveTotal"] == 11 and f["liveBlacklisted"] == 1
    live = f["liveSites"]
    assert len(live) == 2
    for key, site in live.items():
        assert key.split("\0") == [site["severity"], site["reason"],
                                   site["location"], site["zonePath"]]
        assert site["zonePath"] == "loop"
    assert isinstance(rep["durationSec"], int) and 0 <= rep["durationSec"] <= 60
    assert rep["totalAborts"] == 11 and rep["blacklisted"] == 1
    assert rep["reasonCatalogId"] == "nupp.trace-reasons"
    assert isinstance(rep["reasonCatalogVersion"], int) and rep["reasonCatalogVersion"] >= 1
    for s in rep["sites"]:
        assert set(s) == {"severity", "count", "reason", "reasonId", "reasonClass",
                          "rawReason", "location", "zonePath"}
        assert s["location"] == "prog.lua:%d" % (line_of(PRELUDE + FNEW_LOOP, "local f = function"))
    p = rep["traceProfile"]
    assert p == f["profile"]
    # /usr/bin/luajit is Debian's luajit, known to the registry by content
    # (both backends ask the C module, which needs no privileges for it).
    assert p["luajitRevision"] == "luajit " + PINNED["luajit"]
    assert p["luajitVersion"] == 20220320, "the snapshot date of the pinned source"
    assert p["supported"] is True
    assert p["architecture"] == "x64" and p["operatingSystem"] == "Linux"
    assert p["enabledRecorderFeatures"] == out["status"]
    h = 0x811c9dc5
    for b in out["bcnames"].encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    assert p["bytecodeSchema"] == "%08x" % h
    assert p["id"] == "|".join([p["luajitRevision"], str(p["luajitVersion"]),
                                p["architecture"], p["operatingSystem"],
                                ",".join(p["enabledRecorderFeatures"]),
                                p["bytecodeSchema"], str(p["supported"]).lower()])


def test_trace_csv_is_rfc4180(tmp_path):
    out = run_lua(tmp_path, PRELUDE + FNEW_LOOP + """
        local s = profile.trace({includeBenign = true})
        hot(200000)
        local r = s:stop("aborts.csv")
        local trace = require("nupp.profile.trace")
        local odd = trace.csv({{severity = "warn", count = 2, reason = 'a, "b"',
          reasonId = "x", reasonClass = "risk", rawReason = "line\\nbreak",
          location = "m.lua:1", zonePath = "z"}})
        T.emit({rep = rep(r), odd = odd, file = io.open("aborts.csv", "rb"):read("*a")})
    """)
    rep = out["rep"]
    assert out["file"] == rep["tostring"]
    text = rep["tostring"]
    assert text.startswith("severity,count,reason,reasonId,reasonClass,rawReason,"
                           "location,zonePath\r\n")
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == ["severity", "count", "reason", "reasonId", "reasonClass",
                       "rawReason", "location", "zonePath"]
    assert rows[1:] == [[s["severity"], str(s["count"]), s["reason"], s["reasonId"],
                         s["reasonClass"], s["rawReason"], s["location"],
                         s["zonePath"]] for s in rep["sites"]]
    assert out["odd"].split("\r\n")[1] == 'warn,2,"a, ""b""",x,risk,"line\nbreak",m.lua:1,z'


def test_trace_benign_left_out_by_default(tmp_path):
    # The abort corpus's unroll.lua: a short recursion called from a hot loop,
    # whose side trace back into the loop reaches the loop unroll limit.
    with open(os.path.join(TOP, "tests", "fixtures", "aborts", "unroll.lua")) as f:
        unroll_src = f.read().replace("print(s)", "return s")
    src = PRELUDE + """
        local benign = %s
        local s = profile.trace({includeBenign = benign})
        -- Hot counters are shared and penalties randomized, so a try can
        -- miss the abort: five fresh copies, each with its own bytecode.
        local code = [==[UNROLL]==]
        for _ = 1, 5 do assert(loadstring(code, "=unroll"))() end
        T.emit(rep(s:stop()))
    """
    off = run_lua(tmp_path, (src % "nil").replace("UNROLL", unroll_src))
    on = run_lua(tmp_path, (src % "true").replace("UNROLL", unroll_src))
    assert not off["sites"] and off["totalAborts"] == 0
    assert on["totalAborts"] >= 1
    unroll = [s for s in on["sites"] if s["reason"] == "loop unroll limit reached"]
    assert unroll and all(s["severity"] == "info" and s["reasonClass"] == "stop" for s in unroll)
    assert unroll[0]["reasonId"] == "trace.loop-unroll"
    assert {s["location"] for s in unroll} == {"unroll:%d" % line_of(unroll_src, "for _ = 1, 200")}
    assert on["totalAborts"] == sum(s["count"] for s in on["sites"])


def test_trace_sites_order(tmp_path):
    out = run_lua(tmp_path, PRELUDE + FNEW_LOOP + """
        local s = profile.trace({includeBenign = true})
        hot(200000)
        local t = 0
        for k = 1, 300 do for j = 1, 4 do t = t + j end end
        T.emit(rep(s:stop()))
    """)
    rank = {"blacklist": 0, "warn": 1, "info": 2}
    keys = [(rank[s["severity"]], -s["count"]) for s in out["sites"]]
    assert keys == sorted(keys) and {0, 1} <= {k for k, _ in keys}


def test_trace_pause(tmp_path):
    src = PRELUDE + FNEW_LOOP + """
        local s = profile.trace()
        s:pause(); s:pause()
        hot(200000)
        s:resume(); s:resume()
        local t = s.totalAborts
        local again = function(n)
          local k = 0
          for i = 1, n do local f = function() return i end k = k + 1 end
          return k
        end
        again(200000)
        local r = s:stop()
        T.emit({whilePaused = t, rep = rep(r)})
    """
    out = run_lua(tmp_path, src)
    assert out["whilePaused"] == 0
    assert out["rep"]["totalAborts"] == 11 and out["rep"]["blacklisted"] == 1
    want = "prog.lua:%d" % line_of(src, "for i = 1, n do local f")
    assert {s["location"] for s in out["rep"]["sites"]} == {want}


def test_trace_identities(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local trace = require("nupp.profile.trace")
        local function r(...) return {trace.describe(...)} end
        T.emit({fnvEmpty = trace.fnv1a32(""), fnvA = trace.fnv1a32("a"),
          fnvFoobar = trace.fnv1a32("foobar"), fnew = trace.bcname(51),
          nyibc = r(7, 51), ffu = r(15, "string.dump"), err = r("boom"),
          llev = r(8), unknown = trace.lookup("no such reason"),
          id = trace.catalogId, version = trace.catalogVersion})
    """)
    assert out["fnvEmpty"] == "811c9dc5" and out["fnvA"] == "e40c292c"
    assert out["fnvFoobar"] == "bf9cf968" and out["fnew"] == "FNEW"
    reason, raw, ident = out["nyibc"]
    assert (reason, raw) == ("NYI: bytecode FNEW", "NYI: bytecode 51")
    assert ident["reasonId"] == "trace.nyi-bytecode.FNEW" and ident["reasonClass"] == "blocker"
    assert out["ffu"][:2] == ["NYI: unsupported variant of FastFunc string.dump"] * 2
    assert out["err"][:2] == ["error thrown or hook called during recording", "boom"]
    assert out["err"][2]["reasonId"] == "trace.recorder-error"
    assert out["llev"][2]["severity"] == "info" and out["llev"][2]["reasonClass"] == "stop"
    assert out["unknown"]["reasonId"] == "trace.unknown"	# as the CLI's
    assert out["id"] == "nupp.trace-reasons" and out["version"] >= 1


# --- zones -------------------------------------------------------------------

def test_zone_paths_and_gate(tmp_path):
    out = run_lua(tmp_path, PRELUDE + """
        local r = {}
        r.closed = zone.active()
        zone.enter("a"); r.closedPath = zone.get(); zone.leave()
        zone.leave()
        r.hold = zone.hold()
        r.open = zone.active()
        zone.enter("a"); zone.enter("b"); r.ab = zone.get(); r.abId = zone.id()
        zone.leave(); r.a = zone.get(); zone.leave(); r.none = zone.get()
        zone.leave(); r.noneAfterExtraLeave = zone.get()
        r.run = {zone.run("x", function(p, q) return zone.get(), p + q end, 1, 2)}
        local ok, obj = pcall(zone.run, "y", function() zone.enter("deep"); error({code = 7}) end)
        r.errObj = obj.code
        r.afterErr = zone.get()
        zone.reset()
        zone.run("outer", function()
          pcall(zone.run, "y", function() zone.enter("deep"); error("x") end)
          r.insideOuter = zone.get()
        end)
        r.afterOuter = zone.get()
        zone.enter("a"); zone.enter("b"); r.sameId = zone.id() == r.abId
        r.pathOfId = zone.path(r.abId)
        zone.reset(); r.reset = zone.get()
        r.release = zone.release()
        r.closedAgain = zone.active()
        r.release2 = zone.release()
        r.usdt = zone.usdt
        r.badName = T.raises(function() zone.hold(); zone.enter(42) end)
        T.emit(r)
    """)
    assert out["closed"] is False and out["closedPath"] == ""
    assert out["hold"] == 1 and out["open"] is True
    assert out["ab"] == "a/b" and out["a"] == "a" and out["none"] == ""
    assert out["noneAfterExtraLeave"] == ""
    assert out["run"] == ["x", 3]
    assert out["errObj"] == 7, "run passes errors through unchanged"
    assert out["afterErr"] == "y/deep", "no pcall: an error leaves the zones open"
    assert out["insideOuter"] == "outer/y/deep" and out["afterOuter"] == ""
    assert out["sameId"] is True and out["pathOfId"] == "a/b"
    assert out["reset"] == ""
    assert out["release"] == 0 and out["closedAgain"] is False and out["release2"] == 0
    assert out["usdt"] is True
    assert "zone name must be a non-empty string" in out["badName"]


def test_zone_code_never_aborts_a_trace(tmp_path):
    """Zone calls in a compiled loop abort no trace. Aborts of the "stop"
    class (leaving the loop in a root trace, an inner loop, the unroll
    limit: the recorder choosing where traces go) are left out: LuaJIT's
    JIT penalizes with a randomly seeded PRNG, so which of them a run meets
    varies (one CI run met "leaving loop in root trace" once), and they
    stop no code from being compiled."""
    out = run_lua(tmp_path, PRELUDE + """
        local reasons = require("nupp.profile.reasons")
        local vmdef = require("jit.vmdef")
        local aborts, traces = {}, 0
        jit.attach(function(what, tr, func, pc, err, info)
          local r = what == "abort" and reasons.byText[vmdef.traceerr[err]]
          if what == "abort" and not (r and r.class == "stop") then
            aborts[#aborts + 1] = tostring(err)
          end
          if what == "stop" then traces = traces + 1 end
        end, "trace")
        local function body(i) if i % 100 == 0 then return i % 7 end return i % 3 end
        local function body2(i, j) if i % 50 == 0 then return 2 end return j end
        local function loop(n)
          local enter, leave, run, acc = zone.enter, zone.leave, zone.run, 0
          for i = 1, n do
            enter("frame"); enter("render")
            acc = acc + run("inner", body, i) + run("inner2", body2, i, 1)
            leave(); leave()
          end
          return acc
        end
        for _ = 1, 3 do
          loop(100000)
          zone.hold()
          loop(100000)
          zone.release()
        end
        T.emit({aborts = aborts, traces = traces})
    """)
    assert not out["aborts"] and out["traces"] >= 1


def test_zone_gate_reloads_inside_a_running_trace(tmp_path):
    """A loop compiled with the gate closed sees it open without exiting."""
    out = run_lua(tmp_path, PRELUDE + """
        local ffi = require("ffi")
        local hits = 0
        for i = 1, 200000 do
          zone.enter("z")
          if zone.id() ~= 0 then hits = hits + 1 end
          zone.leave()
          if i == 100000 then
            -- What an external attach does: bump the semaphore in memory.
            ffi.cast("uint16_t *", zone.address)[0] = 1
          end
        end
        ffi.cast("uint16_t *", zone.address)[0] = 0
        T.emit({hits = hits})
    """)
    assert out["hits"] == 100000


def test_sample_and_trace_carry_zone_paths(tmp_path):
    out = run_lua(tmp_path, PRELUDE + FNEW_LOOP + """
        local s = profile.sample({intervalMs = 5})
        local t = profile.trace()
        zone.run("frame", function() zone.run("spin", T.spin, 0.2); zone.run("jit", hot, 200000) end)
        T.spin(0.1)
        t:stop(); s:stop()
        local zs = {}
        for zp in pairs(s.aggregate) do zs[#zs + 1] = zp end
        table.sort(zs)
        local tz = {}
        for _, site in pairs(t.sites) do tz[#tz + 1] = {site.location, site.zonePath} end
        T.emit({zs = zs, tz = tz, active = zone.active()})
    """)
    assert "frame/spin" in out["zs"] and "" in out["zs"]
    # hot()'s FNEW aborts (a warning, then the blacklisting) are frame/jit's.
    # T.spin's loop compiles, but in one run of many it aborted once too
    # (where its traces start depends on when the sampler's callbacks run):
    # such a site is spin's, in one of the two zones spin ran in.
    hot_line = line_of(PRELUDE + FNEW_LOOP, "local f = function")
    hot = [zp for loc, zp in out["tz"] if loc == f"prog.lua:{hot_line}"]
    assert hot == ["frame/jit", "frame/jit"], out["tz"]
    for loc, zp in out["tz"]:
        assert loc == f"prog.lua:{hot_line}" or \
            (loc.startswith("testutil.lua:") and zp in ("frame/spin", "")), out["tz"]
    assert out["active"] is False, "sessions close the gate they opened"


# --- USDT semaphore: needs root (perf_event_open of a uprobe) -----------------

def _probe_offsets(so):
    notes = subprocess.run(["readelf", "-nW", so], capture_output=True, text=True).stdout
    m = re.search(r"Provider: nupp\s+Name: zone\s+Location: (0x[0-9a-f]+), "
                  r"Base: 0x[0-9a-f]+, Semaphore: (0x[0-9a-f]+)", notes)
    assert m, notes
    loc, sem = int(m.group(1), 16), int(m.group(2), 16)
    segs = subprocess.run(["readelf", "-lW", so], capture_output=True, text=True).stdout
    def off(addr):
        for line in segs.splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                o, va, fs = int(f[1], 16), int(f[2], 16), int(f[4], 16)
                if va <= addr < va + fs:
                    return addr - va + o
        raise AssertionError("no segment for %#x" % addr)
    return off(loc), off(sem)


@pytest.mark.skipif(os.geteuid() != 0, reason="attaching a uprobe needs root")
def test_usdt_attach_opens_the_gate(tmp_path):
    so = os.path.join(BUILD_LUA, "nupp", "profile", "zone_state.so")
    loc, sem = _probe_offsets(so)
    (tmp_path / "target.lua").write_text(textwrap.dedent(PRELUDE + """
        io.write("ready\\n"); io.flush()
        local seen, t0 = {}, os.time()
        while os.time() - t0 < 20 do
          zone.enter("w")
          local a = zone.active()
          if a ~= seen[#seen] then seen[#seen + 1] = a; io.write(tostring(a), "\\n"); io.flush() end
          zone.leave()
          if #seen == 3 then break end
        end
    """))
    p = subprocess.Popen([LUAJIT, "target.lua"], cwd=tmp_path, env=lua_env(),
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        assert p.stdout.readline() == "false\n"
        ptype = int(open("/sys/bus/event_source/devices/uprobe/type").read())
        path = ctypes.create_string_buffer(so.encode())
        attr = (ctypes.c_uint8 * 128)()
        ctypes.memmove(attr, ctypes.pointer(ctypes.c_uint32(ptype)), 4)
        ctypes.memmove(ctypes.addressof(attr) + 4, ctypes.pointer(ctypes.c_uint32(128)), 4)
        config = sem << 32       # ref_ctr_offset: config:32-63
        ctypes.memmove(ctypes.addressof(attr) + 8, ctypes.pointer(ctypes.c_uint64(config)), 8)
        ctypes.memmove(ctypes.addressof(attr) + 56,
                       ctypes.pointer(ctypes.c_uint64(ctypes.addressof(path))), 8)
        ctypes.memmove(ctypes.addressof(attr) + 64, ctypes.pointer(ctypes.c_uint64(loc)), 8)
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(298, attr, p.pid, -1, -1, 8)   # perf_event_open, CLOEXEC
        assert fd >= 0, os.strerror(ctypes.get_errno())
        assert p.stdout.readline() == "true\n", "attach opened the gate"
        os.close(fd)
        assert p.stdout.readline() == "false\n", "closing the event closed it"
    finally:
        p.kill()
        p.wait()


# --- install -------------------------------------------------------------------

def test_make_install_layout(tmp_path):
    dest = tmp_path / "root"
    subprocess.run(["make", "-s", "-C", TOP, "install-lua", "DESTDIR=%s" % dest,
                    "PREFIX=/usr/local"], check=True)
    lmod = dest / "usr/local/share/lua/5.1"
    cmod = dest / "usr/local/lib/lua/5.1"
    for f in ("nupp/profile.lua", "nupp/profile/zone.lua", "nupp/profile/trace.lua",
              "nupp/profile/inprocess.lua", "nupp/profile/reasons.lua", "nupp/profile.d.tl"):
        assert (lmod / f).is_file(), f
    for f in ("nupp/profile/zone_state.so", "nupp/profile/bpf.so"):
        assert (cmod / f).is_file(), f
    # /usr/local/{share,lib}/lua/5.1 are on luajit's default paths; run from
    # the staged copy by substituting the prefix.
    env = lua_env({"LUA_PATH": "%s/?.lua;%s/?.lua;;" % (lmod, os.path.join(TOP, "tests/helpers/lua")),
        "LUA_CPATH": "%s/?.so;;" % cmod})
    p = subprocess.run([LUAJIT, "-e", "local z = require('nupp.profile.zone') "
                        "print(z.library, require('nupp.profile').sample():stop().samples)"],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == str(cmod / "nupp/profile/zone_state.so")
    paths = subprocess.run([LUAJIT, "-e", "print(package.path) print(package.cpath)"],
                           capture_output=True, text=True, env={}).stdout
    assert "/usr/local/share/lua/5.1/?.lua" in paths
    assert "/usr/local/lib/lua/5.1/?.so" in paths


def test_zone_filter_is_the_clis(tmp_path):
    """The API's zone filter answers every case of
    tests/fixtures/zone_filter.tsv as the CLI's --zone does
    (tests/unit/test_profile.c runs the same file through user/profile/profile.c)."""
    cases = [line.split("\t") for line in
             (Path(__file__).parent.parent / "fixtures" / "zone_filter.tsv").read_text().splitlines()
             if line and not line.startswith("#")]
    out = run_lua(tmp_path, PRELUDE + """
        local got = {}
        for _, c in ipairs(T.cases) do got[#got + 1] = profile._inzone(c[1], c[2]) and "1" or "0" end
        T.emit({got = got})
    """.replace("T.cases", "{" + ",".join("{%s,%s}" % (json.dumps(c[0]), json.dumps(c[1]))
                                          for c in cases) + "}"))
    assert out["got"] == [c[2] for c in cases], list(zip(cases, out["got"]))



def test_trace_site_rules_are_the_clis(tmp_path):
    """The API counts aborts into sites and orders them as the CLI does, on
    every case of tests/fixtures/trace_sites.tsv (tests/unit/test_tracer.c
    runs the same file through user/trace/trace.c and user/trace/trace_report.c)."""
    rows = [line.split("\t") for line in
            (Path(__file__).parent.parent / "fixtures" / "trace_sites.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    counted = [r[1:] for r in rows if r[0] == "counted"]
    order = [dict(zip(("severity", "count", "reason", "location", "zonePath"), r[1:]))
             for r in rows if r[0] == "order"]
    for s in order:
        s["count"] = int(s["count"])
    assert len(counted) == 8 and len(order) == 8
    out = run_lua(tmp_path, PRELUDE + """
        local trace = require("nupp.profile.trace")
        local got = {}
        for _, c in ipairs(T.counted) do
          local id = c[2] ~= "-" and { severity = c[2] } or nil
          local sev = trace.siteSeverity(c[1] == "1", id)
          got[#got + 1] = trace.siteCounted(sev, c[3] == "1") and sev or "-"
        end
        local sites = {}
        for i = #T.order, 1, -1 do sites[#sites + 1] = T.order[i] end
        table.sort(sites, trace.siteOrder)
        local order = {}
        for i, s in ipairs(sites) do order[i] = s.location .. "|" .. s.zonePath end
        T.emit({got = got, order = order})
    """.replace("T.counted", "(%s)" % lua_literal(counted)).replace("T.order", "(%s)" % lua_literal(order)))
    assert out["got"] == [c[3] for c in counted], list(zip(counted, out["got"]))
    assert out["order"] == [s["location"] + "|" + s["zonePath"] for s in order]


def test_report_file_replaces_a_planted_symlink(tmp_path):
    """stop(filename) writes as the CLI's -o does (user/base/output.c, through the
    C module): a symlink planted at the name in a world-writable directory is
    replaced, not followed; an existing file is kept as NAME.old."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)			# like /tmp
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (shared / "p.collapsed").symlink_to(victim)
    (shared / "aborts.csv").write_text("earlier run\n")
    out = run_lua(tmp_path, PRELUDE + """
        local s = profile.sample({intervalMs = 1})
        T.spin(0.05)
        local r = s:stop("shared/p.collapsed")
        local t = profile.trace()
        t:stop("shared/aborts.csv")
        T.emit({text = r.text})
    """)
    assert victim.read_text() == "precious\n", "stop() wrote through the symlink"
    assert (shared / "p.collapsed").read_text() == out["text"] and out["text"]
    assert (shared / "p.collapsed.old").is_symlink()
    assert (shared / "aborts.csv.old").read_text() == "earlier run\n"
    assert (shared / "aborts.csv").read_text().startswith("severity,count,reason,")
    assert sorted(os.listdir(shared)) == ["aborts.csv", "aborts.csv.old", "p.collapsed", "p.collapsed.old"]


def test_report_file_with_an_empty_name_is_an_error(tmp_path):
    """stop("") raises, as a name no file can have (the C module's writer
    takes "" for no output: it must not be handed one)."""
    out = run_lua(tmp_path, PRELUDE + """
        local s = profile.sample({intervalMs = 1})
        T.spin(0.01)
        local ok, err = pcall(s.stop, s, "")
        T.emit({ok = ok, err = tostring(err)})
    """)
    assert out["ok"] is False and "cannot write" in out["err"], out


def test_trace_reasons_are_the_clis(tmp_path):
    """The API names every abort of tests/fixtures/trace_reasons.tsv as the
    CLI's collector does (tests/unit/test_tracer.c runs the same file through
    user/trace/abort_site.c): raw text, reason with its detail, identity."""
    rows = [line.split("\t") for line in
            (Path(__file__).parent.parent / "fixtures" / "trace_reasons.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    assert len(rows) >= 8
    out = run_lua(tmp_path, PRELUDE + """
        local trace = require("nupp.profile.trace")
        local vmdef = require("jit.vmdef")
        local function number_of(names, name)	-- in a table of 6-character names
          for i = 0, #names / 6 - 1 do
            if names:sub(i * 6 + 1, i * 6 + 6):gsub(" +$", "") == name then return i end
          end
        end
        local nerr = 0
        while vmdef.traceerr[nerr] do nerr = nerr + 1 end
        local got = {}
        for _, c in ipairs(T.rows) do
          local err, info, n = nerr + 3, nil, nil
          for i = 0, nerr - 1 do
            local text = vmdef.traceerr[i]:gsub("bytecode %%s", "bytecode %%d")
            if text == c[1] then err = i end
          end
          n = err
          if c[2]:sub(1, 3) == "bc " then info = number_of(vmdef.bcnames, c[2]:sub(4)); n = info
          elseif c[2]:sub(1, 3) == "ir " then info = number_of(vmdef.irnames, c[2]:sub(4)); n = info
          elseif c[2]:sub(1, 6) == "error " then err = c[2]:sub(7) end
          local reason, raw, ident = trace.describe(err, info)
          got[#got + 1] = {raw, reason, ident.reasonId, ident.reasonClass, ident.severity, n}
        end
        T.emit({got = got})
    """.replace("T.rows", "(%s)" % lua_literal(rows)))
    for row, got in zip(rows, out["got"]):
        n = str(got[5])
        assert got[:5] == [row[2].replace("#", n), row[3].replace("#", n), *row[4:7]], (row, got)
    assert len(out["got"]) == len(rows)


def test_trace_csv_is_the_clis(tmp_path):
    """The API writes a report's sites as CSV byte for byte as the CLI does:
    the two sites of tests/fixtures/trace_report.csv (tests/unit/test_tracer.c
    writes the same two through user/trace/trace_report.c): a field quoted only
    when it must be, its quotes doubled, CRLF inside a field and at line ends,
    a count past 32 bits."""
    out = run_lua(tmp_path, PRELUDE + """
        local trace = require("nupp.profile.trace")
        T.emit({csv = trace.csv({
          { severity = "blacklist", count = 12, reason = "NYI: bytecode FNEW",
            reasonId = "trace.nyi-bytecode.FNEW", reasonClass = "blocker",
            rawReason = "NYI: bytecode 51", location = '"a,b":3', zonePath = "frame/jit" },
          { severity = "info", count = 12884901888, reason = "leaving loop in root trace",
            reasonId = "trace.leaving-loop", reasonClass = "stop",
            rawReason = "line\\r\\nbreak", location = "app.lua:7", zonePath = "" },
        })})
    """)
    want = (Path(__file__).parent.parent / "fixtures" / "trace_report.csv").read_bytes().decode()
    assert out["csv"] == want


def lua_literal(v):
    """A Python value of strings, ints, lists and dicts as a Lua constructor."""
    if isinstance(v, dict):
        return "{" + ",".join("[%s]=%s" % (json.dumps(k), lua_literal(x)) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "{" + ",".join(lua_literal(x) for x in v) + "}"
    return json.dumps(v) if isinstance(v, str) else str(v)


def test_heap_census_of_the_script_itself(tmp_path):
    """profile.heap(): the script's own VM, read by the C module (no
    privileges), the shapes it made found where they are: 20,000 closures
    of one prototype at its line, 30,000 strings of one prefix, a table of
    200,000 array slots held in package.loaded (its path); the bytes within
    5 % of collectgarbage("count")."""
    src = PRELUDE + """
        local keep = {}
        local function make(i) return function() return i end end   -- MAKE
        for i = 1, 20000 do keep[#keep + 1] = make(i) end
        for i = 1, 30000 do keep[#keep + 1] = string.format("census-key-%020d", i) end
        local sessions = {}
        for i = 1, 200000 do sessions[i] = i end
        package.loaded.appcache = {sessions = sessions}
        sessions = nil
        collectgarbage(); collectgarbage()
        local before = collectgarbage("count") * 1024
        local c = profile.heap()
        T.emit({before = before, gcTotal = c.gcTotal, counted = c.counted, partial = c.partial,
                closures = c.closuresByPrototype[1], prefix = c.stringsByPrefix[1],
                table = c.largestTables[1], strings = c.types.string.objects,
                path = c.byPath[1], npaths = #c.byPath,
                sessions = (function()
                  for _, p in ipairs(c.byPath) do
                    if p.path == "package.loaded.appcache.sessions" then return p end
                  end
                end)()})
    """
    out = run_lua(tmp_path, src)
    # The VM's count as the script read it, but for what the call itself
    # allocated on its way to the C module.
    assert abs(out["gcTotal"] - out["before"]) < 64 * 1024, out
    assert not out["partial"] and 0.95 * out["gcTotal"] <= out["counted"] <= out["gcTotal"], out
    assert out["closures"]["closures"] == 20000 and \
        out["closures"]["where"].endswith("prog.lua:%d" % line_of(src, "-- MAKE")), out
    assert out["prefix"]["prefix"] == "census-key-0" and 30000 <= out["prefix"]["strings"] <= 30002, out
    # The largest table is reached from the registry's _LOADED only.
    assert out["table"]["arraySlots"] >= 200000 and \
        out["table"]["path"] == "package.loaded.appcache.sessions", out
    # By path: that table's own bytes where it is; the paths ranked by
    # what they retain, a root first.
    assert out["sessions"]["objects"] == 1 and out["sessions"]["bytes"] == out["table"]["bytes"], out
    assert out["path"]["path"] in ("_G", "registry", "main thread") and 1 <= out["npaths"] <= 2000, out
