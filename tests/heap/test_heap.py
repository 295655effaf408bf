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

from helpers import NUPP, STOCK_LUAJIT, BUILDS, workload

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


@pytest.mark.parametrize("args,message", [
    (["heap"], "heap takes one -p PID"),
    (["heap", "-p", "1", "-p", "2"], "heap takes one -p PID"),
    (["heap", "-p", "1", "-o", "x"], "heap writes to stdout, once: it takes -p PID, --json and --pause"),
    (["record", "--pause", "-p", "1"], "--pause is for heap"),
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
