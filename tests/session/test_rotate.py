# SPDX-License-Identifier: MIT
"""Continuous mode: `record --rotate SECONDS -o DIR` writes one complete
profile per interval, and `--keep N` keeps the newest N.

The files of a session add up to it: the samples of every rotated file,
read back with Go's own `go tool pprof -raw`, sum to the session's total
as its summary states it, sample for sample, whatever crossed a rotation.
Each file is named by the pid and its interval's start (UTC), which is the
start the file itself records; each is read whole by pprof; and a watcher
that reads every file the moment it appears in the directory finds each
one complete (they are renamed into place).
"""
import gzip
import os
import re
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

from helpers import NUPP, STOCK_LUAJIT, assert_rate, cpu_seconds, go_pprof, parse_collapsed, parse_summary, \
    wait_for_teardowns, workload

HOTCOLD = workload("hotcold.lua")
NAME_RE = re.compile(r"^nupp-(\d+)-(\d{8}T\d{6}Z)\.(pb\.gz|collapsed)$")
SAMPLE_RE = re.compile(r"^\s+(\d+)\s+\d+: ", re.M)
COST_RE = re.compile(r"^Comment: nupp-bpf: (\d+) samples; its own CPU ([\d.]+) s over ([\d.]+) s "
                     r"\(([\d.]+)% of a core\)(; sampling at 1/(\d+) of the rate, each counting "
                     r"for (\d+))?$", re.M)
TIME_RE = re.compile(r"^Time: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)? ", re.M)


def pprof_raw(path):
    return go_pprof("-raw", path)


def raw_samples(raw):
    """samples/count summed over a -raw listing's samples."""
    return sum(int(m[1]) for m in SAMPLE_RE.finditer(raw))


class Watcher:
    """Reads each new file of a directory as soon as it is listed, and
    keeps what it found: a file renamed into place is whole when seen."""

    def __init__(self, d):
        self.dir, self.seen, self.broken = d, set(), []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        # One pass more after close(): a file renamed into place as the
        # session ended is seen too.
        while True:
            last = self.done.is_set()
            self._scan()
            if last:
                return
            time.sleep(0.005)

    def _scan(self):
        for p in self.dir.glob("*.pb.gz"):
            if p.name in self.seen:
                continue
            self.seen.add(p.name)
            try:
                gzip.decompress(p.read_bytes())
            except FileNotFoundError:
                pass		# --keep removed it meanwhile
            except (OSError, EOFError) as e:
                self.broken.append((p.name, str(e)))

    def close(self):
        self.done.set()
        self.thread.join()


def test_rotated_files_add_up_to_the_session(privileged, tmp_path):
    """A launched workload recorded with --rotate 1: one pprof file per
    second, named by pid and start, readable by pprof, seen whole as they
    appear; their samples sum to the session's total. Each says, as a
    pprof comment, its samples and nupp-bpf's own CPU over its interval."""
    out = tmp_path / "profiles"
    out.mkdir()
    watcher = Watcher(out)
    wait_for_teardowns()
    p = subprocess.run([str(NUPP), "record", "-F", "997", "--rotate", "1", "-o", f"{out}/",
                        "--", *STOCK_LUAJIT.command(HOTCOLD, 3)],
                       capture_output=True, text=True, timeout=120)
    watcher.close()
    assert p.returncode == 0, p.stderr
    summary = parse_summary(p.stderr)
    pid = int(re.search(r"^nupp-bpf: recording PID (\d+)", p.stderr, re.M)[1])
    files = sorted(out.iterdir())
    written = int(re.search(r"^nupp-bpf: wrote (\d+) profiles in ", p.stderr, re.M)[1])
    assert len(files) == written >= 2, (files, p.stderr)
    assert not watcher.broken, watcher.broken
    assert len(watcher.seen) == written, "the watcher saw other files than the rotated ones"
    total, starts, costs = 0, [], []
    for f in files:
        m = NAME_RE.match(f.name)
        assert m and m[3] == "pb.gz" and int(m[1]) == pid, f.name
        raw = pprof_raw(f)
        t = TIME_RE.search(raw)
        assert t, raw
        start = datetime.fromisoformat(t[1]).replace(tzinfo=timezone.utc)
        assert start.strftime("%Y%m%dT%H%M%SZ") == m[2], (f.name, t[0])
        starts.append(start.timestamp() + float(t[2] or 0))
        total += raw_samples(raw)
        # Each file says what its interval cost: its samples (exactly those
        # it holds) and nupp-bpf's own CPU over the interval's seconds.
        c = COST_RE.search(raw)
        assert c, f"{f.name} states no cost:\n{raw[:400]}"
        assert int(c[1]) == raw_samples(raw), (c[0], raw_samples(raw))
        # Both figures are printed to the millisecond: the last file's
        # interval can be a few of them (the target exited just after a
        # rotation), so the bound allows each its rounding.
        assert 0 <= float(c[2]) <= os.cpu_count() * (float(c[3]) + 0.0005) + 0.0005 \
            and float(c[3]) <= 1.6, c[0]
        costs.append(float(c[3]))
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    # Every file but the last covers one interval of 1 s: their starts are
    # a second apart, give or take a poll (100 ms) and a loaded machine.
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(0.99 <= g <= 1.5 for g in gaps[:-1]), gaps
    assert all(abs(c - g) <= 0.05 for c, g in zip(costs, gaps)), (costs, gaps)
    assert summary.samples > 1000, p.stderr
    assert total == summary.samples, f"rotated files hold {total}, the session {summary.samples}"


def test_keep_and_format(privileged, tmp_path, target):
    """--keep 2 with --format collapsed on a running process for 4 s:
    every interval was written, only the newest two are left, and they
    are the last two written (the session's final counts end the last)."""
    t = target(STOCK_LUAJIT, HOTCOLD, ready="ready")
    out = tmp_path / "profiles"
    out.mkdir()
    wait_for_teardowns()
    p = subprocess.run([str(NUPP), "record", "-F", "997", "--rotate", "1", "--keep", "2",
                        "--format", "collapsed", "-d", "4", "-p", str(t.pid), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    written = int(re.search(r"^nupp-bpf: wrote (\d+) profiles in ", p.stderr, re.M)[1])
    files = sorted(out.iterdir())
    assert written >= 4, p.stderr
    assert len(files) == 2, files
    for f in files:
        m = NAME_RE.match(f.name)
        assert m and m[3] == "collapsed" and int(m[1]) == t.pid, f.name
    # The newest two: consecutive intervals (the last one's, a second or
    # less, and the one before), ended with the session just now.
    first, last = (datetime.strptime(NAME_RE.match(f.name)[2], "%Y%m%dT%H%M%SZ")
                   for f in files)
    age = datetime.now(timezone.utc).replace(tzinfo=None) - last
    assert 0 < (last - first).total_seconds() <= 2 and age.total_seconds() < 10, (files, age)
    rows = parse_collapsed(files[0].read_text())
    assert sum(c for _, c in rows) > 0
    assert t.alive()


def test_rotate_errors(privileged, tmp_path):
    """--rotate and --keep against what they go with: usage errors (exit 2);
    a directory that cannot take the files: one error line (exit 1)."""
    plain = tmp_path / "file"
    plain.write_text("")
    cases = [
        (["trace", "--rotate", "1", "-p", "1"], 2, "--rotate is for record"),
        (["--rotate", "1", "-p", "1"], 2, "--rotate is for record"),
        (["record", "--keep", "3", "-p", "1"], 2, "--keep goes with --rotate"),
        (["record", "--rotate", "0", "-p", "1"], 2, "--rotate wants a whole number"),
        (["record", "--rotate", "1", "-o", "-", "-p", "1"], 2, "not to stdout"),
        (["record", "--rotate", "1", "-o", "a", "-o", "b", "-p", "1"], 2, "one -o DIR"),
        (["record", "--rotate", "1", "-o", str(plain), "--", "true"], 1,
         f"cannot write files in {plain}"),
        (["record", "--rotate", "1", "-o", str(tmp_path / "none"), "--", "true"], 1,
         "No such file or directory"),
    ]
    for args, status, text in cases:
        p = subprocess.run([str(NUPP), *args], capture_output=True, text=True, timeout=30)
        lines = p.stderr.splitlines()
        assert p.returncode == status and len(lines) == 1 and text in lines[0] and \
            lines[0].startswith("nupp-bpf: error: "), (args, p.returncode, p.stderr)


@pytest.mark.parametrize("clock", ["cpu", "thread", "tick"])
def test_max_cpu_lowers_the_rate(privileged, tmp_path, target, clock):
    """--max-cpu below anything nupp-bpf can spend (0.01 % of a core: 0.5 ms
    of CPU per 5-s window, where its polls alone take more): the rate is
    halved at the end of each window, said on stderr at 499 then 249 Hz,
    and each file of a --rotate 4 session of 13 s says the rate it ended at.
    Counts stay samples at the rate asked: a sample counts for 2, then 4,
    so that every stack's count in the last file (12 to 13 s, all at 1/4
    of the rate) is a multiple of 4, and in the third (8 to 12 s) of 2;
    the files add up to the session's total, and that total is 997 a CPU
    second the target ran (assert_rate's bounds). --clock cpu lowers the
    events' rate, --clock thread keeps one sample in 2, then 4, at random
    (the events' periods tell whose they are), --clock tick thins the ticks
    twice, then four times as much: there at 200 Hz (the tick's rate is at
    least 250 where CI runs), said at 100 then 50 Hz."""
    t = target(STOCK_LUAJIT, HOTCOLD, 60, ready="ready")
    out = tmp_path / "profiles"
    out.mkdir()
    wait_for_teardowns()
    cpu0 = cpu_seconds(t.pid)
    hz = 200 if clock == "tick" else 997
    p = subprocess.run([str(NUPP), "record", "-F", str(hz), "--clock", clock, "--max-cpu", "0.01", "--rotate", "4",
                        "-d", "13", "-p", str(t.pid), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    cpu = cpu_seconds(t.pid) - cpu0
    assert p.returncode == 0, p.stderr
    notes = re.findall(r"^nupp-bpf: note: its own CPU was [\d.]+% of a core over 5 s, above "
                       r"--max-cpu 0.01%: sampling at (\d+) Hz from now \(a sample counts for "
                       r"(\d+)\)$", p.stderr, re.M)
    assert notes == {997: [("499", "2"), ("249", "4")], 200: [("100", "2"), ("50", "4")]}[hz], p.stderr
    assert "--max-cpu: sampled at 1/4 of the rate asked at the end" in p.stderr, p.stderr
    summary = parse_summary(p.stderr)
    files = sorted(out.iterdir())
    assert len(files) == 4, files
    total, weights = 0, []
    units = [1, 1, 2, 4]	# what every count of each file is a multiple of
    for f, unit in zip(files, units):
        raw = pprof_raw(f)
        cost = COST_RE.search(raw)
        assert cost, raw
        total += raw_samples(raw)
        weights.append(int(cost[6] or 1))
        counts = [int(m[1]) for m in SAMPLE_RE.finditer(raw)]
        assert counts and all(c % unit == 0 for c in counts), (f.name, unit, counts)
    # The first file ends before the first window does (4 s < 5 s), the
    # second after it, the third and the last (12 to 13 s) after the second.
    assert weights == [1, 2, 4, 4], weights
    assert total == summary.samples, f"rotated files hold {total}, the session {summary.samples}"
    assert_rate(summary.samples, cpu, hz)

