# SPDX-License-Identifier: MIT
"""Compiled time between two guards, placed on the bytecode that ran there
(user/sampler/bcpath.h), against the calibration shapes of spans.lua.

Each shape is a driver loop, loop(), calling parts (a, b, ...) that the JIT
inlines into its trace. spans.lua times each part alone (the best of 21
interleaved rounds, minus an empty loop) and prints each part's share of
the driver's time: its truth. A sample under loop() goes to the innermost
of loop() and the parts on its stack (loop() itself: "self").

Model: over n samples under loop(), a part with truth t gets a binomial
count, standard error s = sqrt(t (1 - t) / n), ~0.8 points at n ~ 3,000.
A part passes within 5 points (the goal) plus 4.5 s: a part whose mapping
were right fails less than once in 100,000 runs on sampling noise alone.
The measured errors, shape by shape and before this mapping, are in
docs/testing.md (scripts/calibrate-spans.py).
"""
import re

import pytest

from helpers import workload
from helpers.spans import SHAPES, errors, split_of, truth_disturbed, truth_of

GOAL = 5.0		# points
Z = 4.5
TRUTH_TRIES = 3
BUILDS = ["stock-luajit", "stock-luajit2"]
# Shapes whose error is larger, each for a measured reason (docs/testing.md),
# bounded where it stands so that a regression still fails:
# - stitch, compiled: the stitched builtin runs through the interpreter and C
#   (samples of loop() itself), and b's share falls below its truth, loop()'s
#   own rises above it; LuaJIT's own profiler gives the same split. The
#   stitched trace's first span (from its start in loop() to b4's guard) is
#   shared out by bytecodes, loop()'s among them. Measured 2026-12-06: b4
#   -9 to -11, self +9 to +11.6 points over 9 runs (a fresh-clone CI failed
#   at +11.6 against a bound of 10 + 4.5 sd = 11.4), so 14. The kernel's
#   own sampling (perf, by address in the traces' code) gives the stitched
#   trace 14 % of the driver's samples where b4's timing says 23.5 %: the
#   timing, not the mapping, is off (docs/testing.md).
# intfloat, compiled, had 10 while a builtin call weighed as one arithmetic
# bytecode (5-7 points off); at twice that (bcpath.c, W_BUILTIN) it is
# 1-2 points off, and the kernel's own sampling by address agrees with the
# timing (a 71 %): it takes the common bound.
ALLOWED = {("stitch", "jit"): 14.0}
# Where nupp-bpf, its earlier mapping and LuaJIT's own profiler agree with
# one another and not with the parts' isolated timing, the truth is what
# fails: a's table stores overlap b's arithmetic (tables, compiled: every
# profiler gives a ~36 %, the timing 85-90 %; interpreted, the timing's
# share of loop() itself moved between 6 and 11 % from run to run), and the
# interpreter runs a's builtins slower alone than in the driver (intfloat,
# -joff: 70 % against 74-81 %). Measured and published, not asserted.
NOT_ASSERTED = {("tables", "jit"), ("tables", "joff"), ("intfloat", "joff")}
CASES = [(shape, build, mode) for shape in SHAPES for build in BUILDS for mode in ("jit", "joff")
         if (shape, mode) not in NOT_ASSERTED]


def record_shape(nupp, build, shape, joff, extra=()):
    argv = ["--", *build.argv, *(["-joff"] if joff else []), str(workload("spans.lua")), shape, 3]
    run = nupp.record(argv, extra=extra, env=build.environ(), timeout=180)
    assert run.returncode == 0, run
    return run


@pytest.mark.parametrize("shape,build_name,mode", CASES)
def test_span_shapes(nupp, lua_build_ready, shape, build_name, mode):
    """Each part of each shape within 5 points (ALLOWED: more) + 4.5
    standard errors of its truth, compiled and interpreted (-joff), on both
    stock builds."""
    goal = ALLOWED.get((shape, mode), GOAL)
    b = lua_build_ready(build_name)
    # A timing whose parts alone add up to more than the driver was
    # disturbed while it ran (a fresh-clone CI run of 7923db2: side, -joff,
    # a12 + b4 at 101 % of loop(), loop()'s own share read 0 for 3-6 %):
    # the run is measured again, twice at most; the last is asserted as it is.
    for _ in range(TRUTH_TRIES):
        run = record_shape(nupp, b, shape, mode == "joff")
        if not truth_disturbed(run.stdout):
            break
    truth = truth_of(run.stdout)
    assert "self" in truth and len(truth) >= 2, f"spans.lua printed no truth:\n{run.stdout}"
    got = split_of(run.rows, [n for n in truth if n != "self"])
    n = sum(got.values())
    assert n >= 2000, f"{n} samples under loop():\n{run}"
    errs = errors(truth, got)
    text = run.output.read_text()
    for name, (share, want, err, sigma) in errs.items():
        assert abs(err) <= goal + Z * sigma, \
            f"{shape}: {name} has {share:.1f} % of loop()'s samples, its truth is " \
            f"{want:.1f} % (bound {goal + Z * sigma:.1f} points):\n{errs}\n{text}"


LINE_RE = re.compile(r";spans\.lua:loop:\d+;spans\.lua:a12:(\d+)$")


@pytest.mark.parametrize("build_name", BUILDS)
def test_lines_between_guards(nupp, lua_build_ready, build_name):
    """--lines in compiled code names the line that ran: in the noguard
    shape a12 is 12 lines of the same arithmetic and one compare at its
    end, its only guard. Each of the 12 lines holds about a twelfth of
    a12's samples (m ~ 180 each: its count within [0.5 m, 1.6 m] is more
    than 5 standard errors (sqrt(m) ~ 13) either way), the compare's line
    no more than two twelfths, and loop()'s call line, where the span
    starts, under 10 % of loop()'s samples (it was 74 %: the span all to
    the snapshot at the call)."""
    b = lua_build_ready(build_name)
    run = record_shape(nupp, b, "noguard", False, extra=["--lines"])
    per_line = {}
    under_loop = self_ = 0
    for st, c in run.rows:
        if ";spans.lua:loop:" not in st:
            continue
        under_loop += c
        m = LINE_RE.search(st)
        if m:
            per_line[int(m[1])] = per_line.get(int(m[1]), 0) + c
        elif re.search(r";spans\.lua:loop:\d+$", st):
            self_ += c
    text = run.output.read_text()
    assert len(per_line) >= 12, f"a12's lines: {per_line}\n{text}"
    lines = sorted(per_line)
    body, compare = lines[-13:-1], lines[-1]
    m = sum(per_line[x] for x in body) / 12
    for x in body:
        assert 0.5 * m <= per_line[x] <= 1.6 * m, f"a12:{x} has {per_line[x]}, mean {m:.0f}:\n{text}"
    assert per_line[compare] <= 2 * m, f"the compare a12:{compare}: {per_line[compare]}:\n{text}"
    assert self_ < 0.1 * under_loop, f"loop() itself: {self_} of {under_loop}:\n{text}"
