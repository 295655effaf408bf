# SPDX-License-Identifier: MIT
"""Every way in, inside a PID namespace (where containers run).

The kernel's own ids are those of the initial namespace; nupp-bpf run in a
container names its targets by the ids of its own. Before the programs
compared ids in nupp-bpf's namespace (bpf/pid_view.h), every way in gave an
empty profile there and exited 0. Here nupp-bpf, its target, or both run
in `unshare --pid --fork --mount-proc`, and a target also in a namespace
nested in nupp-bpf's.

Sampled counts are judged with one model: a CPU-bound target is sampled at
997 Hz per CPU second it runs, as a Poisson count (the kernel's timer,
whatever the machine's load: a target that gets half a CPU beside a busy
loop runs half the CPU seconds). The tests ask for half of that mean, on
means of several hundred: a Poisson count of mean 400 falls below 200 with
a probability under 1e-30, so only a lost sample fails them, never chance.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import (FNEW, FNEW_SITES, MIXED, NUPP, ROOT, STOCK_LUAJIT, cpu_seconds, frames,
                     parse_collapsed, parse_truth, read_csv, wait_for_teardowns, workload)

FREQ = 997
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def run(argv, **kw):
    wait_for_teardowns()
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          **kw)


def descendants(pid):
    """Pids of every process under pid (host ids)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


def host_pid_of(root_pid, name):
    """The host id of the process called name (its comm) under root_pid."""
    for p in descendants(root_pid):
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == name:
                return p
        except OSError:
            pass
    return None


def assert_mixed_rate(rows, cpu, what):
    """mixed.lua's stacks: at least half the samples its CPU seconds are
    worth at 997 Hz (the module's model), and 97 % of them on its two
    stacks (the rest: its start, before the loop)."""
    n = sum(c for _, c in rows)
    good = sum(c for s, c in rows if MIXED.match(s))
    assert cpu > 0.3, (what, cpu)
    assert n >= 0.5 * FREQ * cpu and good >= 0.97 * n, (what, cpu, rows)


def test_launch_in_a_namespace(privileged, tmp_path):
    """nupp-bpf and the program it launches, both inside: the program's
    output passes through, every sample is its own."""
    out = tmp_path / "ns.collapsed"
    p = run([*UNSHARE, NUPP, "record", "-F", FREQ, "-o", out, "--", *STOCK_LUAJIT.argv,
             workload("mixed.lua"), 1])
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ready\n"), p.stdout
    assert_mixed_rate(parse_collapsed(out.read_text()), parse_truth(p.stdout)["cpu"], p.stderr)


# Where the target and nupp-bpf run: both in one namespace; the target in a
# namespace nested in nupp-bpf's; nupp-bpf on the host, the target inside.
ATTACH_WAYS = ["both-inside", "target-nested", "nupp-outside"]


@pytest.mark.parametrize("way", ATTACH_WAYS)
def test_attach_across_namespaces(privileged, tmp_path, way):
    """The default job (both channels) attached with -p to a running
    mixed.lua: its stacks at the model's rate over the CPU seconds the
    target ran while recorded (read on the host between nupp-bpf's
    "recording" line and its summary), and its trace aborts counted."""
    out = tmp_path / "ns"
    target = [*STOCK_LUAJIT.argv, str(workload("mixed.lua")), "5"]
    nupp = [str(NUPP), "-F", str(FREQ), "-d", "2", "-o", str(out)]
    if way == "nupp-outside":
        holder = subprocess.Popen([*UNSHARE, *target], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline() == "ready\n"
        host = host_pid_of(holder.pid, "luajit")
        argv = [*nupp, "-p", str(host)]
    else:
        inner = " ".join(target)
        if way == "target-nested":
            inner = " ".join(UNSHARE) + " " + inner
        # The namespace ends with its first process, sh, and its target
        # with it: sh waits for the test to close its input before it
        # exits, so that the target's CPU time is read while it runs.
        script = (f"{inner} >/dev/null & sleep 0.3; "
                  f"P=$(pgrep -n -x luajit); {' '.join(nupp)} -p $P; s=$?; cat >/dev/null; exit $s")
        argv = [*UNSHARE, "sh", "-c", script]
        holder = None
    wait_for_teardowns()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    err, cpu0, host = [], None, None
    try:
        for line in p.stderr:
            err.append(line)
            if line.startswith("nupp-bpf: recording PID"):
                host = host or host_pid_of((holder or p).pid, "luajit")
                cpu0 = cpu_seconds(host)
            if re.match(r"^nupp-bpf: [\d.]+ s, \d+ samples", line):
                cpu = cpu_seconds(host) - cpu0
                break
        p.stdin.close()
        err.append(p.stderr.read())
        p.wait(timeout=60)
    finally:
        if holder:
            holder.kill()
            holder.wait()
    stderr = "".join(err)
    assert p.returncode == 0, stderr
    assert_mixed_rate(parse_collapsed((tmp_path / "ns.collapsed").read_text()), cpu, stderr)
    m = re.search(r"^nupp-bpf: (\d+) trace aborts", stderr, re.M)
    assert m and int(m[1]) >= 1, stderr


def test_trace_launch_in_a_namespace(privileged, tmp_path):
    """Every trace abort of nyi_fnew.lua, as on the host, with nupp-bpf and
    the program inside."""
    out = tmp_path / "aborts.csv"
    p = run([*UNSHARE, NUPP, "trace", "-o", out, "--", *STOCK_LUAJIT.argv, FNEW])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "45000150000\n"
    assert read_csv(out)[1:] == FNEW_SITES, p.stderr


def test_launch_follows_workers_in_a_namespace(privileged, tmp_path):
    """The workers a launched master forks inside the namespace are found
    (children are read from nupp-bpf's /proc) and sampled as their own."""
    out = tmp_path / "ns.collapsed"
    p = run([*UNSHARE, NUPP, "record", "-F", FREQ, "-o", out, "--", *STOCK_LUAJIT.argv,
             workload("forkworkers.lua"), 1])
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("workers done\n"), p.stdout
    truth = parse_truth(p.stdout)
    rows = parse_collapsed(out.read_text())
    for fn in ("work_a", "work_b"):
        got = sum(c for s, c in rows if f"forkworkers.lua:{fn}" in frames(s))
        assert got >= 0.5 * FREQ * truth[fn], (fn, truth, rows, p.stderr)


def test_lua_api_in_a_namespace(privileged, tmp_path):
    """The Lua API's BPF session in a process inside a namespace samples
    its own process (the whole API suite also runs so: mk/test.mk)."""
    (tmp_path / "prog.lua").write_text(
        'local profile = require("nupp.profile")\n'
        'local c, x = os.clock, 0\n'
        'local function spin(t) local s = c() while c() - s < t do x = x + 1 end end\n'
        'local s = profile.sample({intervalMs = 5})\n'
        'local c0 = c()\n'
        'spin(0.6)\n'
        'local r = s:stop()\n'
        'print(r.samples, c() - c0, r.backend)\n')
    env = dict(os.environ, LUA_PATH=f"{ROOT}/build/lua/?.lua;;",
               LUA_CPATH=f"{ROOT}/build/lua/?.so;;", NUPP_BACKEND="bpf")
    p = run([*UNSHARE, *STOCK_LUAJIT.argv, "prog.lua"], cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    samples, cpu, backend = p.stdout.split()
    assert backend == "bpf"
    # 200 Hz over cpu seconds, the module's model: at least half of it.
    assert int(samples) >= 0.5 * 200 * float(cpu), p.stdout


def test_proc_of_another_namespace_is_refused(privileged):
    """A namespace without a /proc of its own names other processes by
    nupp-bpf's ids: one line, exit 1, never an empty profile."""
    p = run(["unshare", "--pid", "--fork", NUPP, "-p", "1", "-d", "1"])
    assert p.returncode == 1
    assert p.stderr == ("nupp-bpf: error: /proc belongs to another PID namespace than "
                        "nupp-bpf's: mount one of its own (unshare --pid --fork --mount-proc)\n")


def test_pid_outside_the_namespace_is_refused(privileged):
    """A process of the host cannot be named from inside: nupp-bpf there
    says that no process has the id it was given."""
    pid = os.getpid()	# far above any id a fresh namespace has handed out
    p = run([*UNSHARE, NUPP, "-p", pid, "-d", "1"])
    assert p.returncode == 1
    assert p.stderr == f"nupp-bpf: error: no process with PID {pid}\n"
