# SPDX-License-Identifier: MIT
"""nupp-bpf heap: the census of a LuaJIT heap, read from outside.

The target (tests/fixtures/workloads/heap_shapes.lua) builds a heap of known
shapes, collects, prints collectgarbage("count") * 1024 and blocks in
io.read: its heap holds still while it is read. The census must find its
shapes exactly where they are exact (the closures of one prototype, the
strings of one prefix, the largest tables' slots) and the bytes the VM
counts (g->gc.total) within 5 %: what it does not count are the VM's
buffers and the JIT's arrays, small beside a heap of tens of MB. Not
sampled: no statistical bound.
"""
import json
import re
import time
import subprocess

import pytest

from helpers import NUPP, STOCK_LUAJIT, BUILDS, go_pprof, workload

SHAPES = workload("heap_shapes.lua")


class Held:
    """heap_shapes.lua, held in its io.read until released."""

    def __init__(self, build, scale=1):
        self.p = subprocess.Popen(build.command(SHAPES, scale), env=build.environ(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        line = self.p.stdout.readline()
        assert line.startswith("ready "), (line, self.p.stderr.read() if self.p.poll() else "")
        self.count = float(line.split()[1])
        self.pid = self.p.pid

    def release(self):
        """Let it read its line: it prints "done" and exits 0."""
        out, err = self.p.communicate("go\n", timeout=30)
        return self.p.returncode, out, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


@pytest.fixture
def held():
    started = []

    def start(build, scale=1):
        h = Held(build, scale)
        started.append(h)
        return h
    yield start
    for h in started:
        h.kill()


def census(pid, *args):
    p = subprocess.run([str(NUPP), "heap", "-p", str(pid), "--json", *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2"])
def test_census_of_known_shapes(privileged, held, build_name):
    """Every shape the workload built, where the census must find it, and
    the bytes within 5 % of what the VM counts."""
    h = held(BUILDS[build_name])
    out = census(h.pid)
    assert out["pid"] == h.pid and len(out["vms"]) == 1, out
    vm = out["vms"][0]
    # The target is blocked: the VM's count is the one it printed, but
    # for the string of the number it printed, and the line buffer.
    assert abs(vm["gcTotal"] - h.count) < 64 * 1024, (vm["gcTotal"], h.count)
    assert vm["gcTotal"] == vm["gcTotalAfter"]
    assert not vm["partial"], vm
    assert 0.95 * vm["gcTotal"] <= vm["counted"] <= vm["gcTotal"], \
        f"counted {vm['counted']} of gc.total {vm['gcTotal']}"
    types = vm["types"]
    # 200,000 keys, 131,072 "kN", the chunk's own: at least those.
    assert types["string"]["objects"] >= 331072, types
    assert types["Lua function"]["objects"] >= 50000, types
    assert types["thread"]["objects"] >= 101, types	# 100 coroutines and the main thread
    # The keys, each a GCstr (24 bytes), 40 characters and their NUL; and
    # the strings of the chunk that share their prefix (its format string,
    # "session-key-%028d"), at most two of under 100 bytes.
    top = vm["stringsByPrefix"][0]
    assert top["prefix"] == "session-key-" and 200000 <= top["strings"] <= 200002, \
        vm["stringsByPrefix"][:3]
    extra = top["strings"] - 200000
    assert 200000 * (24 + 40 + 1) <= top["bytes"] <= 200000 * (24 + 40 + 1) + 100 * extra, top
    clo = vm["closuresByPrototype"][0]
    assert clo["closures"] == 50000 and clo["where"].endswith("heap_shapes.lua:25"), clo
    tables = vm["largestTables"]
    assert tables[0]["arraySlots"] >= 1000000 and tables[0]["bytes"] >= 8 * 1000000, tables[:2]
    # Reference paths: the array is a local of the main chunk (a slot of
    # the main thread's stack), the hash table the global cache.sessions as
    # well, and the globals come first; a closure, a slot of the local
    # table of closures.
    assert re.fullmatch(r"main thread\.stack\[\d+\]", tables[0]["path"]), tables[0]
    hashed = [t for t in tables if t["hashSlots"] == 131072]
    assert hashed and hashed[0]["path"] == "_G.cache.sessions", hashed
    assert re.fullmatch(r"main thread\.stack\[\d+\]\[\d+\]", clo["path"]), clo
    assert vm["reached"] >= 50000 + 3, vm["reached"]
    # By path: the hash table under _G.cache.sessions, whose 131,072 keys
    # "k1".."k131072" (24-byte GCstr header, the text and its NUL) are
    # first reached there (the globals come first); its values are true:
    # it retains itself and its keys.
    by_path = {g["path"]: g for g in vm["byPath"]}
    assert len(by_path) == len(vm["byPath"]), "a path twice"
    keys = by_path["_G.cache.sessions.<key>"]
    want = sum(24 + len(f"k{i}") + 1 for i in range(1, 131073))
    assert keys["objects"] == 131072 and keys["bytes"] == want, keys
    sessions = by_path["_G.cache.sessions"]
    assert sessions["objects"] == 1 and sessions["bytes"] == hashed[0]["bytes"], sessions
    assert sessions["retainedBytes"] == sessions["bytes"] + want, sessions
    # The 200,000 strings of the local table `strings`: its entries are
    # one group, "[*]", under the main thread's stack slot.
    entries = [g for path, g in by_path.items()
               if re.fullmatch(r"main thread\.stack\[\d+\]\[\*\]", path) and g["objects"] == 200000]
    assert len(entries) == 1 and entries[0]["bytes"] == 200000 * (24 + 40 + 1), \
        [(k, g["objects"]) for k, g in by_path.items() if k.startswith("main thread")][:10]
    code, out, _ = h.release()
    assert code == 0 and out == "done\n"


def test_pause_stops_it_for_the_census_and_lets_it_go(privileged, held):
    """--pause: stopped while read (the time said), running again after,
    with the same census as the process blocked in its read gives."""
    h = held(STOCK_LUAJIT)
    out = census(h.pid, "--pause")
    assert 0 < out["pausedSeconds"] < 30, out
    vm = out["vms"][0]
    assert not vm["partial"] and abs(vm["gcTotal"] - h.count) < 64 * 1024
    with open(f"/proc/{h.pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    assert state in "SR", f"left in state {state}"
    code, out, _ = h.release()
    assert code == 0 and out == "done\n"


def test_large_heap_within_five_percent(privileged, held):
    """A heap of about 130 MB (scale 5): the census within 5 % of the VM's
    count, and read in well under a second per 100 MB here."""
    h = held(STOCK_LUAJIT, 5)
    out = census(h.pid)
    vm = out["vms"][0]
    assert vm["gcTotal"] > 100e6, vm["gcTotal"]
    assert 0.95 * vm["gcTotal"] <= vm["counted"] <= vm["gcTotal"], vm
    assert 1000000 <= vm["stringsByPrefix"][0]["strings"] <= 1000002
    h.release()


def test_heap_text_output(privileged, held):
    """The text form: the totals line, each type, the rankings."""
    h = held(STOCK_LUAJIT)
    p = subprocess.run([str(NUPP), "heap", "-p", str(h.pid)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"nupp-bpf: heap of PID {h.pid}: 1 VM (read while it ran"), lines[0]
    assert "% counted); read in" in lines[1], lines[1]
    for want in ("  table ", "  string ", "largest tables:", "closures by prototype:",
                 "strings by prefix:", '"session-key-"'):
        assert any(want in line for line in lines), (want, p.stdout)


GROW = workload("heap_grow.lua")
# What heap_grow.lua's "grow 5000" adds (GC64 sizes: a GCtab is 64 bytes, a
# hash Node 24, a GCstr header 24): 5,000 session tables of three fields
# (4 nodes: 64 + 4 * 24 = 160 bytes), 5,000 tags tables { "a", "b" } (their
# 3 array slots allocated with them: 64 + 3 * 8 = 88 bytes), the 5,000
# names "user-<i>" and keys "s<i>" (i from 1,001 to 6,000).
GREW_SESSIONS = 5000 * 160
GREW_TAGS = 5000 * 88
GREW_NAMES = sum(24 + len(f"user-{i}") + 1 for i in range(1001, 6001))
GREW_KEYS = sum(24 + len(f"s{i}") + 1 for i in range(1001, 6001))


class Growing:
    """heap_grow.lua: grows by the sessions it is told to add."""

    def __init__(self, build):
        self.p = subprocess.Popen(build.command(GROW), env=build.environ(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        assert self.p.stdout.readline() == "ready\n", self.p.stderr.read()
        self.pid = self.p.pid

    def grow(self, n):
        self.p.stdin.write(f"grow {n}\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline() == f"grown {n}\n"

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


@pytest.fixture
def growing():
    started = []

    def start(build=STOCK_LUAJIT):
        g = Growing(build)
        started.append(g)
        return g
    yield start
    for g in started:
        g.close()


def assert_grew_by_5000_sessions(vm):
    """The diff of one VM across "grow 5000": every shape exactly, and
    nothing else (a few strings of the command's line may come and go)."""
    types = vm["types"]
    assert types["table"]["objects"] == 10000, types
    assert types["table"]["bytes"] >= GREW_SESSIONS + GREW_TAGS, types
    assert 10000 <= types["string"]["objects"] <= 10004, types
    grew = {g["path"]: g for g in vm["grew"]}
    assert vm["grew"][0]["path"] == "_G.cache.sessions[*]", vm["grew"][:3]
    want = {
        "_G.cache.sessions[*]": (5000, GREW_SESSIONS),
        "_G.cache.sessions[*].tags": (5000, GREW_TAGS),
        "_G.cache.sessions[*].name": (5000, GREW_NAMES),
        "_G.cache.sessions.<key>": (5000, GREW_KEYS),
    }
    for path, (objects, nbytes) in want.items():
        assert (grew[path]["objects"], grew[path]["bytes"]) == (objects, nbytes), (path, grew[path])
    # A session retains its tags and its name.
    assert grew["_G.cache.sessions[*]"]["retainedBytes"] == GREW_SESSIONS + GREW_TAGS + GREW_NAMES
    # The hash part of cache.sessions grew, the table is the same one.
    assert grew["_G.cache.sessions"]["objects"] == 0 and grew["_G.cache.sessions"]["bytes"] > 0
    others = [g for g in vm["grew"] if not g["path"].startswith("_G.cache.sessions")]
    assert sum(g["objects"] for g in others) <= 4, others


@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2"])
def test_diff_over_seconds_finds_the_leak(privileged, growing, build_name, tmp_path):
    """heap --diff 4 -p PID --json -o grew.collapsed: the process grows by
    5,000 sessions between the two censuses (told to once the first is
    taken, which stderr says); the diff names each shape by its path,
    exactly, and so does its profile."""
    g = growing(BUILDS[build_name])
    grew = tmp_path / "grew.collapsed"
    d = subprocess.Popen([str(NUPP), "heap", "--diff", "4", "-p", str(g.pid), "--json", "-o",
                          str(grew)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    note = d.stderr.readline()
    assert note == "nupp-bpf: first census taken (1 VM); the second in 4 s (^C: now)\n", note
    g.grow(5000)
    out, err = d.communicate(timeout=60)
    assert d.returncode == 0 and err == f"nupp-bpf: wrote {grew}\n", err
    rows = dict(line.rsplit(" ", 1) for line in grew.read_text().splitlines())
    assert int(rows["_G;_G.cache;_G.cache.sessions;_G.cache.sessions[*]"]) == GREW_SESSIONS, rows
    diff = json.loads(out)
    assert diff["pid"] == g.pid and 3.9 <= diff["seconds"] <= 30, diff["seconds"]
    assert len(diff["vms"]) == 1
    assert_grew_by_5000_sessions(diff["vms"][0])


def test_diff_of_two_census_files(privileged, growing, tmp_path):
    """heap --json twice, with 5,000 sessions added between; heap --diff
    OLD.json NEW.json reads them back: the same diff as live, in JSON and
    as text (its first path the sessions, with their count and bytes)."""
    g = growing()
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    first = census(g.pid)
    old.write_text(json.dumps(first))
    # A list deeper than a path is written: one group per link down to the
    # deepest written, which holds the rest; every path once.
    paths = first["vms"][0]["byPath"]
    assert len({p["path"] for p in paths}) == len(paths)
    chain = [p for p in paths if p["path"].startswith("_G.chain")]
    assert sum(p["objects"] for p in chain) == 100 and max(p["objects"] for p in chain) > 1, chain
    g.grow(5000)
    new.write_text(json.dumps(census(g.pid)))
    p = subprocess.run([str(NUPP), "heap", "--diff", str(old), str(new), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert_grew_by_5000_sessions(json.loads(p.stdout)["vms"][0])
    growth = [tmp_path / f"growth.{ext}" for ext in ("collapsed", "pb.gz", "svg")]
    p = subprocess.run([str(NUPP), "heap", "--diff", str(old), str(new),
                        *[a for f in growth for a in ("-o", str(f))]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    # What grew as a profile of own bytes, each path under those above it.
    rows = dict(line.rsplit(" ", 1) for line in growth[0].read_text().splitlines())
    sessions = "_G;_G.cache;_G.cache.sessions;_G.cache.sessions[*]"
    assert int(rows[sessions]) == GREW_SESSIONS, rows
    assert int(rows[sessions + ";_G.cache.sessions[*].tags"]) == GREW_TAGS, rows
    assert int(rows[sessions + ";_G.cache.sessions[*].name"]) == GREW_NAMES, rows
    assert int(rows["_G;_G.cache;_G.cache.sessions;_G.cache.sessions.<key>"]) == GREW_KEYS, rows
    assert "Type: inuse_space" in go_pprof("-top", "-nodecount=3", growth[1])
    assert "MiB more held than at the first census" in growth[2].read_text()
    lines = p.stdout.splitlines()
    assert lines[0] == f"nupp-bpf: heap of PID {g.pid}: what grew between the two censuses", lines
    at = lines.index('grew, by reference path (own bytes; "[*]" the entries of a collection):')
    assert re.fullmatch(r" +\+5000 +\+781\.2 KiB +\+\S+ \S+  _G\.cache\.sessions\[\*\]",
                        lines[at + 2]), lines[at:at + 4]
    assert re.fullmatch(r"  table +\+10000 +\+\S+ MiB", next(x for x in lines if x.startswith("  table"))), p.stdout


def test_diff_file_errors(tmp_path):
    """A file that is no census, or is missing: one line, exit 1."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"samples": []}')
    for args, message in [
        ([str(bad), str(bad)], f"{bad}: not a census (heap --json writes one)"),
        ([str(tmp_path / "none.json"), str(bad)], f"unable to open {tmp_path / 'none.json'}: "),
        ([str(tmp_path), str(bad)], f"{tmp_path}: "),
    ]:
        p = subprocess.run([str(NUPP), "heap", "--diff", *args], capture_output=True, text=True,
                           timeout=10)
        assert p.returncode == 1 and p.stderr.startswith(f"nupp-bpf: error: {message}") and \
            p.stderr.count("\n") == 1, p.stderr


def test_heap_by_path_as_profiles(privileged, held, tmp_path):
    """heap -o: the bytes by reference path as collapsed stacks, pprof
    (inuse_space, read by go tool pprof) and a flame graph, each frame a
    path from the root; the same bytes as the census's byPath."""
    h = held(STOCK_LUAJIT)
    out = census(h.pid)
    by_path = {g["path"]: g for g in out["vms"][0]["byPath"]}
    files = [tmp_path / n for n in ("heap.collapsed", "heap.pb.gz", "heap.svg")]
    p = subprocess.run([str(NUPP), "heap", "-p", str(h.pid), *sum([["-o", str(f)] for f in files], [])],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"nupp-bpf: heap of PID {h.pid}: 1 VM"), p.stdout[:200]
    assert p.stderr == "".join(f"nupp-bpf: wrote {f}\n" for f in files), p.stderr
    rows = {}
    for line in files[0].read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        rows[stack] = int(n)
    keys = "_G;_G.cache;_G.cache.sessions;_G.cache.sessions.<key>"
    assert rows[keys] == by_path["_G.cache.sessions.<key>"]["bytes"], rows.get(keys)
    assert rows["_G;_G.cache;_G.cache.sessions"] == by_path["_G.cache.sessions"]["bytes"]
    # Every path's own bytes, once: the roots retain them all.
    roots = [g for path, g in by_path.items() if path in ("_G", "registry", "main thread")]
    assert sum(rows.values()) == sum(g["retainedBytes"] for g in roots), (sum(rows.values()), roots)
    raw = go_pprof("-raw", files[1])
    assert re.search(r"^Samples:\ninuse_space/bytes$", raw, re.M), raw[:300]
    assert "Type: inuse_space" in go_pprof("-top", "-nodecount=3", files[1])
    svg = files[2].read_text()
    assert f"<title>_G.cache.sessions.&lt;key&gt; ({rows[keys]} bytes, " in svg
    assert "MiB held at " in svg and "Hover a frame for its bytes" in svg


@pytest.mark.parametrize("args,message", [
    (["heap"], "heap takes one -p PID"),
    (["heap", "-p", "1", "-p", "2"], "heap takes one -p PID"),
    (["heap", "-p", "1", "--svg", "x.svg"], "heap takes -p PID, --json, --pause, --diff and -o FILE "
                                            "(each file's extension names its format)"),
    (["heap", "--diff", "5", "-p", "1", "-o", "-"], "heap --diff writes its report to stdout: its "
                                                   "-o files go elsewhere"),
    (["heap", "-p", "1", "-o", "-", "--json"], "heap -o - writes that file to stdout: no --json, one -o"),
    (["record", "--pause", "-p", "1"], "--pause is for heap"),
    (["record", "--diff", "5", "-p", "1"], "--diff is for heap"),
    (["heap", "--diff", "5"], "heap takes one -p PID"),
    (["heap", "--diff", "0", "-p", "1"], "--diff wants a whole number from 1 to 31536000, not '0'"),
    (["heap", "--diff", "a.json"], "heap --diff OLD.json NEW.json takes two census files of heap "
                                   "--json (and --json), or --diff SECONDS -p PID"),
    (["heap", "--diff", "a.json", "b.json", "-p", "1"], "heap --diff OLD.json NEW.json takes two "
     "census files of heap --json (and --json), or --diff SECONDS -p PID"),
])
def test_heap_usage_errors(args, message):
    p = subprocess.run([str(NUPP), *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and p.stderr == f"nupp-bpf: error: {message} (see nupp-bpf --help)\n", p


def test_heap_of_a_process_without_luajit(privileged, tmp_path):
    """A process that runs no LuaJIT: one line, exit 1."""
    p0 = subprocess.Popen(["sleep", "30"])
    try:
        p = subprocess.run([str(NUPP), "heap", "-p", str(p0.pid)], capture_output=True, text=True,
                           timeout=30)
    finally:
        p0.kill()
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and \
        p.stderr.startswith("nupp-bpf: error: "), p.stderr


def test_scribbled_heap_is_partial_not_a_crash(privileged):
    """An object whose list link points where nothing is mapped: the
    census ends that list there, says it is partial, and exits 0."""
    p = subprocess.Popen(STOCK_LUAJIT.command(workload("heap_scribble.lua")),
                         env=STOCK_LUAJIT.environ(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready"), p.stderr.read()
        vm = census(p.pid)["vms"][0]
    finally:
        p.kill()
        p.wait()
    assert vm["partial"] and vm["unreadable"] >= 1, vm
    assert vm["types"]["table"]["objects"] >= 1, vm


def test_target_gone_mid_census_is_no_crash(privileged, held):
    """The target killed while a large heap is read: the census ends with
    what it read or one line, never a crash."""
    h = held(STOCK_LUAJIT, 5)
    c = subprocess.Popen([str(NUPP), "heap", "-p", str(h.pid), "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.05)
    h.kill()
    out, err = c.communicate(timeout=60)
    assert c.returncode in (0, 1), (c.returncode, err)
    if c.returncode:
        assert err.count("\n") == 1 and err.startswith("nupp-bpf: error: "), err
    else:
        json.loads(out)
