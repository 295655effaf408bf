# SPDX-License-Identifier: MIT
"""Deep Lua recursion, compiled: traces that recurse down (fib, ack: a call
of the function the trace started in) and up (returns into it), and a
recursive tree walk, deeper than the sampler's walk (--depth 16 of stacks
60 to 500 frames deep). Every sample resolves but for a few lost at the
target's exit.

Model: a sample fails to resolve only at the instructions where a frame is
half made (about 1 in 10,000, `test_interp_base_around_c_calls`), so at
most 0.5 % of >= 1,000 samples may be `bad frame base` or any other cause
but the target's exit. At the exit, the samples of stacks first seen in the
last poll before the process ended (`target gone before symbolization`) are
lost: at most a poll's worth, 100 ms at 997 Hz, here bounded at 150 (the
tree walk's exit frees its heap in lua_close: 33 once in 30 runs beside a
busy loop per CPU, 1.1 % of that run's samples).
"""
import re

import pytest

from helpers import BUILDS, workload

EXIT_LOSS_MAX = 150		# 1.5 polls of 100 ms at 997 Hz
UNRESOLVED_RE = re.compile(r"^  unresolved: (\d+) of (\d+) samples \(([^)]*)\)$", re.M)


def causes(stderr):
    """{cause: samples} of the summary's unresolved line, and its total."""
    m = UNRESOLVED_RE.search(stderr)
    if not m:
        assert "unresolved:" not in stderr, f"the summary's unresolved line changed:\n{stderr}"
        return {}, 0
    out = {}
    for part in m[3].split(", "):
        name, _, n = part.rpartition(" ")
        out[name] = int(n)
    return out, int(m[2])


@pytest.mark.parametrize("mode", ["fib", "ack", "tree"])
@pytest.mark.parametrize("build_name", ["stock-luajit", "stock-luajit2"])
def test_deep_recursion_resolves(nupp, lua_build_ready, build_name, mode):
    b = lua_build_ready(build_name)
    run = nupp.launch(b, workload("recurse.lua"), mode, 3, timeout=120)
    assert run.returncode == 0, run
    n = run.summary.samples
    assert n >= 1000, f"{n} samples:\n{run}"
    why, of = causes(run.stderr)
    gone = why.pop("target gone before symbolization", 0)
    lost = sum(why.values())
    assert lost <= 0.005 * n, f"{lost} of {n} samples unresolved ({why}):\n{run.stderr}"
    assert gone <= EXIT_LOSS_MAX, f"{gone} of {n} samples lost at the exit:\n{run.stderr}"
    assert why.get("bad frame base", 0) <= 0.005 * n, run.stderr
