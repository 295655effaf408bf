# SPDX-License-Identifier: MIT
"""`nupp-bpf trace` and the default job, end to end, on every LuaJIT build.

The collector's own exactness against jit.attach is tested in test_trace.py
(through its test driver); here the CLI is: launch mode catches every abort of
a short program even when LuaJIT sits in a shared library (it attaches at the
program's entry point), the CSV holds the API's AbortSite rows, and the
default job writes all three outputs.
"""
import csv
import json
import io
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from helpers import BUILDS, NUPP, ROOT, STOCK_LUAJIT, nupp_processes

FNEW = ROOT / "tests" / "fixtures" / "aborts" / "nyi_fnew.lua"
HEADER = ["severity", "count", "reason", "reasonId", "reasonClass", "rawReason", "location",
          "zonePath"]
# A closure created in a hot loop: LuaJIT gives up 11 times at the same loop,
# the 11th time blacklisting it (penalty 72 doubling past 60000).
FNEW_SITES = [
    ["blacklist", "1", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
     "NYI: bytecode 51", "nyi_fnew.lua:4", ""],
    ["warn", "10", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
     "NYI: bytecode 51", "nyi_fnew.lua:4", ""],
]


def abort_sites(path):
    """The trace-abort jumps `nupp-bpf inspect` lists for a build."""
    out = subprocess.run([str(NUPP), "inspect", str(path)], capture_output=True, text=True).stdout
    return re.findall(r"^trace-abort\s+(0x[0-9a-f]+) verified$", out, re.M)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_trace_launch_every_build(name, privileged, lua_build_ready, tmp_path):
    b = lua_build_ready(name)
    out = tmp_path / "aborts.csv"
    p = subprocess.run([str(NUPP), "trace", "-o", str(out), "--", *b.command(FNEW)],
                       capture_output=True, text=True, env=b.environ(), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "45000150000\n", "the program's output passes through unchanged"
    rows = read_csv(out)
    assert rows[0] == HEADER
    assert rows[1:] == FNEW_SITES, p.stderr
    assert "11 trace aborts, 1 blacklisted, 2 sites" in p.stderr


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_trace_launch_abort_at_exit(name, privileged, lua_build_ready, tmp_path):
    """The program's one abort (FNEW in a loadstring'd chunk) comes right
    before it exits: the CSV, written once the process is gone, names it as
    LuaJIT does (test_trace.py compares it with jit.attach in one run)."""
    b = lua_build_ready(name)
    out = tmp_path / "aborts.csv"
    p = subprocess.run([str(NUPP), "trace", "-o", str(out), "--",
                        *b.command(ROOT / "tests" / "fixtures" / "aborts" / "abort_at_exit.lua")],
                       capture_output=True, text=True, env=b.environ(), timeout=60)
    assert p.returncode == 0, p.stderr
    assert read_csv(out)[1:] == [["warn", "1", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW",
                                  "blocker", "NYI: bytecode 51", "last:3", ""]], p.stderr


def test_trace_launch_through_a_wrapper(privileged, tmp_path):
    """`env VAR=1 luajit ...`: the wrapper's exec is followed before any Lua
    runs, so every abort is caught, as when luajit is launched itself."""
    out = tmp_path / "aborts.csv"
    p = subprocess.run([str(NUPP), "trace", "-o", str(out), "--", "env", "NUPP_TEST=1",
                        *STOCK_LUAJIT.argv, str(FNEW)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "45000150000\n"
    assert read_csv(out)[1:] == FNEW_SITES, p.stderr


def test_default_job_writes_every_output(privileged, tmp_path):
    p = subprocess.run([str(NUPP), "-F", "997", "-o", str(tmp_path / "demo"), "--",
                        "/usr/bin/luajit", str(ROOT / "examples" / "demo.lua"), "2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("demo: ") and p.stdout.endswith(" s\n")
    collapsed = (tmp_path / "demo.collapsed").read_text().splitlines()
    assert sum(int(l.rsplit(" ", 1)[1]) for l in collapsed) > 1000
    assert any(l.split(" ")[0].endswith(";demo.lua:physics") for l in collapsed)
    svg = (tmp_path / "demo.svg").read_text()
    assert svg.startswith("<?xml") and "demo.lua:physics" in svg and svg.rstrip().endswith("</svg>")
    rows = read_csv(tmp_path / "demo-aborts.csv")
    assert rows[0] == HEADER
    # The particle loop creates a closure per particle: blacklisted, at its line.
    bl = [r for r in rows[1:] if r[0] == "blacklist"]
    assert bl and all(r[3] == "trace.nyi-bytecode.FNEW" and r[6] == "demo.lua:33" for r in bl)
    assert "trace aborts" in p.stderr and "blacklisted" in p.stderr


def assert_only_fnew_aborts(csv_path, script):
    """The CSV holds FNEW aborts, each at the line of script marked `-- FNEW`,
    and no other."""
    line = next(i for i, l in enumerate(script.read_text().splitlines(), 1) if "-- FNEW" in l)
    rows = read_csv(csv_path)
    assert rows[0] == HEADER
    assert len(rows) > 1, rows
    assert all(r[3] == "trace.nyi-bytecode.FNEW" and r[6] == f"{script.name}:{line}"
               for r in rows[1:]), rows


def test_default_job_follows_forked_workers(privileged, tmp_path):
    """The default job on a master that forks two workers (forkworkers.lua):
    the trace aborts of the worker whose loop creates a closure (NYI: FNEW)
    are collected from its own process, and both workers are sampled. Its
    first aborts come before the worker is found (the loop is hot within
    microseconds); LuaJIT's doubling penalty spaces the later ones out over
    seconds, so that some fall in the 1.5 s it runs."""
    workers = ROOT / "tests" / "fixtures" / "workloads" / "forkworkers.lua"
    p = subprocess.run([str(NUPP), "-F", "997", "-o", str(tmp_path / "w"), "--",
                        "/usr/bin/luajit", str(workers), "1.5"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("workers done\n"), p.stdout
    assert_only_fnew_aborts(tmp_path / "w-aborts.csv", workers)
    collapsed = (tmp_path / "w.collapsed").read_text()
    for fn in ("work_a", "work_b"):
        assert f";forkworkers.lua:{fn} " in collapsed, collapsed


def test_default_job_follows_an_exec(privileged, tmp_path):
    """The default job on execself.lua run by the stock luajit, which then
    executes the stock luajit2 (another build, another layout) on a part
    whose loop creates a closure (NYI: FNEW): both channels take the new
    program on, so its aborts are collected at their exact line and its
    function is sampled. Guards against keeping only the old probe, on a
    file the new program does not map, which collects no abort."""
    script = ROOT / "tests" / "fixtures" / "workloads" / "execself.lua"
    luajit2 = BUILDS["stock-luajit2"].argv[0]
    p = subprocess.run([str(NUPP), "-F", "997", "-o", str(tmp_path / "x"), "--",
                        "/usr/bin/luajit", str(script), "1.5", luajit2],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "truth after_exec" in p.stdout, p.stdout
    assert re.search(r"^nupp-bpf: recording PID \d+: .*/luajit \(debian-luajit2-bin\), after its "
                     r"exec$", p.stderr, re.M), p.stderr
    assert_only_fnew_aborts(tmp_path / "x-aborts.csv", script)
    collapsed = (tmp_path / "x.collapsed").read_text()
    for fn in ("before_exec", "after_exec"):
        assert f";execself.lua:{fn} " in collapsed, collapsed


def perf_show():
    """The perf events with a BPF program, by holder (bpftool perf show)."""
    return json.loads(subprocess.run(["bpftool", "--json", "perf", "show"], check=True,
                                     capture_output=True, text=True).stdout)


def prog_names():
    progs = json.loads(subprocess.run(["bpftool", "--json", "prog", "show"], check=True,
                                      capture_output=True, text=True).stdout)
    return {p["id"]: p.get("name") for p in progs}


def uprobe_links_of(pid):
    """The programs of the uprobe_multi links process pid holds, by id (its
    descriptors' fdinfo: bpftool of this distribution names neither the
    link's type nor its holder)."""
    ids = []
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            info = dict(line.split(":\t", 1) for line in fd.read_text().splitlines()
                        if ":\t" in line)
        except OSError:
            continue	# closed meanwhile
        if info.get("link_type") == "uprobe_multi":
            ids.append(int(info["prog_id"]))
    return ids


def uprobes_of(pid):
    """Names of the BPF programs process pid holds on uprobes: perf events
    (bpftool perf) and uprobe_multi links."""
    names = prog_names()
    perf = [e["prog_id"] for e in perf_show() if e["pid"] == pid and e.get("fd_type") == "uprobe"]
    return sorted(names.get(i) for i in perf + uprobe_links_of(pid))


def test_exec_detaches_the_old_probes(privileged, tmp_path, target):
    """The default job on execself.lua, which executes `sh -c 'sleep 1;
    exit 7'` after 1 s of a loop that allocates nothing: while sh runs, no
    uprobe is left on the luajit the process no longer is (before the exec,
    the GC probe and the abort probes; a new program mapping the same file
    would hit them beside its own). The target's own status stays 7."""
    t = target(STOCK_LUAJIT, ROOT / "tests" / "fixtures" / "workloads" / "execself.lua", 1, "sh",
               ready="started")
    p = subprocess.Popen([str(NUPP), "-F", "997", "-o", str(tmp_path / "x"), "-p", str(t.pid)],
                         stderr=subprocess.PIPE, text=True)
    before, after, err = None, None, []
    for line in p.stderr:
        err.append(line)
        if line.startswith("nupp-bpf: recording PID"):
            before = uprobes_of(p.pid)
        if "executed another program" in line:
            after = uprobes_of(p.pid)
            break
    rest = p.communicate(timeout=30)[1]
    assert p.returncode == 0, "".join(err) + rest
    assert before == ["on_gc_cycle"] + ["trace_abort_site"] * len(abort_sites(STOCK_LUAJIT.argv[0])), \
        before
    assert after == [], "".join(err) + rest
    code, _, _ = t.wait()
    assert code == 7


def test_probes_removed_after_exit(privileged, tmp_path, target):
    """The default job on a master with 6 workers (-p --children -d 1): 21
    uprobes, the GC probe and the two abort probes of each process (stock
    luajit has two copies of the abort test, `nupp-bpf inspect` lists them). Removing one
    waits ~0.1 s in the kernel, so a child of nupp-bpf removes them after
    it has written everything and exited: right after the exit, another
    nupp-bpf process lives, exiting (its exit releases the probes, and its
    descriptors are no longer listed then); guards against nupp-bpf removing
    them itself, one wait after another, before it exits. Within 30 s no
    nupp-bpf process is left, and with it
    no probe; the workers, which ran on, are unharmed."""
    n = 6
    t = target(STOCK_LUAJIT, ROOT / "tests" / "fixtures" / "workloads" / "sameworkers.lua", n, 2,
               ready="forked")
    p = subprocess.Popen([str(NUPP), "-o", str(tmp_path / "x"), "-p", str(t.pid), "--children",
                          "-d", "1"], stderr=subprocess.PIPE, text=True)
    probes, err = [], []
    for line in p.stderr:
        err.append(line)
        if line.startswith("nupp-bpf: recording PID") and len(err) == n + 1:
            probes = uprobes_of(p.pid)
    err = "".join(err) + p.communicate(timeout=30)[1]
    others = set(nupp_processes()) - {p.pid}
    assert p.returncode == 0, err
    sites = abort_sites(STOCK_LUAJIT.argv[0])
    assert len(sites) == 2, sites
    assert probes == ["on_gc_cycle"] * (n + 1) + ["trace_abort_site"] * (len(sites) * (n + 1)), err
    assert (tmp_path / "x.collapsed").read_text(), err
    assert others, "no nupp-bpf process was left removing the probes"
    deadline = time.monotonic() + 30
    while nupp_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert nupp_processes() == [], "a live nupp-bpf process is left"
    ours = re.findall(r"^nupp-bpf: recording PID (\d+)", err, re.M)	# other runs may probe theirs
    held = [e for e in perf_show() if e.get("fd_type") == "uprobe" and
            any(f"/proc/{pid}/" in e.get("filename", "") for pid in ours)]
    links = [l for l in json.loads(subprocess.run(["bpftool", "--json", "link", "show"], check=True,
                                                  capture_output=True, text=True).stdout)
             if l.get("type") in (12, "uprobe_multi")
             and prog_names().get(l["prog_id"]) in ("on_gc_cycle", "trace_abort_site")]
    assert len(ours) == n + 1 and not held and not links, (ours, held, links)
    code, out, _ = t.wait()
    assert code == 0 and out.endswith("workers done\n"), out
    assert len(re.findall(r"^truth \d+ ", out, re.M)) == n, out


def kernel_filters_uprobe_multi_by_process():
    """Linux 6.10 on: uprobe_multi links filter by process (6.6-6.9 did by
    thread, and nupp-bpf takes libbpf's perf-event uprobes there)."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 10)


@pytest.mark.parametrize("kind", ["uprobe_multi", "perf_event"])
def test_probes_put_no_perf_event_on_the_target(privileged, tmp_path, target, kind):
    """The default job on execself.lua: its uprobes (the GC probe, the abort
    probes) are uprobe_multi links, none a perf event of the uprobe PMU, on
    a kernel that filters those links by process. A perf event opened on
    the target's task joins its perf context, and every switch of the task
    then pays perf's context switch, hit or not (docs/lab-notes.md: a
    session sampling at 1 Hz cost a process switching 90,000 times a second
    3.6 % of its round trips). NUPP_PERF_UPROBES=1 takes the perf events,
    the older kernels' path: the same probes; and in both, `trace` counts
    nyi_fnew.lua's aborts exactly."""
    env = dict(os.environ)
    if kind == "perf_event":
        env["NUPP_PERF_UPROBES"] = "1"
    links_expected = kind == "uprobe_multi" and kernel_filters_uprobe_multi_by_process()
    t = target(STOCK_LUAJIT, ROOT / "tests" / "fixtures" / "workloads" / "execself.lua", 3, "sh",
               ready="started")
    p = subprocess.Popen([str(NUPP), "-F", "997", "-d", "1", "-o", str(tmp_path / "x"), "-p",
                          str(t.pid)], stderr=subprocess.PIPE, text=True, env=env)
    links, perf, err = None, None, []
    for line in p.stderr:
        err.append(line)
        if line.startswith("nupp-bpf: recording PID"):
            names = prog_names()
            links = sorted(names.get(i) for i in uprobe_links_of(p.pid))
            perf = sorted(names.get(e["prog_id"]) for e in perf_show()
                          if e["pid"] == p.pid and e.get("fd_type") == "uprobe")
            break
    err = "".join(err) + p.communicate(timeout=30)[1]
    assert p.returncode == 0, err
    probes = ["on_gc_cycle"] + ["trace_abort_site"] * len(abort_sites(STOCK_LUAJIT.argv[0]))
    assert (links, perf) == ((probes, []) if links_expected else ([], probes)), err
    p = subprocess.run([str(NUPP), "trace", "-o", "-", "--no-summary", "--", "/usr/bin/luajit",
                        "-e", "io.stdout:setvbuf('no')", str(FNEW)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    rows = list(csv.reader(io.StringIO(p.stdout.replace("45000150000\n", "", 1), newline="")))
    assert rows == [HEADER] + FNEW_SITES


def test_trace_csv_to_stdout_round_trips(privileged):
    p = subprocess.run([str(NUPP), "trace", "-o", "-", "--no-summary", "--", "/usr/bin/luajit",
                        "-e", "io.stdout:setvbuf('no')", str(FNEW)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    text = p.stdout.replace("45000150000\n", "", 1)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows == [HEADER] + FNEW_SITES


def test_trace_zone_path_from_outside(privileged, tmp_path):
    """Aborts carry the zone path the script had open, read from outside."""
    out = tmp_path / "z.csv"
    env = dict(os.environ, LUA_PATH=f"{ROOT}/build/lua/?.lua;;", LUA_CPATH=f"{ROOT}/build/lua/?.so;;")
    p = subprocess.run([str(NUPP), "trace", "-o", str(out), "--", "/usr/bin/luajit",
                        str(ROOT / "tests" / "fixtures" / "workloads" / "zoneaborts.lua")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "gate true\n45000150000\n", "the gate opened, and the output is the program's"
    rows = read_csv(out)
    src = (ROOT / "tests" / "fixtures" / "workloads" / "zoneaborts.lua").read_text().splitlines()
    loc = "zoneaborts.lua:%d" % (1 + next(i for i, l in enumerate(src) if "function() return i" in l))
    assert rows[1:] == [
        ["blacklist", "1", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
         "NYI: bytecode 51", loc, "frame/render"],
        ["warn", "10", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
         "NYI: bytecode 51", loc, "frame/render"],
    ], p.stderr
