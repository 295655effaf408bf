# SPDX-License-Identifier: MIT
"""`nupp-bpf top`: the live view, driven as a person would, in tmux.

tests/fixtures/workloads/hotcold.lua runs a hot function three times as often as a
cold one with the same loop: hot holds 3/4 of their samples by
construction. In a tmux pane (send-keys, capture-pane) the view shows hot
on top with its share, sorts by total share on `t`, shows the workload's
trace aborts as they come, and quits on `q` with status 0, the terminal
given back and the target running on. On a dumb terminal, and with stdout
not a terminal, it prints plain text blocks instead; `top -- CMD` passes
the command's exit status through.
"""
import os
import re
import subprocess
import time

import pytest

from helpers import NUPP, STOCK_LUAJIT, cpu_seconds, wait_for, wait_for_teardowns, workload

HOTCOLD = workload("hotcold.lua")
ROW_RE = re.compile(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)  (\S.*)$", re.M)
SHARE = (0.65, 0.85)		# hot's share of hot + cold samples, 0.75 by construction
MIN_SAMPLES = 300		# of hot + cold, before the share is judged


def rows(text):
    """[(self%, total%, self, total, function)] of a view, in its order."""
    return [(float(a), float(b), int(c), int(d), e.rstrip()) for a, b, c, d, e in
            ROW_RE.findall(text)]


class Pane:
    """A tmux server of its own running one command in an 80x40 pane (the classic terminal; the
    header of a long command line must still show its PID)."""

    def __init__(self, tmp, command, env=""):
        self.sock = f"nupp-top-{os.getpid()}-{time.monotonic_ns()}"
        self.status = tmp / "status"
        shell = f"{env} {command}; echo $? > {self.status}; sleep 600"
        self.tmux("new-session", "-d", "-s", "top", "-x", "80", "-y", "40", shell)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True,
                              check=True, timeout=10).stdout

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "top")

    def history(self):
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", "top")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def exit_status(self, timeout=15):
        assert wait_for(lambda: self.status.exists() and self.status.read_text().strip(),
                        timeout), f"nupp-bpf top did not exit:\n{self.screen()}"
        return int(self.status.read_text())

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def pane(tmp_path):
    made = []

    def make(command, env=""):
        wait_for_teardowns()
        made.append(Pane(tmp_path, command, env))
        return made[-1]
    yield make
    for p in made:
        p.close()


def hot_share(view):
    by_name = {r[4]: r for r in rows(view)}
    hot, cold = by_name.get("hotcold.lua:hot"), by_name.get("hotcold.lua:cold")
    return (hot[2], cold[2]) if hot and cold else (0, 0)


def enough_samples(p):
    hot, cold = hot_share(p.screen())
    return hot + cold >= MIN_SAMPLES


def test_top_in_tmux(privileged, target, pane):
    """hot on top with its share; `t` sorts by total share; the aborts the
    workload starts after 2 s show up; `q` quits with status 0, the
    terminal given back, the target running on."""
    t = target(STOCK_LUAJIT, HOTCOLD, 600, 2, ready="ready")
    p = pane(f"{NUPP} top -F 997 -p {t.pid}")
    assert wait_for(lambda: enough_samples(p), 60), p.screen()
    view = p.screen()
    assert f"(PID {t.pid})" in view.splitlines()[0], view
    assert "sort: self%" in view, view
    first = rows(view)[0]
    assert first[4] == "hotcold.lua:hot", view
    hot, cold = hot_share(view)
    assert SHARE[0] <= hot / (hot + cold) <= SHARE[1], view
    # In the last second alone, hot is most of it too (the main chunk, the
    # clock and the aborts' chunk take the rest).
    assert 50 <= first[0] <= 90, view
    assert re.search(r"^VM states: compiled ([\d.]+)%", view, re.M), view

    p.keys("t")
    assert wait_for(lambda: "sort: total%" in p.screen(), 5), p.screen()
    view = p.screen()
    assert rows(view)[0][1] == 100.0, view	# the outermost frames hold every sample

    assert wait_for(lambda: "NYI: bytecode FNEW" in p.screen(), 30), p.screen()
    view = p.screen()
    assert re.search(r"^trace aborts: [1-9]\d*, blacklisted \d+", view, re.M), view
    assert re.search(r"^\d\d:\d\d:\d\d (warn|blacklist)\s+\d+  closures:3  NYI: bytecode FNEW",
                     view, re.M), view

    cpu = cpu_seconds(t.pid)
    p.keys("q")
    assert p.exit_status() == 0
    assert "nupp-bpf top" not in p.screen(), "the alternate screen was not left"
    time.sleep(0.5)
    assert t.alive() and cpu_seconds(t.pid) > cpu, "the target does not run on"


def test_top_dumb_terminal_in_tmux(privileged, target, pane):
    """TERM=dumb in a terminal: plain text blocks one after another, and
    `q` still quits."""
    t = target(STOCK_LUAJIT, HOTCOLD, ready="ready")
    p = pane(f"{NUPP} top -F 997 -p {t.pid}", env="TERM=dumb")
    assert wait_for(lambda: p.history().count("nupp-bpf top - ") >= 3, 30), p.history()
    assert "hotcold.lua:hot" in p.history()
    p.keys("q")
    assert p.exit_status() == 0
    assert t.alive()


def test_top_plain_text_to_a_pipe(privileged, target):
    """stdout a pipe: plain text blocks without an escape code, each with
    the header and the functions, hot first once it has samples."""
    t = target(STOCK_LUAJIT, HOTCOLD, ready="ready")
    wait_for_teardowns()
    p = subprocess.run([str(NUPP), "top", "-F", "997", "-d", "4", "-p", str(t.pid)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env={**os.environ, "TERM": "xterm"})
    assert p.returncode == 0, p.stderr
    assert "\033" not in p.stdout
    blocks = [b for b in p.stdout.split("\n\n") if b.strip()]
    assert len(blocks) >= 3, p.stdout
    for b in blocks:
        assert b.startswith("nupp-bpf top - ") and "\n SELF% TOTAL%" in b, b
    assert rows(blocks[-1])[0][4] == "hotcold.lua:hot", blocks[-1]
    assert t.alive()


def test_top_launch(privileged):
    """top -- CMD: the command's output and exit status pass through."""
    wait_for_teardowns()
    p = subprocess.run([str(NUPP), "top", "--", *STOCK_LUAJIT.command(HOTCOLD, 1)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ready\n"), p.stdout
    assert re.search(r"^\d+$", p.stdout, re.M), p.stdout		# the workload's last line
    bad = subprocess.run([str(NUPP), "top", "-o", "x", "-p", "1"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "top writes no files" in bad.stderr, bad.stderr


def test_top_children(privileged, target):
    """top -p MASTER --children: the workers forkworkers.lua forked are in
    the view, work_a and work_b each holding samples."""
    t = target(STOCK_LUAJIT, workload("forkworkers.lua"), 60, ready="forked")
    wait_for_teardowns()
    p = subprocess.run([str(NUPP), "top", "-F", "997", "-d", "4", "--children", "-p", str(t.pid)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    last = [b for b in p.stdout.split("\n\n") if b.strip()][-1]
    by_name = {r[4]: r for r in rows(last)}
    for fn in ("forkworkers.lua:work_a", "forkworkers.lua:work_b"):
        assert fn in by_name and by_name[fn][3] > 100, last
