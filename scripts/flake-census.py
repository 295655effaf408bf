#!/usr/bin/env python3
"""flake-census.py - run sampled tests many times beside a busy loop on every CPU.

    scripts/flake-census.py [--runs 30] [--no-busy] NODEID...

A NODEID is what pytest takes (tests/sampler/test_sampler.py::test_x, with
[params] or without). Each is run --runs times, one after another, while one
busy loop per CPU competes for the machine (the load a sampled test must
stand: a CI host shared with other jobs). Prints a Markdown table, a row per
test: runs, failures, and the first line of each distinct failure, for
docs/testing.md; a failed run's whole output goes to build/census/. Exits
1 when any run failed. As root, like `make test`.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
LOGS = os.path.join(ROOT, "build", "census")	# a failed run's whole output


def busy_loops():
    """One spinning process per CPU, at the tests' own priority."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count())]


def first_error(out):
    for line in out.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:160]
    return out.strip().splitlines()[-1][:160] if out.strip() else "(no output)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--no-busy", action="store_true")
    ap.add_argument("nodeids", nargs="+")
    a = ap.parse_args()
    os.makedirs(LOGS, exist_ok=True)
    loops = [] if a.no_busy else busy_loops()
    rows, bad = [], 0
    try:
        for node in a.nodeids:
            fails, t0 = [], time.monotonic()
            for i in range(a.runs):
                p = subprocess.run(PYTEST + [node], cwd=ROOT, capture_output=True, text=True)
                if p.returncode:
                    fails.append(first_error(p.stdout))
                    log = os.path.join(LOGS, node.replace("/", "_").replace(":", "_") + f".{i}.log")
                    with open(log, "w") as f:
                        f.write(p.stdout + p.stderr)
            bad += len(fails)
            rows.append((node, a.runs, fails, time.monotonic() - t0))
            print(f"{node}: {len(fails)} of {a.runs} failed", file=sys.stderr, flush=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    print(f"| test | runs | failed | first failure |\n|---|---|---|---|")
    for node, runs, fails, secs in rows:
        print(f"| `{node}` | {runs} | {len(fails)} | {fails[0] if fails else ''} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
