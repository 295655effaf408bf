#!/usr/bin/python3
"""bench-large.py - what a large program costs nupp-bpf itself.

A program that calls 20,000 generated functions round-robin
(tests/bench/large.lua) meets thousands of distinct stacks, most of them
new: every one is symbolized once. nupp-bpf attaches with -p to the running
program for its whole run at -F 997, as `record` and as the default job,
and its own CPU time (user + system) is read when it says it records (the
start's cost, in seconds), at 4 s and 0.3 s before the duration ends
(/proc/PID/stat), and at its exit (wait4: its start and its writing of the
files included): the first 4 s and the whole run as a share of one core,
and what it spent from 0.3 s before the end to its exit (writing the files,
the summary, detaching) in seconds. Prints a Markdown table.

    /usr/bin/python3 scripts/bench-large.py [--luajit /usr/bin/luajit] [--reps 3]
        [--compare OTHER-NUPP-BPF]   (both in turn, for a ratio on one machine)
        [--per-chunk K]              (K functions to a chunk, as modules hold them)
        [--attach-after S]           (attach once the program has run S seconds,
                                      as to a server: by default at once, 0.1 s old)
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")
END_S = 0.3		# the end's reading starts this long before the duration ends


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(a, nupp, job, seconds):
    tgt = subprocess.Popen([a.luajit, os.path.join(ROOT, "tests/bench/large.lua"), "20000",
                            str(seconds + 3 + a.attach_after), str(a.per_chunk)],
                           stdout=subprocess.PIPE, text=True)
    assert tgt.stdout.readline() == "ready\n"
    time.sleep(a.attach_after)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p")
        args = (["record", "-o", out + ".collapsed"] if job == "record" else ["-o", out])
        t0 = time.monotonic()
        prof = subprocess.Popen([nupp, *args, "-p", str(tgt.pid), "-F", "997", "-d", str(seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        first = prof.stderr.readline()		# "recording PID ...": started
        start = cpu_s(prof.pid)
        time.sleep(max(0, 4 - (time.monotonic() - t0)))
        early = cpu_s(prof.pid)
        time.sleep(max(0, seconds - END_S - (time.monotonic() - t0)))
        late = cpu_s(prof.pid)
        err = first + prof.stderr.read()		# to its exit
        _, status, usage = os.wait4(prof.pid, 0)
        t_end = time.monotonic()
        prof.returncode = os.waitstatus_to_exitcode(status)
        if prof.returncode:
            raise SystemExit("nupp-bpf failed: " + err)
        stacks = sum(1 for _ in open(out + ".collapsed"))
    tgt.kill()
    tgt.wait()
    whole = usage.ru_utime + usage.ru_stime	# its start and its writing of the files too
    return {"start": start, "early": early / 4, "whole": whole / (t_end - t0),
            "end": whole - late, "stacks": stacks}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--luajit", default="/usr/bin/luajit")
    p.add_argument("--nupp", default=os.path.join(ROOT, "build", "nupp-bpf"))
    p.add_argument("--compare", metavar="NUPP", help="another nupp-bpf, run in turn with --nupp")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seconds", type=int, default=12)
    p.add_argument("--per-chunk", type=int, default=1,
                   help="functions to a chunk (1: each its own, as generated code)")
    p.add_argument("--attach-after", type=float, default=0, metavar="S",
                   help="seconds the program runs before nupp-bpf attaches")
    a = p.parse_args()
    builds = [a.nupp] + ([a.compare] if a.compare else [])
    runs = {(b, job): [] for b in builds for job in ("record", "default job")}
    for _ in range(a.reps):			# every build and job in turn
        for b, job in runs:
            runs[(b, job)].append(one(a, b, job, a.seconds))
    print("`nupp-bpf [record] -p PID -F 997 -d %d` on `%s tests/bench/large.lua 20000 %g %d` "
          "(20,000 generated functions called round-robin, %s%s), %d runs of each in turn; "
          "nupp-bpf's own CPU as a share of one core, medians:" % (
              a.seconds, a.luajit, a.seconds + 3 + a.attach_after, a.per_chunk,
              "each its own chunk" if a.per_chunk == 1 else "%d to a chunk" % a.per_chunk,
              ", attached after it ran %g s" % a.attach_after if a.attach_after else "",
              a.reps))
    print()
    print("| %sjob | start | first 4 s | whole run | last %.1f s and end | distinct stacks |"
          % ("nupp-bpf | " if a.compare else "", END_S))
    print("|%s---|---:|---:|---:|---:|---:|" % ("---|" if a.compare else ""))
    for (b, job), rs in runs.items():
        print("| %s%s | %.3f s | %.1f %% | %.1f %% | %.3f s | %d |" % (
            "`%s` | " % b if a.compare else "", job,
            statistics.median(r["start"] for r in rs),
            100 * statistics.median(r["early"] for r in rs),
            100 * statistics.median(r["whole"] for r in rs),
            statistics.median(r["end"] for r in rs),
            statistics.median(r["stacks"] for r in rs)))

if __name__ == "__main__":
    main()
