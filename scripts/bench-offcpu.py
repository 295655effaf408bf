#!/usr/bin/python3
"""bench-offcpu.py - what `record --off-cpu` costs a program that switches a lot.

    /usr/bin/python3 scripts/bench-offcpu.py [--rounds 7] [--trips 150000]

tests/fixtures/workloads/pingpong.lua passes a byte between a process and
its child through two pipes, both on CPU 0 (PIN): every round trip blocks each once, four
switches of the machine, two of them target threads switching out. Two
measures:

1. Throughput: runs alone, under `nupp-bpf record --off-cpu`, beside a
   `record --off-cpu -p` of another process that sleeps (what watching one
   process costs the others on the machine: their switches run no
   program, but the kernel's context-switch software event is on) and
   under `perf record -e sched:sched_switch -a` (the reference: what any
   observer of the scheduler's tracepoint costs on the machine), --rounds
   rounds; each run's rate is the round trips per second the program
   measures over its own loop. On these machines two runs of the same
   program differ by up to 10 %, and the machine drifts within a minute:
   each round runs the program alone first and last, every mode between,
   and a mode's cost is the median over rounds of its run against the
   mean of its round's two runs alone.
   `record --off-cpu -F 99` (sweeps at 99 Hz instead of each switch) runs
   in the same rounds, and its nupp-bpf's own CPU is measured attached to
   a running pingpong for 3 s (its sweeping thread runs on some CPU, not
   in the target's time); so does `record --clock tick -F 1`, a session
   that samples next to nothing: what being a launched target costs
   whatever the clock (the probes a target gets, its children followed);
   and the same session with its uprobes as perf events on the target's
   task (NUPP_PERF_UPROBES=1, the path of kernels before 6.10), which
   join the task's perf context: what they cost each of its switches.
2. The channel's own time, which is what it takes from the target: the
   kernel's count of the switch program's runs (each switch out of the
   target's threads, and of its child's, which inherits their events)
   and their time
   (kernel.bpf_stats_enabled, read with bpftool over 3 s of a session
   attached to a running pingpong), per switch of the machine, and as a
   share of the target's CPU time over the same seconds. It runs on the
   switching thread's CPU, in its time.

Prints Markdown. The goal (issue: time off the CPU) is a slowdown of 2 % or
less at 100,000 switches a second.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
PINGPONG = os.path.join(ROOT, "tests", "fixtures", "workloads", "pingpong.lua")
# Both processes of pingpong on one CPU: each switch a hand-off there. Left
# to the scheduler, they share a CPU in some runs and not in others, and
# a run's rate moved by 10-40 % with it; pinned, ~140,000 switches a
# second, steady to a few per cent.
PIN = ["taskset", "-c", "0"]


def rate(argv, env=None):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    m = re.search(r"^round trips/s (\d+)$", p.stdout, re.M)
    if p.returncode or not m:
        raise SystemExit(f"bench-offcpu: {' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
    return int(m[1]), p.stderr


def beside_idle_session(idle_pid, argv):
    """rate(argv) while `record --off-cpu` watches another process, one that
    sleeps: what the session costs a process it does not watch."""
    nupp = subprocess.Popen([NUPP, "record", "--off-cpu", "-p", str(idle_pid), "-o", "/dev/null"],
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in nupp.stderr:
            if line.startswith("nupp-bpf: recording"):
                break
        return rate(argv)[0]
    finally:
        nupp.send_signal(signal.SIGINT)
        nupp.communicate(timeout=60)


def prog_stats():
    """(run_time_ns, run_cnt) of the loaded on_switch_out program, or None."""
    out = subprocess.run(["bpftool", "prog", "show", "name", "on_switch_out"], capture_output=True,
                         text=True).stdout
    m = re.search(r"run_time_ns (\d+) run_cnt (\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def cpu_s(pid):
    """CPU seconds of process pid and its children so far (utime + stime)."""
    total = 0
    for p in [pid] + [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return total


def sweeper_cpu(luajit):
    """nupp-bpf's CPU, as a share of one core, sweeping a running pingpong
    at 99 Hz for 3 s (after 1.5 s of its start)."""
    target = subprocess.Popen(PIN + [luajit, PINGPONG, "100000000"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        nupp = subprocess.Popen([NUPP, "record", "--off-cpu", "-F", "99", "-p", str(target.pid),
                                 "-d", "6", "-o", "/dev/null"], stderr=subprocess.PIPE, text=True)
        for line in nupp.stderr:
            if line.startswith("nupp-bpf: recording"):
                break
        time.sleep(1.5)
        c0, t0 = own_cpu_s(nupp.pid), time.monotonic()
        time.sleep(3)
        c1, t1 = own_cpu_s(nupp.pid), time.monotonic()
        nupp.communicate(timeout=60)
    finally:
        target.kill()
        target.wait()
    return (c1 - c0) / (t1 - t0)


def own_cpu_s(pid):
    """CPU seconds of process pid alone (all its live threads), to the
    nanosecond (schedstat: /proc/PID/stat counts 10-ms ticks, and the
    sweeper takes a tick or two in 3 s)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            pass	# the thread exited
    return total / 1e9


def own_time(luajit):
    """(ns per run, runs/s, share of the target's CPU) of the switch program."""
    target = subprocess.Popen(PIN + [luajit, PINGPONG, "100000000"], stdout=subprocess.DEVNULL)
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        time.sleep(0.5)
        with tempfile.TemporaryDirectory() as tmp:
            nupp = subprocess.Popen([NUPP, "record", "--off-cpu", "-p", str(target.pid), "-d", "6",
                                     "-o", os.path.join(tmp, "p.collapsed")],
                                    stderr=subprocess.PIPE, text=True)
            for line in nupp.stderr:
                if line.startswith("nupp-bpf: recording"):
                    break
            time.sleep(1.5)
            a, c0, t0 = prog_stats(), cpu_s(target.pid), time.monotonic()
            time.sleep(3)
            b, c1, t1 = prog_stats(), cpu_s(target.pid), time.monotonic()
            nupp.communicate(timeout=60)
    finally:
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
        target.kill()
        target.wait()
    ns, n = b[0] - a[0], b[1] - a[1]
    return ns / n, n / (t1 - t0), ns / 1e9 / (c1 - c0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trips", type=int, default=150000)
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    a = ap.parse_args()
    plain, profiled, traced, besides, swept, floor, every = [], [], [], [], [], [], set()
    floor_perf, alone_mean = [], []
    # Its own session, and no pipe of ours: its sleep is killed with it,
    # and holds none of our output open.
    idle = subprocess.Popen([a.luajit, "-e", "os.execute('sleep 3600')"], stdout=subprocess.DEVNULL,
                            start_new_session=True)
    prog = PIN + [a.luajit, PINGPONG, str(a.trips)]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.collapsed")
        for _ in range(a.rounds):
            # Alone first and last: each mode of the round is weighed
            # against the mean of the two (this machine drifts by several
            # per cent within a minute).
            first = rate(prog)[0]
            besides.append(beside_idle_session(idle.pid, prog))
            r, err = rate([NUPP, "record", "--off-cpu", "-o", out, "--", *prog])
            profiled.append(r)
            m = re.search(r"one switch in up to (\d+) was walked", err)
            every.add(int(m[1]) if m else 1)
            swept.append(rate([NUPP, "record", "--off-cpu", "-F", "99", "-o", out, "--", *prog])[0])
            floor.append(rate([NUPP, "record", "--clock", "tick", "-F", "1", "-o", out, "--",
                               *prog])[0])
            floor_perf.append(rate([NUPP, "record", "--clock", "tick", "-F", "1", "-o", out, "--",
                                    *prog],
                                   {"NUPP_PERF_UPROBES": "1"})[0])
            # The reference: the kernel's own tracing of every switch, what
            # any observer of the tracepoint pays on this machine.
            traced.append(rate(["perf", "record", "-q", "-e", "sched:sched_switch", "-a", "-o",
                                os.path.join(tmp, "perf.data"), "--", *prog])[0])
            last = rate(prog)[0]
            plain += [first, last]
            alone_mean.append((first + last) / 2)
    os.killpg(idle.pid, signal.SIGKILL)
    idle.wait()
    per_run, runs_s, share = own_time(a.luajit)
    sweeper = sweeper_cpu(a.luajit)

    def lost(v):
        """Per cent lost: the median over rounds of each run against its
        round's alone."""
        return 100 * (1 - statistics.median(x / m for x, m in zip(v, alone_mean)))

    print("| | round trips/s (median of %d) | target switches out/s | lost against alone "
          "(median of the rounds) |" % a.rounds)
    print("|---|---:|---:|---:|")
    for name, v in [("alone", plain), ("`record --off-cpu`", profiled),
                    ("`record --off-cpu -F 99` (sweeps)", swept),
                    ("`record --clock tick -F 1` (a session sampling next to nothing)", floor),
                    ("the same, its uprobes perf events on the target's task "
                     "(`NUPP_PERF_UPROBES=1`)", floor_perf),
                    ("`record --off-cpu -p` of another process, asleep", besides),
                    ("`perf record -e sched:sched_switch -a` (reference)", traced)]:
        r = statistics.median(v)
        print(f"| {name} | {r:,.0f} | {2 * r:,.0f} | "
              f"{'—' if v is plain else f'{lost(v):.1f} %'} |")
    print(f"\nThroughput: **{lost(profiled):.1f} %** lower under `--off-cpu` (each rate is the "
          f"program's own over its loop; each round runs it alone first and last, every mode "
          f"between, and each run is weighed against the mean of the round's two alone; one "
          f"switch out in up to {max(every)} was walked); under perf's tracing of the same "
          f"tracepoint, **{lost(traced):.1f} %** lower; with nupp-bpf watching another process, "
          f"**{lost(besides):.1f} %** lower; swept at 99 Hz (`--off-cpu -F 99`), "
          f"**{lost(swept):.1f} %** lower, nupp-bpf's own CPU **{100 * sweeper:.2f} %** of "
          f"a core (attached to a running pingpong for 3 s), where a session sampling next to "
          f"nothing (`--clock tick -F 1`) costs **{lost(floor):.1f} %**, and "
          f"**{lost(floor_perf):.1f} %** with its uprobes as perf events on the target's task.")
    print(f"\nThe switch program's own time: **{per_run:.0f} ns** a run (its timing by the "
          f"kernel included), {runs_s:,.0f} runs/s, **{100 * share:.1f} %** of the target's "
          f"CPU time over the same 3 s.")
    print(f"\n`/usr/bin/python3 scripts/bench-offcpu.py --rounds {a.rounds} --trips {a.trips}`")


if __name__ == "__main__":
    main()
