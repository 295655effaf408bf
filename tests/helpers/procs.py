# SPDX-License-Identifier: MIT
"""Target processes of the tests and what they use."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


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


def have(cmd):
    return shutil.which(cmd) is not None

