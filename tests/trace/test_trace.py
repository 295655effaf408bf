"""test_trace.py - the trace-abort collector against in-process ground truth (root).

For every corpus program in tests/fixtures/aborts/ and every LuaJIT build, the sites
nupp-trace-dev reports must equal, row for row, what a jit.attach handler in
the same run counted (tests/fixtures/aborts/truth.lua); the target's output and exit
status must not change when the collector is attached.
"""
import csv
import glob
import io
import os
import subprocess
import sys

import pytest

from helpers import trace_run

ROOT = trace_run.ROOT
BUILDS = {
    "stock-luajit": os.path.join(ROOT, "build/stock/luajit/usr/bin/luajit"),
    "system-luajit": "/usr/bin/luajit",
    "stock-luajit2": os.path.join(ROOT, "build/stock/luajit2/usr/bin/luajit"),
    "pinned-luajit": os.path.join(ROOT, "build/luajit/luajit/src/luajit"),
    "pinned-luajit2": os.path.join(ROOT, "build/luajit/luajit2/src/luajit"),
}
# Debian 13 and sid, in a container (tests/helpers/container, `make roots`).
for _suite in ("trixie", "sid"):
    BUILDS[_suite + "-luajit"] = (os.path.join(ROOT, "tests/helpers/container"),
                                  os.path.join(ROOT, "build/roots", _suite), "/usr/bin/luajit")
PROGRAMS = sorted(p for p in glob.glob(os.path.join(ROOT, "tests/fixtures/aborts/*.lua"))
                  if not p.endswith("/truth.lua"))
HEADER = ["severity", "count", "reason", "reasonId", "reasonClass", "rawReason", "location", "zonePath"]

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="BPF needs root")]


def build(name):
    path = BUILDS[name]
    need = path if isinstance(path, str) else path[1] + path[2]
    if not os.path.exists(need):
        pytest.fail("%s not built (%s): run `make`" % (name, need), pytrace=False)
    return path


@pytest.mark.parametrize("benign", [False, True], ids=["default", "benign"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_sites_equal_truth(name, prog, benign):
    r = trace_run.run(build(name), prog, benign=benign)
    assert r["dev_status"] == 0, r["dev_stderr"]
    assert r["status"] == 0, r["stderr"]
    assert r["truth"][0] == HEADER
    assert r["bpf"] == r["truth"], r["dev_stderr"]
    totals = dict(kv.split("=") for kv in r["truth_totals"].split())
    assert "totalAborts=%s blacklisted=%s" % (totals["totalAborts"], totals["blacklisted"]) \
        in r["dev_stderr"]
    assert "lost=0" in r["dev_stderr"]


@pytest.mark.parametrize("prog", PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
def test_output_unchanged(prog):
    luajit = build("stock-luajit")
    plain = trace_run.run(luajit, prog, bpf=False)
    traced = trace_run.run(luajit, prog, bpf=True)
    assert traced["stdout"] == plain["stdout"]
    assert traced["stderr"] == plain["stderr"]
    assert traced["status"] == plain["status"]


def test_corpus_covers_reasons():
    """At least 12 distinct VM reasons across the three classes, and blacklisting."""
    luajit = build("stock-luajit")
    ids, classes, blacklist = set(), set(), 0
    for prog in PROGRAMS:
        rows = trace_run.run(luajit, prog, benign=True)["bpf"][1:]
        for row in rows:
            ids.add(row[3].split(".")[0] + "." + row[3].split(".")[1])
            classes.add(row[4])
            blacklist += row[0] == "blacklist"
    assert len(ids) >= 12, sorted(ids)
    assert classes == {"blocker", "risk", "stop"}
    assert blacklist >= 3


# luajit2 from 2019-02 to 2023-10 names lj_debug_frame(L, 0), the builtin
# itself; LuaJIT (and luajit2 since) the first Lua frame below it.
DEBUG_FRAME_BUILDS = {"stock-luajit2", "pinned-luajit2"}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_generated_code_through_non_lua_frames(name):
    """Chunks made by loadstring abort in string.rep, recorded as an __index
    metamethod (a continuation frame below it) and under pcall (a pcall
    frame, then pcall's own), and are collected right after: every location
    is the one jit.attach named, the search through those frames included."""
    r = trace_run.run(build(name), os.path.join(ROOT, "tests/fixtures/aborts/generated.lua"))
    assert r["dev_status"] == 0, r["dev_stderr"]
    assert r["bpf"] == r["truth"], r["dev_stderr"]
    got = {row[6] for row in r["bpf"][1:] if row[2] == "bad argument type"}
    if name in DEBUG_FRAME_BUILDS:
        assert got == {"string.rep"}
    else:
        # Chunk k (1..8) starts k lines down: get's t[i] at k+4 (through the
        # continuation frame), the pcall(string.rep, ...) at k+11. A chunk
        # whose loop lands where a collected one's was inherits its hot count
        # and penalty (both kept by bytecode address), and may not abort at
        # all: not every k appears.
        cont = {'"solver":%d' % (k + 4) for k in range(1, 9)}
        pcall = {'"solver":%d' % (k + 11) for k in range(1, 9)}
        assert got <= cont | pcall
        assert got & cont and got & pcall


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_abort_at_exit(name):
    """The program's last abort comes about 1 ms before it exits, and the
    collector is not waited for: it takes the abort in after the process is
    gone, and names it as jit.attach did in the same run."""
    r = trace_run.run(build(name), os.path.join(ROOT, "tests/fixtures/aborts/abort_at_exit.lua"),
                      drain=False)
    assert r["dev_status"] == 0, r["dev_stderr"]
    assert r["status"] == 0, r["stderr"]
    assert [row[6] for row in r["truth"][1:]] == ["last:3"]
    assert r["bpf"] == r["truth"], r["dev_stderr"]


def test_csv_round_trip():
    """A location with a comma, a quote and a newline survives python's csv."""
    luajit = build("stock-luajit")
    r = trace_run.run(luajit, os.path.join(ROOT, "tests/fixtures/aborts/odd_names.lua"))
    rows = r["bpf"]
    assert rows[0] == HEADER
    assert rows[1][6] == 'odd, "name"\nline:1'
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    assert list(csv.reader(io.StringIO(buf.getvalue(), newline=""))) == rows


def test_profile():
    r = trace_run.run(build("stock-luajit"), os.path.join(ROOT, "tests/fixtures/aborts/nyi_fnew.lua"))
    line = [l for l in r["dev_stderr"].splitlines() if l.startswith("profile.id=")][0]
    fields = line[len("profile.id="):].split("|")
    assert fields[0].startswith("luajit 2.1.0~beta3+git20220320")
    assert fields[1] == "20220320"
    assert fields[2:4] == ["x64", "Linux"]
    assert "fold" in fields[4].split(",") and fields[4].split(",") == sorted(fields[4].split(","))
    assert fields[6] == "true"
    # Read from outside, the recorder is described as nupp.profile.trace
    # describes it from inside the same build: features and bytecode schema.
    inside = subprocess.run(
        [build("stock-luajit"), "-e",
         "local p = require('nupp.profile.trace').profile() "
         "io.write(p.id, '\\n', p.bytecodeSchema)"],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, LUA_PATH=os.path.join(ROOT, "build/lua/?.lua") + ";;")).stdout.split("\n")
    assert fields[2:6] == inside[0].split("|")[2:6]
    assert fields[5] == inside[1]
