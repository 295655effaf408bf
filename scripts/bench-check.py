#!/usr/bin/python3
"""bench-check.py - how fast `nupp-bpf check` reads Lua, on one core.

Builds a tree of at least --lines lines of Lua from the repository's own
programs (tests/fixtures/*, lua/, examples/), each file copied under a name
of its own until the tree is big enough, then times `nupp-bpf check DIR`
pinned to one CPU (taskset -c 0), best of --rounds, and prints lines per
second. The Lua is loaded by --luajit (the default luajit on PATH) and
read against its recorder, as a user's run does.

  bench-check.py [--luajit luajit] [--lines 100000] [--rounds 5]

python3 standard library only; needs taskset (util-linux).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sources():
    out = []
    for d in ("tests/fixtures/aborts", "tests/fixtures/corpus", "tests/fixtures/check",
              "tests/fixtures/workloads", "lua/nupp", "examples"):
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            out += [os.path.join(base, f) for f in sorted(files) if f.endswith(".lua")]
    ok = []
    for p in out:	# only those the build loads (the tree must hold no error)
        if subprocess.run(["luajit", "-e", "assert(loadfile(%r))" % p], capture_output=True).returncode == 0:
            ok.append(p)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--luajit", default="luajit")
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--nupp", default=os.path.join(ROOT, "build", "nupp-bpf"))
    a = ap.parse_args()
    src = sources()
    tmp = tempfile.mkdtemp(prefix="nupp-bench-check-")
    try:
        lines = files = 0
        while lines < a.lines:
            for p in src:
                d = os.path.join(tmp, "copy%03d" % (files // len(src)))
                os.makedirs(d, exist_ok=True)
                shutil.copy(p, os.path.join(d, "%d_%s" % (files, os.path.basename(p))))
                with open(p) as f:
                    lines += sum(1 for _ in f)
                files += 1
                if lines >= a.lines:
                    break
        best, findings = None, 0
        for _ in range(a.rounds):
            t0 = time.monotonic()
            r = subprocess.run(["taskset", "-c", "0", a.nupp, "check", "--luajit", a.luajit, tmp],
                               capture_output=True, text=True)
            dt = time.monotonic() - t0
            if r.returncode not in (0, 1):
                sys.exit("bench-check.py: check failed: " + r.stderr.strip())
            findings = r.stdout.count("\n") - 1
            best = dt if best is None else min(best, dt)
        print("| tree | files | lines | findings | best of %d (s) | lines/s |" % a.rounds)
        print("|---|---:|---:|---:|---:|---:|")
        print("| the repository's Lua, copied | %d | %d | %d | %.2f | %.0f |" %
              (files, lines, findings, best, lines / best))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
