# SPDX-License-Identifier: MIT
"""`nupp-bpf dump -p PID`: the Lua stack of every VM of a process, now.

Real processes whose stacks are known by construction: a program blocked in
a read on a pipe and one sleeping in os.execute (stacks read from memory:
exact frames and lines), one spinning in the interpreter (sampled: the stack
sampled most often), and a host with three VMs on three threads, one of each
kind. Each target's output and exit status are checked after the dump, as
they are without it.

Time: the bound is 200 ms end to end. The machine is shared, so the test
measures, in the same run, how long the dump waited for a CPU (its
runqueue wait in /proc/PID/schedstat, read before it is reaped) and the
hypervisor's steal share of the CPUs meanwhile (/proc/stat), and holds the
wall time less that wait, and less the share stolen of the rest, to the
bound.
"""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from helpers import NUPP, STOCK_LUAJIT, steal_share, steal_ticks, wait_for, workload

WAIT = workload("dumpwait.lua")
VMS = workload("dumpvms.lua")
BOUND_MS = 200


def marked_lines(path):
    """{TAG: line} of the `-- LINE TAG` marks in a workload."""
    lines = {}
    for n, text in enumerate(Path(path).read_text().splitlines(), 1):
        m = re.search(r"-- LINE (\w+)$", text)
        if m:
            lines[m.group(1)] = n
    return lines


def run_dump(pid, *extra):
    """nupp-bpf dump -p PID: (returncode, stdout, stderr, wall ms, ms it
    waited for a CPU, steal share). The wait is read from its schedstat
    while it is a zombie, so that it covers its whole life."""
    steal0 = steal_ticks()
    t0 = time.monotonic()
    p = subprocess.Popen([str(NUPP), "dump", "-p", str(pid), *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = (time.monotonic() - t0) * 1e3
    _, delay, _ = map(int, Path(f"/proc/{p.pid}/schedstat").read_text().split())
    steal = steal_share(steal0, steal_ticks())
    p.wait()
    return p.returncode, out, err, wall, (delay / 1e6, steal)


def assert_fast(wall, waited, what):
    """wall less the runqueue wait, less the steal share of what is left."""
    delay, steal = waited
    own = (wall - delay) * (1 - steal)
    print(f"{what}: {wall:.1f} ms end to end, {delay:.1f} ms of it waiting for a CPU, "
          f"{100 * steal:.0f} % of the CPUs' time stolen: {own:.1f} ms")
    assert own <= BOUND_MS, f"{what}: {own:.1f} ms without the waits ({wall:.1f} ms wall)"


def syscall_of(pid, tid):
    """The system call tid is blocked in, None while it runs."""
    text = Path(f"/proc/{pid}/task/{tid}/syscall").read_text()
    return None if text.startswith("running") else int(text.split()[0])


def switches(pid):
    """The thread's context switches: a blocked thread that something woke,
    stopped or signalled has made one more."""
    text = Path(f"/proc/{pid}/status").read_text()
    return [int(m) for m in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)$", text, re.M)]


def start(argv, env=None):
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, 9)
        p.communicate(timeout=10)


def start_wait(procs, mode, seconds=5, build=STOCK_LUAJIT):
    p = start(build.command(WAIT, mode, seconds), env=build.environ())
    procs.append(p)
    line = p.stdout.readline()
    assert line == f"ready {p.pid}\n", line
    return p


def text_stack(out, vm_line_re):
    """The frames printed under the VM line that matches vm_line_re."""
    lines = out.splitlines()
    at = next(i for i, l in enumerate(lines) if re.match(vm_line_re, l))
    frames = []
    for l in lines[at + 1:]:
        if not l.startswith("  "):
            break
        if not l.startswith("  ("):
            frames.append(l.strip())
    return frames


def json_frames(vm):
    return [(f["name"], f["kind"], f["line"]) for f in vm["frames"]]


# --- one VM, blocked: read from memory ------------------------------------------------

@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2", "trixie-luajit"])
def test_dump_blocked_in_read(privileged, procs, lua_build_ready, build_name):
    """Blocked reading a pipe: the exact stack with each frame's line; the
    thread, its system call and the VM state; the thread is not woken (no
    context switch: nothing stopped or signalled it); then the program goes
    on and prints and exits as it would have. On Debian 12's luajit and
    luajit2, and on Debian 13's in a container (another mount namespace)."""
    build = lua_build_ready(build_name)
    L = marked_lines(WAIT)
    p = start_wait(procs, "read", build=build)
    wait_for(lambda: syscall_of(p.pid, p.pid) == 0)
    before = switches(p.pid)
    rc, out, err, wall, waited = run_dump(p.pid)
    assert rc == 0 and err == "", err
    assert re.search(rf"^VM 0x[0-9a-f]+: C, thread {p.pid} \(luajit\) blocked in read\b", out, re.M), out
    frames = text_stack(out, r"^VM ")
    assert frames[:4] == ["read", f"dumpwait.lua:wait_line:{L['read']}",
                          f"dumpwait.lua:handle:{L['handle']}", f"dumpwait.lua:0:{L['main_read']}"], out
    assert len(frames) == 5 and re.fullmatch(r"@0x[0-9a-f]+", frames[4]), out	# luajit's pmain
    assert_fast(wall, waited, "dump of a blocked process")

    rc, out, err, wall, waited = run_dump(p.pid, "--json")
    assert rc == 0 and err == "", err
    d = json.loads(out)
    # In the container: its file as the host reaches it, through its root.
    shown = build.argv[1] + "/usr/bin/luajit" if build_name.startswith("trixie") else build.argv[0]
    assert d["pid"] == p.pid and d["file"] == shown and d["sample_window_ms"] == 0
    (vm,) = d["vms"]
    assert vm["vmstate"] == "C" and vm["trace"] is None
    assert vm["stack_from"] == "memory" and vm["thread_from"] == "stack" and vm["note"] is None
    assert vm["thread"]["tid"] == p.pid and vm["thread"]["state"] == "blocked"
    assert vm["thread"]["syscall"] == 0 and vm["thread"]["syscall_name"] == "read"
    assert json_frames(vm)[:4] == [("read", "builtin", None),
                                   ("dumpwait.lua:wait_line", "lua", L["read"]),
                                   ("dumpwait.lua:handle", "lua", L["handle"]),
                                   ("dumpwait.lua:0", "lua", L["main_read"])]
    assert vm["frames"][1]["file"] == str(WAIT) and vm["frames"][1]["start_line"] == L["read"] - 1
    assert vm["frames"][4]["kind"] == "c" and not vm["truncated"]
    assert d["threads"] == [dict(vm["thread"], vm=vm["vm"])]
    assert_fast(wall, waited, "dump --json of a blocked process")
    assert switches(p.pid) == before and syscall_of(p.pid, p.pid) == 0

    out, err = p.communicate("hello\n", timeout=10)
    assert (p.returncode, out, err) == (0, "got hello\n", "")


def test_dump_sleeping_in_execute(privileged, procs):
    """os.execute("sleep 10"): the thread waits for its child in wait4."""
    L = marked_lines(WAIT)
    p = start_wait(procs, "sleep", 3)
    wait_for(lambda: syscall_of(p.pid, p.pid) == 61)
    rc, out, err, wall, waited = run_dump(p.pid)
    assert rc == 0 and err == "", err
    assert re.search(rf"^VM 0x[0-9a-f]+: C, thread {p.pid} \(luajit\) blocked in wait4\b", out, re.M), out
    frames = text_stack(out, r"^VM ")
    assert frames[:3] == ["execute", f"dumpwait.lua:nap:{L['nap']}",
                          f"dumpwait.lua:0:{L['main_sleep']}"], out
    assert_fast(wall, waited, "dump of a process in os.execute")
    out, err = p.communicate(timeout=20)
    assert (p.returncode, out, err) == (0, "slept 0\n", "")


def test_dump_blocked_in_ffi_call_from_trace(privileged, procs):
    """Blocked in an FFI call that compiled code made: the VM is on trace;
    its position in the trace is the return address the call left on the
    thread's native stack, which maps through the trace's snapshots as a
    sample's would: the leaf, the trace's frame, has its line."""
    L = marked_lines(WAIT)
    p = start_wait(procs, "ffi", 3)
    vm = {}

    def on_trace():
        nonlocal vm
        rc, out, err, wall, waited = run_dump(p.pid, "--json")
        assert rc == 0 and err == "", err
        vm = json.loads(out)["vms"][0]
        return vm["vmstate"] == "compiled" and vm["thread"]["syscall_name"] == "poll"
    wait_for(on_trace, timeout=2.5, step=0.1)
    assert vm["stack_from"] == "memory" and isinstance(vm["trace"], int) and vm["trace"] >= 1
    assert json_frames(vm)[:2] == [("dumpwait.lua:ffi_loop", "lua", L["ffi"]),
                                   ("dumpwait.lua:0", "lua", L["main_ffi"])], vm
    out, err = p.communicate(timeout=20)
    assert (p.returncode, out, err) == (0, "polled\n", "")


# --- one VM, running: sampled ------------------------------------------------------------

def test_dump_spinning_interpreter(privileged, procs):
    """Spinning in the interpreter: no system call to find it in, so the VM
    is sampled; the stack sampled most often is the spin loop's."""
    L = marked_lines(WAIT)
    p = start_wait(procs, "spin", 4)
    rc, out, err, wall, waited = run_dump(p.pid, "--json")
    assert rc == 0 and err == "", err
    d = json.loads(out)
    (vm,) = d["vms"]
    assert vm["vmstate"] == "interpreted" and vm["stack_from"] == "sample", vm
    assert vm["thread_from"] == "sample" and vm["thread"]["tid"] == p.pid
    assert vm["thread"]["state"] == "running" and vm["thread"]["syscall"] is None
    assert 1 <= vm["samples"] <= vm["vm_samples"] and 0 < d["sample_window_ms"] <= 150, d
    assert json_frames(vm) == [("dumpwait.lua:spin", "lua", L["spin"]),
                               ("dumpwait.lua:loop", "lua", L["loop"]),
                               ("dumpwait.lua:0", "lua", L["main_spin"]),
                               (vm["frames"][3]["name"], "c", None)], vm
    assert_fast(wall, waited, "dump of a spinning process (sampled)")
    out, err = p.communicate(timeout=20)
    assert (p.returncode, out, err) == (0, "spun 0\n", "")


# --- several VMs ----------------------------------------------------------------------------

def test_dump_three_vms(privileged, procs, lua_build_ready):
    """A host with a VM per thread: each VM is given its own thread (by its
    C frame for the blocked ones, by a sample for the running one) and its
    own stack; the host's main thread, in no VM, is listed as such."""
    host = lua_build_ready("stock-luajit-host")
    L = marked_lines(VMS)
    p = start(host.command(VMS, "--threads", 3, 4), env=host.environ())
    procs.append(p)
    tids = {}
    while len(tids) < 3:
        m = re.fullmatch(r"thread (\d) tid (\d+)\n", p.stdout.readline())
        assert m, "the host did not start its threads"
        tids[int(m.group(1))] = int(m.group(2))
    wait_for(lambda: syscall_of(p.pid, tids[1]) == 0 and syscall_of(p.pid, tids[3]) == 61)
    rc, out, err, wall, waited = run_dump(p.pid, "--json")
    assert rc == 0 and err == "", err
    d = json.loads(out)
    assert len(d["vms"]) == 3, out
    by_tid = {vm["thread"]["tid"]: vm for vm in d["vms"] if vm["thread"]}
    assert set(by_tid) == set(tids.values()), out

    reader, spinner, sleeper = (by_tid[tids[i]] for i in (1, 2, 3))
    assert (reader["vmstate"], reader["stack_from"], reader["thread_from"]) == ("C", "memory", "stack")
    assert json_frames(reader) == [("read", "builtin", None),
                                   ("dumpvms.lua:wait_line", "lua", L["read"]),
                                   ("dumpvms.lua:0", "lua", L["main1"])]
    assert (sleeper["vmstate"], sleeper["stack_from"], sleeper["thread_from"]) == ("C", "memory", "stack")
    assert sleeper["thread"]["syscall_name"] == "wait4"
    assert json_frames(sleeper) == [("execute", "builtin", None),
                                    ("dumpvms.lua:nap", "lua", L["nap"]),
                                    ("dumpvms.lua:0", "lua", L["main3"])]
    assert (spinner["vmstate"], spinner["stack_from"], spinner["thread_from"]) == \
        ("interpreted", "sample", "sample")
    assert json_frames(spinner) == [("dumpvms.lua:spin", "lua", L["spin"]),
                                    ("dumpvms.lua:0", "lua", L["main2"])]
    main = next(t for t in d["threads"] if t["tid"] == p.pid)
    assert main["vm"] is None and main["state"] == "blocked"	# joining its threads
    assert {t["tid"]: t["vm"] for t in d["threads"] if t["tid"] != p.pid} == \
        {tid: by_tid[tid]["vm"] for tid in tids.values()}
    assert_fast(wall, waited, "dump of three VMs, one sampled")

    rc, text, err, wall, waited = run_dump(p.pid)
    assert rc == 0 and err == "", err
    assert text_stack(text, rf"^VM 0x[0-9a-f]+: C, thread {tids[1]} \(luahost\) blocked in read\b") == \
        ["read", f"dumpvms.lua:wait_line:{L['read']}", f"dumpvms.lua:0:{L['main1']}"], text
    assert re.search(rf"^Threads in no VM known:\n  {p.pid} \(luahost\) blocked in futex", text, re.M), text

    out, err = p.communicate("line\n", timeout=30)
    assert sorted(out.splitlines()) == ["got line", "slept 0", "spun 0"] and err == ""
    assert p.returncode == 0


# --- errors ---------------------------------------------------------------------------------

def free_pid():
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    return next(pid for pid in range(pid_max - 1, 300, -1) if not Path(f"/proc/{pid}").exists())


def test_dump_errors(privileged):
    """One line and exit 1 for a process that is not there or holds no
    LuaJIT; exit 2 for a dump without one -p, or --json without dump."""
    pid = free_pid()
    r = subprocess.run([str(NUPP), "dump", "-p", str(pid)], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"nupp-bpf: error: no process with PID {pid}\n")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = subprocess.run([str(NUPP), "dump", "-p", str(sleeper.pid)], capture_output=True, text=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"nupp-bpf: error: process {sleeper.pid} does not contain LuaJIT\n"
    for args, msg in ((["dump"], "dump takes one -p PID"),
                      (["dump", "-p", "1", "-p", "2"], "dump takes one -p PID"),
                      (["dump", "-p", "1", "-o", "x"],
                       "dump writes to stdout, once: it takes -p PID and --json"),
                      (["record", "--json", "-p", "1"], "--json is for dump and heap")):
        r = subprocess.run([str(NUPP), *args], capture_output=True, text=True)
        assert (r.returncode, r.stderr) == (2, f"nupp-bpf: error: {msg} (see nupp-bpf --help)\n")
