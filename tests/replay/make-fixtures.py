#!/usr/bin/env python3
"""make-fixtures.py - capture the replay test's processes (tests/fixtures/replay/).

    sudo make replay-fixtures    # or tests/replay/make-fixtures.py [NAME...] after it built

Each fixture runs one workload of this folder under one stock LuaJIT build,
waits for its "ready" line, and stops it (build/tests/replay-capture) at a
moment of the kind it names: blocked in a C function, in a trace's own
code, in C code a trace called. The capture is written as NAME.cap.gz, and
what the replay gives for it is printed, to be reviewed against the
workload and kept as NAME.want with the reasons it is the truth. A capture
holds no layout (the replay describes the build again from the registry),
so it outlives changes of the layout and of struct nupp_proc; it is made
again when the capture's format changes (test_replay refuses the old
file). The moment a trace is stopped at differs from one capture to the
next, so its .want is reviewed again then.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(ROOT, "build")
OUT = os.path.join(ROOT, "tests", "fixtures", "replay")
LUAJIT = "/usr/bin/luajit"
LUAJIT2 = os.path.join(BUILD, "stock", "luajit2", "usr", "bin", "luajit")

# name: (build and its options, workload, moment, depth)
FIXTURES = {
    "deep-read": (LUAJIT, "deep_read.lua", "c", 16),
    "deep-read-whole": (LUAJIT, "deep_read.lua", "c", 64),
    "coro-read": (LUAJIT2, "coro_read.lua", "c", 16),
    "inline-trace": (LUAJIT, "inline_loop.lua", "trace", 16),
    "inline-trace-luajit2": (LUAJIT2, "inline_loop.lua", "trace", 16),
    "alloc-trace-calls-c": (LUAJIT, "alloc_loop.lua", "trace-c", 16),
    "fib-returning": (LUAJIT + " -joff", "fib.lua", "returning", 64),
    "ack-deep": (LUAJIT2 + " -joff", "ack.lua", "interp", 16),
    "link-tail": (LUAJIT, "link_tail.lua", "link-tail", 16),
    "link-tail-luajit2": (LUAJIT2, "link_tail.lua", "link-tail", 16),
}


def capture(name, build, workload, moment, depth):
    proc = subprocess.Popen(build.split() + [workload], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=HERE)
    try:
        assert proc.stdout.readline() == b"ready\n", "%s did not start" % workload
        time.sleep(0.3)     # into its loop, compiled, or blocked in its read
        out = os.path.join(OUT, name + ".cap.gz")
        subprocess.run([os.path.join(BUILD, "tests", "replay-capture"), str(proc.pid), out, moment],
                       check=True)
        print(subprocess.run([os.path.join(BUILD, "unit", "test_replay"), "--print", out, str(depth)],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    finally:
        proc.kill()
        proc.wait()


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in sys.argv[1:] or FIXTURES:
        print("==", name)
        capture(name, *FIXTURES[name])


if __name__ == "__main__":
    main()
