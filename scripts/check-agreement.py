#!/usr/bin/python3
"""check-agreement.py - `nupp-bpf check` against the runtime collector.

Runs every program given under `nupp-bpf trace` (the runtime collector) and
under `nupp-bpf check`, and compares the blocker sites, keyed by jit.v
location and reasonId:

  recall     the runtime blocker sites a reader of the bytecode can decide
             (NYI bytecodes; NYI builtins where the build aborts on them)
             that check predicted. A site in code the program made at run
             time (loadstring) is not in its file: it is listed apart, as
             check -p PID is what sees it.
  precision  the predicted blocker sites (severity blacklist or warn) that
             aborted, counted in code that ran hot: functions the recorder
             recorded the site's bytecode (jit.attach "record" events,
             in a separate run of the program). Printed twice: against
             the collector's runs, and against LuaJIT's own abort events
             (jit.attach "trace") in the runs that found the code hot.

  check-agreement.py [--luajit PATH] [--nupp build/nupp-bpf] [--json OUT]
                     [--also LIBDIR]... PROGRAM[:ARGS]... | --list FILE

--also names library code the programs load (a test suite's modules):
checked with each program, its sites count as the program's.

A program is run in its own directory with its ARGS (split on ','), --runs
times under each (2.1 seeds the recorder's penalty PRNG at random: which
traces form, and where they abort, varies from run to run); the sites of
the runs are joined. Needs
root (the collector). python3 standard library only. See docs/check.md.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Records the function (source, first line) and position of every bytecode
# the recorder records (the one it aborts at too); written at exit to
# $NUPP_HOT.
HOT_HOOK = r"""
local jutil = require("jit.util")
local seen = {}
jit.attach(function(tr, func, pc)
  local fi = jutil.funcinfo(func, pc)
  local src = fi.source
  if src and src:sub(1, 1) == "@" then
    seen[src .. "\0" .. (fi.linedefined or 0) .. "\0" .. pc] = true
  end
end, "record")
local vmdef = require("jit.vmdef")
jit.attach(function(what, tr, func, pc, otr, oex)
  if what ~= "abort" then return end
  local fi = jutil.funcinfo(func, pc)
  local src = fi.source
  if src and src:sub(1, 1) == "@" and otr == 7 and type(oex) == "number" then
    local name = vmdef.bcnames:sub(oex * 6 + 1, oex * 6 + 6):gsub(" +$", "")
    seen["A" .. src .. "\0" .. (fi.currentline or 0) .. "\0" .. name] = true
  end
end, "trace")
local out = os.getenv("NUPP_HOT")
local function dump()
  local f = io.open(out, "w")
  for k in pairs(seen) do f:write((k:gsub("%z", "\t")), "\n") end
  f:close()
end
local exit = os.exit
os.exit = function(...) dump() return exit(...) end
package.loaded["nupp.hot"] = setmetatable({}, {__gc = dump})
nupp_hot_keep = newproxy(true)
getmetatable(nupp_hot_keep).__gc = dump
"""


def rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def run_trace(nupp, luajit, prog, args, tmp):
    out = os.path.join(tmp, "rt.csv")
    r = subprocess.run([nupp, "trace", "--no-summary", "-o", out, "--", luajit, os.path.basename(prog)] + args,
                       cwd=os.path.dirname(os.path.abspath(prog)), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0 and not os.path.exists(out):
        raise RuntimeError("trace failed: " + r.stderr.strip()[-300:])
    with open(out) as f:
        return rows(f.read())


def run_hot(luajit, prog, args, tmp):
    out = os.path.join(tmp, "hot.txt")
    hook = os.path.join(tmp, "hook.lua")
    with open(hook, "w") as f:
        f.write(HOT_HOOK)
    subprocess.run([luajit, "-e", "dofile(%r)" % hook, os.path.basename(prog)] + args,
                   cwd=os.path.dirname(os.path.abspath(prog)), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=dict(os.environ, NUPP_HOT=out), timeout=600)
    hot, vm = set(), set()
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                src, first, cur = line.rstrip("\n").rsplit("\t", 2)
                if src.startswith("A"):	# an NYI bytecode abort, as jit.attach saw it
                    vm.add(("%s:%s" % (os.path.basename(src[1:].lstrip("@")), first),
                            "trace.nyi-bytecode." + cur))
                else:
                    hot.add((os.path.basename(src.lstrip("@")), int(first), int(cur)))
    return hot, vm


def run_check(nupp, luajit, prog, also):
    r = subprocess.run([nupp, "check", "--luajit", luajit, "--format", "sarif", prog] + also,
                       capture_output=True, text=True, timeout=600)
    if r.returncode == 2:
        raise RuntimeError("check failed: " + r.stderr.strip()[-300:])
    return json.loads(r.stdout)["runs"][0]["results"]


def decidable(reason_id):
    return reason_id.startswith("trace.nyi-bytecode.") or reason_id.startswith("trace.nyi-fastfunc.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--list", help="a file of PROGRAM[:ARGS] lines")
    ap.add_argument("--luajit", default="luajit")
    ap.add_argument("--nupp", default=os.path.join(ROOT, "build", "nupp-bpf"))
    ap.add_argument("--json", help="write the figures and every miss here")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of each program under each (their sites joined): LuaJIT seeds its "
                         "penalty PRNG at random, so which traces abort where varies")
    ap.add_argument("--also", action="append", default=[], metavar="PATH",
                    help="library code the programs load, checked with each (repeatable)")
    a = ap.parse_args()
    progs = list(a.programs)
    if a.list:
        base = os.path.dirname(os.path.abspath(a.list))
        with open(a.list) as f:
            progs += [os.path.join(base, l.strip()) for l in f if l.strip() and not l.startswith("#")]
    total = {"runtime": 0, "found": 0, "generated": 0, "predicted": 0, "aborted": 0, "aborted_vm": 0}
    lib_names = set()
    for lib in a.also:
        for base, _, files in os.walk(lib):
            lib_names |= {f for f in files if f.endswith(".lua")}
        if os.path.isfile(lib):
            lib_names.add(os.path.basename(lib))
    misses, false, generated, failed = [], [], [], []
    for spec in progs:
        prog, _, args = spec.partition(":")
        args = args.split(",") if args else []
        name = os.path.basename(prog)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                rt, hot, vm = [], set(), set()
                for _ in range(a.runs):
                    rt += run_trace(a.nupp, a.luajit, prog, args, tmp)
                    h, v = run_hot(a.luajit, prog, args, tmp)
                    hot |= h
                    vm |= v
                st = run_check(a.nupp, a.luajit, prog, a.also)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failed.append({"program": spec, "error": str(e)})
                continue
        rtb = {(x["location"], x["reasonId"]) for x in rt if x["reasonClass"] == "blocker"}
        pred = {}
        for x in st:
            p = x["properties"]
            if p["severity"] in ("blacklist", "warn") and x["level"] != "note" and x["ruleId"].startswith("trace.nyi"):
                pred[(p["location"], p["reasonId"])] = (p["functionLine"], p["pc"])
        checked = {name} | {os.path.basename(x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
                             for x in st} | lib_names
        for site in sorted(rtb):
            if not decidable(site[1]):
                continue
            if site[0].rpartition(":")[0] not in checked:
                total["generated"] += 1
                generated.append({"program": spec, "location": site[0], "reasonId": site[1]})
                continue
            total["runtime"] += 1
            if site in pred:
                total["found"] += 1
            else:
                misses.append({"program": spec, "location": site[0], "reasonId": site[1]})
        hot_lines = {(src, first, cur) for (src, first, cur) in hot}
        for site, where in sorted(pred.items(), key=lambda kv: kv[0]):
            ran = site in rtb or (site[0].rpartition(":")[0],) + where in hot_lines
            if not ran:
                continue
            total["predicted"] += 1
            if site in rtb:
                total["aborted"] += 1
            else:
                false.append({"program": spec, "location": site[0], "reasonId": site[1],
                              "luajitAborted": site in vm})
            if site in rtb or site in vm:
                total["aborted_vm"] += 1
        print("%-28s runtime %d, predicted %d" % (name, len([s for s in rtb if decidable(s[1])]), len(pred)),
              file=sys.stderr)
    recall = total["found"] / total["runtime"] if total["runtime"] else 1.0
    precision = total["aborted"] / total["predicted"] if total["predicted"] else 1.0
    precision_vm = total["aborted_vm"] / total["predicted"] if total["predicted"] else 1.0
    doc = {"programs": len(progs), "failed": failed, "recall": recall, "precision": precision,
           "precisionLuaJIT": precision_vm,
           "counts": total, "misses": misses, "false": false, "generated": generated}
    print("programs %d (%d failed)  recall %.3f (%d of %d)  precision %.3f (%d of %d)  runtime-generated %d"
          % (len(progs), len(failed), recall, total["found"], total["runtime"], precision, total["aborted"],
             total["predicted"], total["generated"]))
    print("precision against LuaJIT's own abort events (jit.attach, in the runs that found the code hot): "
          "%.3f (%d of %d)" % (precision_vm, total["aborted_vm"], total["predicted"]))
    for m in misses:
        print("  miss   %(program)s %(location)s %(reasonId)s" % m)
    for m in false:
        print("  false  %(program)s %(location)s %(reasonId)s%(why)s" %
              dict(m, why="  (LuaJIT aborted there, in a run under jit.attach)" if m["luajitAborted"] else ""))
    for m in failed:
        print("  failed %(program)s %(error)s" % m)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
