#!/bin/sh
# bench-trace.sh - per-abort cost: the BPF collector vs an in-process jit.attach handler.
#
#   scripts/bench-trace.sh [LUAJIT] [RUNS]      (root; make trace-dev first)
#
# Runs a generated program that aborts a known number of times (many loops,
# each hitting NYI FNEW until it is blacklisted) three ways, RUNS times each,
# and prints one markdown table: median wall time with no observer, with
# jit.attach (tests/aborts/truth.lua) and with nupp-trace-dev attached, and
# the extra microseconds per abort for each observer.
set -eu
LUAJIT=${1:-/usr/bin/luajit}
RUNS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 - "$ROOT" "$LUAJIT" "$RUNS" <<'PY'
import os, statistics, sys, tempfile
root, luajit, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, os.path.join(root, "tests"))
import trace_run

src = ["local s = 0"]
for k in range(300):
    src.append("do local function f() for i = 1, 200000 do local g = function() return i end s = s + g() end end f() end")
src.append("print(s)")
with tempfile.TemporaryDirectory() as d:
    prog = os.path.join(d, "aborts.lua")
    with open(prog, "w") as f:
        f.write("\n".join(src) + "\n")
    def med(**kw):
        walls, last = [], None
        for _ in range(runs):
            last = trace_run.run(luajit, prog, **kw)
            walls.append(last["wall"])
        return statistics.median(walls), last
    base, _ = med(bpf=False, hook=False)
    hooked, r = med(bpf=False, hook=True)
    bpf, rb = med(bpf=True, hook=False)
    aborts = int(r["truth_totals"].split()[0].split("=")[1])
    print("| observer | median wall (s) | aborts | extra us per abort |")
    print("|---|---|---|---|")
    print("| none | %.3f | %d | - |" % (base, aborts))
    print("| jit.attach (in-process) | %.3f | %d | %.1f |" % (hooked, aborts, (hooked - base) * 1e6 / aborts))
    print("| nupp-trace-dev (BPF uprobe) | %.3f | %d | %.1f |" % (bpf, aborts, (bpf - base) * 1e6 / aborts))
    print()
    print("%s, %d runs each; %s" % (luajit, runs, [l for l in rb["dev_stderr"].splitlines() if l.startswith("probe")][0]))
PY
