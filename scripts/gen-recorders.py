#!/usr/bin/python3
"""gen-recorders.py - what each LuaJIT revision's trace recorder refuses.

Makes luajit/recorders.json (committed), the data `nupp-bpf check` reads to
predict trace aborts from bytecode alone, from the sources of every
revision luajit/revisions.json describes:

  * the builtins' recording handlers, as buildvm writes lj_recdef.h: the
    LJLIB_REC annotations of the revision's lib_*.c (a builtin without one
    is recorded by recff_nyi); emulated here and checked against a real
    lj_recdef.h by tests/unit/test_recorders.py;
  * which handlers of lj_ffrecord.c fall back to recff_nyi for some argument
    values (string.format's %s of a non-string, tostring of a table...), and
    which abort with NYIFFU for some (ffi.typeof of a string);
  * what recff_nyi does: stitch (2.1) or abort (2.0), the bytecodes after
    which it cannot stitch, the builtins it never stitches across, and the
    default minstitch of lj_jit.h;
  * where trace_abort() (lj_trace.c) reports an abort raised in a builtin's
    handler: at the Lua line that called it, or at the builtin;
  * the bytecodes lj_record_ins() leaves NYI (its NYIBC case and the
    opcodes of lj_bc.h it has no case for), and whether rec_varg refuses a
    multi-result VARG at the trace's base frame.

Sources: first-parent commits of upstream v2.1 and OpenResty's v2.1-agentzh
from bare git mirrors (a row where the recorder's files changed), and the
Debian source trees of luajit/pins and luajit/suite-pins, unpacked.

  gen-recorders.py [--upstream GITDIR] [--openresty GITDIR]
                   [--debian-source NAME=DIR]... [-o luajit/recorders.json]
  gen-recorders.py --tree SRCDIR          (one tree's recorder, printed)
  gen-recorders.py --emit-c build/gen/lj_recorders.c [--json FILE]

python3 standard library only. See kernel-notes/recorder.md.
"""

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BETA3 = "8271c643c21d1b2f344e339f559f2de6f3663191"
FORKS = [("luajit", "build/git/luajit.git", "v2.1"),
         ("luajit2", "build/git/luajit2.git", "v2.1-agentzh")]
RECORDER_FILES = ["lj_record.c", "lj_ffrecord.c", "lj_crecord.c", "lj_trace.c", "lj_dispatch.h", "lj_jit.h", "lj_bc.h", "Makefile",
                  "host/buildvm_lib.c"]
# buildvm's simplistic pre-processor: the blocks it drops in a default build.
OFF_BLOCKS = {"#if LJ_52"}


def die(msg):
    sys.exit("gen-recorders.py: " + msg)


# ---- one source tree, as a reader of files ----------------------------------

def ljlib_files(makefile):
    """lib_*.c in the order of the Makefile's LJLIB_O (buildvm's order)."""
    m = re.search(r"^LJLIB_O=((?:.*\\\n)*.*)$", makefile, re.M)
    if not m:
        die("no LJLIB_O in the Makefile")
    return [o[:-2] + ".c" for o in m.group(1).replace("\\\n", " ").split()]


def builtin_handlers(read):
    """[(ffname, cname, handler)] by ffid from 2 on, as lj_recdef.h maps them."""
    out = []
    for lib in ljlib_files(read("Makefile")):
        modname, funcname = "", ""
        lines = iter(read(lib).splitlines())
        for line in lines:
            if line.startswith("#if"):
                if line.strip() in OFF_BLOCKS:
                    depth = 1
                    for line in lines:
                        if line.startswith("#en"):
                            depth -= 1
                            if depth == 0:
                                break
                        elif line.startswith("#if"):
                            depth += 1
                continue
            for m in re.finditer(r"LJLIB_(MODULE_(\w+)|CF\((\w+)\)|ASM_?\((\w+)\)|REC\(([^)]*)\))", line):
                if m.group(2):
                    modname = m.group(2)
                elif m.group(3) or m.group(4):
                    funcname = m.group(3) or m.group(4)
                    name = list(funcname)
                    for i in range(1, min(len(name), len(modname) + 1)):
                        if name[i] == "_":
                            name[i] = "."
                    out.append(["".join(name), funcname, "nyi"])
                elif m.group(5) is not None:
                    rec = m.group(5).strip()
                    rec = funcname if rec == "." else rec.split(" ")[0]
                    out[-1][2] = rec
    return out


def c_function(src, name):
    """The body of static function name in src, "" when absent."""
    m = re.search(r"^(?:static )?[^\n(;]*\b%s\([^;]*?\n{.*?\n}" % re.escape(name), src, re.M | re.S)
    return m.group(0) if m else ""


def c_functions(src):
    """{name: body} of the functions defined in src."""
    return {m.group(1): m.group(0) for m in
            re.finditer(r"^(?:static )?[A-Za-z_][^\n(;#/=]*?\b(\w+)\([^;]*?\n{.*?\n}", src, re.M | re.S)}


def reaches(name, pattern, funcs, memo):
    """Whether function name, or one it calls in the same sources, holds
    pattern: recff_nyi (a builtin recorded for some argument values only),
    LJ_TRERR_NYIFFU (one that aborts for some)."""
    if name not in memo:
        memo[name] = False	# a cycle adds nothing
        body = funcs[name].split("{", 1)[1]
        memo[name] = bool(re.search(pattern, body)) or any(
            reaches(c, pattern, funcs, memo) for c in set(re.findall(r"\b(\w+)\(", body))
            if c in funcs and c != name)
    return memo[name]


def handler_aliases(ffrec):
    return dict(re.findall(r"^#define\s+recff_(\w+)\s+recff_(\w+)", ffrec, re.M))


def recorder(read):
    """The recorder of one tree: a JSON-able dict."""
    ffrec, rec, jith, bch = read("lj_ffrecord.c"), read("lj_record.c"), read("lj_jit.h"), read("lj_bc.h")
    handlers = ffrec + read("lj_crecord.c")	# the FFI's handlers live there
    alias = handler_aliases(handlers)
    funcs = c_functions(handlers)

    def resolve(h):
        seen = set()
        while h in alias and h not in seen:
            seen.add(h)
            h = alias[h]
        return h

    nyi = c_function(ffrec, "recff_nyi")
    if not nyi:
        die("no recff_nyi in lj_ffrecord.c")
    builtins, partial = [], set()
    for ffname, cname, handler in builtin_handlers(read):
        h = resolve(handler)
        if h == "nyi":
            kind = "nyi"
        else:
            if "recff_" + h not in funcs:
                die("handler recff_%s of %s not found" % (h, ffname))
            kind = ("aborts" if reaches("recff_" + h, r"LJ_TRERR_NYIFFU", funcs, {}) else
                    "partial" if reaches("recff_" + h, r"\brecff_nyiu?\(", funcs, {}) else "compiled")
        builtins.append([ffname, kind])
    # lj_record_ins(): the NYIBC case, and the opcodes it has no case for.
    body = re.search(r"^void lj_record_ins\(jit_State \*J\)\n{.*?\n}", rec, re.M | re.S)
    if not body:
        die("no lj_record_ins in lj_record.c")
    body = body.group(0)
    opcodes = re.findall(r"^\s*_\((\w+),", re.search(r"#define BCDEF\(_\)(.*?)\n\n", bch, re.S).group(1), re.M)
    cased = set(re.findall(r"case BC_(\w+):", body))
    nyi_bc = set()
    for m in re.finditer(r"((?:\s*case BC_\w+:)+)\s*setintV\(&J->errinfo, \(int32_t\)op\);\s*"
                         r"lj_trace_err_info\(J, LJ_TRERR_NYIBC\)", body):
        nyi_bc.update(re.findall(r"BC_(\w+)", m.group(1)))
    nyi_bc.update(op for op in opcodes if op not in cased)
    varg = c_function(rec, "rec_varg")
    abort = c_function(read("lj_trace.c"), "trace_abort")
    if not abort:
        die("no trace_abort in lj_trace.c")
    minstitch = re.search(r"_\(\\\d+, minstitch,\s*(\d+)\)", jith)
    hotloop = re.search(r"_\(\\\d+, hotloop,\s*(\d+)\)", jith)
    hotcount = re.search(r"#define HOTCOUNT_LOOP\s+(\d+)", read("lj_dispatch.h"))
    if not hotloop or not hotcount:
        die("no hotloop in lj_jit.h or HOTCOUNT_LOOP in lj_dispatch.h")
    return {
        "builtins": builtins,
        "nyi_bytecodes": [op for op in opcodes if op in nyi_bc],
        "varg_multi_nyi": "LJ_TRERR_NYIBC" in varg,
        "stitch": "recff_stitch(J)" in nyi,
        "nyi_aborts": "LJ_TRERR_NYIFFU" in nyi,
        "nostitch_ops": re.findall(r"op == BC_(\w+)", nyi),
        "nostitch_builtins": [c.replace("_", ".", 1) for c in re.findall(r"case FF_(\w+):", nyi)],
        "minstitch": int(minstitch.group(1)) if minstitch else 0,
        # A loop starts a trace after hotloop / HOTCOUNT_LOOP iterations.
        "hot_iterations": int(hotloop.group(1)) // int(hotcount.group(1)),
        # Where an abort raised in a builtin's handler is reported: the Lua
        # frame that called it (trace_abort walks down to it), or the
        # builtin itself (lj_debug_frame's innermost frame).
        "builtin_abort_at_caller": "while (!isluafunc(frame_func(frame)))" in abort,
    }


# ---- sources ----------------------------------------------------------------

class GitTree:
    def __init__(self, gitdir, commit):
        self.gitdir, self.commit = gitdir, commit

    def __call__(self, path):
        r = subprocess.run(["git", "--git-dir", self.gitdir, "show", "%s:src/%s" % (self.commit, path)],
                           capture_output=True, text=True, errors="replace")
        if r.returncode:
            die("%s %s: src/%s: %s" % (self.gitdir, self.commit[:12], path, r.stderr.strip()))
        return r.stdout


class DirTree:
    def __init__(self, srcdir):
        self.srcdir = srcdir

    def __call__(self, path):
        with open(os.path.join(self.srcdir, path), encoding="utf-8", errors="replace") as f:
            return f.read()


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir] + list(args), check=True,
                          capture_output=True, text=True).stdout


def git_key(gitdir, commit):
    """The blobs of the files the recorder data comes from."""
    out = git(gitdir, "ls-tree", "-r", commit, "src/")
    blobs = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        p = path[4:]
        if p in RECORDER_FILES or re.fullmatch(r"lib_\w+\.c", p):
            blobs[p] = meta.split()[2]
    return json.dumps(sorted(blobs.items()))


def git_rows(fork, gitdir, branch, intern):
    commits = git(gitdir, "rev-list", "--first-parent", "--reverse", "--format=%H %ct", branch).split("\n")
    commits = [c.split() for c in commits if c and not c.startswith("commit ")]
    if fork == "luajit":
        start = [i for i, (h, _) in enumerate(commits) if h == BETA3]
    else:
        start = [i for i, (h, _) in enumerate(commits)
                 if subprocess.run(["git", "--git-dir", gitdir, "merge-base", "--is-ancestor", BETA3, h]).returncode == 0][:1]
    if not start:
        die("%s: beta3 not in the history of %s" % (gitdir, branch))
    rows, last = [], None
    for h, t in commits[start[0]:]:
        key = git_key(gitdir, h)
        if key == last:
            continue
        last = key
        rows.append({"fork": fork, "time": int(t), "commit": h, "recorder": intern(recorder(GitTree(gitdir, h)))})
        print("  %s %s %d" % (fork, h[:12], rows[-1]["recorder"]), file=sys.stderr)
    return rows


def generate(args):
    tables, index = [], {}

    def intern(r):
        k = json.dumps(r, sort_keys=True)
        if k not in index:
            index[k] = len(tables)
            tables.append(r)
        return index[k]

    rows = []
    for fork, default, branch in FORKS:
        gitdir = getattr(args, fork) or os.path.join(ROOT, default)
        if not os.path.isdir(gitdir):
            die("no git mirror of %s at %s (--%s GITDIR)" % (fork, gitdir, fork))
        rows += git_rows(fork, gitdir, branch, intern)
    for spec in args.debian_source:
        name, _, srcdir = spec.partition("=")
        rows.append({"source": name, "recorder": intern(recorder(DirTree(os.path.join(srcdir, "src"))))})
    doc = {
        "about": "What the trace recorder of each LuaJIT revision refuses, for nupp-bpf check; "
                 "generated by scripts/gen-recorders.py, see kernel-notes/recorder.md",
        "recorders": tables,
        "rows": rows,
    }
    with open(args.output + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.rename(args.output + ".tmp", args.output)
    print("%d rows, %d distinct recorders -> %s" % (len(rows), len(tables), args.output), file=sys.stderr)


# ---- C ----------------------------------------------------------------------

def cstr(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def emit_c(doc, out):
    kinds = {"compiled": "LJ_REC_COMPILED", "partial": "LJ_REC_PARTIAL", "aborts": "LJ_REC_ABORTS",
             "nyi": "LJ_REC_NYI"}
    w = ["/* Generated by scripts/gen-recorders.py from luajit/recorders.json. Do not edit. */",
         '#include "luajit/lj_recorder.h"', ""]
    for i, r in enumerate(doc["recorders"]):
        w.append("static const struct lj_rec_builtin builtins_%d[] = {" % i)
        w += ["\t{ %s, %s }," % (cstr(n), kinds[k]) for n, k in r["builtins"]]
        w.append("};")
        for key in ("nyi_bytecodes", "nostitch_ops", "nostitch_builtins"):
            w.append("static const char *const %s_%d[] = { %s };" %
                     (key, i, " ".join(cstr(s) + "," for s in r[key] + [None] if s) + " NULL"))
    w.append("const struct lj_recorder lj_recorders[] = {")
    for i, r in enumerate(doc["recorders"]):
        w.append("\t{ builtins_%d, %d, nyi_bytecodes_%d, %d, %d, %d, nostitch_ops_%d, nostitch_builtins_%d, %d, %d, %d }," %
                 (i, len(r["builtins"]), i, int(r["varg_multi_nyi"]), int(r["stitch"]), int(r["nyi_aborts"]),
                  i, i, r["minstitch"], int(r["builtin_abort_at_caller"]), r["hot_iterations"]))
    w.append("};")
    w.append("const struct lj_recorder_row lj_recorder_rows[] = {")
    for row in doc["rows"]:
        w.append("\t{ %s, %s, %dULL, %s, %d }," % (cstr(row.get("fork", "")), cstr(row.get("commit", "")),
                                                  row.get("time", 0), cstr(row.get("source", "")), row["recorder"]))
    w.append("};")
    w.append("const int lj_nrecorder_rows = %d;" % len(doc["rows"]))
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(w) + "\n")
    os.rename(out + ".tmp", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--luajit", dest="luajit", help="bare git mirror of upstream LuaJIT")
    ap.add_argument("--luajit2", dest="luajit2", help="bare git mirror of OpenResty's luajit2")
    ap.add_argument("--debian-source", action="append", default=[], metavar="NAME=DIR",
                    help="an unpacked source tree; NAME is its revisions.json source")
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "luajit", "recorders.json"))
    ap.add_argument("--tree", help="print the recorder of one source tree's src/ and exit")
    ap.add_argument("--emit-c", help="write the C table from the JSON")
    ap.add_argument("--json", default=os.path.join(ROOT, "luajit", "recorders.json"))
    args = ap.parse_args()
    if args.tree:
        json.dump(recorder(DirTree(args.tree)), sys.stdout, indent=1)
        print()
    elif args.emit_c:
        with open(args.json) as f:
            emit_c(json.load(f), args.emit_c)
    else:
        generate(args)


if __name__ == "__main__":
    main()
