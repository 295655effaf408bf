# SPDX-License-Identifier: MIT
"""record --off-cpu -F HZ: the time target threads spend switched out,
found by sweeps of the machine's threads at about HZ rather than at each
switch (bpf/offcpu.h, sweep_off_cpu; user/sampler/waits.c, sweeper).

Model. The sweeps come at jittered intervals, uniform between 0.5 and 1.5
periods (P = 1/HZ), later by whatever delays nupp-bpf's sweeping thread.
Each sweep that finds a target thread switched out (blocked, by default)
charges it the interval since the sweep before; the thread's Lua stack is
walked when it next returns to user mode, where it still is what it was
while it waited. A wait from a to b, seen first at sweep j and last at
sweep m, is charged t_m - t_(j-1) = (b - a) + (a - t_(j-1)) - (b - t_m):
the two terms are each between 0 and the interval they lie in, so the
error of one wait is less than the longest interval between two sweeps,
I_MAX. Not a probability: a bound, given I_MAX. The tests take I_MAX as
1.5 P and 10 ms of lateness of the sweeping thread (it wakes beside a busy
loop per CPU within a few ms: the scheduler's wake-up preemption). A call
that waits k times (os.execute: the spawn and wait4; a pipe: the spawn,
the read and the close's wait4) is off by less than k I_MAX.

The workloads and their truths are test_offcpu.py's (waits.lua prints
each call's wall-clock and CPU time). A wait's stack is walked when the
wait ends: one new at the process's very exit would be named only from
what the walk captured (test_a_stack_new_at_the_exit_...), so waits.lua
spins LINGER seconds after its last wait here.
"""
import re
import subprocess

import pytest

from helpers import NUPP, charged, parse_collapsed, parse_truth, ready_build, workload

WAITS = workload("waits.lua")
PINGPONG = workload("pingpong.lua")
SECONDS = 1.0
HZ = 99
I_MAX = 1.5 / HZ + 0.010	# s: the longest interval between two sweeps (the model)
LINGER = {"NUPP_WAITS_LINGER": "0.3"}

# waits.lua's waits: its function, the C function it waits in, the leaf's
# system call, and the waits the call makes (k above).
KINDS = {
    "execute": ("waits.lua:wait_execute", "execute", "wait4", 2),
    "pipe": ("waits.lua:wait_pipe", "read", "read", 3),
    "ffi": ("waits.lua:wait_ffi", "usleep", "clock_nanosleep", 1),
}


def assert_swept(kind, waited, truth, asked, k, what=""):
    """A call's time blocked, as the sweeps charge it: between what it was
    asked to wait and the call's wall-clock time (the kernel wakes no one
    early; the call's time holds its waits), each end widened by k I_MAX."""
    low, high = asked - k * I_MAX, truth[kind] + k * I_MAX
    assert low <= waited <= high, \
        f"{kind}: {waited:.4f} s charged, the model's bounds {low:.4f}..{high:.4f} s\n{what}"


@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2"])
def test_swept_waits_charged_to_their_functions(nupp, build_name):
    """Each wait of waits.lua 1.0, swept at 99 Hz, is charged to its function
    under the C function it waits in, with its system call and wait channel
    as the leaf (the channel read from the thread's saved kernel stack by
    the sweep), within the model's bounds."""
    b = ready_build(build_name)
    run = nupp.run(["record", "--off-cpu", "-F", HZ, "--", *b.command(WAITS, SECONDS)],
                   env={**b.environ(), **LINGER})
    assert run.returncode == 0, run
    truth = parse_truth(run.stdout)
    rows = run.rows
    for kind, (fn, cfn, call, k) in KINDS.items():
        by_leaf = charged(rows, fn)
        main = {leaf: us for leaf, us in by_leaf.items() if leaf.startswith(call + " (")}
        assert len(main) == 1, f"{kind}: no single '{call} (…)' leaf under {fn}: {by_leaf}\n{run}"
        assert_swept(kind, sum(by_leaf.values()) / 1e6, truth, SECONDS, k, run.output.read_text())
        stack = next(s for s, _ in rows if fn in s.split(";") and s.endswith(next(iter(main))))
        assert stack.split(";")[-2] == cfn, f"{kind}: {stack}"
    assert not any(s.startswith("[still waiting]") for s, _ in rows), run.output.read_text()


def test_sweeps_walk_a_thread_at_most_once_a_sweep(nupp):
    """pingpong.lua 30000: a process and its child (both targets) switch
    ~80,000 times a second. Swept at 99 Hz, a thread's stack is walked at
    most once a sweep that finds it waiting, so the waits counted are at
    most 2 threads × the sweeps (at least 0.5 P apart) over the session,
    where every switch counted would be 60,000 and more. Exact: a count,
    no sampling in it. Both processes' loops are charged waits."""
    b = ready_build("stock-luajit")
    run = nupp.run(["record", "--off-cpu", "-F", HZ, "--", *b.command(PINGPONG, 30000)],
                   env=b.environ(), timeout=120)
    assert run.returncode == 0, run
    m = re.search(r"^nupp-bpf: ([\d.]+) s, ([\d.]+) s off the CPU in (\d+) waits", run.stderr, re.M)
    assert m, run.stderr
    seconds, waits = float(m[1]), int(m[3])
    assert 0 < waits <= 2 * (seconds * 2 * HZ + 1), run.stderr
    # Each process has its own iterator (a target's threads alone): both
    # are swept, the child found as the launched command's. Each is blocked
    # about half the time over ~70 sweeps: never seen, ~2^-70.
    for fn in ("pingpong.lua:ping", "pingpong.lua:pong"):
        assert sum(us for s, us in run.rows if fn in s.split(";")) > 0, \
            f"{fn}: no wait\n{run.output.read_text()}"


def test_a_wait_under_way_at_the_end_is_counted_by_its_kernel_side(nupp):
    """-d 1 on a program stuck in os.execute("sleep 5"): its thread never
    comes back during the session, so its stack is never walked; its time
    is charged under "[still waiting]" with its system call and wait
    channel: between 0.8 s (start-up) and the session's 1 s, an interval
    and its teardown."""
    b = ready_build("stock-luajit")
    run = nupp.run(["record", "--off-cpu", "-F", HZ, "-d", 1, "--", *b.command(
        "-e", 'local function stuck() os.execute("sleep 5") end stuck()')], env=b.environ(),
        timeout=30)
    assert run.returncode == 0, run
    waited = sum(us for s, us in run.rows if s == "[still waiting];wait4 (do_wait)") / 1e6
    assert 0.8 <= waited <= 1.2 + I_MAX, run.output.read_text()


def test_swept_in_a_pid_namespace(tmp_path):
    """nupp-bpf and its launched target inside `unshare --pid --fork
    --mount-proc`: the same waits, charged alike (the sweep names threads
    by the namespace's ids)."""
    b = ready_build("stock-luajit")
    out = tmp_path / "ns.collapsed"
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", str(NUPP),
                        "record", "--off-cpu", "-F", str(HZ), "-o", str(out), "--",
                        *b.command(WAITS, SECONDS)], capture_output=True, text=True, timeout=60,
                       env={**b.environ(), **LINGER})
    assert p.returncode == 0, p.stderr
    truth = parse_truth(p.stdout)
    text = out.read_text()
    rows = parse_collapsed(text)
    for kind, (fn, _, call, k) in KINDS.items():
        by_leaf = charged(rows, fn)
        assert any(leaf.startswith(call + " (") for leaf in by_leaf), \
            f"{kind}: {by_leaf}\n{text}\n{p.stderr}"
        assert_swept(kind, sum(by_leaf.values()) / 1e6, truth, SECONDS, k, text + p.stderr)


def test_rotated_files_add_up_with_sweeps(nupp, tmp_path):
    """--rotate 1 over six os.execute("sleep 0.4") and a last one still
    under way at -d 3: a wait counts in the file of the interval it ends
    in (its stack is read then), the one under way in the last file alone,
    under [still waiting]. The files add up to the session's summary, to
    the rounding of their µs: nothing counted twice across a rotation,
    nothing lost. Exact: sums of the same counts."""
    b = ready_build("stock-luajit")
    out = tmp_path / "profiles"
    out.mkdir()
    p = subprocess.run([str(NUPP), "record", "--off-cpu", "-F", str(HZ), "--rotate", "1",
                        "--format", "collapsed", "-d", "3", "-o", f"{out}/", "--",
                        *b.command("-e", 'local function nap(s) os.execute("sleep " .. s) end '
                                   'for _ = 1, 6 do nap(0.4) end nap(5)')],
                       capture_output=True, text=True, timeout=60, env=b.environ())
    assert p.returncode == 0, p.stderr
    m = re.search(r"^nupp-bpf: [\d.]+ s, ([\d.]+) s off the CPU", p.stderr, re.M)
    assert m, p.stderr
    files = sorted(out.iterdir())
    assert len(files) >= 3, (files, p.stderr)
    rows = [parse_collapsed(f.read_text()) for f in files]
    total = sum(us for r in rows for _, us in r)
    assert abs(total / 1e6 - float(m[1])) <= 0.001 + 1e-6 * len(files) * 50, \
        (total, m[1], [f.read_text() for f in files])
    still = [i for i, r in enumerate(rows) if any(s.startswith("[still waiting]") for s, _ in r)]
    assert still == [len(files) - 1], [f.read_text() for f in files]
