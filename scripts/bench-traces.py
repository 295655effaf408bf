#!/usr/bin/python3
"""bench-traces.py - what mapping compiled samples through their traces costs nupp-bpf.

    /usr/bin/python3 scripts/bench-traces.py [--traces 1000] [--seconds 10] [--rounds 3]

Runs as root. Starts a JIT-heavy target: --traces / 2 generated functions,
each a loop that calls two small helpers the JIT inlines (two traces each:
the loop, and one from the function's entry), all kept hot in turn so that
samples spread over every function. Once its traces are compiled it prints
how many there are, and nupp-bpf records it
(`record -p PID -F 997 -d SECONDS`), in rounds, alternately with the
mapping (the default) and without it (NUPP_NO_TRACE_MAP=1: the samples keep
their positions, so the kernel side and the stacks to symbolize are the
same, and only the mapping is left out). Reported per configuration, as
medians over the rounds: nupp-bpf's CPU time (user + sys, wait4) as a share
of one core over the recording, its peak RSS, the distinct stacks in the
kernel's table and in the output, the compiled samples mapped, and what the mapper holds (traces read, bytes;
from NUPP_VERBOSE). The difference of the CPU shares is the mapping's cost.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The target: K generated functions, each a loop calling two small helpers
# the JIT inlines (each starts with a guard, so snapshots inside them). A
# function makes two traces: its loop, and one from its entry that links to
# it (sometimes a function trace of a helper too). A dispatcher the JIT leaves alone calls them in turn, each for
# long enough that its trace's exit costs little; side traces are kept from
# forming (hotexit) so that the set of traces holds still.
TARGET = r"""
local K, maxtrace = tonumber(arg[1]), tonumber(arg[2])
jit.opt.start("maxtrace=" .. maxtrace, "maxmcode=" .. (256 * 1024), "hotexit=1000000000")
local fns = {}
for k = 1, K do
  fns[k] = assert(load(([[
    local function h(x) if x > 1e300 then x = 0 end return x * 0.999 + %d end
    local function g(x) if x < -1e300 then x = 0 end return x * 0.998 + 1 end
    return function(n, x)
      for i = 1, n do x = g(h(x)) end
      return x
    end]]):format(k), "=gen" .. k))()
end
local sink = 0
local function round() for k = 1, K do sink = sink + fns[k](2000, 1) end end
jit.off(round)
for _ = 1, 3 do round() end
local n = 0
for i = 1, maxtrace do
  if require("jit.util").traceinfo(i) then n = n + 1 end
end
io.stdout:write(("traces %d\nready\n"):format(n))
io.stdout:flush()
while true do round() end
"""


def log(msg):
    sys.stderr.write("bench-traces: %s\n" % msg)
    sys.stderr.flush()


def start_target(a, script):
    k = max(1, a.traces // 2)
    p = subprocess.Popen([a.luajit, script, str(k), str(min(65535, 2 * a.traces + 1000))],
                         stdout=subprocess.PIPE, text=True)
    traces = None
    for line in p.stdout:
        m = re.match(r"traces (\d+)", line)
        if m:
            traces = int(m[1])
        if line.startswith("ready"):
            break
    if traces is None:
        p.kill()
        sys.exit("bench-traces: error: the target did not start")
    return p, traces


def record(a, pid, mapping):
    """One nupp-bpf run on pid: its CPU seconds, peak RSS (KiB), stderr."""
    env = dict(os.environ, NUPP_VERBOSE="1")
    if not mapping:
        env["NUPP_NO_TRACE_MAP"] = "1"
    out = os.path.join(a.tmp, "out.collapsed")
    p = subprocess.Popen([a.nupp, "record", "-p", str(pid), "-F", "997", "-d", str(a.seconds),
                          "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=env)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit("bench-traces: error: nupp-bpf failed:\n" + err)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss, err


def parse(err):
    r = {}
    m = re.search(r"^nupp-bpf: [\d.]+ s, (\d+) samples, (\d+) stacks$", err, re.M)
    if m:
        r["samples"], r["stacks"] = int(m[1]), int(m[2])
    m = re.search(r"compiled: (\d+) of (\d+) samples mapped", err)
    if m:
        r["mapped"], r["compiled"] = int(m[1]), int(m[2])
    m = re.search(r"sampler: (\d+) kernel stacks", err)
    if m:
        r["keys"] = int(m[1])
    m = re.search(r"sampler: pid \d+: (\d+) traces held, (\d+) bytes", err)
    if m:
        r["held"], r["bytes"] = int(m[1]), int(m[2])
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", type=int, default=1000, help="traces to aim at (about)")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--nupp", default=os.path.join(ROOT, "build/nupp-bpf"))
    p.add_argument("--luajit", default="/usr/bin/luajit")
    a = p.parse_args()
    if os.geteuid():
        sys.exit("bench-traces: error: run as root")
    # Killed, it still stops its target (the finally below): a target left
    # spinning would skew whatever is measured next.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench-traces: terminated"))
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        a.tmp = tmp
        script = os.path.join(tmp, "target.lua")
        with open(script, "w") as f:
            f.write(TARGET)
        target, traces = start_target(a, script)
        log("target pid %d: %d traces" % (target.pid, traces))
        runs = {True: [], False: []}
        try:
            for r in range(a.rounds):
                for mapping in ((True, False) if r % 2 == 0 else (False, True)):
                    cpu, rss, err = record(a, target.pid, mapping)
                    res = dict(parse(err), cpu=cpu, rss=rss)
                    runs[mapping].append(res)
                    log("round %d, mapping %s: %.3f s CPU, %d KiB, %s" %
                        (r + 1, "on" if mapping else "off", cpu, rss,
                         {k: v for k, v in res.items() if k not in ("cpu", "rss")}))
                    time.sleep(0.5)
        finally:
            target.send_signal(signal.SIGKILL)
            target.wait()

    def med(mapping, key):
        xs = [x[key] for x in runs[mapping] if key in x]
        return statistics.median(xs) if xs else float("nan")

    print("target: %d traces (%s), nupp-bpf record -F 997 -d %g, %d rounds alternating "
          "the mapping on and off, medians. The goal: 1 %% of a core at 1,000 traces.\n"
          % (traces, a.luajit, a.seconds, a.rounds))
    print("| mapping | CPU, % of a core | peak RSS, MiB | kernel stacks | stacks written "
          "| compiled samples mapped | traces held | bytes held |")
    print("|---|---|---|---|---|---|---|---|")
    for mapping in (True, False):
        print("| %s | %.2f | %.1f | %d | %d | %s | %s | %s |" % (
            "on" if mapping else "off (NUPP_NO_TRACE_MAP=1)",
            100 * med(mapping, "cpu") / a.seconds, med(mapping, "rss") / 1024,
            med(mapping, "keys"), med(mapping, "stacks"),
            "%d of %d" % (med(mapping, "mapped"), med(mapping, "compiled"))
            if mapping else "-",
            "%d" % med(mapping, "held") if mapping else "-",
            "%d" % med(mapping, "bytes") if mapping else "-"))
    print("\nThe mapping's cost: **%.2f %%** of a core" %
          (100 * (med(True, "cpu") - med(False, "cpu")) / a.seconds))


if __name__ == "__main__":
    main()
