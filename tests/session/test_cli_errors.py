# SPDX-License-Identifier: MIT
"""nupp-bpf's faults and the end of a session: exact one-line errors and
exit codes, targets that exit or die, launched commands passed through,
and SIGINT/SIGTERM.

Exit codes: 2 for a usage error, 1 for a fault at run time, 0 for a session
that ended (also when the -p target exited); a launched command's own exit
status, 128 + N when signal N killed it, 127 when it could not be run.
"""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import (NUPP, MIXED, cpu_seconds, STOCK_LUAJIT, max_depth, share, total, wait_for, workload)



@pytest.fixture(scope="session")
def nupp_bin():
    if not NUPP.exists():
        pytest.fail(f"{NUPP} is not built; run `make`", pytrace=False)
    return str(NUPP)


def free_pid():
    """A PID no process has."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(pid_max - 1, 300, -1):
        if not Path(f"/proc/{pid}").exists():
            return pid
    raise AssertionError("no free PID")


def assert_one_error_line(run_or_proc, message, code):
    """stderr is exactly `nupp-bpf: error: MESSAGE` and the exit code is code."""
    err = run_or_proc.stderr
    assert err == f"nupp-bpf: error: {message}\n", f"stderr:\n{err}"
    assert run_or_proc.returncode == code, f"exit {run_or_proc.returncode}, want {code}\n{err}"


def assert_mixed_profile(run, min_samples=200):
    """min_samples: from the target's CPU time where a test measures it (a
    loaded host gives a target less than its wall time)."""
    rows = run.rows
    assert total(rows) >= min_samples, f"{total(rows)} samples:\n{run}"
    good = share(rows, lambda f: bool(MIXED.match(";".join(f))))
    assert good >= 0.97, run.output.read_text()


# --- 4. usage errors (no root needed) ----------------------------------------------------

def _usage_cases():
    return [
        (["record", "-F", "0", "-p", "1"], "-F wants a whole number from 1 to 100000, not '0'"),
        (["record", "-F", "abc", "-p", "1"], "-F wants a whole number from 1 to 100000, not 'abc'"),
        (["record", "-F", "100001", "-p", "1"], "-F wants a whole number from 1 to 100000, not '100001'"),
        (["record", "-i", "0", "-p", "1"], "-i wants a whole number from 1 to 60000, not '0'"),
        (["record", "--depth", "0", "-p", "1"], "--depth wants a whole number from 1 to {max}, not '0'"),
        (["record", "--depth", "999", "-p", "1"], "--depth wants a whole number from 1 to {max}, not '999'"),
        (["record", "--clock", "foo", "-p", "1"], "--clock is cpu, thread or tick, not 'foo'"),
        (["record", "--max-cpu", "0", "-p", "1"],
         "--max-cpu wants a percentage of one core, above 0 and at most 100, not '0'"),
        (["record", "--max-cpu", "1%", "-p", "1"],
         "--max-cpu wants a percentage of one core, above 0 and at most 100, not '1%'"),
        (["trace", "--max-cpu", "1", "-p", "1"],
         "--max-cpu lowers the sampling rate: it is for record, top and the default job"),
        (["record", "-p", "abc"], "-p wants a whole number from 1 to 2147483647, not 'abc'"),
        (["record", "-d", "0", "-p", "1"], "-d wants a whole number from 1 to 3153600000, not '0'"),
        (["record", "--max-stacks", "1", "-p", "1"],
         "--max-stacks wants a whole number from 16 to 4194304, not '1'"),
        (["foo", "-p", "1"], "unknown command 'foo' (record, trace, top, inspect, dump, heap or check; a program to launch goes after --)"),
        (["record", "-p", "1", "--", "luajit", "x.lua"], "-p and a command to launch exclude each other"),
        (["record"], "nothing to profile: give -p PID or -- CMD ARGS"),
        (["record", "--children", "--", "luajit", "x.lua"],
         "--children goes with -p (a launched command's children are always profiled)"),
        (["record", "--format", "perf", "-p", "1"],
         "--format is collapsed, pprof, speedscope or svg (check: csv, text or sarif), not 'perf'"),
        (["record", "--format", "pprof", "-o", "a", "-o", "b", "-p", "1"],
         "--format goes with one -o: with several, each file's extension names its format"),
        (["record", "-o", "-", "-o", "-", "-p", "1"], "at most one -o -"),
        (["trace", "--format", "pprof", "-p", "1"],
         "--format and --svg are for the profile (record or the default job); trace writes CSV"),
        (["-o", "a", "-o", "b", "-p", "1"],
         "several -o are for record (trace writes one CSV file, the default job takes one "
         "-o NAME)"),
    ]


@pytest.mark.parametrize("args,message", _usage_cases(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_usage_error(nupp_bin, args, message):
    """A bad option value: one line naming it, exit 2, nothing run."""
    p = subprocess.run([nupp_bin, *args], capture_output=True, text=True, timeout=10)
    message = message.format(max=max_depth())
    assert_one_error_line(p, f"{message} (see nupp-bpf --help)", 2)
    assert p.stdout == ""


@pytest.mark.parametrize("args", [["record", "--bogus", "-p", "1"], ["record", "-p"]],
                         ids=["unknown option", "missing value"])
def test_usage_error_from_option_parser(nupp_bin, args):
    """An unknown option or a missing value is a usage error like the
    others: one `nupp-bpf: error: ...` line, exit 2."""
    p = subprocess.run([nupp_bin, *args], capture_output=True, text=True, timeout=10)
    assert re.fullmatch(r"nupp-bpf: error: [^\n]+\n", p.stderr), f"stderr:\n{p.stderr}"
    assert p.returncode == 2, f"exit {p.returncode}\n{p.stderr}"


def test_version(nupp_bin):
    """--version prints one line: the release and the commit built, which is
    this checkout's HEAD (with "+" when the tree differed from it)."""
    p = subprocess.run([nupp_bin, "--version"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and p.stderr == "", f"exit {p.returncode}\n{p.stderr}"
    m = re.fullmatch(r"nupp-bpf (\d+\.\d+) \(([0-9a-f]{7,})\+?\)\n", p.stdout)
    assert m, f"stdout: {p.stdout!r}"
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent).stdout.strip()
    assert head.startswith(m.group(2)), f"built from {m.group(2)}, HEAD is {head}"


def test_word_without_dashdash_is_not_launched(nupp_bin, tmp_path):
    """A second word before any `--` is not a program to launch (the
    usage is `[record|trace] [-- CMD ARGS...]`): `record touch FILE` is a
    usage error, exit 2, and touch does not run."""
    mark = tmp_path / "ran"
    p = subprocess.run([nupp_bin, "record", "-o", str(tmp_path / "o"), "touch", str(mark)],
                       capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert not mark.exists(), f"`touch` was launched without --:\n{p.stderr}"
    assert re.fullmatch(r"nupp-bpf: error: [^\n]+\n", p.stderr), f"stderr:\n{p.stderr}"
    assert p.returncode == 2, f"exit {p.returncode}"


# --- 4. faults at run time -------------------------------------------------------------

def test_no_such_pid(nupp):
    pid = free_pid()
    run = nupp.record(["-p", pid])
    assert_one_error_line(run, f"no process with PID {pid}", 1)
    assert not run.output.exists(), "an output file for a failed session"


def test_pid_without_luajit(nupp):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        run = nupp.record(["-p", sleeper.pid, "-d", 1])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert_one_error_line(run, f"process {sleeper.pid} does not contain LuaJIT", 1)
    assert not run.output.exists()


def test_not_root(nupp, target, tmp_path):
    """Without privileges: one line saying what is needed, exit 1, even for
    a valid LuaJIT target."""
    t = target(STOCK_LUAJIT, workload("mixed.lua"), 60, ready="ready")
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", str(NUPP), "record", "-d", "1", "-p", str(t.pid),
                        "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=30)
    assert_one_error_line(p, "loading BPF programs needs root (or CAP_BPF and CAP_PERFMON)", 1)
    assert t.alive()


@pytest.mark.parametrize("opt", ["-o", "--svg"])
def test_unwritable_output_attach(nupp, target, opt):
    t = target(STOCK_LUAJIT, workload("mixed.lua"), 60, ready="ready")
    bad = "/nonexistent/dir/x"
    args = ["record", "-d", "1", "-p", t.pid, opt, bad]
    run = nupp.run(args, output=(opt != "-o"))
    assert_one_error_line(run, f"cannot write {bad}: No such file or directory", 1)
    assert t.alive(), "the target must survive a failed session"


def test_unwritable_output_launch(nupp, tmp_path):
    """With -o unwritable the command is not started at all."""
    mark = tmp_path / "ran"
    bad = "/nonexistent/dir/x"
    run = nupp.run(["record", "-o", bad, "--", "luajit", "-e", f"io.open('{mark}', 'w'):close()"],
                   output=False)
    assert_one_error_line(run, f"cannot write {bad}: No such file or directory", 1)
    assert not mark.exists(), "the command ran although the session failed"


def test_tick_above_its_rate(nupp, tmp_path):
    """--clock tick gives at most CONFIG_HZ samples a second (100 to 1000):
    -F 2000 is an error of one line, and the command is not run."""
    mark = tmp_path / "ran"
    run = nupp.run(["record", "--clock", "tick", "-F", "2000", "--", "sh", "-c", f"touch {mark}"],
                   output=False)
    m = re.fullmatch(r"nupp-bpf: error: --clock tick samples at most CONFIG_HZ \((\d+)\) times a "
                     r"second; ask -F (\d+) or less, or another --clock\n", run.stderr)
    assert m and m[1] == m[2] and 100 <= int(m[1]) <= 1000, run
    assert run.returncode == 1, run
    assert not mark.exists(), "the command ran although the session failed"


def test_launch_cannot_run(nupp):
    run = nupp.run(["record", "--", "/nonexistent/cmd"])
    assert "nupp-bpf: error: cannot run /nonexistent/cmd: No such file or directory\n" in run.stderr, run
    assert run.returncode == 127, run


# --- 4. the target ends during the session ---------------------------------------------

@pytest.mark.parametrize("how", ["exits", "SIGKILL"])
def test_attach_target_ends(nupp, target, how):
    """The -p target exits (or is killed) after ~1 s of a -d 30 session:
    nupp-bpf ends soon after, writes what it sampled, notes the exit on
    stderr and exits 0."""
    t = target(STOCK_LUAJIT, workload("mixed.lua"), 1.2 if how == "exits" else 60, ready="ready")
    cpu0 = cpu_seconds(t.pid)
    p, out = nupp.start(["record", "-F", 997, "-d", 30, "-p", t.pid])
    if how == "SIGKILL":
        time.sleep(1.2)
        cpu = cpu_seconds(t.pid)
        t.kill(signal.SIGKILL)
    t0 = time.monotonic()
    while how != "SIGKILL" and t.popen.poll() is None:	# its CPU time until it exits
        cpu = cpu_seconds(t.pid) or cpu
        time.sleep(0.02)
    t.popen.wait(timeout=30)
    run = nupp.finish(p, out, timeout=30)
    late = time.monotonic() - t0
    assert run.returncode == 0, run
    assert late < 5, f"nupp-bpf took {late:.1f} s to notice the end of its target"
    assert re.search(rf"^nupp-bpf: note: PID {t.pid} exited during the session\b.*$", run.stderr, re.M), run
    assert_mixed_profile(run, min_samples=int(0.5 * 997 * (cpu - cpu0)))


def start_with_pid(pid, argv):
    """Start argv as process pid, which no process has, through
    /proc/sys/kernel/ns_last_pid (the next fork gets the pid after it)."""
    for _ in range(20):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        p = subprocess.Popen(argv)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    pytest.fail(f"could not start a process as PID {pid}")


def test_exited_target_pid_reused(nupp, target):
    """-p A -p B: A exits 0.5 s in, and a CPU-bound process that is not
    LuaJIT is then started with A's pid. It is not sampled as A: the
    session's unresolved samples stay under 1 % (taken as A, its 1.5 s would
    be a quarter of them, as read faults or no VM) and B's profile is whole:
    at least 80 % of the samples B's CPU time over the session makes at
    997 Hz (a loaded host gives B less than its 4 s)."""
    a = target(STOCK_LUAJIT, workload("mixed.lua"), 0.5, ready="ready")
    b = target(STOCK_LUAJIT, workload("mixed.lua"), 60, ready="ready")
    b_cpu = cpu_seconds(b.pid)
    p, out = nupp.start(["record", "-F", 997, "-d", 4, "-p", a.pid, "-p", b.pid])
    a.popen.wait(timeout=30)
    time.sleep(0.3)			# past a poll: A is seen gone
    spin = start_with_pid(a.pid, ["/usr/bin/python3", "-c",
                                  "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"])
    spin.wait(timeout=30)
    run = nupp.finish(p, out, timeout=30)
    b_cpu = cpu_seconds(b.pid) - b_cpu
    assert run.returncode == 0, run
    assert run.unresolved_fraction() < 0.01, run
    assert_mixed_profile(run, min_samples=int(0.8 * 997 * b_cpu))


# --- 4. launch mode passes the command through ------------------------------------------

def test_launch_passes_output_and_status(nupp):
    """The command's stdout and stderr go through untouched; its exit status
    is nupp-bpf's; the profile is written to -o."""
    code = ("io.stdout:write('to stdout\\n') io.stderr:write('to stderr\\n') "
            "local t = os.clock() while os.clock() - t < 0.5 do end os.exit(3)")
    run = nupp.record(["--", "luajit", "-e", code])
    assert run.returncode == 3, run
    assert run.stdout == "to stdout\n", run
    # nupp-bpf's own lines (its name first, or indented summary lines) aside,
    # stderr is the command's, byte for byte.
    own = [l for l in run.stderr.splitlines(keepends=True)
           if not l.startswith(("nupp-bpf: ", "  "))]
    assert own == ["to stderr\n"], run
    assert total(run.rows) >= 200, run
    on_chunk = share(run.rows, lambda f: f[1:2] == ["(command line):0"])
    assert on_chunk >= 0.97, run.output.read_text()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_launch_command_killed(nupp, sig):
    """A launched command killed by signal N: exit 128 + N, profile written."""
    run = nupp.launch(STOCK_LUAJIT, workload("selfkill.lua"), int(sig), 0.5)
    assert run.returncode == 128 + sig, run
    assert total(run.rows) >= 200, run
    spin = share(run.rows, lambda f: "selfkill.lua:spin" in f)
    assert spin >= 0.9, run.output.read_text()


def test_launch_without_luajit(nupp):
    """A command that never loads LuaJIT: its status, a note, an empty profile."""
    run = nupp.record(["--", "sh", "-c", "exit 5"])
    assert run.returncode == 5, run
    assert "nupp-bpf: note: sh never loaded LuaJIT\n" in run.stderr, run
    assert run.output.read_text() == ""


# --- 5. SIGINT / SIGTERM -----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_attach_session(nupp, target, sig):
    """SIGINT or SIGTERM ends a -p session without -d: profile written,
    summary printed, exit 0, target untouched."""
    t = target(STOCK_LUAJIT, workload("mixed.lua"), 60, ready="ready")
    cpu = cpu_seconds(t.pid)
    p, out = nupp.start(["record", "-F", 997, "-p", t.pid])
    time.sleep(1.5)
    assert p.poll() is None, "nupp-bpf ended by itself"
    p.send_signal(sig)
    run = nupp.finish(p, out, timeout=10)
    cpu = cpu_seconds(t.pid) - cpu
    assert run.returncode == 0, run
    assert run.summary.samples > 0
    assert_mixed_profile(run, min_samples=int(0.5 * 997 * cpu))
    assert t.alive(), "stopping nupp-bpf must not stop a -p target"


def _child_of(pid):
    def get():
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except FileNotFoundError:
            return None
        return int(kids[0]) if kids else None
    assert wait_for(lambda: get() is not None, timeout=5), "nupp-bpf started no command"
    return get()


def test_sigterm_ends_launch_session(nupp):
    """SIGTERM to nupp-bpf in launch mode: the profile is written and the
    command is terminated too; nupp-bpf passes on its status (128 + 15)."""
    p, out = nupp.start(["record", "-F", 997, "--", *STOCK_LUAJIT.command(workload("mixed.lua"), 60)])
    child = _child_of(p.pid)
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    run = nupp.finish(p, out, timeout=10)
    assert run.returncode == 128 + signal.SIGTERM, run
    assert not Path(f"/proc/{child}").exists(), "the command outlived nupp-bpf"
    assert_mixed_profile(run)


def test_ctrl_c_ends_launch_session(nupp):
    """Ctrl-C (SIGINT to the foreground process group) in launch mode: the
    profile is written and nupp-bpf exits with the command's status (luajit
    reports `interrupted!` and exits 1)."""
    argv = [str(NUPP), "record", "-F", "997", "-o", str(nupp.tmp / "c.collapsed"), "--",
            *STOCK_LUAJIT.command(workload("mixed.lua"), 60)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    child = _child_of(p.pid)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    run = nupp.finish(p, nupp.tmp / "c.collapsed", timeout=10)
    assert "interrupted" in run.stderr, run
    assert run.returncode == 1, run
    assert not Path(f"/proc/{child}").exists()
    assert_mixed_profile(run)
