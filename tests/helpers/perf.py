# SPDX-License-Identifier: MIT
"""The kernel's own sampling of a run, for comparison with nupp-bpf's:
`perf record -a` beside it, its samples per process; and the [pid/tid vm
ADDR] frame that --threads puts first in each collapsed stack."""
import re
import signal
import subprocess
import time

# --threads: [pid/tid vm 0xADDR];rest of the stack
THREAD_RE = re.compile(r"^\[(\d+)/(\d+) vm (0x[0-9a-f]+)\];(.*)$")


def perf_counts(data):
    """{pid: samples} of a perf.data file."""
    rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "pid", "-F", "sample,pid",
                          "--stdio"], capture_output=True, text=True, timeout=120).stdout
    return {int(m[2]): int(m[1]) for m in re.finditer(r"^\s*(\d+)\s+(\d+):", rep, re.M)}


class PerfBeside:
    """`perf record -e cpu-clock -F FREQ -a` into DATA until stop(): every
    CPU sampled by the kernel's own timer over the same run. Its events are
    open once the constructor returns."""

    def __init__(self, data, freq=997, timeout=20):
        self.data = data
        self.p = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq),
                                   "-a", "-o", str(data), "--", "sleep", "600"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # perf has opened its events once its output file has its header
        end = time.monotonic() + timeout
        while not (data.exists() and data.stat().st_size > 0) and self.p.poll() is None \
                and time.monotonic() < end:
            time.sleep(0.02)
        if self.p.poll() is not None:
            raise RuntimeError(f"perf record failed: {self.p.stderr.read()}")

    def interrupt(self):
        """Ends the recording (perf writes its file on SIGINT)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)

    def stop(self):
        """{pid: samples} of the whole recording."""
        self.interrupt()
        self.p.wait(timeout=60)
        return perf_counts(self.data)
