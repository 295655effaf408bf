#!/usr/bin/python3
"""bench-sampler.py - what nupp-bpf's sampler costs the program it profiles.

    /usr/bin/python3 scripts/bench-sampler.py [--rounds 5] [--out docs/benchmarks.md]

Runs as root (BPF, perf events, kernel.bpf_stats_enabled). Four parts:

  overhead   every workload of tests/bench under every configuration, in
             interleaved rounds (each round runs each pair once, in shuffled
             order); the target's CPU time (user+sys from wait4) and wall time
             are compared with the same round's unprofiled run
  bpf cost   run_time_ns / run_cnt of the sampler program (bpf_stats) on a
             60-frame Lua stack at --depth 16 and 64, cpu clock and tick
  latency    from starting `nupp-bpf record -p PID` to the first sample in
             its counters map
  footprint  nupp-bpf's own CPU and peak RSS at 997 Hz
  many       the default job on a master and its workers (-p --children):
             when all are recorded, nupp-bpf's own CPU, its exit

and replaces its own section of docs/benchmarks.md (between the marker
comments), leaving the sections of the other benchmark scripts alone.

    bench-sampler.py --bpf-only [--compare NUPP]   the bpf cost part alone
    bench-sampler.py --concurrent NUPP[@DEPTH] ...   builds attached to one
             target at once, at rates a few Hz apart: ratios of time per
             sample that hold still on a noisy machine

    bench-sampler.py --floor HZ   (used by the script itself) holds one
             cpu-clock perf_event per CPU at HZ with no BPF program attached,
             prints "ready", and sleeps until SIGTERM: the cost of the timer
             interrupt alone.
"""
import argparse
import ctypes
import datetime
import json
import mmap
import os
import platform
import random
import re
import signal
import statistics
import struct
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ["interp", "jit_loop", "c_heavy", "gc_heavy"]
WORKLOAD_TITLES = {
    "interp": "interpreter only (jit.off)",
    "jit_loop": "JIT-heavy loop",
    "c_heavy": "C-heavy (table.sort, string ops)",
    "gc_heavy": "GC-heavy",
}
JP_MODE = "Gi1"			# full stacks (flame graph format), 1 ms asked
SYS_BPF, SYS_PERF_EVENT_OPEN, SYS_CLOCK_NANOSLEEP, SYS_POLL = 321, 298, 230, 7
STATS = "/proc/sys/kernel/bpf_stats_enabled"
BEGIN, END = "<!-- bench-sampler: begin -->", "<!-- bench-sampler: end -->"

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def die(msg):
    sys.exit("bench-sampler: error: " + msg)


# --- the floor: cpu-clock perf events with nothing attached ----------------

def floor_main(hz):
    """Open one cpu-clock event per CPU (pid -1, fixed period, as nupp-bpf
    opens them) and hold them: the timer interrupts happen, nothing runs."""
    fds = []
    for cpu in possible_cpus():
        # perf_event_attr, PERF_ATTR_SIZE_VER0: type, size, config,
        # sample_period, sample_type, read_format, flags (all off: enabled),
        # wakeup_events, bp_type, config1.
        attr = struct.pack("=IIQQQQQIIQ", 1, 64, 0, 10**9 // hz, 0, 0, 0, 0, 0, 0)
        buf = ctypes.create_string_buffer(attr, len(attr))
        fd = libc.syscall(SYS_PERF_EVENT_OPEN, buf, -1, cpu, -1, 8)
        if fd < 0:
            die("perf_event_open on CPU %d: %s" % (cpu, os.strerror(ctypes.get_errno())))
        fds.append(fd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    while True:
        signal.pause()


def possible_cpus():
    with open("/sys/devices/system/cpu/possible") as f:
        cpus = []
        for part in f.read().strip().split(","):
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
        return cpus


# --- reading nupp-bpf's BPF objects from outside ----------------------------

def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    ret = libc.syscall(SYS_BPF, cmd, buf, 128)
    if ret < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return ret, buf


def map_fd_by_id(map_id):
    return bpf(14, struct.pack("=I", map_id))[0]		# BPF_MAP_GET_FD_BY_ID


def prog_fd_by_id(prog_id):
    return bpf(13, struct.pack("=I", prog_id))[0]		# BPF_PROG_GET_FD_BY_ID


def map_info(fd):
    """(name, value_size, max_entries) of a BPF map."""
    info = ctypes.create_string_buffer(80)
    bpf(15, struct.pack("=IIQ", fd, 80, ctypes.addressof(info)))  # BPF_OBJ_GET_INFO_BY_FD
    _, _, _, value_size, max_entries = struct.unpack_from("=5I", info.raw)
    return info.raw[24:40].split(b"\0")[0].decode(), value_size, max_entries


def map_name(fd):
    return map_info(fd)[0]


def percpu_u64(fd, key, ncpu):
    """Sum over CPUs of a u64 per-CPU array slot."""
    k = ctypes.create_string_buffer(struct.pack("=I", key), 4)
    v = ctypes.create_string_buffer(8 * ncpu)
    bpf(1, struct.pack("=IIQQQ", fd, 0, ctypes.addressof(k), ctypes.addressof(v), 0))
    return sum(struct.unpack("=%dQ" % ncpu, v.raw))


def held_bpf_ids(pid):
    """Map ids and program ids behind the open fds of a process."""
    maps, progs = set(), set()
    try:
        names = os.listdir("/proc/%d/fdinfo" % pid)
    except OSError:
        return maps, progs
    for n in names:
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, n)) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^map_id:\s*(\d+)", text, re.M)
        if m:
            maps.add(int(m.group(1)))
        m = re.search(r"^prog_id:\s*(\d+)", text, re.M)
        if m:
            progs.add(int(m.group(1)))
    return maps, progs


class Counters:
    """The samples nupp-bpf's sampler counted on its targets: each is counted
    once, in its stack's slot of the `counts` table (read in place through
    mmap, as nupp-bpf reads it) or in the `counters` map (paused,
    unresolved)."""

    SLOT_STATES = (4, 9)	# struct nupp_stack_slot: u64 words of state[]

    def __init__(self, pid):
        self.pid, self.tried = pid, set()
        self.counters = self.table = None
        self.ncpu = len(possible_cpus())

    def _find(self):
        for map_id in held_bpf_ids(self.pid)[0] - self.tried:
            self.tried.add(map_id)
            try:
                fd = map_fd_by_id(map_id)
            except OSError:
                continue
            name, value_size, entries = map_info(fd)
            if name == "counters" and self.counters is None:
                self.counters = (fd, entries)
                continue
            if name == "counts" and self.table is None:
                size = -(-value_size * entries // mmap.PAGESIZE) * mmap.PAGESIZE
                self.table = (mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ),
                              value_size // 8, entries)
            os.close(fd)

    def _found(self):
        if self.counters is None or self.table is None:
            self._find()
        return self.counters is not None and self.table is not None

    def _column(self, k):
        """Word k of every slot of the table, as bytes (copied at C speed)."""
        mm, words, slots = self.table
        return memoryview(mm).cast("Q")[k:words * slots:words].tobytes()

    def samples(self):
        """Samples counted so far, or None while the maps are not found."""
        if not self._found():
            return None
        fd, entries = self.counters
        n = sum(percpu_u64(fd, i, self.ncpu) for i in range(entries))
        lo, hi = self.SLOT_STATES
        return n + sum(sum(memoryview(self._column(k)).cast("Q")) for k in range(lo, hi))

    def any(self):
        """Whether a stack has been counted yet (cheap enough to poll), or
        None while the maps are not found."""
        if not self._found():
            return None
        return self._column(self.SLOT_STATES[0] - 1).strip(b"\0") != b""	# key.stack words

    def close(self):
        if self.counters is not None:
            os.close(self.counters[0])
        if self.table is not None:
            self.table[0].close()


def prog_stats(prog_ids):
    """(name, run_time_ns, run_cnt) of each sampler program."""
    out = []
    for pid in sorted(prog_ids):
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(pid)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            j = json.loads(r.stdout)
            if j.get("name") in ("on_cpu_clock", "on_tick"):
                out.append((j["name"], j.get("run_time_ns", 0), j.get("run_cnt", 0)))
    return out


# --- running one target under one configuration -----------------------------

def driver_cmd(a, workload, hold=True, extra=()):
    cmd = [a.luajit, os.path.join(ROOT, "tests/bench/driver.lua"), workload]
    return cmd + (["--hold"] if hold else []) + list(extra)


def nupp_cmd(a, pid, args):
    return [a.nupp, "record", "-p", str(pid), "-o", "/dev/null"] + list(args)


def schedstat_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def threads_cpu_ns(pid, seen):
    """Each live thread's CPU time (its schedstat) into seen, {tid: ns}:
    a thread that has exited keeps the last value read."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                seen[tid] = int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass


def wait_polling(pid, proc, what, timeout=15.0):
    """Wait until nupp-bpf sleeps in its poll loop (clock_nanosleep between
    ticks, or poll on its ring of new stacks while it only samples): it has
    loaded, attached and registered the target. Returns the CPU time it
    has spent by then, in s, threads that have exited included: the
    sampler's BPF object loads on a thread of its own, gone by then, whose
    time /proc/PID/schedstat (the main thread's) leaves out. Read every
    millisecond, a thread's time misses at most its last one."""
    t_end = time.monotonic() + timeout
    seen = {}
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            die("%s exited early: %s" % (what, proc.stderr.read().strip()))
        threads_cpu_ns(pid, seen)
        try:
            with open("/proc/%d/syscall" % pid) as f:
                if f.read().split()[0] in (str(SYS_CLOCK_NANOSLEEP), str(SYS_POLL)):
                    threads_cpu_ns(pid, seen)
                    return sum(seen.values()) / 1e9
        except (OSError, IndexError):
            pass
        time.sleep(0.001)
    die("%s did not attach within %.0f s" % (what, timeout))


def steal_ticks():
    """Time the hypervisor ran something else on our CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def busy_s():
    """CPU time spent by every task on the machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def vm_hwm_kib(pid):
    """VmHWM of a live process, None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            m = re.search(r"^VmHWM:\s*(\d+) kB", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def rusage_cpu(ru):
    return ru.ru_utime + ru.ru_stime


def parse_summary(text):
    """Samples taken on the target: the kernel's count when the summary has an
    'unresolved: U of T samples' line, else the resolved total."""
    m = re.search(r"unresolved: \d+ of (\d+) samples", text)
    if m:
        return int(m.group(1))
    m = re.search(r"nupp-bpf: [\d.]+ s, (\d+) samples", text)
    if not m:
        die("no summary from nupp-bpf: %s" % text.strip())
    return int(m.group(1))


CONFIGS = {
    # name: (profiler kind, arguments)
    "none": (None, ()),
    "floor 997": ("floor", (997,)),
    "nupp 99": ("nupp", ("-F", "99")),
    "nupp 997": ("nupp", ("-F", "997")),
    "nupp tick": ("nupp", ("--clock", "tick")),
    "jit.p": ("jp", (JP_MODE,)),
}


def command_text(a, config):
    kind, args = CONFIGS[config]
    target = "luajit tests/bench/driver.lua WORKLOAD --hold"
    if kind is None:
        return "`%s`" % target
    if kind == "floor":
        return "`%s` + `python3 scripts/bench-sampler.py --floor %d`" % (target, args[0])
    if kind == "nupp":
        return "`%s` + `nupp-bpf record -p PID -o /dev/null %s`" % (target, " ".join(args))
    return ("`luajit tests/bench/driver.lua WORKLOAD --hold --jp=%s` (jit.p as "
            "`luajit -jp=%s,/dev/null`)" % (args[0], args[0]))


def run_one(a, workload, config):
    """One held target, released once its profiler is in place."""
    kind, args = CONFIGS[config]
    extra = ["--jp=" + args[0]] if kind == "jp" else []
    tgt = subprocess.Popen(driver_cmd(a, workload, extra=extra), stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    prof, ready_cpu = None, 0
    if kind == "floor":
        prof = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--floor",
                                 str(args[0])], stdout=subprocess.PIPE, text=True)
        if prof.stdout.readline().strip() != "ready":
            die("the perf_event floor helper failed")
    elif kind == "nupp":
        prof = subprocess.Popen(nupp_cmd(a, tgt.pid, args), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        ready_cpu = wait_polling(prof.pid, prof, "nupp-bpf")
        # Holding the program keeps its run time readable after nupp-bpf exits.
        progs = held_bpf_ids(prof.pid)[1]
        prog_fds = [prog_fd_by_id(i) for i in progs]
        stats0 = prog_stats(progs)
    steal0, busy0 = steal_ticks(), busy_s()
    t0 = time.monotonic()
    tgt.stdin.write("\n")
    tgt.stdin.close()
    err = tgt.stderr.read()
    _, status, ru = os.wait4(tgt.pid, 0)
    wall = time.monotonic() - t0
    # nupp-bpf's peak RSS: its own memory's high-water mark, read while it
    # finishes (it polls for its target's exit every 100 ms). ru_maxrss from
    # wait4 would not do: a child's starts at this script's own RSS when it
    # was spawned (exec keeps the larger high-water mark).
    nupp_hwm = vm_hwm_kib(prof.pid) if kind == "nupp" else None
    tgt.returncode = os.waitstatus_to_exitcode(status)
    if tgt.returncode:
        die("%s failed under %s: %s" % (workload, config, err.strip()))
    r = {"cpu": rusage_cpu(ru), "wall": wall, "samples": None,
         "steal_s": (steal_ticks() - steal0) / os.sysconf("SC_CLK_TCK"),
         "busy_s": busy_s() - busy0}
    if kind == "jp":
        r["samples"] = int(re.search(r"jp_samples (\d+)", err).group(1))
    elif kind == "floor":
        prof.terminate()
        prof.wait()
    elif kind == "nupp":
        text = prof.stderr.read()
        _, status, pru = os.wait4(prof.pid, 0)
        t_exit = time.monotonic()
        prof.returncode = os.waitstatus_to_exitcode(status)
        if prof.returncode:
            die("nupp-bpf failed on %s: %s" % (workload, text.strip()))
        r["samples"] = parse_summary(text)
        r["nupp_cpu"] = rusage_cpu(pru)
        r["nupp_run_cpu"] = rusage_cpu(pru) - ready_cpu
        r["nupp_run_wall"] = t_exit - t0
        r["nupp_rss_kib"] = nupp_hwm
        r["busy_s"] -= r["nupp_run_cpu"]
        stats1 = prog_stats(progs)
        for fd in prog_fds:
            os.close(fd)
        if stats0 and stats1:
            r["bpf_ns"] = stats1[0][1] - stats0[0][1]
            r["bpf_runs"] = stats1[0][2] - stats0[0][2]
    return r


def overhead_and_bpf_cost(a):
    """Interleaved rounds: each runs every workload × configuration once and
    every BPF cost configuration (below) once, all in one shuffled order, so
    that a slow phase of the machine spreads over every figure rather than
    falling on one part. Overhead numbers are relative to their own round's
    baseline."""
    runs = {(w, c): [] for w in WORKLOADS for c in CONFIGS}
    bcost = {c: [] for c in BPF_CONFIGS}
    nrounds = max(a.rounds, a.bpf_rounds)
    for rnd in range(nrounds):
        tasks = [("overhead", k) for k in runs] if rnd < a.rounds else []
        tasks += [("bpf", c) for c in BPF_CONFIGS] if rnd < a.bpf_rounds else []
        random.shuffle(tasks)
        for kind, k in tasks:
            if kind == "overhead":
                runs[k].append(run_one(a, *k))
            else:
                bcost[k].append(bpf_cost_one(a, BPF_CONFIGS[k]))
        log("round %d of %d done" % (rnd + 1, nrounds))
    return runs, bcost


# --- BPF run time per sample on a deep stack ---------------------------------

# The program at 250 and 4001 Hz too: what a sample costs depends on how much
# of what it touches the machine evicted since the last one.
BPF_CONFIGS = {
    "cpu 997 Hz, --depth 1": ("-F", "997", "--depth", "1"),
    "cpu 997 Hz, --depth 16": ("-F", "997", "--depth", "16"),
    "cpu 997 Hz, --depth 64": ("-F", "997", "--depth", "64"),
    "cpu 250 Hz, --depth 16": ("-F", "250", "--depth", "16"),
    "cpu 4001 Hz, --depth 16": ("-F", "4001", "--depth", "16"),
    "tick, --depth 16": ("--clock", "tick", "--depth", "16"),
}


def bpf_cost_one(a, args):
    tgt = subprocess.Popen(driver_cmd(a, "deep", extra=["--scale=1.2"]), stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    prof = subprocess.Popen(nupp_cmd(a, tgt.pid, args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    wait_polling(prof.pid, prof, "nupp-bpf")
    progs = held_bpf_ids(prof.pid)[1]
    counters = Counters(prof.pid)
    # While the target waits, every run finds another task: their cost.
    s0 = prog_stats(progs)
    time.sleep(0.4)
    s1 = prog_stats(progs)
    idle_runs = s1[0][2] - s0[0][2] if s0 and s1 else 0
    other_ns = (s1[0][1] - s0[0][1]) / idle_runs if idle_runs else 0
    tgt.stdin.write("\n")
    tgt.stdin.close()
    time.sleep(0.5)			# past the first frames, down at 60 deep
    s1, c1 = prog_stats(progs), counters.samples()
    time.sleep(a.bpf_window)
    s2, c2 = prog_stats(progs), counters.samples()
    counters.close()
    tgt.kill()
    tgt.wait()
    text = prof.stderr.read()
    prof.wait()
    if not s1 or not s2 or c1 is None or c2 is None:
        die("could not read the sampler's run time or counters: %s" % text.strip())
    run_ns = s2[0][1] - s1[0][1]
    runs = s2[0][2] - s1[0][2]
    samples = max(c2 - c1, 1)
    est = (run_ns - other_ns * (runs - samples)) / samples
    # The runs that find another task cost less while the target spins (the
    # program runs more often, on warmer caches) than while it waits: the
    # correction can exceed the run time. No estimate then.
    if est <= 0:
        est = None
    m = re.search(r"(\d+) samples had deeper stacks", text)
    # Run time per timer interval of the target's busy CPU: what a build cut
    # short for an experiment (it counts no samples) can be compared on.
    hz = dict(zip(args, args[1:])).get("-F")
    return {"per_sample_ns": run_ns / samples, "est_ns": est, "other_ns": other_ns,
            "per_tick_ns": run_ns / (int(hz) * a.bpf_window) if hz else None,
            "runs": runs, "samples": samples, "truncated": bool(m)}


def bpf_only(a):
    """The BPF cost alone, for a.nupp and, interleaved round by round, each
    build of a.compare; with a.per_tick, run time per timer interval."""
    builds = [a.nupp] + (a.compare or [])
    configs = {c: v for c, v in BPF_CONFIGS.items() if a.configs in c}
    what = "per_tick_ns" if a.per_tick else "est_ns"
    res = {(b, c): [] for b in builds for c in configs}
    for rnd in range(a.bpf_rounds):
        for c in configs:
            for b in random.sample(builds, len(builds)):
                a_b = argparse.Namespace(**{**vars(a), "nupp": b})
                res[b, c].append(bpf_cost_one(a_b, configs[c])[what])
    for c in configs:
        meds = [med(res[b, c]) for b in builds]
        line = "  ".join("%s: %s" % (b, fmt(m, "6.0f", " ns")) for b, m in zip(builds, meds))
        if a.compare and None not in meds:
            line += "  ratios to the first %s" % " ".join("%.2f" % (m / meds[0]) for m in meds[1:])
        log("%-28s %s  (%s, median of %d)" % (c, line, "per timer interval" if a.per_tick
                                              else "estimate", a.bpf_rounds))


def bpf_concurrent(a):
    """Builds side by side on one target at once, each at a slightly different
    rate so that their timers drift through every phase of each other (a
    program that runs just after another finds its caches warmer). What varies
    from minute to minute on a shared machine then varies for all builds
    alike: the ratio of one round is steadier than the times of separate runs,
    though the absolute times are lower than with one profiler (see bpf cost)."""
    builds = a.concurrent
    rates = [997 - 6 * i for i in range(len(builds))]
    res = [[] for _ in builds]	# by position: a build may be listed twice (A/A)
    for rnd in range(a.bpf_rounds):
        tgt = subprocess.Popen(driver_cmd(a, "deep", extra=["--scale=%g" % (a.bpf_window + 1.5)]),
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, text=True)
        order = random.sample(range(len(builds)), len(builds))
        profs = []
        for i, b in enumerate(builds):
            nupp, _, depth = b.partition("@")
            cmd = [nupp, "record", "-p", str(tgt.pid), "-o", "/dev/null",
                   "-F", str(rates[order[i]]), "--depth", depth or "16"]
            prof = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            wait_polling(prof.pid, prof, "nupp-bpf")
            profs.append(prof)
        progs = [held_bpf_ids(p.pid)[1] for p in profs]
        counters = [Counters(p.pid) for p in profs]
        # Let the last one settle: started just before the target, one build
        # measured up to three times its cost in the first round.
        time.sleep(1.0)
        tgt.stdin.write("\n")
        tgt.stdin.close()
        time.sleep(0.5)
        s1 = [prog_stats(p) for p in progs]
        c1 = [c.samples() for c in counters]
        time.sleep(a.bpf_window)
        s2 = [prog_stats(p) for p in progs]
        c2 = [c.samples() for c in counters]
        for c in counters:
            c.close()
        tgt.kill()
        tgt.wait()
        for p in profs:
            p.wait()
        for i, b in enumerate(builds):
            if not s1[i] or not s2[i] or c1[i] is None or c2[i] is None:
                die("could not read the run time or counters of %s" % b)
            res[i].append((s2[i][0][1] - s1[i][0][1]) / max(c2[i] - c1[i], 1))
        log("round %d: %s" % (rnd + 1, "  ".join("%.0f" % r[-1] for r in res)))
    for b, r in zip(builds, res):
        ratios = [x / y for x, y in zip(r, res[0])]
        log("%-40s %6.0f ns per sample (median of %d); ratio to the first, median of rounds: %.2f"
            % (b, med(r), a.bpf_rounds, med(ratios)))


# --- attach latency ------------------------------------------------------------

CACHE_DIR = os.path.join(ROOT, "build/bench/build-cache")


def empty_cache():
    shutil.rmtree(CACHE_DIR, ignore_errors=True)
    os.makedirs(CACHE_DIR, mode=0o755)


def latency_one(a):
    tgt = subprocess.Popen(driver_cmd(a, "deep", hold=False), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(0.3)			# LuaJIT loaded and spinning
    t0 = time.monotonic()
    prof = subprocess.Popen(nupp_cmd(a, tgt.pid, ("-F", "997", "-d", "1")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NUPP_CACHE_DIR": CACHE_DIR})
    counters, first = Counters(prof.pid), None
    while first is None and prof.poll() is None:
        try:
            n = counters.any()
        except OSError:
            n = None
        if n:
            first = time.monotonic() - t0
        else:
            time.sleep(0.002)
    counters.close()
    text = prof.stderr.read()
    _, status, ru = os.wait4(prof.pid, 0)
    prof.returncode = os.waitstatus_to_exitcode(status)
    total = time.monotonic() - t0
    tgt.kill()
    tgt.wait()
    if prof.returncode:
        die("nupp-bpf failed: %s" % text.strip())
    return {"first": first, "d1_minus_1": total - 1.0,
            "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1e3}


LATENCY_KINDS = (("known", "the known build (`%s`)"),
                 ("unseen_first", "unseen stripped build, first attach (empty build cache)"),
                 ("unseen_cached", "unseen stripped build, cached"))


def latency(a):
    """The known build and a build no registry holds (a stripped rebuild,
    described from its code: lj_derive), the latter with an empty build cache
    and then with the entry the first attach wrote, round after round."""
    unseen = os.path.join(ROOT, "build/bench/luajit-unseen")
    os.makedirs(os.path.dirname(unseen), exist_ok=True)
    subprocess.run(["strip", "--strip-all", "-o", unseen, a.unseen], check=True)
    b = argparse.Namespace(**vars(a))
    b.luajit = unseen
    res = []
    for _ in range(a.latency_reps):
        for nupp in [a.nupp] + (a.compare or []):
            ka = argparse.Namespace(**{**vars(a), "nupp": nupp})
            kb = argparse.Namespace(**{**vars(b), "nupp": nupp})
            empty_cache()
            res.append({"kind": "unseen_first", "nupp": nupp, **latency_one(kb)})
            res.append({"kind": "unseen_cached", "nupp": nupp, **latency_one(kb)})
            res.append({"kind": "known", "nupp": nupp, **latency_one(ka)})
    derive = []
    for path in (unseen, a.luajit):
        for _ in range(3):
            empty_cache()
            derive.append({"cache": "empty", **derive_cost(a, path)})
            derive.append({"cache": "warm", **derive_cost(a, path)})
    res.append({"derive": derive, "unseen": a.unseen})
    log("latency: done")
    return res


def derive_cost(a, path):
    """`nupp-bpf inspect PATH`: identification alone, its CPU and peak RSS."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execve(a.nupp, [a.nupp, "inspect", path], {**os.environ, "NUPP_CACHE_DIR": CACHE_DIR})
    _, status, ru = os.wait4(pid, 0)
    if status:
        die("nupp-bpf inspect %s failed" % path)
    return {"path": path, "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1e3, "maxrss_kb": ru.ru_maxrss}


# --- many targets ---------------------------------------------------------------

MANY_WORKERS = (1, 16, 128)
MANY_SECONDS = 6


def live_nupp():
    """Whether a nupp-bpf process lives (not a zombie): the child of an
    earlier run removing its probes delays every uprobe attached meanwhile."""
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                text = f.read()
        except (OSError, ValueError):
            continue
        if text[text.index("(") + 1:text.rindex(")")] == "nupp-bpf" and \
           text[text.rindex(")") + 2] not in "ZX":
            return True
    return False


def many_one(a, n):
    """`nupp-bpf -p MASTER --children -d MANY_SECONDS` on tests/bench/workers.lua
    with n workers: seconds until all n + 1 are recorded, nupp-bpf's CPU share
    from 3 s to 5.5 s, seconds from its last line to its exit."""
    deadline = time.monotonic() + 60
    while live_nupp() and time.monotonic() < deadline:
        time.sleep(0.05)
    tgt = subprocess.Popen([a.luajit, os.path.join(ROOT, "tests/bench/workers.lua"), str(n),
                            str(MANY_SECONDS + 20)], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    tgt.stdout.readline()		# forked
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        prof = subprocess.Popen([a.nupp, "-p", str(tgt.pid), "--children", "-d", str(MANY_SECONDS),
                                 "-o", os.path.join(tmp, "x")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: lines.extend(
            (time.monotonic() - t0, line) for line in prof.stderr))
        reader.start()
        time.sleep(max(0.0, t0 + 3 - time.monotonic()))
        c0 = schedstat_ns(prof.pid)
        time.sleep(max(0.0, t0 + 5.5 - time.monotonic()))
        cpu = (schedstat_ns(prof.pid) - c0) / 1e9 / 2.5
        prof.wait()
        end = time.monotonic() - t0
        reader.join()
    os.killpg(tgt.pid, signal.SIGKILL)
    tgt.wait()
    rec = [t for t, line in lines if line.startswith("nupp-bpf: recording PID")]
    if prof.returncode or len(rec) != n + 1:
        die("nupp-bpf on %d workers: exit %d, %d recorded:\n%s"
            % (n, prof.returncode, len(rec), "".join(l for _, l in lines)))
    return {"n": n, "all_recorded": max(rec), "cpu_share": cpu, "exit_after_output": end - lines[-1][0]}


def many_targets(a):
    res = [many_one(a, n) for _ in range(a.many_reps) for n in MANY_WORKERS]
    log("many targets: done")
    return res


def many_compare(a):
    """--many-only: the many-targets runs of --nupp and the --compare builds,
    interleaved; medians per build and worker count, ratios to --nupp's."""
    builds = [a.nupp] + (a.compare or [])
    counts = [int(x) for x in a.many_workers.split(",")] if a.many_workers else MANY_WORKERS
    res = {}
    for _ in range(a.many_reps):
        for n in counts:
            for b in builds:
                res.setdefault((b, n), []).append(many_one(argparse.Namespace(**{**vars(a), "nupp": b}), n))
    for n in counts:
        base = None
        for b in builds:
            rs = res[(b, n)]
            row = [med([r[k] for r in rs]) for k in ("all_recorded", "cpu_share", "exit_after_output")]
            base = base or row
            print("%3d workers  %-40s all recorded %6.0f ms  own CPU %5.2f%% (%.2f)  exit after "
                  "its last line %6.0f ms" % (n, b, row[0] * 1e3, row[1] * 100, row[1] / base[1],
                                              row[2] * 1e3))


# --- the report ------------------------------------------------------------

def log(msg):
    print("bench-sampler: " + msg, file=sys.stderr, flush=True)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, unit=""):
    return "—" if x is None else format(x, spec) + unit


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    lj = subprocess.run([args_luajit, "-v"], capture_output=True, text=True).stdout.strip()
    return {"kernel": "%s %s" % (platform.release(), platform.version()), "cpu": cpu,
            "ncpu": os.cpu_count(), "luajit": lj}


def other_task_ns(bcost, config):
    """Run time of a program run that finds another task, per clock."""
    key = "tick, --depth 16" if "tick" in config else "cpu 997 Hz, --depth 16"
    return med([r["other_ns"] for r in bcost[key]])


def overhead_rows(runs, bcost):
    """Per workload and configuration: medians of per-round deltas."""
    rows = []
    for w in WORKLOADS:
        base = runs[(w, "none")]
        for c in CONFIGS:
            rs = runs[(w, c)]
            added = [r["cpu"] - b["cpu"] for r, b in zip(rs, base)]
            if c == "floor 997":	# the target gets the interrupts of its CPU time
                samples = [r["cpu"] * 997 for r in rs]
            else:
                samples = [r["samples"] for r in rs]
            row = {"w": w, "c": c, "cpu": med([r["cpu"] for r in rs]),
                   "pct": [100 * d / b["cpu"] for d, b in zip(added, base)],
                   "minpct": 100 * (min(r["cpu"] for r in rs) / min(b["cpu"] for b in base) - 1),
                   "wall": med([100 * (r["wall"] / b["wall"] - 1) for r, b in zip(rs, base)]),
                   "samples": med(samples),
                   "us": med([1e6 * d / s if s else None for d, s in zip(added, samples)]),
                   "bpf_us": None, "bpf_pct": None}
            if all("bpf_ns" in r for r in rs):
                other = other_task_ns(bcost, c) or 0
                est = [(r["bpf_ns"] - other * max(r["bpf_runs"] - r["samples"], 0)) for r in rs]
                row["bpf_us"] = med([e / 1e3 / max(r["samples"], 1) for e, r in zip(est, rs)])
                row["bpf_pct"] = med([100 * e / 1e9 / r["cpu"] for e, r in zip(est, rs)])
            rows.append(row)
    return rows


def latency_table(a, lat):
    """The "Attach to first sample" part of the report, as lines."""
    runs = [r for r in lat if "kind" in r]
    derive = next((r for r in lat if "derive" in r), None)
    L = ["", "### Attach to first sample", "",
         "Target `luajit tests/bench/driver.lua deep` already spinning; clock starts just before "
         "spawning `nupp-bpf record -p PID -F 997 -d 1 -o /dev/null`. *first sample*: until "
         "nupp-bpf's `counts` table (read through mmap, polled every 2 ms) holds a stack; covers "
         "exec, build identification, BPF load, attach and the first timer tick. *-d 1 wall − 1 s*: "
         "the whole command minus its 1 s of recording (start-up + up to one 100 ms poll + "
         "collection, output, teardown). *CPU*: nupp-bpf's user + system time over the whole "
         "command. The three kinds run in turn, %d rounds; an unseen build's first attach starts "
         "from an empty build cache, its second reads the entry the first wrote." % a.latency_reps,
         "", "| build | first sample, median | min | max | -d 1 wall − 1 s | CPU |",
         "|---|---:|---:|---:|---:|---:|"]
    nupps = list(dict.fromkeys(r.get("nupp", a.nupp) for r in runs))
    for nupp in nupps:
        for kind, title in LATENCY_KINDS:
            rs = [r for r in runs if r["kind"] == kind and r.get("nupp", a.nupp) == nupp]
            firsts = [r["first"] for r in rs if r.get("first") is not None]
            if not firsts:
                continue
            title = title % a.luajit if "%s" in title else title
            if len(nupps) > 1:
                title += ", `%s`" % os.path.relpath(nupp, ROOT) if nupp.startswith(ROOT) else \
                    ", `%s`" % nupp
            L.append("| %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms |" % (
                title, med(firsts) * 1e3, min(firsts) * 1e3, max(firsts) * 1e3,
                med([r["d1_minus_1"] for r in rs]) * 1e3, med([r["cpu_ms"] for r in rs])))
    if derive:
        L += ["", "The unseen build: `%s`, stripped. Identification alone (`nupp-bpf inspect "
              "FILE`: version, layout, code sites, each site decoded; 3 runs each, CPU time and "
              "peak RSS of the whole process), with an empty build cache and with a warm one:"
              % os.path.relpath(derive["unseen"], ROOT), "",
              "| file | cache | CPU | peak RSS |", "|---|---|---:|---:|"]
        for path in dict.fromkeys(d["path"] for d in derive["derive"]):
            for cache in ("empty", "warm"):
                ds = [d for d in derive["derive"] if d["path"] == path and d["cache"] == cache]
                L.append("| `%s` | %s | %.1f ms | %.1f MiB |" % (
                    os.path.relpath(path, ROOT) if path.startswith(ROOT) else path, cache,
                    med([d["cpu_ms"] for d in ds]), med([d["maxrss_kb"] for d in ds]) / 1024))
    return L


def write_report(a, info, runs, bcost, lat, many, started):
    L = [BEGIN, "## Sampler overhead (`scripts/bench-sampler.py`)", ""]
    L.append("Produced by `make bench` → `/usr/bin/python3 scripts/bench-sampler.py --rounds %d` "
             "on %s (took %.0f s; every run's numbers in `%s`)."
             % (a.rounds, started, info["elapsed"], os.path.relpath(a.raw, ROOT)))
    L += ["", "| machine | |", "|---|---|",
          "| kernel | %s |" % info["kernel"], "| CPU | %s × %d |" % (info["cpu"], info["ncpu"]),
          "| LuaJIT | %s (`%s`) |" % (info["luajit"], a.luajit),
          "| load average before / after | %s / %s |" % info["load"],
          "| steal time during the benchmark (`/proc/stat`) | %.1f s |" % info["steal"],
          "| other tasks during a run: CPUs busy besides the target and nupp-bpf (median; "
          "`/proc/stat`, 10 ms ticks) | %.2f |" % info["others"], ""]
    L += ["Workloads (`tests/bench/*.lua`, a fixed amount of work each): " +
          ", ".join("`%s` %s" % (w, WORKLOAD_TITLES[w]) for w in WORKLOADS) + ". "
          "`kernel.bpf_stats_enabled=1` during the whole benchmark (two clock reads per "
          "program run), restored at the end.", ""]
    L += ["### Added CPU time of the target", "",
          "%d rounds; each round runs every workload × configuration once, and each BPF run time "
          "configuration (next section) once, all in one shuffled order. "
          "The target waits on stdin until its profiler is attached, then does its work; its CPU "
          "time is user+sys from `wait4`. *added* = CPU time minus the same round's unprofiled run, "
          "median over rounds (min..max); *added, min* = the configuration's fastest run against "
          "the fastest unprofiled run; *wall* = median of per-round wall ratios. *samples* = "
          "samples taken on the target: nupp-bpf's summary, jit.p's callback count, or CPU "
          "time × 997 for the floor (an estimate). *µs/sample* = added CPU time / samples. "
          "*BPF µs/sample* and *BPF share* = the sampler program's run time (bpf_stats, read "
          "through a held program fd) spent on the target's samples — runs that found another "
          "task are taken out at the cost measured in the next section — per sample and as a "
          "share of the target's CPU time: the part of the added time that is nupp-bpf's own "
          "program, free of run-to-run noise." % a.rounds, "",
          "| config | command |", "|---|---|"]
    for c in CONFIGS:
        L.append("| %s | %s |" % (c, command_text(a, c)))
    L += ["", "| workload | config | CPU s | added | added, min | wall | samples | µs/sample "
          "| BPF µs/sample | BPF share |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in overhead_rows(runs, bcost):
        if r["c"] == "none":
            L.append("| %s | none | %.3f | — | — | — | — | — | — | — |" % (r["w"], r["cpu"]))
            continue
        L.append("| %s | %s | %.3f | %+.2f%% (%+.1f..%+.1f) | %+.2f%% | %+.2f%% | %.0f | %s | %s "
                 "| %s |" % (r["w"], r["c"], r["cpu"], med(r["pct"]), min(r["pct"]),
                             max(r["pct"]), r["minpct"], r["wall"], r["samples"],
                             fmt(r["us"], ".1f"), fmt(r["bpf_us"], ".2f"),
                             fmt(r["bpf_pct"], ".3f", "%")))

    L += ["", "### BPF run time per sample (60-frame Lua stack)", "",
          "Target: `luajit tests/bench/driver.lua deep --hold --scale=1.2` (60 distinct functions called one from the next, each from its own chunk, "
          "spinning in a compiled loop at the bottom); profiler: `nupp-bpf record -p PID -o "
          "/dev/null ARGS`. Over a %.1f s window: Δrun_time_ns and Δrun_cnt of the program "
          "(`bpftool -j prog show id ID`), Δ samples counted for the target (the state counts of "
          "its `counts` table, read through mmap, plus its `counters` map). *upper bound* charges all run time to the target's samples (also the "
          "runs that found another task and returned at once). *other task* = run time per run "
          "measured for 0.4 s before the target is released, when every run finds another task "
          "(0 when there is none: an idle CPU does not run the program); "
          "*estimate* = (Δrun_time_ns − other task × (Δrun_cnt − Δsamples)) / Δsamples, "
          "left out when not above 0 (the runs that find another task cost less while the target "
          "spins than while it waits; *(k of n)*: runs that gave one). "
          "run_time_ns covers every run of the program, also those that found another task and "
          "returned at once. Median of %d runs, one in each round of the overhead runs above, "
          "at a shuffled place among them." % (a.bpf_window, a.bpf_rounds), "",
          "| ARGS | per sample, upper bound (ns) | per sample, estimate (ns) | other task (ns) "
          "| runs / target samples | stack cut at --depth |", "|---|---:|---:|---:|---:|---|"]
    for c, args in BPF_CONFIGS.items():
        rs = bcost[c]
        ests = [r["est_ns"] for r in rs if r["est_ns"] is not None]
        L.append("| `%s` | %.0f | %s%s | %s | %.0f / %.0f | %s |" % (
            " ".join(args), med([r["per_sample_ns"] for r in rs]), fmt(med(ests), ".0f"),
            "" if len(ests) == len(rs) else " (%d of %d)" % (len(ests), len(rs)),
            fmt(med([r["other_ns"] for r in rs]), ".0f"),
            med([r["runs"] for r in rs]), med([r["samples"] for r in rs]),
            "yes" if rs[0]["truncated"] else "no"))

    L += latency_table(a, lat)
    L += ["", "### nupp-bpf's own CPU and memory at 997 Hz", "",
          "From the `nupp 997` runs above (`nupp-bpf record -p PID -o /dev/null -F 997`), `wait4` "
          "on nupp-bpf. *total*: all its CPU time, start-up included. *while recording*: CPU time "
          "after it reached its poll loop (every thread's `schedstat` then, the exited loader's included) until exit, divided by the "
          "wall time from releasing the target to nupp-bpf's exit. Peak RSS = nupp-bpf's `VmHWM` "
          "(`/proc/PID/status`) when its target has exited and it is finishing; `ru_maxrss` from "
          "`wait4` would report at least this script's own RSS, which a child's peak starts from.", "",
          "| workload | total CPU s | while recording, % of one core | peak RSS MiB |",
          "|---|---:|---:|---:|"]
    for w in WORKLOADS:
        rs = runs[(w, "nupp 997")]
        L.append("| %s | %.3f | %.2f%% | %.1f |" % (
            w, med([r["nupp_cpu"] for r in rs]),
            med([100 * r["nupp_run_cpu"] / r["nupp_run_wall"] for r in rs]),
            max(r["nupp_rss_kib"] or 0 for r in rs) / 1024))

    L += ["", "### Many targets: a master and its workers", "",
          "`tests/bench/workers.lua N %d` (N workers forked by a master, each doing ~1 ms of Lua "
          "work every 100 ms, as a server at light load), then the default job "
          "`nupp-bpf -p MASTER --children -d %d -o DIR/x` (both channels: two uprobes per "
          "process). *all recorded*: from starting nupp-bpf to its last \"recording PID\" line "
          "(start-up, attach to the master and its workers). *own CPU*: nupp-bpf's CPU time "
          "(`/proc/PID/schedstat`) from 3 s to 5.5 s, as a share of one core. *exit after its "
          "last line*: from its last line on stderr (the files written) to its exit; a child "
          "of it removes the uprobes after that. Medians of %d runs, the worker counts "
          "interleaved; each run starts once no nupp-bpf process of the run before lives."
          % (MANY_SECONDS + 20, MANY_SECONDS, a.many_reps), "",
          "| workers | all recorded | own CPU, % of one core | exit after its last line |",
          "|---:|---:|---:|---:|"]
    for n in MANY_WORKERS:
        rs = [r for r in many if r["n"] == n]
        L.append("| %d | %.0f ms | %.2f%% | %.0f ms |" % (
            n, med([r["all_recorded"] for r in rs]) * 1e3,
            med([100 * r["cpu_share"] for r in rs]),
            med([r["exit_after_output"] for r in rs]) * 1e3))

    L += ["", "### Against the targets", "", "| target | measured | met |", "|---|---|---|"]
    for t in targets(runs, bcost, lat):
        L.append("| %s | %s | %s |" % t)
    L += ["", END]
    section = "\n".join(L) + "\n"

    text = ""
    if os.path.exists(a.out):
        with open(a.out) as f:
            text = f.read()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        if not text:
            text = ("# Benchmarks\n\nWritten by `make bench`; each section by the script named "
                    "in its title.\n\n")
        text = text.rstrip("\n") + "\n\n" + section
    with open(a.out, "w") as f:
        f.write(text)


def targets(runs, bcost, lat):
    all_rows = overhead_rows(runs, bcost)
    rows = [r for r in all_rows if r["c"] == "nupp tick"]
    # nupp-bpf at 997 Hz against the bare timer at 997 Hz, round by round:
    # the median per workload, and over every workload and round (the
    # largest of four noisy medians would overstate a cost that is ~0.2 %).
    pairs = {w: [100 * (n["cpu"] / f["cpu"] - 1)
                 for n, f in zip(runs[(w, "nupp 997")], runs[(w, "floor 997")])]
             for w in WORKLOADS}
    over_floor = {w: med(xs) for w, xs in pairs.items()}
    pooled = med([x for xs in pairs.values() for x in xs])
    bpf997 = {r["w"]: r["bpf_pct"] for r in all_rows if r["c"] == "nupp 997"}
    d16 = med([r["per_sample_ns"] for r in bcost["cpu 997 Hz, --depth 16"]])
    d16e = med([r["est_ns"] for r in bcost["cpu 997 Hz, --depth 16"]])
    def first_of(kind):		# the nupp-bpf measured (--compare's come after it)
        return med([r["first"] for r in lat
                    if r.get("kind") == kind and r["nupp"] == lat[0]["nupp"] and r.get("first") is not None])
    firsts, unseen = first_of("known"), first_of("unseen_first")
    core = max(med([100 * r["nupp_run_cpu"] / r["nupp_run_wall"] for r in runs[(w, "nupp 997")]])
               for w in WORKLOADS)
    rss = max(r["nupp_rss_kib"] or 0 for w in WORKLOADS for r in runs[(w, "nupp 997")]) / 1024
    bpf_tick = [r["bpf_pct"] for r in rows if r["bpf_pct"] is not None]
    rate = med([r["samples"] / r["cpu"] for r in rows])
    at_hz = max(r["bpf_us"] * 250 / 1e4 for r in rows if r["bpf_us"] is not None)
    yes = lambda ok: "yes" if ok else "**no**"
    return [
        ("BPF run time ≤ 2 µs per sample at --depth 16 (60-frame stack)",
         "%.2f µs upper bound, %s estimate" % (d16 / 1e3, fmt(d16e and d16e / 1e3, ".2f", " µs")),
         yes(d16 <= 2000)),
        ("target CPU at 997 Hz ≤ 10% over the bare timer (floor 997)",
         "CPU time nupp 997 / floor 997 − 1, round by round: median %+.1f%% over all %d "
         "workload rounds; per workload %s (run-to-run noise about ±10%%); nupp-bpf's BPF "
         "program alone, as a share of the target's CPU time (its run time, free of that "
         "noise): %s"
         % (pooled, sum(len(xs) for xs in pairs.values()),
            ", ".join("%s %+.1f%%" % (w, over_floor[w]) for w in WORKLOADS),
            ", ".join("%s %s" % (w, fmt(bpf997.get(w), ".2f", "%")) for w in WORKLOADS)),
         yes(pooled <= 10) + " (median over all rounds)"),
        ("attach to first sample ≤ 300 ms", fmt(firsts and firsts * 1e3, ".0f", " ms"),
         yes(firsts is not None and firsts <= 0.3)),
        ("attach to first sample on an unseen stripped build ≤ 300 ms",
         fmt(unseen and unseen * 1e3, ".0f", " ms"), yes(unseen is not None and unseen <= 0.3)),
        ("nupp-bpf ≤ 2% of one core at 997 Hz", "%.2f%% (worst workload)" % core, yes(core <= 2)),
        ("nupp-bpf peak RSS ≤ 64 MiB", "%.1f MiB" % rss, yes(rss <= 64)),
        ("tick mode ≤ 0.2% added target CPU",
         "BPF share per workload: %s at a median %.0f samples per CPU-second (the "
         "scheduler tick), ≤ %.3f%% scaled to exactly 250 a second; measured added CPU "
         "(median): %s"
         % (", ".join("%s %.3f%%" % (r["w"], r["bpf_pct"]) for r in rows if r["bpf_pct"] is not None),
            rate, at_hz, ", ".join("%+.2f%%" % med(r["pct"]) for r in rows)),
         yes(bpf_tick and max(bpf_tick) <= 0.2) + " (BPF share; the measured added CPU is within "
         "run-to-run noise)"),
    ]


args_luajit = "luajit"


def main():
    global args_luajit
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bpf-rounds", type=int, default=5)
    p.add_argument("--bpf-window", type=float, default=1.5)
    p.add_argument("--latency-reps", type=int, default=5)
    p.add_argument("--many-reps", type=int, default=3)
    p.add_argument("--nupp", default=os.path.join(ROOT, "build/nupp-bpf"))
    p.add_argument("--luajit", default="/usr/bin/luajit")
    p.add_argument("--unseen", default=os.path.join(ROOT, "build/variants/luajit-clang-O2/src/luajit"),
                   help="a LuaJIT no registry holds (stripped for the run): attach latency")
    p.add_argument("--out", default=os.path.join(ROOT, "docs/benchmarks.md"))
    p.add_argument("--raw", default=os.path.join(ROOT, "build/bench/sampler.json"),
                   help="every run's numbers, as JSON")
    p.add_argument("--bpf-only", action="store_true",
                   help="only measure the BPF run time per sample and print it (no report)")
    p.add_argument("--compare", nargs="+", metavar="NUPP",
                   help="with --bpf-only, --many-only or --latency-only: also measure these "
                        "other nupp-bpf builds, runs interleaved with --nupp's (for --bpf-only "
                        "and --many-only, the ratios of the medians to it)")
    p.add_argument("--configs", default="", metavar="TEXT",
                   help="with --bpf-only: only the configurations whose name contains TEXT")
    p.add_argument("--per-tick", action="store_true",
                   help="with --bpf-only: run time per timer interval of the busy target "
                        "instead of per sample counted, for builds cut short that count none "
                        "(-F configurations only)")
    p.add_argument("--concurrent", nargs="+", metavar="NUPP[@DEPTH]",
                   help="only compare the BPF run time per sample of these builds, attached "
                        "to one target at once (the first is the reference; DEPTH default 16)")
    p.add_argument("--latency-only", action="store_true",
                   help="only attach to first sample, known and unseen build: a table on stdout")
    p.add_argument("--many-only", action="store_true",
                   help="only measure the many-targets part and print it (no report); with "
                        "--compare, of each build in turn")
    p.add_argument("--many-workers", metavar="N,N", help="with --many-only: these worker counts")
    p.add_argument("--floor", type=int, metavar="HZ", help=argparse.SUPPRESS)
    p.add_argument("--from-raw", action="store_true",
                   help="measure nothing: write the report again from --raw, the last run's numbers")
    a = p.parse_args()
    if a.floor:
        return floor_main(a.floor)
    if a.from_raw:
        with open(a.raw) as f:
            raw = json.load(f)
        info = raw["machine"]
        info["load"] = tuple(info["load"])	# JSON made the pair a list
        started = info.get("started") or datetime.datetime.fromtimestamp(
            os.path.getmtime(a.raw)).astimezone().strftime("%Y-%m-%d %H:%M %Z")
        runs = {(o["workload"], o["config"]): o["runs"] for o in raw["overhead"]}
        write_report(a, info, runs, raw["bpf_cost"], raw["latency"], raw["many"], started)
        return
    if os.geteuid() != 0:
        die("needs root (BPF programs, perf events, kernel.bpf_stats_enabled)")
    if not os.access(a.nupp, os.X_OK):
        die("%s not built (make build/nupp-bpf)" % a.nupp)
    args_luajit = a.luajit
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    load0 = "%.2f" % os.getloadavg()[0]
    t0 = time.monotonic()
    info = machine()
    steal0 = steal_ticks()
    with open(STATS) as f:
        saved = f.read().strip()
    try:
        # Two clock reads per program run: tens of ns against µs.
        with open(STATS, "w") as f:
            f.write("1")
        if a.bpf_only:
            bpf_only(a)
            return
        if a.concurrent:
            bpf_concurrent(a)
            return
        if a.latency_only:
            print("\n".join(latency_table(a, latency(a))))
            return
        if a.many_only:
            many_compare(a)
            return
        lat = latency(a)
        many = many_targets(a)
        runs, bcost = overhead_and_bpf_cost(a)
    finally:
        with open(STATS, "w") as f:
            f.write(saved)
    info["load"] = (load0, "%.2f" % os.getloadavg()[0])
    info["steal"] = (steal_ticks() - steal0) / os.sysconf("SC_CLK_TCK")
    info["others"] = med([(r["busy_s"] - r["cpu"]) / r["wall"] for rs in runs.values() for r in rs])
    info["elapsed"] = time.monotonic() - t0
    info["started"] = started
    os.makedirs(os.path.dirname(a.raw), exist_ok=True)
    with open(a.raw, "w") as f:
        json.dump({"machine": info, "latency": lat, "many": many, "bpf_cost": bcost,
                   "overhead": [{"workload": w, "config": c, "runs": rs}
                                for (w, c), rs in runs.items()]}, f, indent=1)
    write_report(a, info, runs, bcost, lat, many, started)
    for t in targets(runs, bcost, lat):
        log("%s: %s (%s)" % t)
    log("wrote %s" % os.path.relpath(a.out, ROOT))


if __name__ == "__main__":
    main()
