#!/usr/bin/python3
"""bench-dump.py - how long `nupp-bpf dump -p PID` takes, end to end.

    /usr/bin/python3 scripts/bench-dump.py [--rounds 10] [--luajit /usr/bin/luajit]

Three targets, each left waiting or spinning while it is dumped ROUNDS times:
a program blocked reading a pipe (its stack read from memory), one spinning
in the interpreter (its VM sampled), and a host with three VMs on three
threads (blocked, spinning, in os.execute). For each dump: its wall time
from start to exit, the part of it spent waiting for a CPU (runqueue wait,
/proc/PID/schedstat, read while it is a zombie), and its CPU time; the
goal is 200 ms without the wait. Prints a table; `make bench` puts it in
docs/benchmarks.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
WAIT = os.path.join(ROOT, "tests", "fixtures", "workloads", "dumpwait.lua")
VMS = os.path.join(ROOT, "tests", "fixtures", "workloads", "dumpvms.lua")
HOST = os.path.join(ROOT, "build", "tests", "luahost")
HOST_LIBS = os.path.join(ROOT, "build", "stock", "luajit", "usr", "lib", "x86_64-linux-gnu")


def dump(pid):
    """One dump: (wall ms, runqueue wait ms, CPU ms)."""
    t0 = time.monotonic()
    p = subprocess.Popen([NUPP, "dump", "-p", str(pid)], stdout=subprocess.DEVNULL)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = (time.monotonic() - t0) * 1e3
    with open(f"/proc/{p.pid}/schedstat") as f:
        run, delay, _ = map(int, f.read().split())
    if p.wait():
        sys.exit(f"nupp-bpf dump -p {pid} failed")
    return wall, delay / 1e6, run / 1e6


def start(argv, ready_lines, env=None):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    for _ in range(ready_lines):
        p.stdout.readline()
    time.sleep(0.3)		# into its read, sleep or loop
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    a = ap.parse_args()
    seconds = 60
    targets = [
        ("blocked in read", [a.luajit, WAIT, "read"], 1, None),
        ("spinning, interpreted", [a.luajit, WAIT, "spin", seconds], 1, None),
        ("3 VMs: read, spin, os.execute", [HOST, VMS, "--threads", "3", seconds], 3,
         dict(os.environ, LD_LIBRARY_PATH=HOST_LIBS)),
    ]
    print(f"{a.rounds} dumps of each target, `build/nupp-bpf dump -p PID`; medians (max).")
    print("own = wall less the time it waited for a CPU; the goal is own <= 200 ms.\n")
    print(f"{'target':32} {'wall ms':>16} {'own ms':>16} {'CPU ms':>16}")
    for name, argv, ready, env in targets:
        p = start([str(x) for x in argv], ready, env)
        try:
            runs = [dump(p.pid) for _ in range(a.rounds)]
        finally:
            p.kill()
            p.communicate()
        cols = ([r[0] for r in runs], [r[0] - r[1] for r in runs], [r[2] for r in runs])
        print(f"{name:32}" + "".join(f" {statistics.median(c):9.1f} ({max(c):5.1f})" for c in cols))
    with open("/proc/loadavg") as f:
        print(f"\nload average after: {f.read().split()[0]}")


if __name__ == "__main__":
    main()
