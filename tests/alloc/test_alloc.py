# SPDX-License-Identifier: MIT
"""record --alloc: the bytes a VM allocates, sampled by bytes, charged to the
Lua stacks that allocated them (bpf/alloc.h, user/sampler/allocs.c).

The workload (tests/fixtures/workloads/allocs.lua) measures what each of its
functions allocates a call, with the collector stopped, then waits while
nupp-bpf attaches, and runs: three() allocates three times one()'s bytes in
strings it drops, held() strings it keeps to the end. It prints the truths:
each function's bytes and blocks over the run, and the bytes kept holds.

Model. An allocation is sampled when a Poisson process over the bytes
allocated (mean R, --alloc-mean) has an event inside it; a sampled block of
s bytes counts for R·g(s/R) bytes, g(x) = x / (1 - e^-x): the estimate of
each function's bytes is unbiased, and its number of samples N is Poisson
with mean T/R (T its true bytes), so its relative error has a standard
deviation of 1/sqrt(T/R). Here R = 8 KiB and blocks are ~1 KiB or ~4 KiB:

- three: T = 127 MB, N ~ 15,500, sd 0.8 %; bound ±6 % (7.5 sd), and its
  blocks (same N) ±8 %;
- one: T = 42 MB, N ~ 5,100, sd 1.4 %; bound ±8 % (5.7 sd);
- three's share of three + one: 75 % (the truths' ratio), sd 0.35 points;
  bound ±5 points, the issue's (14 sd);
- held's bytes still in use: T = 40.7 MB, N ~ 5,000, sd 1.4 %; bound
  ±10 % (7 sd). Its array's slots (80 KB) are in its row too, 0.2 %.

A bound at 5.7 sd fails once in 10^8 runs. Compiled, the traces the JIT
records while a function runs are that function's allocations too (a
GCtrace, its IR and snapshots), and they stay in use: a census beside a
busy loop per CPU found one sampled in 10 of 30 runs, which an exact bound
on three's blocks in use (1, the string table's array) took for a leak. The truths are the VM's own
count of its allocations (collectgarbage("count") with the collector
stopped), which the allocator's sizes make up.
"""
import os
import re
import subprocess

import pytest

from helpers import BUILDS, NUPP, go_pprof, wait_for_teardowns, workload

ALLOCS = workload("allocs.lua")
ROUNDS = 400
MEAN = "8K"


def truths(lines):
    """{"three": bytes, ..., "calls three": n, ...} from the workload's lines."""
    t = {}
    for line in lines:
        m = re.match(r"(truth|calls) (\S+) (\d+)$", line)
        if m:
            t[m[2] if m[1] == "truth" else f"calls {m[2]}"] = int(m[3])
    return t


def pprof_rows(path):
    """{leaf Lua function: [alloc_objects, alloc_space, inuse_objects,
    inuse_space]} summed over the file's samples, read by Go's pprof."""
    raw = go_pprof("-raw", path)
    head = raw.split("Samples:\n", 1)[1].splitlines()
    assert head[0].split() == ["alloc_objects/count", "alloc_space/bytes[dflt]",
                               "inuse_objects/count", "inuse_space/bytes"], head[0]
    locs = {}
    for m in re.finditer(r"^\s+(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(\S+)", raw, re.M):
        locs[m[1]] = m[2]
    rows = {}
    for m in re.finditer(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+): ([\d ]+)$", raw, re.M):
        leaf = locs.get(m[5].split()[0], "?")
        have = rows.setdefault(leaf, [0, 0, 0, 0])
        for i in range(4):
            have[i] += int(m[i + 1])
    return rows


class Attached:
    """allocs.lua started and waiting; nupp-bpf record --alloc -p attached to it."""

    def __init__(self, tmp_path, argv, env, extra=()):
        self.w = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert self.w.stdout.readline() == "ready\n", self.w.stderr.read()
        self.pb = tmp_path / "alloc.pb.gz"
        self.collapsed = tmp_path / "alloc.collapsed"
        wait_for_teardowns()
        self.n = subprocess.Popen([str(NUPP), "record", "--alloc", "--alloc-mean", MEAN, "-d",
                                   "120", *extra, "-o", str(self.pb), "-o", str(self.collapsed),
                                   "-p", str(self.w.pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.n.stderr.readline()
        assert line.startswith("nupp-bpf: recording"), line + self.n.stderr.read()

    def run(self):
        """Let the workload run its rounds; then stop nupp-bpf (^C) while it
        holds what it kept, and let it end. (truths, nupp-bpf's stderr)."""
        self.w.stdin.write("go\n")
        self.w.stdin.flush()
        lines = []
        while (line := self.w.stdout.readline()) not in ("done\n", ""):
            lines.append(line.strip())
        self.n.send_signal(2)
        _, err = self.n.communicate(timeout=60)
        assert self.n.returncode == 0, err
        out, _ = self.w.communicate("go\n", timeout=30)
        assert self.w.returncode == 0 and out == "", out
        return truths(lines), err

    def kill(self):
        for p in (self.w, self.n):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture
def attached(tmp_path):
    made = []

    def attach(argv, env, extra=()):
        a = Attached(tmp_path, argv, env, extra)
        made.append(a)
        return a
    yield attach
    for a in made:
        a.kill()


def within(est, truth, tol):
    return abs(est - truth) <= tol * truth


def assert_bytes(a, t, err):
    """three's and one's bytes allocated and held's still in use, read from
    a's pprof file, within the model's bounds of the truths t; their rows
    (Go's four values each) and a report for further assertions."""
    rows = pprof_rows(a.pb)
    three, one, held = (rows.get(f"allocs.lua:{f}", [0] * 4) for f in ("three", "one", "held"))
    report = f"truths {t}\nrows {rows}\n{err}"
    assert within(three[1], t["three"], 0.06), report
    assert within(one[1], t["one"], 0.08), report
    assert within(held[3], t["held.inuse"], 0.10), report
    return three, one, held, report


@pytest.mark.parametrize("jit", ["jit", "interpreted"])
@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2"])
def test_allocation_shares_and_bytes(privileged, attached, build_name, jit):
    """Each function's bytes and blocks allocated, three's share of three
    and one, and what held still holds, against the VM's own count."""
    b = BUILDS[build_name]
    argv = [*b.argv, *(["-joff"] if jit == "interpreted" else []), str(ALLOCS), str(ROUNDS)]
    a = attached(argv, b.environ())
    t, err = a.run()
    three, one, held, report = assert_bytes(a, t, err)
    assert within(three[0], t["calls three"], 0.08), report
    assert abs(three[1] / (three[1] + one[1]) - 0.75) <= 0.05, report
    # What three and one allocated was collected before the end: had frees
    # not been matched, 160 MB of their strings would be in use. What they
    # hold is the string table's array, grown while they ran (256 KB), and,
    # compiled, the traces the JIT recorded in them (a sampled one of
    # ~600 bytes counts for 8 KiB): 2 % of their bytes is 2.5 MB.
    assert three[3] + one[3] <= 0.02 * (t["three"] + t["one"]), report
    # The collapsed stacks count the same bytes allocated.
    collapsed = {line.rsplit(" ", 1)[0].split(";")[-1]: int(line.rsplit(" ", 1)[1])
                 for line in a.collapsed.read_text().splitlines()}
    assert collapsed["allocs.lua:three"] == three[1], (collapsed, report)


@pytest.mark.parametrize("build_name", ["stock-luajit-host", "stock-luajit2-host"])
def test_host_allocator_in_another_file(privileged, attached, build_name):
    """An embedder's VM made with lua_newstate(host_alloc, ...) allocates
    through a function of the host's executable (luahost --host-alloc),
    not LuaJIT's: that function is found in the file mapped there, verified
    as a function's entry in it and probed. Before, it was refused ("outside
    the LuaJIT file": 0 bytes). The model and bounds of the test above."""
    b = BUILDS[build_name]
    a = attached(b.command(ALLOCS, "--host-alloc", ROUNDS), b.environ())
    t, err = a.run()
    assert "not sampled" not in err, err
    assert_bytes(a, t, err)


def test_launched_program_keeps_what_its_vm_held_at_close(privileged, tmp_path):
    """Launch mode: the program's output and exit are its own, and the
    bytes still in use are those it held when lua_close began freeing
    everything (the model above, the same rounds: ±10 %, 7 sd)."""
    out = tmp_path / "alloc.pb.gz"
    b = BUILDS["stock-luajit"]
    plain = subprocess.run([*b.argv, str(ALLOCS), str(ROUNDS)], input="go\ngo\n",
                           capture_output=True, text=True, timeout=60)
    p = subprocess.run([str(NUPP), "record", "--alloc", "--alloc-mean", MEAN, "-d", "120",
                        "-o", str(out), "--", *b.argv, str(ALLOCS), str(ROUNDS)],
                       input="go\ngo\n", capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == plain.stdout, p.stderr
    t = truths(p.stdout.splitlines())
    rows = pprof_rows(out)
    held = rows.get("allocs.lua:held", [0] * 4)
    assert within(held[3], t["held.inuse"], 0.10), (t, rows, p.stderr)
    m = re.search(r"allocated in \d+ blocks, ([\d.]+) MiB of them", p.stderr)
    assert m and within(float(m[1]) * 1048576, t["held.inuse"], 0.10), p.stderr


@pytest.mark.parametrize("args, says", [
    (["record", "--alloc", "-p", "1"], "--alloc traps every allocation"),
    (["record", "--alloc-mean", "64K", "-d", "1", "-p", "1"], "--alloc-mean goes with --alloc"),
    (["record", "--alloc", "--off-cpu", "-d", "1", "-p", "1"], "--alloc samples by bytes"),
    (["record", "--alloc", "-F", "99", "-d", "1", "-p", "1"], "--alloc samples by bytes"),
    (["record", "--alloc", "--alloc-mean", "0", "-d", "1", "-p", "1"], "--alloc-mean wants"),
    (["record", "--alloc", "--alloc-mean", "2G", "-d", "1", "-p", "1"], "--alloc-mean wants"),
    (["record", "--alloc", "--alloc-mean", "12Q", "-d", "1", "-p", "1"], "--alloc-mean wants"),
    (["trace", "--alloc", "-d", "1", "-p", "1"], "--alloc is for record"),
])
def test_usage_errors(args, says):
    p = subprocess.run([str(NUPP), *args], capture_output=True, text=True, timeout=30)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("nupp-bpf: error: ") and says in lines[0], p.stderr


LUA_API_SCRIPT = """
local profile = require("nupp.profile")
local pad = string.rep("z", 2000)
kept = {}
local function grow(n) for i = 1, n do kept[#kept + 1] = pad .. i end end
local function churn(n) local s for i = 1, n do s = pad .. (i + 1e9) end return s end
local function bytes_of(f, n)   -- the VM's count, the collector stopped
  collectgarbage(); collectgarbage("stop")
  local before = collectgarbage("count"); f(n)
  local after = collectgarbage("count"); collectgarbage("restart")
  return (after - before) * 1024
end
local per_string = bytes_of(churn, 100) / 100
kept = {}
collectgarbage()
local s = profile.alloc({ meanBytes = 8192 })
grow(5000) churn(15000)
collectgarbage()
local r = s:stop(arg[1])
print(string.format("truth %.0f %.0f", 5000 * per_string, 15000 * per_string))
print(string.format("report %s %d %d %d %d", r.backend, r.bytes, r.objects, r.inuseBytes, r.stacks))
"""


def test_lua_api_alloc_session(privileged, tmp_path):
    """profile.alloc() in the script's own process: the bytes grow and churn
    allocate, and what grow keeps in use at the stop. Model as above, R =
    8 KiB: grow 10 MB (N ~ 1,240, sd 2.8 %; bound ±15 %, 5.3 sd), churn
    30 MB (N ~ 3,700, sd 1.6 %; bound ±10 %, 6 sd)."""
    script = tmp_path / "alloc_api.lua"
    script.write_text(LUA_API_SCRIPT)
    out = tmp_path / "api.collapsed"
    lua = NUPP.parent / "lua"
    env = {**os.environ, "LUA_PATH": f"{lua}/?.lua;;",
           "LUA_CPATH": f"{lua}/?.so;;", "NUPP_BACKEND": "bpf"}
    p = subprocess.run([*BUILDS["stock-luajit"].argv, str(script), str(out)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    grow_truth, churn_truth = map(float, re.search(r"truth (\S+) (\S+)", p.stdout).groups())
    backend, total, _, inuse, stacks = re.search(r"report (\S+) (\d+) (\d+) (\d+) (\d+)",
                                                 p.stdout).groups()
    assert backend == "bpf", p.stdout
    rows = {line.rsplit(" ", 1)[0].split(";")[-1]: int(line.rsplit(" ", 1)[1])
            for line in out.read_text().splitlines()}
    report = f"{p.stdout}\n{rows}"
    assert within(rows["alloc_api.lua:grow"], grow_truth, 0.15), report
    assert within(rows["alloc_api.lua:churn"], churn_truth, 0.10), report
    assert int(total) == sum(rows.values()) and int(stacks) == len(rows), report
    assert within(int(inuse), grow_truth, 0.15), report


def test_rotated_allocation_profiles_add_up(privileged, tmp_path):
    """record --alloc --rotate 1: each file holds its interval's
    allocations (they add up to the session's, which the summary states)
    and what was in use at its end. Exact: intervals are differences of the
    same counts."""
    script = tmp_path / "rot.lua"
    script.write_text(
        'local pad = string.rep("q", 1000)\nkept = {}\nlocal i = 0\n'
        'for r = 1, 30 do\n'
        '  for k = 1, 2000 do i = i + 1; local s = pad .. i;'
        ' if i % 10 == 0 then kept[#kept + 1] = s end end\n'
        '  os.execute("sleep 0.1")\nend\ncollectgarbage()\n')
    d = tmp_path / "rot"
    d.mkdir()
    p = subprocess.run([str(NUPP), "record", "--alloc", "--alloc-mean", "16K", "-d", "60",
                        "--rotate", "1", "-o", str(d), "--", *BUILDS["stock-luajit"].argv,
                        str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    files = sorted(d.glob("*.pb.gz"))
    assert len(files) >= 3, (files, p.stderr)
    alloc = sum(sum(r[1] for r in pprof_rows(f).values()) for f in files)
    m = re.search(r"([\d.]+) MiB allocated in", p.stderr)
    assert m and abs(alloc / 1048576 - float(m[1])) <= 0.051, (alloc, p.stderr)
    # The program kept a tenth of 60,000 strings of ~1 KB and collected
    # the rest: about 6.2 MB in use when its VM closed (the model above,
    # R = 16 KiB: N ~ 380, sd 5 %; bound ±25 %, 5 sd, and 1 MB for the
    # arrays and the string table).
    last = sum(r[3] for r in pprof_rows(files[-1]).values())
    assert 0.75 * 6.2e6 <= last <= 1.25 * 6.2e6 + 1e6, (last, p.stderr)


def test_a_program_that_allocates_little_has_an_empty_profile(privileged, tmp_path):
    """No sampled allocation is no error: the program's output and exit
    pass through, the profile is written, empty, and the summary says 0."""
    out = tmp_path / "none.collapsed"
    p = subprocess.run([str(NUPP), "record", "--alloc", "--alloc-mean", "1G", "-d", "30", "-o",
                        str(out), "--", *BUILDS["stock-luajit"].argv, "-e",
                        "io.write('hi') os.exit(3)"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and p.stdout == "hi", p.stderr
    assert out.read_text() == "" and "0.0 MiB allocated in 0 blocks" in p.stderr, p.stderr
