# SPDX-License-Identifier: MIT
"""Zones seen from outside: `nupp-bpf -p PID` on a script using nupp.profile.zone.

The gate opens when nupp-bpf attaches (the kernel raises the USDT semaphore),
samples carry the zone path open in the target, and when nupp-bpf is killed
with SIGKILL the kernel drops the semaphore again: the zone cost measured in
the script returns to the gated-off figure.
"""
import os
import re
import signal
import subprocess

from conftest import BUILD, NUPP, ROOT, parse_collapsed

LUA_ENV = dict(os.environ,
               LUA_PATH=f"{BUILD}/lua/?.lua;;", LUA_CPATH=f"{BUILD}/lua/?.so;;")
WINDOW = re.compile(r"^window (\d+) active (true|false) ns ([0-9.]+)$")


class Script:
    """The zonecost workload, with its window lines collected as they come."""

    def __init__(self, seconds):
        self.proc = subprocess.Popen(
            ["/usr/bin/luajit", str(ROOT / "tests/workloads/zonecost.lua"), str(seconds)],
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
        # physics spins twice as long as render; both inside "frame".
        render, physics = by_zone.get("frame/render", 0), by_zone.get("frame/physics", 0)
        assert render + physics >= 0.8 * total, by_zone
        assert 1.5 <= physics / max(render, 1) <= 2.6, by_zone
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
