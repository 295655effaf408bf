#!/usr/bin/python3
"""bench-trace.py - what collecting trace aborts costs, per abort.

    /usr/bin/python3 scripts/bench-trace.py [--rounds 7] [--out docs/benchmarks.md]

Runs as root. An abort-heavy program (2000 loops, each creating a closure per
iteration: each aborts on FNEW until its penalty blacklists it, or the shared
hot counters let it rest) runs under
three observers, in interleaved rounds (each round runs each once, in shuffled
order):

  none        nothing attached
  jit.attach  the in-process collector: tests/fixtures/aborts/truth.lua, a jit.attach
              "trace" handler aggregating sites as profile.trace does
  nupp-bpf    `nupp-bpf trace -p PID`, attached before the program starts

The program waits on stdin until its observer is attached, then runs; its CPU
time (user+sys from wait4; a uprobe's trap and BPF program are charged to it)
minus the same round's unobserved run, over the abort count, is the cost per
abort. The BPF program's own run time per hit comes from bpf_stats.
Replaces its own section of docs/benchmarks.md.
"""
import argparse
import datetime
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
TRUTH = os.path.join(ROOT, "tests", "fixtures", "aborts", "truth.lua")
BEGIN, END = "<!-- bench-trace: begin -->", "<!-- bench-trace: end -->"
LOOPS = 2000

PROGRAM = """io.read("*l")  -- held until the observer is attached
local s = 0
%s
print(s)
""" % "\n".join("do local function f() for i = 1, 2000 do local g = function() return i end "
                "s = s + g() end end f() end" for _ in range(LOOPS))


def run(luajit, prog, observer, tmp):
    """One run: (CPU seconds of the program, aborts, BPF ns or None)."""
    argv = [luajit, prog]
    if observer == "jit.attach":
        argv = [luajit, TRUTH, os.path.join(tmp, "truth.csv"), prog]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    nupp = None
    if observer == "nupp-bpf":
        nupp = subprocess.Popen([NUPP, "trace", "-p", str(p.pid), "-o", os.path.join(tmp, "a.csv")],
                                stderr=subprocess.PIPE, text=True)
        for line in nupp.stderr:			# attached once it says so
            if line.startswith("nupp-bpf: recording"):
                break
    bpf0 = bpf_stats()
    p.stdin.write("go\n")
    p.stdin.flush()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    bpf1 = bpf_stats()
    aborts = None
    if nupp:
        nupp.send_signal(2)
        err = nupp.communicate(timeout=30)[1]
        m = re.search(r"(\d+) trace aborts, (\d+) blacklisted", err)
        aborts = (int(m[1]), int(m[2])) if m else None
    elif observer == "jit.attach":
        with open(os.path.join(tmp, "truth.csv")) as f:
            rows = [l.split(",") for l in f.read().splitlines()[1:] if l]
        aborts = (sum(int(r[1]) for r in rows), sum(int(r[1]) for r in rows if r[0] == "blacklist"))
    bpf = None
    if bpf0 and bpf1 and bpf1[1] > bpf0[1]:
        bpf = (bpf1[0] - bpf0[0]) / (bpf1[1] - bpf0[1])
    return ru.ru_utime + ru.ru_stime, aborts, bpf


def bpf_stats():
    """(run_time_ns, run_cnt) summed over loaded trace_abort_site programs."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    progs = [p for p in json.loads(out or "[]") if p.get("name") == "trace_abort_site"]
    if not progs:
        return None
    return (sum(p.get("run_time_ns", 0) for p in progs), sum(p.get("run_cnt", 0) for p in progs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = ap.parse_args()
    observers = ["none", "jit.attach", "nupp-bpf"]
    results = {o: [] for o in observers}
    stats_was = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prog = os.path.join(tmp, "aborts.lua")
            with open(prog, "w") as f:
                f.write(PROGRAM)
            for _ in range(a.rounds):
                order = observers[:]
                random.shuffle(order)
                rnd = {o: run(a.luajit, prog, o, tmp) for o in order}
                for o in observers:
                    results[o].append((rnd[o], rnd["none"][0]))
    finally:
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=" + stats_was])
    counts = [r[0][1] for o in ("jit.attach", "nupp-bpf") for r in results[o] if r[0][1]]
    aborts = statistics.median(c[0] for c in counts)
    blacklisted = statistics.median(c[1] for c in counts)
    lines = [BEGIN, "## Trace-abort collector, cost per abort (`scripts/bench-trace.py`)", "",
             "Produced by `make bench` → `/usr/bin/python3 scripts/bench-trace.py --rounds %d` on %s "
             "(took %.0f s). Program: %d loops that each create a closure per iteration "
             "(`%s`, %d aborts a run, %d of them blacklisting, as both observers counted), held on stdin until its observer is "
             "attached. %d rounds, each running every observer once in shuffled order; *added* = the "
             "program's CPU time (user+sys from wait4: a uprobe's trap and BPF program are charged "
             "to it) minus the same round's unobserved run; per abort = median added / aborts. "
             "*BPF ns/hit* = the probe program's own run time (bpf_stats)."
             % (a.rounds, started, time.monotonic() - t0, LOOPS, a.luajit, aborts, blacklisted,
                a.rounds), "",
             "| observer | command | CPU s (median) | added per abort (µs, median, min..max) | BPF ns/hit |",
             "|---|---|---:|---:|---:|"]
    cmds = {"none": "`luajit aborts.lua`",
            "jit.attach": "`luajit tests/fixtures/aborts/truth.lua OUT.csv aborts.lua`",
            "nupp-bpf": "`luajit aborts.lua` + `nupp-bpf trace -p PID`"}
    for o in observers:
        cpu = statistics.median(r[0][0] for r in results[o])
        if o == "none":
            lines.append("| none | %s | %.3f | — | — |" % (cmds[o], cpu))
            continue
        per = [(r[0][0] - r[1]) * 1e6 / aborts for r in results[o]]
        bpf = [r[0][2] for r in results[o] if r[0][2]]
        lines.append("| %s | %s | %.3f | %.1f (%.1f..%.1f) | %s |" % (
            o, cmds[o], cpu, statistics.median(per), min(per), max(per),
            "%.0f" % statistics.median(bpf) if bpf else "—"))
    lines += ["", END]
    section = "\n".join(lines) + "\n"
    print(section)
    text = open(a.out).read() if os.path.exists(a.out) else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(a.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
