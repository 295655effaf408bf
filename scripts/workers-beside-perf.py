#!/usr/bin/python3
"""workers-beside-perf.py - each worker's samples: nupp-bpf against perf, and perf against itself.

    /usr/bin/python3 scripts/workers-beside-perf.py [--runs 10] [--workers 72]

One run of tests/fixtures/workloads/sameworkers.lua (a master forks
--workers workers that spin 0.2 s of CPU each in one function) is sampled
three times at once: `perf record -e cpu-clock -F 997 -a` twice (a and b,
as two fleet agents would) and `nupp-bpf record --threads -F 997`, which
launches it. For every worker, b's count over a's and nupp-bpf's over a's,
each scaled by its ratio of all workers' counts (k): how far two kernel
samplings of one schedule stray from each other per worker, and how far
nupp-bpf strays from the kernel's. At ~200 samples a worker, two
independent samplings differ by Poisson noise alone: sqrt(2/200) = 0.10.

Prints a line per run and sampler, then the spread over all runs, and the
number of workers outside 0.85-1.15 (the bound of the issue "Profiles true in
every container"). As root, from a built tree.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.helpers.perf import PerfBeside, THREAD_RE  # noqa: E402

NUPP = os.path.join(ROOT, "build", "nupp-bpf")
WORKLOAD = os.path.join(ROOT, "tests", "fixtures", "workloads", "sameworkers.lua")
RECORDING_CHILD = re.compile(r"nupp-bpf: recording PID \d+: .*, a child of PID")


def nupp_counts(path):
    """{pid: samples} of a collapsed file with [pid/tid ...] frames."""
    got = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            m = THREAD_RE.match(stack)
            if m:
                got[int(m[1])] = got.get(int(m[1]), 0) + int(count)
    return got


def ratios(counts, ref, pids):
    """k, the ratio of all workers' counts, and each worker's count over
    k times the reference's, sorted."""
    k = sum(counts.get(p, 0) for p in pids) / sum(ref.get(p, 0) for p in pids)
    return k, sorted(counts.get(p, 0) / (k * ref[p]) for p in pids if ref.get(p))


def outside(rs):
    return sum(1 for r in rs if not 0.85 <= r <= 1.15)


def one_run(d, workers):
    """perf a, perf b and nupp-bpf over one run: their {pid: samples} and the workers."""
    a, b = PerfBeside(Path(d, "a.data")), PerfBeside(Path(d, "b.data"))
    go = f"{d}/go"
    p = subprocess.Popen([NUPP, "record", "-F", "997", "--threads", "-o", f"{d}/nupp.txt", "--",
                          "/usr/bin/luajit", WORKLOAD, str(workers), "0.2", go],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = 0
    for line in p.stderr:		# the workers wait for go until all are recorded
        seen += bool(RECORDING_CHILD.match(line))
        if seen == workers:
            break
    open(go, "w").close()
    out, _ = p.communicate()
    a.interrupt()		# both end at once: neither samples longer than the other
    b.interrupt()
    counts_a, counts_b = a.stop(), b.stop()
    if p.returncode:
        sys.exit(f"workers-beside-perf: nupp-bpf exited {p.returncode}")
    pids = [int(m[1]) for m in re.finditer(r"^truth (\d+)", out, re.M)]
    return counts_a, counts_b, nupp_counts(f"{d}/nupp.txt"), pids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=72)
    args = ap.parse_args()
    every = {"perf b / perf a": [], "nupp-bpf / perf a": []}
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            a, b, nupp, pids = one_run(d, args.workers)
        print(f"run {run + 1}: {len(pids)} workers, perf a gave each "
              f"{min(a.get(p, 0) for p in pids)}-{max(a.get(p, 0) for p in pids)} samples")
        for name, counts in (("perf b / perf a", b), ("nupp-bpf / perf a", nupp)):
            k, rs = ratios(counts, a, pids)
            every[name] += rs
            print(f"  {name}: k {k:.3f}, workers {rs[0]:.2f}..{rs[-1]:.2f} "
                  f"(median {rs[len(rs) // 2]:.2f}), outside 0.85-1.15: {outside(rs)}", flush=True)
    print(f"\n| per worker | counts | lowest | highest | standard deviation | outside 0.85-1.15 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rs in every.items():
        print(f"| {name} | {len(rs)} | {min(rs):.2f} | {max(rs):.2f} | "
              f"{statistics.pstdev(rs):.3f} | {outside(rs)} |")


if __name__ == "__main__":
    main()
