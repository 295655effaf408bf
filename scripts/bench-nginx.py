#!/usr/bin/env python3
"""bench-nginx.py - what profiling costs a production server, in its throughput.

    /usr/bin/python3 scripts/bench-nginx.py [--rounds 9] [--seconds 2] [--modes a,b]
        [--handlers /cpu,/light,/alloc] [--settle 2]

The server: Debian's nginx with its Lua module on OpenResty's LuaJIT (the
stripped Debian library the tests run it with), one worker (four or
sixteen in the modes that say so), serving tests/bench/nginx/handler.lua: /cpu, a CPU-bound
handler (~0.3 ms of compiled Lua per request), /light (a header, an
argument and a short answer: strings LuaJIT interns once, so nothing is
allocated per request) and /alloc (a table and strings of its own per
request, about 18 blocks and 1.2 KB: what record --alloc pays for). wrk
drives it on loopback, one thread and 8
connections, for --seconds per measurement.

Each round chains the measurements on one server: none, a mode, none,
the next mode, none, ... (the modes in a shuffled order), and weighs each
mode's requests/s against the mean of the two unprofiled runs beside it.
This machine's throughput drifts over minutes and jumps between two levels
(a virtual machine's CPUs shared with others: /light served ~52,000 and
~77,000 requests/s in back-to-back runs of the same unprofiled server);
only a pair measured within seconds of each other sees the profiler and
not the machine. A mode is nupp-bpf attached to the master with --children
(as an SRE would attach to a running server), started --settle seconds
before wrk (its attach's first look at each worker is done once, and is
not what an always-on profiler costs) and stopped (SIGINT) after it.
Reported per mode and handler: the median over rounds of that ratio, with
the interval its order statistics give the true median at >= 90 %
confidence (no assumption on the noise's shape), nupp-bpf's own CPU time
as a share of one core over the measurement, and the workers' CPU.

The reference mode is not nupp-bpf: `perf record -a` at 997 Hz on every
CPU, as nupp-bpf's cpu-clock events are opened, without a BPF program:
what the timer's interrupts alone cost this machine.

Prints a Markdown section for docs/benchmarks.md (make bench puts it there
through scripts/doc-section.py). As root.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from math import comb
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
NGINX = BUILD / "stock" / "nginx"
LIB = BUILD / "stock" / "luajit2" / "usr/lib/x86_64-linux-gnu"
SERVER = ROOT / "tests" / "bench" / "nginx"
NUPP = BUILD / "nupp-bpf"

# name -> (nupp-bpf arguments before -p, workers); None: nothing attached.
# Leading NAME=VALUE arguments are set in nupp-bpf's environment.
MODES = {
    "none": (None, 1),
    "--clock tick": (["record", "--clock", "tick", "-o", "{out}.collapsed"], 1),
    # The default clock at 99 Hz is the tick, thinned; the cpu clock's
    # events at the same rate beside it.
    "-F 99": (["record", "-F", "99", "-o", "{out}.collapsed"], 1),
    "-F 99 --clock cpu": (["record", "-F", "99", "--clock", "cpu", "-o", "{out}.collapsed"], 1),
    "-F 997": (["record", "-F", "997", "-o", "{out}.collapsed"], 1),
    # The events on the workers' threads rather than one per CPU.
    "-F 997 --clock thread": (["record", "-F", "997", "--clock", "thread", "-o", "{out}.collapsed"], 1),
    "default job -F 997": (["-F", "997", "-o", "{out}"], 1),
    # Its uprobes as perf events on the workers' tasks, the path of kernels
    # before 6.10 (kernel-notes/uprobes.md): what they cost each switch.
    "default job -F 997 (perf-event uprobes)": (["NUPP_PERF_UPROBES=1", "-F", "997", "-o",
                                                "{out}"], 1),
    "record --rotate 60": (["record", "--rotate", "60", "-o", "{out}.d"], 1),
    "record --wall": (["record", "--wall", "-o", "{out}.collapsed"], 1),
    # Time off the CPU: a walk at each switch of the worker, or sweeps.
    "record --off-cpu": (["record", "--off-cpu", "-o", "{out}.collapsed"], 1),
    "record --off-cpu -F 99": (["record", "--off-cpu", "-F", "99", "-o", "{out}.collapsed"], 1),
    "record --alloc": (["record", "--alloc", "-d", "3600", "-o", "{out}.pb.gz"], 1),
    # Not nupp-bpf: the kernel's own sampler at the same rate on every CPU,
    # as --clock cpu opens its events: what the timer's interrupts on every
    # busy CPU cost this machine.
    "perf record -a -F 997 (reference)": (["perf", "record", "-q", "-a", "-e", "cpu-clock",
                                           "-c", "1003009", "-o", "{out}.perf"], 1),
    "none (4 workers)": (None, 4),
    "record --rotate 60 (4 workers)": (["record", "--rotate", "60", "-o", "{out}.d"], 4),
    "-F 997 (4 workers)": (["record", "-F", "997", "-o", "{out}.collapsed"], 4),
    "-F 997 --clock thread (4 workers)": (["record", "-F", "997", "--clock", "thread", "-o",
                                           "{out}.collapsed"], 4),
    # Continuous profiling of a larger server: nupp-bpf's own CPU.
    "none (16 workers)": (None, 16),
    "record --rotate 60 (16 workers)": (["record", "--rotate", "60", "-o", "{out}.d"], 16),
}
# The unprofiled mode of each server, by its workers.
NONE = {w: m for m, (args, w) in MODES.items() if args is None}
HANDLERS = ["/cpu", "/light?id=7", "/alloc"]


def die(msg):
    sys.exit(f"bench-nginx.py: {msg}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def cpu_s(pid):
    """CPU seconds a process has run, all its threads (schedstat: ns, where
    /proc/PID/stat counts 10-ms ticks)."""
    t = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            t += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return t / 1e9


def bpf_progs():
    """The BPF programs loaded now: id -> the time each has run (ns), as the
    kernel counts it while kernel.bpf_stats_enabled is 1."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    try:
        return {p["id"]: p.get("run_time_ns", 0) for p in json.loads(r.stdout or "[]")}
    except ValueError:
        return {}


class BpfStats:
    """kernel.bpf_stats_enabled on for the run, as it was after."""
    PATH = Path("/proc/sys/kernel/bpf_stats_enabled")

    def __enter__(self):
        self.was = self.PATH.read_text().strip()
        self.PATH.write_text("1")

    def __exit__(self, *exc):
        self.PATH.write_text(self.was)


class Server:
    def __init__(self, tmp, workers):
        self.port = free_port()
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "tmp").mkdir(exist_ok=True)
        conf = (SERVER / "nginx.conf").read_text()
        for k, v in {"@PREFIX@": tmp, "@MODULES@": NGINX / "usr/lib/nginx/modules",
                     "@PORT@": self.port, "@WORKERS@": workers,
                     "@LUA_PATH@": f"{SERVER}/?.lua;{NGINX}/usr/share/lua/5.1/?.lua"}.items():
            conf = conf.replace(k, str(v))
        (tmp / "nginx.conf").write_text(conf)
        self.popen = subprocess.Popen([str(NGINX / "usr/sbin/nginx"), "-p", str(tmp), "-c",
                                       str(tmp / "nginx.conf")],
                                      env={**os.environ, "LD_LIBRARY_PATH": str(LIB)},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        self.pid = self.popen.pid
        end = time.monotonic() + 10
        while len(children(self.pid)) < workers and time.monotonic() < end:
            time.sleep(0.05)
        self.workers = children(self.pid)
        if len(self.workers) != workers:
            self.stop()
            die(f"nginx did not start {workers} workers (see {tmp}/error.log)")
        for path in HANDLERS:		# warm: the handler's traces compiled
            self.wrk(path, 1)

    def wrk(self, path, seconds):
        r = subprocess.run(["wrk", "-t1", "-c8", f"-d{seconds}s", f"http://127.0.0.1:{self.port}{path}"],
                           capture_output=True, text=True)
        m = re.search(r"^Requests/sec:\s+([\d.]+)", r.stdout, re.M)
        if r.returncode or not m:
            die(f"wrk failed: {r.stdout}{r.stderr}")
        if re.search(r"Non-2xx", r.stdout):
            die(f"the server answered errors: {r.stdout}")
        return float(m[1])

    def stop(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait()


def attach(args, server, out):
    """nupp-bpf on the server's master with --children, once it records
    every worker; None for no profiler."""
    if args is None:
        return None
    os.makedirs(f"{out}.d", exist_ok=True)	# --rotate's directory
    if args[0] == "perf":
        p = subprocess.Popen([a.format(out=out) for a in args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1)		# its events open: it says nothing when they are
        if p.poll() is not None:
            die(f"perf failed: {p.stderr.read()}")
        return p
    env = dict(os.environ)
    while re.fullmatch(r"[A-Z_]+=.*", args[0]):
        name, value = args[0].split("=", 1)
        env[name], args = value, args[1:]
    argv = [str(NUPP), *[a.format(out=out) for a in args], "--children", "-p", str(server.pid)]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env)
    seen = 0
    for line in p.stderr:
        if re.match(r"nupp-bpf: recording PID \d+: .*, a child of PID", line):
            seen += 1
            if seen == len(server.workers):
                break
    else:
        die(f"nupp-bpf ended before recording the workers: {' '.join(argv)}")
    return p


def detach(p):
    """Stop nupp-bpf; it must exit 0, its files written."""
    if p is None:
        return
    p.send_signal(signal.SIGINT)
    p.stderr.read()
    if p.wait() not in (0, -signal.SIGINT):	# perf may end on the signal itself
        die(f"{p.args[0]} failed: {' '.join(p.args)}")


def measure(srv, path, args, a, out):
    """One measurement: requests/s, and over it nupp-bpf's, the workers'
    and nupp-bpf's BPF programs' CPU as shares of one core."""
    before = bpf_progs()	# nupp-bpf's: those it loads
    p = attach(args, srv, out)
    if p:
        # The attach's own work (a first look at every worker, its build,
        # its first stacks) is done once; an always-on profiler's cost is
        # what follows.
        time.sleep(a.settle)
    w0 = sum(cpu_s(x) for x in srv.workers)
    n0 = cpu_s(p.pid) if p else 0
    b0 = {k: v for k, v in bpf_progs().items() if k not in before} if p else {}
    t0 = time.monotonic()
    rps = srv.wrk(path, a.seconds)
    wall = time.monotonic() - t0
    wcpu = sum(cpu_s(x) for x in srv.workers) - w0
    ncpu = (cpu_s(p.pid) if p else 0) - n0	# its steady state, not its start
    b1 = bpf_progs() if p else {}
    bcpu = sum(b1.get(k, v) - v for k, v in b0.items()) / 1e9
    detach(p)
    return rps, ncpu / wall, wcpu / wall, bcpu / wall


def median_interval(v, confidence=0.90):
    """The widest-inner pair of order statistics (x(k), x(n+1-k)) that holds
    the true median with at least `confidence`, whatever the noise's
    distribution: P = 1 - 2 P(Binomial(n, 1/2) < k). None if n is too
    small for it."""
    v = sorted(v)
    n = len(v)
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(comb(n, i) for i in range(k)) / 2 ** n
        if 1 - 2 * tail >= confidence:
            best = (v[k - 1], v[n - k])
    return best


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--modes", help="a comma-separated subset of: " + ", ".join(MODES))
    ap.add_argument("--handlers", help="a comma-separated subset of: " + ", ".join(HANDLERS))
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds between the attach and the measurement (every mode, none too)")
    a = ap.parse_args()
    modes = [m.strip() for m in a.modes.split(",")] if a.modes else list(MODES)
    for m in modes:
        if m not in MODES:
            die(f"no mode {m!r}")
    handlers = [h for h in HANDLERS if not a.handlers or h.split("?")[0] in a.handlers.split(",")]
    if not handlers:
        die(f"no handler among {a.handlers!r}")
    if os.geteuid() != 0:
        die("run it as root (nupp-bpf loads BPF programs)")
    for need in (NUPP, NGINX / "usr/sbin/nginx", LIB):
        if not need.exists():
            die(f"{need} is missing: `make all nginx` first")
    started = time.time()
    results = {}		# (mode, path) -> [(rps, nupp cpu, workers' cpu, bpf cpu, ratio)]
    with tempfile.TemporaryDirectory(prefix="bench-nginx.") as tmp, BpfStats():
        servers = {w: Server(Path(tmp) / f"nginx{w}", w) for w in sorted({MODES[m][1] for m in modes})}
        try:
            for rnd in range(a.rounds):
                for path in handlers:
                    for w, srv in servers.items():
                        order = [m for m in modes if MODES[m][1] == w and MODES[m][0] is not None]
                        random.shuffle(order)
                        none = measure(srv, path, None, a, f"{tmp}/out-{rnd}")
                        results.setdefault((NONE[w], path), []).append((*none, 1.0))
                        for m in order:
                            run = measure(srv, path, MODES[m][0], a, f"{tmp}/out-{rnd}")
                            after = measure(srv, path, None, a, f"{tmp}/out-{rnd}")
                            ratio = run[0] / ((none[0] + after[0]) / 2)
                            results.setdefault((m, path), []).append((*run, ratio))
                            none = after
        finally:
            for s in servers.values():
                s.stop()
    took = time.time() - started
    print("nginx with its Lua module on OpenResty's LuaJIT, `wrk -t1 -c8` on loopback for "
          f"{a.seconds} s per measurement; {a.rounds} rounds, each a chain none, mode, none, "
          "mode, ... over every mode in a shuffled order. *requests/s vs none* = the median "
          "over rounds of the mode's requests/s against the mean of the two unprofiled runs "
          "on either side of it, then the interval of order statistics that holds the true "
          "median at >= 90 % confidence whatever the noise's shape; "
          "*nupp-bpf CPU* = its own CPU time over the measurement (not its start), in % of one core "
          "(perf's own in the reference row: the kernel's sampler at the same rate on every CPU, "
          "as `--clock cpu` opens nupp-bpf's cpu-clock events, where `--clock "
          "thread` opens them on the workers' threads: what the timer's interrupts on every "
          "CPU cost); `-F 99` and `record --rotate 60` (99 Hz) sample on the scheduler tick, "
          "the default clock at rates up to CONFIG_HZ, `-F 997` and the default job on "
          "`--clock cpu`; "
          "*BPF CPU* the time its BPF programs ran (in the kernel, on the CPUs they fired on: "
          "kernel.bpf_stats_enabled) over the measurement, in % of one core; "
          "*workers' CPU* the same for the server's workers. nupp-bpf attaches to the master "
          f"with `--children`; wrk starts {a.settle:g} s after it records every worker, and "
          "nupp-bpf stops after wrk. On this machine nupp-bpf's own CPU mostly runs beside the "
          "workers rather than in their place (2 CPUs, the worker and wrk on them): on a server "
          "whose every CPU is busy, add its column to the mode's cost. The run "
          f"took {took:.0f} s.")
    print()
    print("| handler | mode | requests/s | requests/s vs none (90 % interval) | nupp-bpf CPU | BPF CPU | workers' CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    pct = lambda r: f"{100 * (r - 1):+.1f}"
    for path in handlers:
        for m in modes:
            v = results[(m, path)]
            rps = median([x[0] for x in v])
            if MODES[m][0] is None:
                rel = "—"
            else:
                ratios = [x[4] for x in v]
                ci = median_interval(ratios)
                rel = f"{pct(median(ratios))}%" + (f" ({pct(ci[0])}..{pct(ci[1])})" if ci else "")
            ncpu = "—" if MODES[m][0] is None else f"{100 * median([x[1] for x in v]):.2f}%"
            bcpu = "—" if MODES[m][0] is None or MODES[m][0][0] == "perf" else \
                f"{100 * median([x[3] for x in v]):.3f}%"
            print(f"| `{path.split('?')[0]}` | {m} | {rps:,.0f} | {rel} | {ncpu} | {bcpu} | "
                  f"{100 * median([x[2] for x in v]):.0f}% |")

if __name__ == "__main__":
    main()
