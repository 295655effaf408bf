# SPDX-License-Identifier: MIT
"""The calibration shapes of spans.lua: what a profile gives each part of a
shape's driver loop, against the truth the workload timed of its parts."""
import math
import re

SHAPES = ["noguard", "guardstart", "twolevel", "atend", "side", "stitch", "hoisted",
          "intfloat", "tables"]
FRAME_RE = re.compile(r"^spans\.lua:([A-Za-z_]\w*)(?::\d+)?$")


def truth_of(stdout):
    """{part: share} and "self", as spans.lua printed them."""
    out = {}
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "truth" and f[1] not in ("cpu", "sink", "rest"):
            out[f[1]] = float(f[2])
    return out


def truth_disturbed(stdout):
    """Whether spans.lua's timing says its parts alone took longer than the
    driver that runs them all (its `truth rest` below 0): no truth."""
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[:2] == ["truth", "rest"]:
            return float(f[2]) < 0
    return False


def split_of(rows, names):
    """{part or "self": samples} of the stacks under loop(): each sample to
    the innermost of loop() and the parts (names) in its stack."""
    got = {n: 0 for n in names}
    got["self"] = 0
    for stack, count in rows:
        fr = stack.split(";")
        at = None
        for i, f in enumerate(fr):
            m = FRAME_RE.match(f)
            if m and m[1] == "loop":
                at = i
        if at is None:
            continue
        who = "self"
        for f in fr[at + 1:]:
            m = FRAME_RE.match(f)
            if m and m[1] in got:
                who = m[1]
        got[who] += count
    return got


def errors(truth, got):
    """{name: (share %, truth %, error in points, binomial sigma in points)}."""
    n = sum(got.values())
    out = {}
    for name, t in truth.items():
        p = got.get(name, 0) / n if n else 0.0
        sigma = 100 * math.sqrt(max(t * (1 - t), 1e-4) / n) if n else float("inf")
        out[name] = (100 * p, 100 * t, 100 * (p - t), sigma)
    return out
