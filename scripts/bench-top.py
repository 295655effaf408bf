#!/usr/bin/python3
"""bench-top.py - what the live jobs cost nupp-bpf: top and --rotate next to record.

    /usr/bin/python3 scripts/bench-top.py [--luajit LUAJIT] [--seconds 20]

Runs as root. For each workload, three sessions attach to one running
target at once, each at 997 Hz: `record -o /dev/null` (the reference),
`top` in a tmux pane (the screen drawn each second) and `record --rotate 1`
(a pprof file each second). Each session's own CPU time (schedstat, every
thread) is read over the same window after a warm-up, so that the three
ratios are measured side by side on one machine load. Prints a Markdown
table: nupp-bpf's CPU as a share of one core, and top's and rotate's cost
over record's.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUPP = os.path.join(ROOT, "build", "nupp-bpf")
WORKLOADS = [
    ("hotcold", ["tests/fixtures/workloads/hotcold.lua", "100000"]),
    ("c_heavy", ["tests/bench/driver.lua", "c_heavy", "--scale=100000"]),
    ("gc_heavy", ["tests/bench/driver.lua", "gc_heavy", "--scale=100000"]),
    ("wide", ["tests/bench/driver.lua", "wide", "--scale=100000"]),
]
WARMUP_S = 3.0


def cpu_ns(pid):
    """CPU time of process pid so far, every thread (schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def tmux(sock, *args):
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True,
                          check=True).stdout


def stacks_of(pid):
    """Distinct stacks of a target, from a 10 s record."""
    p = subprocess.run([NUPP, "record", "-F", "997", "-d", "10", "-p", str(pid), "-o", "-"],
                       capture_output=True, text=True)
    return len(p.stdout.splitlines())


def measure(luajit, script, seconds):
    target = subprocess.Popen([luajit, *script], cwd=ROOT, stdout=subprocess.DEVNULL,
                              start_new_session=True)
    time.sleep(1)
    sock = f"bench-top-{os.getpid()}"
    outdir = tempfile.mkdtemp(prefix="bench-top-")
    try:
        stacks = stacks_of(target.pid)
        record = subprocess.Popen([NUPP, "record", "-F", "997", "-p", str(target.pid), "-o",
                                   "/dev/null", "--no-summary"], stderr=subprocess.DEVNULL)
        rotate = subprocess.Popen([NUPP, "record", "-F", "997", "-p", str(target.pid),
                                   "--rotate", "1", "-o", outdir, "--no-summary"],
                                  stderr=subprocess.DEVNULL)
        tmux(sock, "new-session", "-d", "-x", "120", "-y", "50",
             f"exec {NUPP} top -F 997 -p {target.pid}")
        top = int(tmux(sock, "display", "-p", "#{pane_pid}"))
        time.sleep(WARMUP_S)
        pids = {"record": record.pid, "top": top, "rotate": rotate.pid}
        t0, c0 = time.monotonic(), {k: cpu_ns(p) for k, p in pids.items()}
        time.sleep(seconds)
        t1, c1 = time.monotonic(), {k: cpu_ns(p) for k, p in pids.items()}
        tmux(sock, "send-keys", "q")
        for p in (record, rotate):
            p.send_signal(signal.SIGINT)
            p.wait(timeout=60)
        files = len(os.listdir(outdir))
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        os.killpg(target.pid, signal.SIGKILL)
        target.wait()
        subprocess.run(["rm", "-rf", outdir])
    share = {k: 100.0 * (c1[k] - c0[k]) / 1e9 / (t1 - t0) for k in pids}
    return stacks, share, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--luajit", default="/usr/bin/luajit")
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    print(f"{a.seconds:.0f} s at 997 Hz after {WARMUP_S:.0f} s of warm-up, the three sessions "
          "on one target at once; nupp-bpf's CPU (schedstat) as a share of one core.")
    print()
    print("| workload | stacks | record, % of a core | top | record --rotate 1 | "
          "top − record | rotate − record |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, script in WORKLOADS:
        stacks, s, files = measure(a.luajit, script, a.seconds)
        print(f"| {name} | {stacks} | {s['record']:.2f}% | {s['top']:.2f}% | "
              f"{s['rotate']:.2f}% ({files} files) | {s['top'] - s['record']:+.2f}% | "
              f"{s['rotate'] - s['record']:+.2f}% |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
