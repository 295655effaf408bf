# SPDX-License-Identifier: MIT
"""How often a session wakes. A steady program (a busy loop: one stack, no
trace aborts) gives nupp-bpf nothing to take in after its first samples: it
waits from one 100-ms poll to the next, woken only by new stacks (their ring)
and aborts (theirs), with samples alone (`record`) and with the trace
channel too (the default job). Each wake is a voluntary context switch of
nupp-bpf (wait4's rusage, its threads included); a clock tick every 10 ms
would be 100 a second."""
import os
import re
import subprocess
import time

import pytest

from helpers import NUPP, STOCK_LUAJIT, cpu_seconds, wait_for_teardowns

SECONDS = 4
PER_SECOND = 25		# ~12 measured (10 polls, the start's threads and files); 100 with ticks


@pytest.mark.parametrize("job", [["record"], []], ids=["record", "default-job"])
def test_steady_program_wakes_at_polls(privileged, tmp_path, job):
    """At most 25 wakes a second, with ~12 measured: a session that sampled
    the loop throughout. The loop's CPU time during the session is the
    model of its samples (997 a CPU second, times the machine's timer
    efficiency k: 0.91-0.98 here, 0.61-0.69 on a fresh VM, docs/testing.md;
    a busy loop per CPU halves the CPU time): at least 30 % of 997 a CPU
    second, where a session that stopped sampling after its first poll
    (0.1 of 4 s) would have 2.5 %."""
    tgt = subprocess.Popen([*STOCK_LUAJIT.argv, "-e", "local x = 0 for i = 1, 1e12 do x = x + i end"])
    try:
        time.sleep(0.5)
        wait_for_teardowns()
        cpu0 = cpu_seconds(tgt.pid)
        p = subprocess.Popen([str(NUPP), *job, "-o", str(tmp_path / "p"), "-p", str(tgt.pid),
                              "-F", "997", "-d", str(SECONDS)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        cpu = cpu_seconds(tgt.pid) - cpu0
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        tgt.kill()
        tgt.wait()
    assert p.returncode == 0, err
    m = re.search(r"^nupp-bpf: [\d.]+ s, (\d+) samples, \d+ stacks$", err, re.M)
    assert m and int(m[1]) >= 0.3 * 997 * cpu, \
        f"the loop was not sampled throughout ({cpu:.2f} CPU seconds):\n{err}"
    assert usage.ru_nvcsw <= PER_SECOND * SECONDS, \
        f"{usage.ru_nvcsw} voluntary context switches in {SECONDS} s:\n{err}"
