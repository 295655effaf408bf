"""trace_run.py - run one corpus program under the in-process truth and the BPF collector.

    python3 tests/helpers/trace_run.py [--benign] [--no-bpf] LUAJIT PROGRAM.lua

Used by tests/trace/test_trace.py. Returns (and prints
with --show) the target's stdout, stderr, exit status, the truth sites, the
collector's sites and both totals.
"""
import csv
import errno
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEV = os.path.join(ROOT, "build", "tests", "nupp-trace-dev")
TRUTH = os.path.join(ROOT, "tests", "fixtures", "aborts", "truth.lua")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def lua_env(luajit):
    """LUA_PATH and LD_LIBRARY_PATH so that luajit loads its own jit.* modules
    (jit.vmdef differs between trees) and its own libluajit."""
    exe = os.path.realpath(luajit)
    d = os.path.dirname(exe)
    env = {}
    cands = [d, os.path.join(os.path.dirname(d), "share", "luajit-2.1.0-beta3")]
    if "/luajit2/" in exe:   # the luajit2 .debs do not ship jit/*.lua: the pinned tree's
        cands.append(os.path.join(ROOT, "build", "luajit", "luajit2", "src"))
    for jd in cands:
        if os.path.exists(os.path.join(jd, "jit", "vmdef.lua")):
            env["LUA_PATH"] = jd + "/?.lua;;"
            break
    lib = os.path.join(os.path.dirname(d), "lib", "x86_64-linux-gnu")
    if os.path.isdir(lib) and not exe.startswith("/usr/"):
        env["LD_LIBRARY_PATH"] = lib
    return env


def wait_exec(pid, name, timeout=30.0):
    """Until process pid runs the program name (a wrapper has executed it).
    A collector attached to the wrapper instead finds no LuaJIT and never
    opens the sync FIFO, and the target then waits on it for good: fail
    here, saying so, rather than time out later with nothing said."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        try:
            seen = os.readlink("/proc/%d/exe" % pid)
        except OSError as e:
            if e.errno == errno.ESRCH or not os.path.exists("/proc/%d" % pid):
                return		# gone: the target's own status tells why
            seen = str(e)
        if os.path.basename(seen) == name:
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} did not execute {name} within {timeout} s (exe: {seen})")


def run(luajit, prog, benign=False, bpf=True, hook=True, env=None, timeout=120, drain=True):
    """Run prog under truth.lua, with the collector attached when bpf.
    luajit is a path, or an argv prefix (a container: tests/helpers/container),
    whose files live under this repository, which a container mounts.
    drain=False: the target exits without waiting for the collector to take
    in its aborts (the collector reads them after the process is gone)."""
    argv = [luajit] if isinstance(luajit, str) else list(luajit)
    luajit = argv[-1]
    tmp = os.path.join(ROOT, "build", "tmp")
    os.makedirs(tmp, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nupp-trace-", dir=tmp) as d:
        sync, done = os.path.join(d, "sync"), os.path.join(d, "done")
        truth, got = os.path.join(d, "truth.csv"), os.path.join(d, "bpf.csv")
        e = dict(os.environ, **lua_env(luajit))
        e.update(env or {})
        if bpf:
            os.mkfifo(sync)
            e.update(NUPP_TRACE_SYNC=sync)
            if drain:
                os.mkfifo(done)
                e.update(NUPP_TRACE_DONE=done)
        if not hook:
            e["NUPP_TRACE_NOHOOK"] = "1"
        cmd = argv + [TRUTH, truth] + (["--benign"] if benign else []) + [prog]
        t0 = time.monotonic()
        target = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                                  cwd=os.path.dirname(prog))
        dev = None
        if bpf and len(argv) > 1:	# a wrapper (container): until it has become luajit
            wait_exec(target.pid, os.path.basename(luajit))
        if bpf:
            dargs = [DEV, "--profile", "--sync", sync] + (["--done", done] if drain else []) + \
                ["-o", got, "-p", str(target.pid)]
            if benign:
                dargs.insert(1, "--benign")
            dev = subprocess.Popen(dargs, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = target.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # The target waits on a FIFO the collector never opened: say
            # what the collector said.
            target.kill()
            target.communicate()
            derr = b""
            if dev:
                dev.kill()
                derr = dev.communicate()[1]
            raise AssertionError(f"{cmd} did not end within {timeout} s; the collector "
                                 f"said: {derr.decode(errors='replace')}")
        wall = time.monotonic() - t0
        res = {"stdout": out, "stderr": err, "status": target.returncode, "wall": wall}
        if dev:
            dout, derr = dev.communicate(timeout=timeout)
            res["dev_status"] = dev.returncode
            res["dev_stderr"] = derr.decode(errors="replace")
            res["bpf"] = read_csv(got) if os.path.exists(got) else None
        if os.path.exists(truth):
            res["truth"] = read_csv(truth)
            with open(truth + ".totals") as f:
                res["truth_totals"] = f.read().strip()
        return res


if __name__ == "__main__":
    args = sys.argv[1:]
    benign = "--benign" in args
    bpf = "--no-bpf" not in args
    args = [a for a in args if not a.startswith("--")]
    r = run(args[0], os.path.abspath(args[1]), benign=benign, bpf=bpf)
    sys.stdout.write(r["stdout"].decode(errors="replace"))
    print("status", r["status"], "wall %.3f" % r["wall"])
    print("truth", r.get("truth_totals"))
    for row in r.get("truth", []):
        print("  T", row)
    if bpf:
        print("dev", r["dev_status"], r["dev_stderr"].strip())
        for row in r.get("bpf") or []:
            print("  B", row)
        print("EQUAL" if r.get("bpf") == r.get("truth") else "DIFFERENT")
