# SPDX-License-Identifier: MIT
"""Zones seen from outside: `nupp-bpf -p PID` on a script using nupp.profile.zone.

The gate opens when nupp-bpf attaches (the kernel raises the USDT semaphore),
samples carry the zone path open in the target, and when nupp-bpf is killed
with SIGKILL the kernel drops the semaphore again: the zone cost measured in
the script returns to the gated-off figure.
"""
import json
import os
import re
import signal
import subprocess
import time

from helpers import BUILD, NUPP, ROOT, parse_collapsed

LUA_ENV = dict(os.environ,
               LUA_PATH=f"{BUILD}/lua/?.lua;;", LUA_CPATH=f"{BUILD}/lua/?.so;;")
WINDOW = re.compile(r"^window (\d+) active (true|false) ns ([0-9.]+)$")


class Script:
    """The zonecost workload, with its window lines collected as they come."""

    def __init__(self, seconds):
        self.proc = subprocess.Popen(
            ["/usr/bin/luajit", str(ROOT / "tests/fixtures/workloads/zonecost.lua"), str(seconds)],
            stdout=subprocess.PIPE, text=True, env=LUA_ENV)
        self.windows = []

    def next_window(self):
        line = self.proc.stdout.readline()
        m = WINDOW.match(line.strip())
        assert m, f"unexpected line from the workload: {line!r}"
        w = (int(m[1]), m[2] == "true", float(m[3]))
        self.windows.append(w)
        return w

    def close(self):
        self.proc.kill()
        self.proc.wait()


def test_zone_paths_in_external_profile(privileged, tmp_path):
    s = Script(8)
    try:
        assert s.next_window()[1] is False, "no profiler yet: the gate is closed"
        out = tmp_path / "z.collapsed"
        r = subprocess.run([str(NUPP), "record", "-p", str(s.proc.pid), "-F", "499", "-d", "2",
                            "--zones", "-o", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rows = parse_collapsed(out.read_text())
        by_zone = {}
        for stack, n in rows:
            m = re.match(r"^\[zone ([^\]]*)\];", stack)
            key = m[1] if m else ""
            by_zone[key] = by_zone.get(key, 0) + n
        total = sum(by_zone.values())
        assert total > 300, by_zone
        # physics spins twice as long as render; both inside "frame". The
        # model: each of the n samples in either lands in render with
        # probability 1/3, independently (Binomial(n, 1/3)); the bound, 3.9
        # standard deviations either side, fails less than once in 10,000
        # runs (at n ~ 900: render's share within 0.27-0.39, physics/render
        # within 1.5-2.7).
        render, physics = by_zone.get("frame/render", 0), by_zone.get("frame/physics", 0)
        n = render + physics
        assert n >= 0.8 * total, by_zone
        assert abs(render / n - 1 / 3) <= 3.9 * (2 / 9 / n) ** 0.5, by_zone
        stacks = [stack for stack, _ in rows if stack.startswith("[zone frame/render];")]
        assert any(stack.endswith("zonecost.lua:spin") for stack in stacks), stacks
    finally:
        s.close()


def test_sigkill_closes_the_gate(privileged, tmp_path):
    s = Script(12)
    try:
        closed = [s.next_window() for _ in range(3)]
        assert all(not active for _, active, _ in closed)
        off = min(ns for _, _, ns in closed)
        prof = subprocess.Popen([str(NUPP), "record", "-p", str(s.proc.pid), "-o", str(tmp_path / "x")],
                                stderr=subprocess.DEVNULL)
        opened = []
        while len(opened) < 2:
            w = s.next_window()
            if w[1]:
                opened.append(w)
            assert len(s.windows) < 20, "the gate never opened while nupp-bpf was attached"
        on = min(ns for _, _, ns in opened)
        prof.send_signal(signal.SIGKILL)
        prof.wait()
        after = []
        while len(after) < 2:
            w = s.next_window()
            if not w[1]:
                after.append(w)
            assert len(s.windows) < 40, "the gate stayed open after nupp-bpf was killed"
        back = min(ns for _, _, ns in after)
        # Gated on, a pair records the path; gated off it is one load and test.
        assert on > 2 * off, (off, on, s.windows)
        assert back < (off + on) / 2, (off, on, back, s.windows)
    finally:
        s.close()


def sampler_gc_epoch():
    """The GC epoch in slot 0 of the newest sampler's procs map (the array
    one; the trace collector's is a hash), 0 for none: struct nupp_proc
    (bpf/sampler_abi.h) holds it at bytes 8-15."""
    maps = json.loads(subprocess.run(["bpftool", "--json", "map", "show"], check=True,
                                     capture_output=True, text=True).stdout)
    ids = [m["id"] for m in maps if m.get("name") == "procs" and m["type"] == "array"]
    if not ids:
        return 0
    got = subprocess.run(["bpftool", "--json", "map", "lookup", "id", str(max(ids)),
                          "key", "0", "0", "0", "0"], capture_output=True, text=True)
    if got.returncode:
        return 0
    value = bytes(int(b, 16) for b in json.loads(got.stdout)["value"])
    return int.from_bytes(value[8:16], "little")


def test_gc_epoch_only_moves_on(privileged, tmp_path):
    """gclatezone.lua runs ~60 GC cycles a second and loads the zone module
    after 1.5 s of CPU; `nupp-bpf record -p PID --zones -d 3` attaches at
    0.3 s. The target's GC epoch in the sampler's procs map, read every
    50 ms, only ever moves on (by at least 60 cycles over the session), and
    samples carry the zone. Guards against handing the zone module to the
    sampler by rewriting the target's whole entry, GC epoch included, with
    the epoch of the attach, some 50 cycles back: the walk caches would then
    take entries made since (possibly of code freed since) for valid again."""
    out = tmp_path / "z.collapsed"
    target = subprocess.Popen(["/usr/bin/luajit", str(ROOT / "tests/fixtures/workloads/gclatezone.lua"),
                               "4", "1.5"], stdout=subprocess.PIPE, text=True, env=LUA_ENV)
    try:
        time.sleep(0.3)
        nupp = subprocess.Popen([str(NUPP), "record", "-p", str(target.pid), "-F", "997", "-d",
                                 "3", "--zones", "-o", str(out)], stderr=subprocess.PIPE, text=True)
        epochs = []
        while nupp.poll() is None:
            e = sampler_gc_epoch()
            if e and (not epochs or e != epochs[-1]):
                epochs.append(e)
            time.sleep(0.05)
        err = nupp.stderr.read()
        assert nupp.returncode == 0, err
        assert target.stdout.readline() == "zone loaded\n"
    finally:
        target.kill()
        target.wait()
    steps = [(b - a) % 2**64 for a, b in zip(epochs, epochs[1:])]
    assert all(s < 2**63 for s in steps), f"the GC epoch went back: {epochs}"
    assert sum(steps) >= 60, f"too few GC cycles seen: {epochs}"
    rows = parse_collapsed(out.read_text())
    assert any(stack.startswith("[zone late];") for stack, _ in rows), rows


def test_zones_from_the_first_sample(privileged, tmp_path):
    """Attached with --zones to a program that spends all its time inside
    two zones (3:1 by construction) and has its zone module loaded already:
    the gate opens before the first sample is counted, so every sample
    carries a zone, the two in about that proportion."""
    p = subprocess.Popen(["/usr/bin/luajit", str(ROOT / "tests/fixtures/workloads/zoneonly.lua"), "20"],
                         stdout=subprocess.PIPE, text=True, env=LUA_ENV)
    try:
        assert p.stdout.readline() == "ready\n"
        out = tmp_path / "z.collapsed"
        r = subprocess.run([str(NUPP), "record", "-p", str(p.pid), "-F", "997", "-d", "2",
                            "--zones", "-o", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        by_zone = {}
        for stack, n in parse_collapsed(out.read_text()):
            m = re.match(r"^\[zone ([^\]]*)\];", stack)
            by_zone[m[1] if m else ""] = by_zone.get(m[1] if m else "", 0) + n
        # 2 s at 997 Hz: ~2,000 samples on an idle machine, half that
        # beside a busy loop per CPU (the target gets half a CPU).
        n = sum(by_zone.values())
        assert n > 200, by_zone
        # Between a leave and the next enter lie a few ns: a sample or two
        # may fall there. Guards against losing every sample before the
        # first poll (up to 100 ms: tens of samples).
        assert by_zone.get("", 0) <= 2, f"samples without their zone: {by_zone}"
        assert set(by_zone) <= {"", "a", "b"}, by_zone
        # The model: each sample lands in "a" with p = 3/4 (its clock check
        # adds up to 2 points), binomial over n; 4.5 standard deviations
        # fail once in 150,000 runs.
        share = by_zone["a"] / (by_zone["a"] + by_zone["b"])
        sd = (0.75 * 0.25 / n) ** 0.5
        assert 0.75 - 4.5 * sd <= share <= 0.77 + 4.5 * sd, by_zone
    finally:
        p.kill()
        p.wait()



def test_zone_module_loaded_late_opens_the_gate_at_once(privileged, tmp_path):
    """gclatezone.lua (its heap grows at every poll) loads the zone module
    after 1 s of CPU and runs 2 s more inside the zone "late"; attached at
    0.3 s, nupp-bpf finds the module at its next poll (100 ms), as the
    process's resident file pages change when it loads one. Of the samples
    in churn, those in the zone are about 2 / 2.6 of them (0.74 measured);
    with the maps read at most once a second while the heap grows, and no
    eye on the file pages, 0.62."""
    out = tmp_path / "z.collapsed"
    target = subprocess.Popen(["/usr/bin/luajit", str(ROOT / "tests/fixtures/workloads/gclatezone.lua"),
                               "3", "1"], stdout=subprocess.PIPE, text=True, env=LUA_ENV)
    try:
        time.sleep(0.3)
        r = subprocess.run([str(NUPP), "record", "-p", str(target.pid), "-F", "997", "-d", "10",
                            "--zones", "-o", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert target.stdout.readline() == "zone loaded\n"
    finally:
        target.kill()
        target.wait()
    late = outside = 0
    for stack, n in parse_collapsed(out.read_text()):
        if stack.split(";")[-1] != "gclatezone.lua:churn":
            continue
        if stack.startswith("[zone late];"):
            late += n
        else:
            outside += n
    assert late + outside > 1500, (late, outside)
    assert late / (late + outside) >= 0.65, f"{late} samples in the zone, {outside} outside it"
