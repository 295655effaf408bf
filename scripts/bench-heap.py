#!/usr/bin/python3
"""bench-heap.py - what a census of a LuaJIT heap costs (`nupp-bpf heap`).

    /usr/bin/python3 scripts/bench-heap.py [--runs 3] [--scales 5,40]

tests/fixtures/workloads/heap_shapes.lua builds a heap at each scale (5:
about 130 MB; 40: about 1 GB), collects and blocks in io.read; `nupp-bpf
heap -p PID --json` reads it --runs times. Prints a Markdown table: the
heap (gc.total), the share the census counted, its wall time and
nupp-bpf's CPU time (wait4), medians, and the wall time per GB. The goal
is 1 s per GB of heap or less.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
SHAPES = os.path.join(ROOT, "tests", "fixtures", "workloads", "heap_shapes.lua")


def census(pid):
    """(JSON, wall s) of one `nupp-bpf heap`."""
    t0 = time.monotonic()
    p = subprocess.Popen([NUPP, "heap", "-p", str(pid), "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=600)
    wall = time.monotonic() - t0
    if p.returncode:
        raise SystemExit("bench-heap: nupp-bpf heap failed: " + err)
    return json.loads(out), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scales", default="5,40")
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    a = ap.parse_args()
    rows = []
    for scale in [int(s) for s in a.scales.split(",")]:
        t = subprocess.Popen([a.luajit, SHAPES, str(scale)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        assert t.stdout.readline().startswith("ready")
        walls, cpus, vm = [], [], None
        for _ in range(a.runs):
            r0 = os.times()
            out, wall = census(t.pid)
            r1 = os.times()
            walls.append(wall)
            cpus.append((r1.children_user - r0.children_user) + (r1.children_system - r0.children_system))
            vm = out["vms"][0]
        t.communicate("go\n", timeout=60)
        gb = vm["gcTotal"] / 2**30
        rows.append((scale, vm["gcTotal"], 100 * vm["counted"] / vm["gcTotal"],
                     statistics.median(walls), statistics.median(cpus),
                     statistics.median(walls) / gb, vm["partial"]))
    print("`tests/fixtures/workloads/heap_shapes.lua SCALE` under `%s`, blocked in io.read; "
          "`nupp-bpf heap -p PID --json`, %d runs each, medians. *CPU*: nupp-bpf's user + "
          "system time (its whole run: identification, the walk, the output). The goal: "
          "1 s of wall time per GB of heap or less.\n" % (a.luajit, a.runs))
    print("| scale | heap (gc.total) | counted | wall | CPU | wall per GB | partial |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for scale, total, counted, wall, cpu, per_gb, partial in rows:
        print("| %d | %.0f MB | %.1f%% | %.2f s | %.2f s | %.2f s | %s |" % (
            scale, total / 1e6, counted, wall, cpu, per_gb, "yes" if partial else "no"))


if __name__ == "__main__":
    main()
