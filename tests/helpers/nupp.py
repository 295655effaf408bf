# SPDX-License-Identifier: MIT
"""Running nupp-bpf, and reading what it wrote: collapsed stacks, the
summary on stderr; the machine's steal while it ran."""
import math
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .paths import NUPP
from .procs import cpu_seconds


def nupp_processes():
    """Pids of the live nupp-bpf processes of this checkout (not zombies: an
    orphan waits for init to reap it, which here can take a second or two).
    Another checkout's runs are left alone while they run (waiting on them
    could not end while they run for minutes), not while they exit: an
    exiting process, whose probes go last, no longer shows its file."""
    own = str(NUPP.resolve())
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_bytes().decode(errors="replace")
        except OSError:
            continue
        comm, state = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2]
        if comm != "nupp-bpf" or state in "ZX":
            continue
        try:
            exe = os.readlink(stat.parent / "exe").removesuffix(" (deleted)")
        except OSError:
            exe = own	# exiting: its memory is gone before its probes are
        if exe == own:
            pids.append(int(stat.parent.name))
    return pids


def wait_for_teardowns():
    """nupp-bpf hands its uprobes to a child that removes them after it has
    exited, ~0.1 s each. Attaching a uprobe meanwhile waits for the removal
    under way (measured: ~0.1 s per attach behind a teardown of 13 probes),
    so a session started then would find its processes attached late: each
    test, and each nupp-bpf a test starts, waits until no nupp-bpf runs (at
    most 30 s)."""
    deadline = time.monotonic() + 30
    while nupp_processes() and time.monotonic() < deadline:
        time.sleep(0.05)



@dataclass
class Summary:
    """What nupp-bpf's end-of-session summary on stderr says."""
    samples: int = 0
    stacks: int = 0
    states: dict = field(default_factory=dict)	# name -> percent
    unresolved: int = 0
    unresolved_of: int = 0
    reasons: dict = field(default_factory=dict)	# unresolved reason -> samples
    outside: int = 0			# samples with no function on the Lua stack
    before_vm: int = 0			# of which before the process had a VM
    thread_no_vm: int = 0		# of which on threads in no VM
    unreadable: int = 0			# samples with an [unknown] frame
    truncated: int = 0


_SUM_HEAD = re.compile(r"^nupp-bpf: [\d.]+ s, (\d+) samples, (\d+) stacks$", re.M)
_SUM_STATES = re.compile(r"^  VM states:(.*)$", re.M)
_SUM_UNRES = re.compile(r"^  unresolved: (\d+) of (\d+) samples \((.*)\)$", re.M)
_SUM_OUTSIDE = re.compile(r"^  outside Lua: (\d+) of .* (\d+) before the process had a VM, "
                          r"(\d+) on threads in no VM", re.M)
_SUM_UNREAD = re.compile(r"^  (\d+) samples have frames that could not be read", re.M)
_SUM_TRUNC = re.compile(r"^  (\d+) samples had deeper stacks than --depth", re.M)


def parse_summary(stderr):
    m = _SUM_HEAD.search(stderr)
    assert m, f"no summary line on stderr:\n{stderr}"
    s = Summary(samples=int(m[1]), stacks=int(m[2]))
    m = _SUM_STATES.search(stderr)
    if m:
        for name, pct in re.findall(r" (\w+) ([\d.]+)%", m[1]):
            s.states[name] = float(pct)
    m = _SUM_UNRES.search(stderr)
    if m:
        s.unresolved, s.unresolved_of = int(m[1]), int(m[2])
        for name, n in re.findall(r"([^,]+?) (\d+)(?:, |$)", m[3]):
            if int(n):
                s.reasons[name] = int(n)
    m = _SUM_OUTSIDE.search(stderr)
    if m:
        s.outside, s.before_vm, s.thread_no_vm = int(m[1]), int(m[2]), int(m[3])
    m = _SUM_UNREAD.search(stderr)
    if m:
        s.unreadable = int(m[1])
    m = _SUM_TRUNC.search(stderr)
    if m:
        s.truncated = int(m[1])
    return s


LINE_RE = re.compile(r"^(.+) (\d+)$")


def parse_collapsed(text):
    """[(stack, count)] in file order; asserts every line is `STACK COUNT`."""
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        m = LINE_RE.match(line)
        assert m, f"line {i} is not 'STACK COUNT': {line!r}"
        rows.append((m[1], int(m[2])))
    return rows


def charged(rows, fn):
    """The counts of the collapsed rows whose stack holds frame fn (a Lua
    function), summed by leaf frame: {leaf: count}."""
    by_leaf = {}
    for stack, n in rows:
        f = stack.split(";")
        if fn in f:
            by_leaf[f[-1]] = by_leaf.get(f[-1], 0) + n
    return by_leaf


def go_pprof(*args):
    """What Go's `go tool pprof ARGS...` prints; asserts it ran."""
    p = subprocess.run(["go", "tool", "pprof", *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"go tool pprof {' '.join(map(str, args))}:\n{p.stderr}"
    return p.stdout


def frames(stack):
    return stack.split(";")


def total(rows):
    return sum(c for _, c in rows)


def share(rows, pred):
    """Fraction of samples whose stack satisfies pred(list of frames)."""
    t = total(rows)
    assert t > 0, "no samples"
    return sum(c for s, c in rows if pred(frames(s))) / t


def assert_rate(n, cpu, hz, what="", steal=0.0):
    """n samples for cpu seconds of CPU time at hz: the cpu-clock timer fires
    per CPU, so a task gets hz samples per second it runs, whatever else
    runs beside it, times the machine's timer efficiency: on a VM a timer
    expiration that comes late is dropped, and a spinning thread got 0.75
    to 0.98 of hz per CPU second here (0.75 and 0.85 in one CI run of
    2026-12-05, two threads spinning on two CPUs; `perf record` itself got
    0.61 on a fresh VM, docs/testing.md). The lower bound, 0.6, is below
    every efficiency seen and still fails a sampler that lost half a run's
    samples or ran at another rate (-i 4 against -F 499). The window
    nupp-bpf samples lies inside the measured CPU time (from nupp-bpf's
    "recording" line to its summary, which comes after writing the output;
    or the launched command's own CPU clock), hence +7 % (+5.06 % was seen
    on a loaded host). Time the hypervisor took from the CPU (steal) is
    left out of a task's CPU time while the timer runs on, so it can only
    add samples: the upper bound widens by the steal the run saw
    (helpers.steal_ticks), twice the whole machine's share, as all of it
    may have fallen on the target's CPU."""
    want = hz * cpu
    high = 1.07 / (1 - min(2 * steal, 0.5))	# +5.06 % seen at a load of 10
    assert 0.6 * want <= n <= high * want, \
        f"{what}{n} samples for {cpu:.2f} s of CPU at {hz} Hz (expected about {want:.0f}, " \
        f"at most {high * want:.0f} with steal {100 * steal:.1f} %)"


def poisson_bound(mean, false_alarm=1e-4):
    """The least k with P(X > k) < false_alarm for X Poisson with this mean:
    a count of rare independent events held to it fails by chance less
    often than that."""
    k, term = 0, math.exp(-mean)
    cdf = term
    while 1 - cdf >= false_alarm:
        k += 1
        term *= mean / k
        cdf += term
    return k


def binomial_low(n, p, false_alarm=1e-4):
    """The largest k with P(X < k) < false_alarm for X binomial (n, p): a
    count of n trials, each a success with probability at least p, held to
    at least k falls short by chance less often than that."""
    cdf, k = 0.0, 0
    while k <= n:
        term = math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if cdf + term >= false_alarm:
            return k
        cdf += term
        k += 1
    return n


def share_tol(n, want_pct, timing_pts=1.0):
    """Points a sampled share may lie from a timed one. The model: each of
    the n samples falls in the function with p = want_pct / 100 (binomial),
    plus timing_pts for the timing's own error (os.clock around the parts,
    the clock calls themselves). 4.5 standard deviations: a false alarm
    once in 150,000 comparisons."""
    p = min(max(want_pct / 100, 0.01), 0.99)
    return 450 * (p * (1 - p) / max(n, 1)) ** 0.5 + timing_pts


def top(rows):
    """The most frequent stack (ties: the first line, which sorts by stack)."""
    assert rows, "no samples"
    return max(rows, key=lambda r: r[1])


@dataclass
class Run:
    """A finished nupp-bpf run."""
    argv: list
    returncode: int
    stdout: str
    stderr: str
    output: Path | None
    steal: float = 0.0		# the hypervisor's share of the CPUs' busy time meanwhile

    @property
    def rows(self):
        assert self.output is not None and self.output.exists(), \
            f"nupp-bpf wrote no output file {self.output}; stderr:\n{self.stderr}"
        return parse_collapsed(self.output.read_text())

    @property
    def summary(self):
        return parse_summary(self.stderr)

    def unresolved_fraction(self):
        s = self.summary
        return s.unresolved / s.unresolved_of if s.unresolved_of else 0.0

    def __str__(self):
        return (f"$ {' '.join(map(str, self.argv))}\nexit {self.returncode}\n"
                f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")


class StealLog:
    """/proc/stat's steal and busy ticks every 20 ms in a thread, with their
    CLOCK_MONOTONIC times: the hypervisor's share over any window of the run
    (steal comes in bursts; a run's average understates one worker's)."""

    def __init__(self):
        self.points, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            self.points.append((time.monotonic(), steal_ticks()))
            time.sleep(0.02)

    def close(self):
        self.stop.set()
        self.thread.join()
        self.points.append((time.monotonic(), steal_ticks()))

    def share(self, t0, t1):
        """Steal share over the samples that bracket [t0, t1]."""
        before = [p for t, p in self.points if t <= t0] or [self.points[0][1]]
        after = [p for t, p in self.points if t >= t1] or [self.points[-1][1]]
        return steal_share(before[-1], after[0])


def steal_ticks():
    """/proc/stat, all CPUs: (steal, busy) in ticks, busy counting steal: the
    time the CPUs ran or wanted to. A task's CPU time leaves steal out
    (CONFIG_PARAVIRT_TIME_ACCOUNTING) while timers run on, so a busy task
    gets hz / (1 - steal share) samples per CPU second it is charged."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return steal, user + nice + system + irq + softirq + steal


def steal_share(before, after):
    busy = after[1] - before[1]
    return (after[0] - before[0]) / busy if busy > 0 else 0.0


class Nupp:
    """Runs nupp-bpf; one instance per test, output files under tmp_path."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.n = 0

    def _out(self):
        self.n += 1
        return self.tmp / f"out{self.n}.collapsed"

    def run(self, args, *, output=True, timeout=60, env=None, **kw):
        """nupp-bpf ARGS (with -o FILE added unless output=False); waits."""
        out = self._out() if output else None
        argv = [str(NUPP), *map(str, args)]
        if out is not None:
            argv[2:2] = ["-o", str(out)]	# after the command word
        wait_for_teardowns()
        t0 = steal_ticks()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                           errors="replace", **kw)
        return Run(argv, p.returncode, p.stdout, p.stderr, out, steal_share(t0, steal_ticks()))

    def record(self, target_args, *, freq=997, extra=(), **kw):
        """nupp-bpf record -F freq EXTRA TARGET_ARGS (target: -p PID ... or -- CMD)."""
        return self.run(["record", "-F", freq, *extra, *target_args], **kw)

    def launch(self, build, script, *script_args, freq=997, extra=(), **kw):
        """Launch mode: nupp-bpf record ... -- BUILD SCRIPT ARGS."""
        return self.record(["--", *build.command(script, *script_args)], freq=freq, extra=extra,
                           env=build.environ(), **kw)

    def start(self, args):
        """nupp-bpf ARGS -o FILE in the background: (Popen, output path)."""
        out = self._out()
        argv = [str(NUPP), *map(str, args)]
        argv[2:2] = ["-o", str(out)]
        wait_for_teardowns()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace")
        return p, out

    def record_cpu(self, args, pid, timeout=60):
        """nupp-bpf ARGS -o FILE: (Run, CPU seconds process pid ran while
        nupp-bpf recorded: from its first "recording" line to the first line
        of its summary, which it prints once sampling stopped and its files
        are written; to its exit when it prints none). Its teardown after
        the summary is left out: on a loaded host it can take a while.
        pid may be a list of pids: then a list of their CPU seconds."""
        pids = pid if isinstance(pid, list) else [pid]
        p, out = self.start(args)
        err = []
        for line in p.stderr:
            err.append(line)
            if line.startswith("nupp-bpf: recording PID"):
                break
        cpu0, t0 = [cpu_seconds(q) for q in pids], steal_ticks()
        cpu1 = None
        for line in p.stderr:
            err.append(line)
            if SUMMARY_RE.match(line):
                cpu1 = [cpu_seconds(q) for q in pids]
                break
        err.append(p.stderr.read())	# from the reader's buffer: communicate() reads the pipe
        o, e = p.communicate(timeout=timeout)
        cpu = [b - a for a, b in zip(cpu0, cpu1 or [cpu_seconds(q) for q in pids])]
        run = Run(p.args, p.returncode, o, "".join(err) + e, out, steal_share(t0, steal_ticks()))
        return run, cpu if isinstance(pid, list) else cpu[0]

    @staticmethod
    def finish(popen, out, timeout=60):
        o, e = popen.communicate(timeout=timeout)
        return Run(popen.args, popen.returncode, o, e, out)


SUMMARY_RE = re.compile(r"^nupp-bpf: [\d.]+ s, \d+ samples, \d+ stacks$")


def max_depth():
    """The largest --depth nupp-bpf accepts, as its --help states it."""
    h = subprocess.run([str(NUPP), "--help"], capture_output=True, text=True).stdout
    m = re.search(r"--depth=N .*at most (\d+)", h)
    assert m, f"--help does not state the largest --depth:\n{h}"
    return int(m[1])


def parse_truth(stdout, prefix="truth"):
    """Lines `truth NAME VALUE` a workload prints: {NAME: float}."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == prefix:
            out[parts[1]] = float(parts[2])
    return out


JP_STATES = {"Compiled": "compiled", "Interpreted": "interpreted", "C code": "C",
             "Garbage Collector": "GC", "JIT Compiler": "compiling"}
JP_ARGS = "-jp=vri1m0"		# VM states, raw counts, 1 ms interval, no minimum


def parse_jp_states(text):
    """The VM-state split in percent (keys as in nupp-bpf's summary) from
    what `luajit -jp=vri1m0 SCRIPT` printed; other lines are ignored."""
    counts = dict.fromkeys(JP_STATES.values(), 0)
    for m in re.finditer(r"^\s*(\d+)\s+(%s)\s*$" % "|".join(JP_STATES), text, re.M):
        counts[JP_STATES[m[2]]] += int(m[1])
    n = sum(counts.values())
    assert n >= 100, f"-jp=v printed too few samples:\n{text}"
    return {k: 100.0 * v / n for k, v in counts.items()}

