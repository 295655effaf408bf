# SPDX-License-Identifier: MIT
"""LuaJIT builds nupp-bpf was not generated from, stripped, and builds it must refuse.

Each variant (scripts/build-variants.sh: other compilers, optimization levels,
frame pointers, build options) is a LuaJIT no registry holds: its layout
comes from the revision table, its probe sites from its own machine code.
The tests run stripped copies, as a distribution ships them, on both
channels. A build nupp-bpf cannot profile gets one line saying so and exit
status 1: never an empty profile. A site that does not decode as the
expected instruction is never probed.

The variants run here are VARIANTS (a sample that fits CI's time: see
mk/variants.mk and the README); `make test-builds` runs every variant the
matrix has, every Debian source (bookworm's luajit and luajit2, trixie's
and sid's luajit) in every flavour.
"""
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers import (FNEW, FNEW_SITES, MIXED, NUPP, VARIANT_DIR, WORKLOADS, parse_collapsed,
                     read_csv, share, stripped, total)
from helpers import run_nupp as run

pytestmark = pytest.mark.slow

DEFAULT_VARIANTS = ["luajit-gcc-O3", "luajit-clang-O2", "luajit-gcc-nummode2",
                    "luajit2-clang-Os", "luajit2-gcc-noffi",
                    "trixie-luajit-gcc-O2", "sid-luajit-clang-O2"]
VARIANTS = os.environ.get("NUPP_VARIANTS", " ".join(DEFAULT_VARIANTS)).split()



@pytest.mark.parametrize("name", VARIANTS)
def test_variant_sampler(privileged, tmp_path, name):
    """The default job on a stripped variant: mixed.lua's two stacks exactly,
    nothing unresolved, the build described from its code."""
    exe = stripped(name, tmp_path)
    r = run(["-F", 997, "-o", tmp_path / "m", "--", exe, WORKLOADS / "mixed.lua", 2])
    assert r.returncode == 0, r.stderr
    assert "(derived)" in r.stderr, r.stderr
    rows = parse_collapsed((tmp_path / "m.collapsed").read_text())
    assert total(rows) > 1000, rows
    good = share(rows, lambda f: bool(MIXED.match(";".join(f))))
    assert good >= 0.97, (good, rows)
    # Each at least 2 %: its interpreted part, 22 % unprofiled, moves to
    # 3-15 % in a few profiled runs (test_build_and_mode).
    for fn in ("compiled", "interpreted"):
        assert share(rows, lambda f: f[-1] == f"mixed.lua:{fn}") >= 0.02, rows


@pytest.mark.parametrize("keep", ["symbols", "dwarf"])
def test_unstripped_variant(privileged, tmp_path, keep):
    """Unstripped, with and without DWARF: both channels, the layout from
    DWARF when there is some, else from the revision table, the sites from
    the symbols (checked against the code)."""
    exe = stripped("luajit-clang-O2", tmp_path, keep)
    info = subprocess.run([str(NUPP), "inspect", str(exe)], capture_output=True, text=True).stdout
    layout = "layout from DWARF" if keep == "dwarf" else "layout from revision table"
    assert layout in info and "sites from symbols" in info, info
    r = run(["-F", 997, "-o", tmp_path / "m", "--", exe, WORKLOADS / "mixed.lua", 2])
    assert r.returncode == 0 and "not collected" not in r.stderr, r.stderr
    rows = parse_collapsed((tmp_path / "m.collapsed").read_text())
    assert share(rows, lambda f: bool(MIXED.match(";".join(f)))) >= 0.97, rows
    out = tmp_path / "a.csv"
    r = run(["trace", "-o", out, "--", exe, FNEW])
    assert r.returncode == 0 and read_csv(out)[1:] == FNEW_SITES, r.stderr


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_trace(privileged, tmp_path, name):
    """Every abort of nyi_fnew.lua, blacklisting included, on a stripped variant."""
    exe = stripped(name, tmp_path)
    out = tmp_path / "a.csv"
    r = run(["trace", "-o", out, "--", exe, FNEW])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "45000150000\n"
    assert read_csv(out)[1:] == FNEW_SITES, r.stderr


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_coroutine_sites(tmp_path, name):
    """--waits' sites in the VM's coroutine fast functions (coroutine.yield,
    coroutine.resume, coroutine.wrap's function), each found once in a
    stripped variant, as `inspect` lists them; with the yield's test of
    L->cframe broken on purpose, the yield is not found, and the others
    still are."""
    exe = stripped(name, tmp_path)
    sites = coroutine_sites(exe)
    assert sorted(sites) == ["co-resume", "co-wrap", "co-yield"], sites
    # The je probed follows `test qword [rbp+L_cframe], 1`: 48 f7 45 XX
    # 01 00 00 00, 8 bytes before it; make its immediate 2.
    broken = patched(exe, tmp_path / "broken", lambda d: d.__setitem__(
        file_offset(exe, sites["co-yield"]) - 4, 2))
    assert sorted(coroutine_sites(broken)) == ["co-resume", "co-wrap"], inspect(broken).stdout


def test_no_jit_build(privileged, tmp_path):
    """LUAJIT_DISABLE_JIT: the sampler works (everything interpreted), the
    trace channel says there is no JIT; `trace` alone fails with exit 1."""
    exe = stripped("luajit-gcc-nojit", tmp_path)
    r = run(["-F", 997, "-o", tmp_path / "m", "--", exe, WORKLOADS / "mixed.lua", 2])
    assert r.returncode == 0, r.stderr
    assert "trace aborts are not collected" in r.stderr and "without the JIT" in r.stderr, r.stderr
    rows = parse_collapsed((tmp_path / "m.collapsed").read_text())
    # Interpreted, compiled() shows its calls of bit.band as builtin frames.
    # A sample at a fast function's return is its caller's (the walk from a
    # stale L->base named outer() for 2.7 % of them).
    assert share(rows, lambda f: bool(MIXED.match(";".join(f[:-1] if f[-1] == "band" else f)))) \
        >= 0.99, rows
    assert "interpreted 100.0%" in r.stderr or "compiled 0.0%" in r.stderr, r.stderr
    r = run(["trace", "-o", tmp_path / "a.csv", "--", exe, FNEW])
    assert r.returncode == 1
    assert r.stdout == "45000150000\n", "the command runs unprofiled"
    assert re.fullmatch(r"nupp-bpf: error: .*without the JIT compiler.*\n", r.stderr), r.stderr


@pytest.mark.parametrize("keep", ["nothing", "dwarf"])
def test_no_jit_build_heap_and_allocations(privileged, tmp_path, keep):
    """LUAJIT_DISABLE_JIT has no jit_State (its layout's gg_j is 0): its VM
    verifies without one. A copy with DWARF was refused by every command
    that reads the heap, its main thread read as J->state. The census and
    record --alloc work on it, stripped or not.

    The census is not sampled: within 5 % of the VM's own count, as in
    tests/heap. --alloc follows the model of tests/alloc: 200 rounds, three()
    allocates T = 63 MB in ~1 KiB strings, sampled once per R = 8 KiB on
    average: N ~ 7,800 samples, relative sd 1.1 %; bound ±8 % (7 sd)."""
    exe = stripped("luajit-gcc-nojit", tmp_path, keep)
    h = subprocess.Popen([str(exe), str(WORKLOADS / "heap_shapes.lua")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = h.stdout.readline()
        assert line.startswith("ready "), line + h.stderr.read()
        r = run(["heap", "-p", h.pid, "--json"])
        assert r.returncode == 0, r.stderr
        vm = json.loads(r.stdout)["vms"][0]
        assert 0.95 * vm["gcTotal"] <= vm["counted"] <= vm["gcTotal"], vm
        assert h.communicate("go\n", timeout=30)[0] == "done\n"
    finally:
        h.kill()
        h.wait()
    # Attached while the workload waits (launched, its first rounds would
    # run before the allocator is probed), stopped while it holds on.
    w = subprocess.Popen([str(exe), str(WORKLOADS / "allocs.lua"), "200"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = tmp_path / "a.collapsed"
    n = w
    try:
        assert w.stdout.readline() == "ready\n", w.stderr.read()
        n = subprocess.Popen([str(NUPP), "record", "--alloc", "--alloc-mean", "8K", "-d", "100",
                              "-o", str(out), "-p", str(w.pid)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = n.stderr.readline()
        assert line.startswith("nupp-bpf: recording"), line + n.stderr.read()
        w.stdin.write("go\n")
        w.stdin.flush()
        lines = []
        while (line := w.stdout.readline()) not in ("done\n", ""):
            lines.append(line)
        n.send_signal(2)
        err = n.communicate(timeout=60)[1]
        assert n.returncode == 0 and "not sampled" not in err, err
        assert w.communicate("go\n", timeout=30)[0] == ""
    finally:
        for p in (w, n):
            p.kill()
            p.wait()
    truth = int(re.search(r"^truth three (\d+)$", "".join(lines), re.M)[1])
    rows = parse_collapsed(out.read_text())
    three = sum(c for stack, c in rows if stack.split(";")[-1] == "allocs.lua:three")
    assert abs(three - truth) <= 0.08 * truth, (truth, rows, err)


def test_non_gc64_build_refused(privileged, tmp_path):
    """A non-GC64 build: one line, exit 1, the command still runs."""
    exe = stripped("luajit-gcc-nogc64", tmp_path)
    r = run(["record", "-o", tmp_path / "x", "--", exe, "-e", "print('ran')"])
    assert r.returncode == 1
    assert r.stdout == "ran\n"
    assert re.fullmatch(r"nupp-bpf: error: unsupported build: .*non-GC64.*\n", r.stderr), r.stderr
    assert not (tmp_path / "x").exists()


def nop_out(path, vaddrs):
    """Overwrite the instruction at each ELF vaddr of path with NOPs of its
    length (a jcc: 2 or 6 bytes): the trace-abort test is gone."""
    data = bytearray(path.read_bytes())
    out = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True).stdout
    loads = [l.split() for l in out.splitlines() if l.strip().startswith("LOAD")]
    for va in vaddrs:
        for seg in loads:
            off, vaddr, filesz = int(seg[1], 16), int(seg[2], 16), int(seg[4], 16)
            if vaddr <= va < vaddr + filesz:
                at = va - vaddr + off
                n = 2 if data[at] in (0x74, 0x75) else 6
                assert data[at] in (0x74, 0x75) or (data[at] == 0x0f and data[at + 1] in (0x84, 0x85))
                data[at:at + n] = b"\x90" * n
    path.write_bytes(bytes(data))


def abort_sites(exe):
    """The trace-abort jumps nupp-bpf finds in exe, as `inspect` lists them."""
    r = run(["inspect", exe])
    assert r.returncode == 0, r.stderr
    return [int(m, 16) for m in re.findall(r"^trace-abort\s+0x([0-9a-f]+) verified", r.stdout, re.M)]


def coroutine_sites(exe):
    """{co-yield|co-resume|co-wrap: address} of the sites `inspect` lists
    as verified."""
    r = run(["inspect", exe])
    assert r.returncode == 0, r.stderr
    return {m[1]: int(m[2], 16) for m in re.finditer(r"^(co-\w+)\s+0x([0-9a-f]+) verified", r.stdout,
                                                      re.M)}


def file_offset(exe, vaddr):
    """The file offset of ELF address vaddr in exe (readelf's program headers)."""
    out = subprocess.run(["readelf", "-lW", str(exe)], capture_output=True, text=True).stdout
    for m in re.finditer(r"^\s+LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) \S+ 0x([0-9a-f]+)", out, re.M):
        off, va, size = (int(x, 16) for x in m.groups())
        if va <= vaddr < va + size:
            return off + vaddr - va
    raise AssertionError(f"0x{vaddr:x} in no LOAD segment of {exe}")


def test_broken_site_refused(privileged, tmp_path):
    """A build whose trace-abort test was broken on purpose: the collector
    refuses in one line and places no probe; the program runs unharmed."""
    exe = stripped("luajit-clang-O2", tmp_path)
    sites = abort_sites(exe)
    assert sites
    nop_out(exe, sites)
    assert abort_sites(exe) == []
    r = run(["trace", "-o", tmp_path / "a.csv", "--", exe, FNEW])
    assert r.returncode == 1
    assert r.stdout == "45000150000\n"
    assert re.fullmatch(r"nupp-bpf: error: .*no trace-abort site.*\n", r.stderr), r.stderr


def patched(src, dst, edit):
    data = bytearray(Path(src).read_bytes())
    edit(data)
    dst.write_bytes(bytes(data))
    dst.chmod(0o755)
    return dst


def inspect(path):
    return subprocess.run([str(NUPP), "inspect", str(path)], capture_output=True, text=True,
                          timeout=30)


def test_refusals_by_file(tmp_path):
    """What cannot be profiled says why, in one line, exit 1: another
    architecture (the ELF header says so), LuaJIT 2.0 (its version string).
    Both files are the stock luajit with that fact changed (and, for 2.0, a
    padding byte of .text, so that it is no registry build)."""
    def machine(data):
        data[18:20] = (183).to_bytes(2, "little")	# e_machine: EM_AARCH64

    def version(data):
        at = data.find(b"LuaJIT 2.1.0-beta3\0")
        assert at > 0
        data[at:at + 18] = b"LuaJIT 2.0.5\0\0\0\0\0\0"
        at = data.find(b"\xc3\x0f\x1f\x40\x00")	# and padding in .text: not the registry's
        assert at > 0
        data[at + 3] = 0x80

    r = inspect(patched("/usr/bin/luajit", tmp_path / "arm", machine))
    assert r.returncode == 1
    assert re.fullmatch(r"nupp-bpf: error: unsupported build: .*/arm: a 64-bit ELF file for "
                        r"machine 183; nupp-bpf profiles x86-64 LuaJIT only\n", r.stderr), r.stderr
    # Not in the registry any more (.rodata is not .text): described, and refused.
    r = inspect(patched("/usr/bin/luajit", tmp_path / "lj20", version))
    assert r.returncode == 1
    assert re.fullmatch(r"nupp-bpf: error: unsupported build: .*/lj20: LuaJIT 2\.0\.5; "
                        r"nupp-bpf profiles LuaJIT 2\.1 \(GC64\) only\n", r.stderr), r.stderr


def test_file_replaced_while_it_runs(privileged, tmp_path):
    """A process whose LuaJIT was replaced on disk (an upgrade) is profiled
    by what it maps: the file is read through /proc/PID/map_files."""
    exe = tmp_path / "luajit"
    shutil.copy("/usr/bin/luajit", exe)
    t = subprocess.Popen([str(exe), str(WORKLOADS / "mixed.lua"), "30"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        new = tmp_path / "luajit.new"
        shutil.copy(VARIANT_DIR / "luajit2-clang-Os" / "src" / "luajit", new)
        os.rename(new, exe)			# what a package upgrade does
        r = run(["record", "-F", 997, "-d", 1, "-p", t.pid, "-o", tmp_path / "x.collapsed"])
        assert r.returncode == 0, r.stderr
        assert "(debian-luajit-bin)" in r.stderr, r.stderr
        rows = parse_collapsed((tmp_path / "x.collapsed").read_text())
        assert share(rows, lambda f: bool(MIXED.match(";".join(f)))) >= 0.97, rows
    finally:
        t.kill()
        t.wait()
