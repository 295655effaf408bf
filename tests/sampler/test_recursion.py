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

Compiled samples: these programs' traces exit and re-enter one another on
every few calls. A sample in a trace's head before the head stores the
trace's number in g->vmstate (a side trace moving its parent's registers;
a root trace entered from the interpreter, whose first instruction stalls
on the jump) maps through the trace the head names: 40 % of fib's compiled
samples in some runs were left unmapped, and 0.5 % were walked from a stale
L->base as read faults. Those in the interpreter's exit from a trace are
counted apart ("leaving a trace"), and so are those whose trace lua_close
freed before the last poll symbolized them ("trace gone": the exit's
loss, bounded as above). Measured after: 0 to 4 unmapped of 1,300
to 3,000 compiled samples a run (0.07 % overall), no read fault in 40 runs.
The bounds are Poisson counts at three times those rates (helpers.
poisson_bound, false alarm < 1e-4): before, fib crossed both.
"""
import re

import pytest

from helpers import BUILDS, workload
from helpers.nupp import poisson_bound

EXIT_LOSS_MAX = 150		# 1.5 polls of 100 ms at 997 Hz
MAPPED_RE = re.compile(r"^  compiled: (\d+) of (\d+) samples mapped", re.M)
TRACE_GONE_RE = re.compile(r"^  trace gone: (\d+) compiled samples", re.M)
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
    assert why.get("read fault", 0) <= poisson_bound(0.0005 * n), run.stderr
    m = MAPPED_RE.search(run.stderr)
    assert m, f"no compiled samples:\n{run.stderr}"
    mapped, compiled = int(m[1]), int(m[2])
    m = TRACE_GONE_RE.search(run.stderr)
    trace_gone = int(m[1]) if m else 0
    assert trace_gone <= EXIT_LOSS_MAX, run.stderr
    assert compiled - mapped - trace_gone <= poisson_bound(0.002 * compiled), run.stderr
