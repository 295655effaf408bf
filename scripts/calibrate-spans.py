#!/usr/bin/python3
"""calibrate-spans.py - how true compiled samples are between two guards.

    sudo /usr/bin/python3 scripts/calibrate-spans.py [--seconds 3] [--runs 1]
        [--builds stock-luajit,stock-luajit2] [--shapes noguard,...] [--no-jp]

For each shape of tests/fixtures/workloads/spans.lua, each build, compiled
and with -joff: records the shape at 997 Hz with nupp-bpf twice, as it maps
compiled samples now (each span of a trace's code placed on the bytecodes it
ran, user/sampler/bcpath.h) and as it did before (NUPP_SPANS=snapshot: a span's code
all to the snapshot it starts at), and runs it under LuaJIT's own profiler
(jit.profile at 1 ms, names as dumpstack gives them, each sample to the innermost of loop() and the parts
on its stack). Prints a markdown table: each part's truth (the workload's
timing of its parts alone) and the share each profiler gave it, and the
largest error of each over the shape's parts, in points, all against the
truth of the first run (jit.profile's hooks slow the workload's own timing
down when it runs under them).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.helpers.builds import BUILDS  # noqa: E402
from tests.helpers.nupp import parse_collapsed  # noqa: E402
from tests.helpers.spans import SHAPES, errors, split_of, truth_of  # noqa: E402

SPANS = ROOT / "tests/fixtures/workloads/spans.lua"
NUPP = ROOT / "build/nupp-bpf"

# jit.profile inside the process: each sample's stack of functions, named as
# dumpstack names them (chunk:line of the definition), counted.
JP = r"""
local script, seconds = ...
local profile = require("jit.profile")
local counts = {}
arg = { [0] = script, select(3, ...) }
profile.start("fi1", function(th, samples)
  local s = profile.dumpstack(th, "f;", -40)
  counts[s] = (counts[s] or 0) + samples
end)
dofile(script)
profile.stop()
local f = assert(io.open(os.getenv("JP_OUT"), "w"))
for s, n in pairs(counts) do f:write(s, " ", n, "\n") end
f:close()
"""


def definitions():
    """spans.lua's functions by the line they start on (dumpstack's name)."""
    names = {}
    for no, line in enumerate(SPANS.read_text().splitlines(), 1):
        m = re.match(r"\s*local function (\w+)\(", line)
        if m:
            names[no] = m[1]
    return names


def jp_rows(build, shape, seconds, joff):
    defs = definitions()
    with tempfile.TemporaryDirectory() as d:
        wrap = Path(d) / "jp.lua"
        wrap.write_text(JP)
        out = Path(d) / "jp.txt"
        argv = list(build.argv) + (["-joff"] if joff else []) + [str(wrap), str(SPANS), "",
                                                                shape, str(seconds)]
        env = build.environ()
        env["JP_OUT"] = str(out)
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        if run.returncode:
            raise SystemExit(f"jit.profile run failed: {run.stderr}")
        rows = []
        for line in out.read_text().splitlines():
            stack, n = line.rsplit(" ", 1)
            fr = []
            for f in stack.strip(";").split(";"):
                m = re.match(r"^.*spans\.lua:(\d+)$", f)
                if m:
                    f = f"spans.lua:{defs.get(int(m[1]), m[1])}"
                elif re.match(r"^[A-Za-z_]\w*$", f):
                    f = f"spans.lua:{f}"	# named by its caller
                fr.append(f)
            rows.append((";".join(fr), int(n)))
        return run.stdout, rows


def nupp_rows(build, shape, seconds, joff, model):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.collapsed"
        env = build.environ()
        if model == "snapshot":
            env["NUPP_SPANS"] = "snapshot"
        argv = [str(NUPP), "record", "-F", "997", "-o", str(out), "--",
                *build.argv, *(["-joff"] if joff else []), str(SPANS), shape, str(seconds)]
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        if run.returncode:
            raise SystemExit(f"nupp-bpf failed: {run.stderr}")
        return run.stdout, parse_collapsed(out.read_text())


def worst(errs):
    return max(abs(e[2]) for e in errs.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--builds", default="stock-luajit,stock-luajit2")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--modes", default="jit,joff")
    ap.add_argument("--no-jp", action="store_true")
    args = ap.parse_args()
    print("| shape | build | mode | part: truth / nupp-bpf / before / jit.p (%) |"
          " error: nupp-bpf | before | jit.p (points) | samples |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        for bname in args.builds.split(","):
            build = BUILDS[bname]
            for mode in args.modes.split(","):
                joff = mode == "joff"
                stdout, rows = nupp_rows(build, shape, args.seconds, joff, "path")
                truth = truth_of(stdout)
                names = [n for n in truth if n != "self"]
                now = split_of(rows, names)
                e_now = errors(truth, now)
                _, rows2 = nupp_rows(build, shape, args.seconds, joff, "snapshot")
                e_before = errors(truth, split_of(rows2, names))
                if args.no_jp:
                    e_jp = None
                else:
                    _, rows3 = jp_rows(build, shape, args.seconds, joff)
                    e_jp = errors(truth, split_of(rows3, names))
                parts = []
                for n in names + ["self"]:
                    cell = f"{n} {e_now[n][1]:.0f} / {e_now[n][0]:.0f} / {e_before[n][0]:.0f}"
                    if e_jp:
                        cell += f" / {e_jp[n][0]:.0f}"
                    parts.append(cell)
                jp = f"{worst(e_jp):.1f}" if e_jp else "-"
                print(f"| {shape} | {bname} | {mode} | {'; '.join(parts)} | "
                      f"{worst(e_now):.1f} | {worst(e_before):.1f} | {jp} | "
                      f"{sum(now.values())} |", flush=True)


if __name__ == "__main__":
    main()
