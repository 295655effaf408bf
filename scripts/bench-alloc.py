#!/usr/bin/python3
"""bench-alloc.py - what `record --alloc` costs programs that allocate a lot.

    /usr/bin/python3 scripts/bench-alloc.py [--rounds 5] [--luajit PATH]

Two allocation-heavy programs of tests/bench/alloc/: trees.lua (binary trees
of tables built and dropped, one block a node) and strings.lua (log lines
and HTML built with string.format and concatenation). Each reports the CPU
seconds of its own loop (os.clock: the kernel's time in the probe's traps
is the process's). Runs alone and under `nupp-bpf record --alloc -d 600 --
…` (the default mean, 512 KiB) alternate, --rounds times each; reported:
the medians, their ratio, and for trees the added time per node (its
allocation and its free: two calls of the allocator).

Every allocation and free traps into the kernel (kernel-notes/alloc.md): the
ratio is that cost against how little else such a program does. Prints
Markdown.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
PROGRAMS = {
    "trees.lua 14": ("trees.lua", "14"),
    "strings.lua 300000": ("strings.lua", "300000"),
}


def seconds(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    m = re.search(r"^seconds ([\d.]+)$", p.stdout, re.M)
    if p.returncode or not m:
        raise SystemExit(f"bench-alloc: {' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
    n = re.search(r"^nodes (\d+)$", p.stdout, re.M)
    return float(m[1]), int(n[1]) if n else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    a = ap.parse_args()
    print("| program | alone, CPU s (median of %d) | `record --alloc` | slowdown |" % a.rounds)
    print("|---|---:|---:|---:|")
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "alloc.pb.gz")
        for name, (script, arg) in PROGRAMS.items():
            path = os.path.join(ROOT, "tests", "bench", "alloc", script)
            alone, profiled, nodes = [], [], 0
            for _ in range(a.rounds):
                alone.append(seconds([a.luajit, path, arg])[0])
                s, nodes = seconds([NUPP, "record", "--alloc", "-d", "600", "--no-summary", "-o",
                                    out, "--", a.luajit, path, arg])
                profiled.append(s)
            p, q = statistics.median(alone), statistics.median(profiled)
            print(f"| `{name}` | {p:.3f} | {q:.3f} | ×{q / p:.1f} |")
            if nodes:
                notes.append(f"`{name}`: {1e6 * (q - p) / nodes:.2f} µs added per node "
                             f"({nodes:,} nodes, each one allocation and one free)")
    print()
    for n in notes:
        print(f"{n}.")
    print(f"\n`/usr/bin/python3 scripts/bench-alloc.py --rounds {a.rounds}`")


if __name__ == "__main__":
    main()
