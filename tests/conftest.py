# SPDX-License-Identifier: MIT
"""Shared fixtures and helpers for the nupp-bpf test suite.

What lives here is generic: where the build products are, how to run
nupp-bpf and the LuaJIT builds, and how to read collapsed stacks and the
summary nupp-bpf prints on stderr.

Policy: a test that cannot run is a failure, not a skip. The BPF tests need
root and kernel BTF; without them the `privileged` fixture fails the test
with the reason. A skip from anywhere else is turned into a failure too
(see pytest_runtest_makereport), so `pytest -q tests/` passing means every
test ran. xfail (with a reason) stays allowed.
"""
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
NUPP = BUILD / "nupp-bpf"
WORKLOADS = ROOT / "tests" / "workloads"
LUAHOST = BUILD / "tests" / "luahost"
STOCK = BUILD / "stock"
PINNED = BUILD / "luajit"
MULTIARCH = "usr/lib/x86_64-linux-gnu"
BTF = Path("/sys/kernel/btf/vmlinux")


# --- skip is failure ----------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped, and a skip counts as a failure in this suite: {reason}"


# --- one test's teardown does not run into the next --------------------------

def nupp_processes():
    """Pids of the live processes named nupp-bpf (not zombies: an orphan
    waits for init to reap it, which here can take a second or two)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_bytes().decode(errors="replace")
        except OSError:
            continue
        comm, state = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2]
        if comm == "nupp-bpf" and state not in "ZX":
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


@pytest.fixture(autouse=True)
def earlier_probes_removed():
    wait_for_teardowns()


def _privilege_problem():
    if os.geteuid() != 0:
        return "the BPF tests must run as root (they load BPF programs for real); run `sudo make test`"
    if not BTF.exists():
        return f"the kernel has no BTF ({BTF} is missing); nupp-bpf needs CONFIG_DEBUG_INFO_BTF"
    if not NUPP.exists():
        return f"{NUPP} is not built; run `make` first"
    return None


@pytest.fixture(scope="session")
def privileged():
    """Root, kernel BTF and a built nupp-bpf, or the test FAILS saying which is missing."""
    problem = _privilege_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


# --- LuaJIT builds -----------------------------------------------------------

@dataclass(frozen=True)
class LuaBuild:
    """A way to run a Lua script: `argv + [script, args...]` with `env` added."""
    name: str
    argv: tuple
    env: tuple = ()			# (("LD_LIBRARY_PATH", "..."), ...)
    embedded: bool = False		# a C host embedding libluajit (no luajit main)

    def command(self, script, *args):
        return [*self.argv, str(script), *map(str, args)]

    def environ(self, base=None):
        e = dict(os.environ if base is None else base)
        e.update(dict(self.env))
        return e


def _host(name, libdir):
    return LuaBuild(name, (str(LUAHOST),), (("LD_LIBRARY_PATH", str(libdir)),), True)


def _pinned_libdir(tree):
    """The pinned rebuild's libluajit.so under its soname, for LD_LIBRARY_PATH."""
    d = BUILD / "tests" / "lib" / tree
    lib = PINNED / tree / "src" / "libluajit.so"
    link = d / "libluajit-5.1.so.2"
    if lib.exists() and not link.exists():
        d.mkdir(parents=True, exist_ok=True)
        link.symlink_to(lib)
    return d


BUILDS = {
    "stock-luajit": LuaBuild("stock-luajit", ("/usr/bin/luajit",)),
    "stock-luajit-host": _host("stock-luajit-host", STOCK / "luajit" / MULTIARCH),
    # luajit2's executable links LuaJIT statically (no libluajit NEEDED).
    "stock-luajit2": LuaBuild("stock-luajit2", (str(STOCK / "luajit2/usr/bin/luajit"),)),
    "stock-luajit2-host": _host("stock-luajit2-host", STOCK / "luajit2" / MULTIARCH),
    "pinned-luajit": LuaBuild("pinned-luajit", (str(PINNED / "luajit/src/luajit"),)),
    "pinned-luajit2": LuaBuild("pinned-luajit2", (str(PINNED / "luajit2/src/luajit"),)),
    "pinned-luajit-host": _host("pinned-luajit-host", BUILD / "tests/lib/luajit"),
    "pinned-luajit2-host": _host("pinned-luajit2-host", BUILD / "tests/lib/luajit2"),
}
# Other distributions' stock builds, run as a container runs them (a mount
# namespace and a root of their own: tests/helpers/container), profiled from
# the host: Debian 13 and sid ship OpenResty's LuaJIT as luajit.
CONTAINER = ROOT / "tests" / "helpers" / "container"
ROOTS = BUILD / "roots"
for _suite in ("trixie", "sid"):
    BUILDS[f"{_suite}-luajit"] = LuaBuild(f"{_suite}-luajit",
                                          (str(CONTAINER), str(ROOTS / _suite), "/usr/bin/luajit"))
    BUILDS[f"{_suite}-luajit-host"] = LuaBuild(f"{_suite}-luajit-host",
                                               (str(CONTAINER), str(ROOTS / _suite), str(LUAHOST)),
                                               embedded=True)
STOCK_LUAJIT = BUILDS["stock-luajit"]


@pytest.fixture(scope="session")
def lua_build_ready():
    """Checks a build's files exist (FAILS otherwise); returns a getter by name."""
    def get(name):
        b = BUILDS[name]
        if name.startswith("pinned-") and b.embedded:
            _pinned_libdir(name[len("pinned-"):-len("-host")])
        missing = [p for p in [b.argv[0]] + [v for k, v in b.env if k == "LD_LIBRARY_PATH"]
                   if not Path(p).exists()]
        if b.argv[0] == str(CONTAINER):	# its root (`make roots`) and program
            missing += [p for p in (b.argv[1] + "/usr/bin/luajit", b.argv[2])
                        if not Path(p).exists() and not p.startswith("/usr/")]
        elif b.embedded:
            libdir = Path(dict(b.env)["LD_LIBRARY_PATH"])
            if not (libdir / "libluajit-5.1.so.2").exists():
                missing.append(str(libdir / "libluajit-5.1.so.2"))
        if missing:
            pytest.fail(f"LuaJIT build {name} is not built ({', '.join(missing)}); run `make`",
                        pytrace=False)
        return b
    return get


def workload(name):
    p = WORKLOADS / name
    assert p.exists(), f"missing workload {p}"
    return p


# --- running nupp-bpf ----------------------------------------------------------

@dataclass
class Summary:
    """What nupp-bpf's end-of-session summary on stderr says."""
    samples: int = 0
    stacks: int = 0
    states: dict = field(default_factory=dict)	# name -> percent
    unresolved: int = 0
    unresolved_of: int = 0
    truncated: int = 0


_SUM_HEAD = re.compile(r"^nupp-bpf: [\d.]+ s, (\d+) samples, (\d+) stacks$", re.M)
_SUM_STATES = re.compile(r"^  VM states:(.*)$", re.M)
_SUM_UNRES = re.compile(r"^  unresolved: (\d+) of (\d+) samples", re.M)
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


def frames(stack):
    return stack.split(";")


def total(rows):
    return sum(c for _, c in rows)


def share(rows, pred):
    """Fraction of samples whose stack satisfies pred(list of frames)."""
    t = total(rows)
    assert t > 0, "no samples"
    return sum(c for s, c in rows if pred(frames(s))) / t


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
        nupp-bpf recorded: from its first "recording" line to its exit).
        pid may be a list of pids: then a list of their CPU seconds."""
        pids = pid if isinstance(pid, list) else [pid]
        p, out = self.start(args)
        err = []
        for line in p.stderr:
            err.append(line)
            if line.startswith("nupp-bpf: recording PID"):
                break
        cpu0, t0 = [cpu_seconds(q) for q in pids], steal_ticks()
        o, e = p.communicate(timeout=timeout)
        cpu = [cpu_seconds(q) - c for q, c in zip(pids, cpu0)]
        run = Run(p.args, p.returncode, o, "".join(err) + e, out, steal_share(t0, steal_ticks()))
        return run, cpu if isinstance(pid, list) else cpu[0]

    @staticmethod
    def finish(popen, out, timeout=60):
        o, e = popen.communicate(timeout=timeout)
        return Run(popen.args, popen.returncode, o, e, out)


@pytest.fixture
def nupp(privileged, tmp_path):
    return Nupp(tmp_path)


# --- target processes ----------------------------------------------------------

class Target:
    """A background LuaJIT process (for -p), killed at the end of the test
    with every process it started (it leads a process group of its own)."""

    def __init__(self, build, script, *args, ready=None, cwd=None):
        self.build = build
        self.popen = subprocess.Popen(build.command(script, *args), env=build.environ(),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=cwd, start_new_session=True)
        self.pid = self.popen.pid
        if ready:
            line = self.popen.stdout.readline()
            assert ready in line, f"target did not say {ready!r}: {line!r}, " \
                                  f"stderr {self.popen.stderr.read() if self.popen.poll() is not None else ''}"

    def alive(self):
        return self.popen.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            self.popen.send_signal(sig)

    def kill_all(self):
        """The process and those it started (forked workers)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout=30):
        o, e = self.popen.communicate(timeout=timeout)
        return self.popen.returncode, o, e


@pytest.fixture
def target():
    """target(build, script, *args, ready=...) starts a process; all are killed after the test."""
    started = []

    def start(build, script, *args, **kw):
        t = Target(build, script, *args, **kw)
        started.append(t)
        return t
    yield start
    for t in started:
        t.kill_all()
        try:
            t.popen.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def max_depth():
    """The largest --depth nupp-bpf accepts, as its --help states it."""
    h = subprocess.run([str(NUPP), "--help"], capture_output=True, text=True).stdout
    m = re.search(r"--depth=N .*at most (\d+)", h)
    assert m, f"--help does not state the largest --depth:\n{h}"
    return int(m[1])


def cpu_seconds(pid):
    """CPU time a process (all its threads) has used so far, from schedstat."""
    t = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        tasks = []			# gone: what it ran is not readable any more
    for task in tasks:
        try:
            t += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return t / 1e9


def wait_for(pred, timeout=10.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


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


def have(cmd):
    return shutil.which(cmd) is not None
