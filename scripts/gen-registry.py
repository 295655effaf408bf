#!/usr/bin/python3
"""gen-registry.py - generate build/gen/lj_builds.c, the LuaJIT build registry.

For every tree pinned in luajit/pins (built by scripts/build-luajit.sh) and
each of its two files (the `luajit` executable and `libluajit.so`), emit one
`struct lj_build` (user/luajit/lj_build.h) holding:

  * the SHA-256 and size of the file's .text section (the registry key); the
    same digest is required of the stock Debian file in build/stock/TREE/;
  * struct lj_layout, every field from offsetof()/sizeof()/macros printed by
    a C program compiled against the tree's own headers;
  * ELF addresses of the symbols in SYMBOLS (nm) and of the inlined call
    sites in INLINE (DWARF DW_TAG_inlined_subroutine entry pc);
  * jit.vmdef tables (ffnames, bcnames, irnames, traceerr) dumped by the
    built luajit, and bytecode modes / metamethod names from lj_bc.h, lj_obj.h.

Usage: gen-registry.py [--build DIR] [--out FILE] [--print]
python3 standard library only.
"""

import argparse
import hashlib
import os
import re
import struct
import subprocess
import sys

# ---------------------------------------------------------------------------
# What to look up. Add names here.

# ELF symbols (nm --defined-only). A GCC clone of a name (name.isra.0,
# name.constprop.0, name.part.0; never name.cold) is recorded under its exact
# clone name. required=True makes a missing symbol an error.
SYMBOLS = [
    # (name, required)
    ("lj_vm_asm_begin", True),      # start of the interpreter blob
    ("lj_vm_ffi_call", True),       # first function after the blob
    ("lj_trace_err", True),
    ("lj_trace_err_info", True),    # amalg builds: only lj_trace_err_info.isra.0 (arg0 = L)
    ("trace_state", True),
    ("lj_trace_hot", True),
    ("lj_trace_ins", True),
    ("lj_err_throw", True),
    ("lj_vmevent_call", True),
    ("lj_trace_exit", True),
    ("lj_trace_stitch", True),
    ("lj_gc_separateudata", True),  # the sampler's walk caches are retired here (each GC cycle)
    ("trace_start", False),
    ("lj_dispatch_ins", False),
    ("lj_dispatch_profile", False),
    ("lj_dispatch_update", False),
    ("lj_debug_frame", False),
    ("lj_debug_line", False),
    ("debug_framepc", False),
    ("lj_vm_exit_handler", False),
    ("lj_vm_exit_interp", False),
]

# Static functions inlined into their callers: recorded as "NAME@inline" at the
# DW_AT_entry_pc of the DW_TAG_inlined_subroutine (the address gdb's
# `break NAME` uses). Further inlined copies, if any, become NAME@inline.2 ...
INLINE = [
    # (name, required)
    ("penalty_pc", True),
    ("blacklist_pc", True),
    ("trace_abort", True),
]

# struct lj_layout field -> C expression, evaluated against the tree's headers.
# The fields, and the LuaJIT type and member each one is, come from the one
# list of them, user/luajit/lj_layout.def, which the DWARF reader (user/luajit/dwarf_layout.c)
# includes too: the two ways a layout is derived (offsetof() here, DWARF there)
# cannot list different members. Every field of the struct in bpf/lj_layout.h
# must be there.
def layout_exprs():
    user = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "user", "luajit")
    src = open(os.path.join(user, "dwarf_layout.c")).read()
    enum = re.search(r"enum lj_type \{([^}]*)\}", src).group(1)
    tags = [t.strip() for t in enum.split(",") if t.strip() and t.strip() != "T__MAX"]
    names = re.findall(r'"(\w+)"', re.search(r"type_names\[T__MAX\] = \{([^}]*)\}", src).group(1))
    types = dict(zip(tags, names))
    table = re.sub(r"/\*.*?\*/", "", open(os.path.join(user, "lj_layout.def")).read(), flags=re.S)
    exprs = {}
    for line in table.split("\n"):
        if not line.strip():
            continue
        m = re.fullmatch(r'\s*(OFS|SIZE|DISP2G)\((\w+), (T_\w+)(?:, "([\w.]+)")?\)\s*', line)
        if not m or m.group(3) not in types or (m.group(1) == "OFS") != bool(m.group(4)):
            die("user/luajit/lj_layout.def: not an entry: %s" % line.strip())
        kind, field, tag, member = m.groups()
        exprs[field] = {"OFS": "offsetof(%s, %s)" % (types[tag], member),
                        "SIZE": "sizeof(%s)" % types[tag], "DISP2G": "GG_DISP2G"}[kind]
    if len(tags) != len(names) or not exprs:
        die("user/luajit/dwarf_layout.c: its type table no longer reads as expected")
    return exprs


# Printed for information (--print) and sanity checks; not stored.
EXTRA = {
    "LJ_GC64": "LJ_GC64",
    "LJ_FR2": "LJ_FR2",
    "LJ_DUALNUM": "LJ_DUALNUM",
    "sizeof_lua_State": "sizeof(lua_State)",
    "sizeof_global_State": "sizeof(global_State)",
    "sizeof_jit_State": "sizeof(jit_State)",
    "GG_G2J": "GG_G2J",
    "GG_G2DISP": "GG_G2DISP",
    "GG_DISP2J": "GG_DISP2J",
    "GG_DISP2HOT": "GG_DISP2HOT",
    "GG_dispatch": "offsetof(GG_State, dispatch)",
    "GG_hotcount": "offsetof(GG_State, hotcount)",
    "BC__MAX": "BC__MAX",
    "BCMbase": "BCMbase",
    "BCMdst": "BCMdst",
    "MM_call": "MM_call",
    "MM__MAX": "MM__MAX",
}

# The compile flags of the debian/rules amalg build that affect headers.
CDEFS = ["-D_FILE_OFFSET_BITS=64", "-D_LARGEFILE_SOURCE", "-U_FORTIFY_SOURCE",
         "-DLUAJIT_UNWIND_EXTERNAL"]

MULTIARCH = "x86_64-linux-gnu"


def die(msg):
    sys.stderr.write("gen-registry: error: %s\n" % msg)
    sys.exit(1)


LAYOUT = layout_exprs()


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                              universal_newlines=True, **kw).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die("command failed: %s: %s" % (" ".join(cmd), e))


# ---------------------------------------------------------------------------
# Inputs

def read_pins(path):
    pins = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) != 5:
                die("%s: bad line: %s" % (path, " ".join(line)))
            tree, src, ver, exe, lib = line
            pins.append(dict(tree=tree, src=src, version=ver, exe_pkg=exe, lib_pkg=lib))
    return pins


def layout_fields(header):
    """Field names of struct lj_layout, in order."""
    text = open(header).read()
    m = re.search(r"struct\s+lj_layout\s*\{(.*?)\};", text, re.S)
    if not m:
        die("%s: struct lj_layout not found" % header)
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    return re.findall(r"__[su]\d+\s+(\w+)\s*;", body)


def text_section(path):
    """(sh_addr, bytes) of the .text section of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        die("%s: not an ELF64 little-endian file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)

    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    strtab = sh(shstrndx)
    for i in range(shnum):
        s = sh(i)
        start = strtab[4] + s[0]
        name = data[start:data.index(b"\0", start)]
        if name == b".text":
            return s[3], data[s[4]:s[4] + s[5]]
    die("%s: no .text section" % path)


# ---------------------------------------------------------------------------
# Values from the tree's headers

# The LAYOUT fields of the types the mapping of compiled samples reads
# (GCtrace, SnapShot, IRIns). Before 2021-03 (upstream a32aeadc) SnapShot has
# no mcofs: such a tree gets 0 for all of them, which turns the mapping off,
# as user/luajit/dwarf_layout.c reads them.
TRACE_MAP_PREFIXES = ("tr_", "sn_", "ir_")
# The fields of the heap's census: from this one to the end of the list. A
# tree that lacks one of them (no g->str before 2020-06, upstream 4e2d3a6b)
# gets 0 for all of them, which turns the census off, as
# user/luajit/dwarf_layout.c reads them.
HEAP_FIRST = "g_gc_total"


def heap_fields():
    names = list(LAYOUT)
    return names[names.index(HEAP_FIRST):]


def missing(group, tree, srcdir, gendir, cflags=()):
    """group, when one of its LAYOUT expressions does not compile against
    the tree's headers, else ()."""
    test = ['#include <stddef.h>', '#include "lj_obj.h"', '#include "lj_jit.h"',
            '#include "lj_dispatch.h"', '']
    test += ['long long v_%s = (long long)(%s);' % (f, LAYOUT[f]) for f in group]
    csrc = os.path.join(gendir, "layout-%s-group.c" % tree)
    with open(csrc, "w") as f:
        f.write("\n".join(test) + "\n")
    r = subprocess.run(["gcc", "-fsyntax-only", "-w"] + CDEFS + list(cflags) + ["-I" + srcdir, csrc],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return tuple(group) if r.returncode else ()


def c_values(tree, srcdir, gendir, cflags=()):
    """Compile and run a printer for LAYOUT, EXTRA, bytecode modes, mmnames.
    cflags: more compiler flags (scripts/gen-layouts.py tries build options).
    A tree whose headers lack a field of TRACE_MAP_PREFIXES gets 0 for all of
    them; one that lacks a field of the heap's (heap_fields), 0 for those."""
    trace = [f for f in LAYOUT if f.startswith(TRACE_MAP_PREFIXES)]
    skip = missing(trace, tree, srcdir, gendir, cflags) + missing(heap_fields(), tree, srcdir, gendir, cflags)
    return c_values_of(tree, srcdir, gendir, cflags, skip)


def c_values_of(tree, srcdir, gendir, cflags, skip):
    lines = ['#include <stddef.h>', '#include <stdio.h>',
             '#include "lj_obj.h"', '#include "lj_bc.h"', '#include "lj_jit.h"',
             '#include "lj_frame.h"', '#include "lj_dispatch.h"', '',
             '#define BC_A(name, ma, mb, mc, mm) BCM##ma,',
             '#define BC_MM(name, ma, mb, mc, mm) MM_##mm,',
             '#define MM_NAME(name) "__" #name,',
             'static const int bc_a[] = { BCDEF(BC_A) };',
             'static const int bc_mm[] = { BCDEF(BC_MM) };',
             'static const char *const mmnames[] = { MMDEF(MM_NAME) };',
             '', 'int main(void)', '{', '\tunsigned i;']
    for name, expr in list(LAYOUT.items()) + list(EXTRA.items()):
        lines.append('\tprintf("v %s %%lld\\n", (long long)(%s));' % (name, "0" if name in skip else expr))
    lines += ['\tfor (i = 0; i < sizeof(bc_a) / sizeof(bc_a[0]); i++)',
              '\t\tprintf("bc %u %d %d\\n", i, bc_a[i], bc_mm[i]);',
              '\tfor (i = 0; i < sizeof(mmnames) / sizeof(mmnames[0]); i++)',
              '\t\tprintf("mm %u %s\\n", i, mmnames[i]);',
              '\treturn 0;', '}', '']
    csrc = os.path.join(gendir, "layout-%s.c" % tree)
    exe = os.path.join(gendir, "layout-%s" % tree)
    with open(csrc, "w") as f:
        f.write("/* Generated by scripts/gen-registry.py. */\n" + "\n".join(lines))
    run(["gcc", "-O0", "-w"] + CDEFS + list(cflags) + ["-I" + srcdir, csrc, "-o", exe])
    vals, bc, mm = {}, [], []
    for line in run([exe]).splitlines():
        f = line.split()
        if f[0] == "v":
            vals[f[1]] = int(f[2])
        elif f[0] == "bc":
            bc.append((int(f[2]), int(f[3])))
        elif f[0] == "mm":
            mm.append(f[2])
    if vals["LJ_GC64"] != 1 or vals["LJ_FR2"] != 1:
        die("%s: not a GC64/FR2 build; bpf/lj_layout.h supports only those" % tree)
    if len(bc) != vals["BC__MAX"] or len(mm) != vals["MM__MAX"]:
        die("%s: BCDEF/MMDEF count mismatch" % tree)
    return vals, bc, mm


VMDEF_DUMP = r'''
local vmdef = require("jit.vmdef")
local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
local function fixed(tag, s)
  for i = 0, #s / 6 - 1 do
    print(tag .. " " .. i .. " =" .. hex((s:sub(i * 6 + 1, i * 6 + 6):gsub(" +$", ""))))
  end
end
local function list(tag, t)
  local i = 0
  while t[i] ~= nil do print(tag .. " " .. i .. " =" .. hex(t[i])); i = i + 1 end
end
fixed("bcnames", vmdef.bcnames)
fixed("irnames", vmdef.irnames)
list("ffnames", vmdef.ffnames)
list("traceerr", vmdef.traceerr)
'''


def vmdef_tables(tree, srcdir):
    """jit.vmdef tables, dumped by the tree's own luajit."""
    env = dict(os.environ, LUA_PATH=os.path.join(srcdir, "?.lua") + ";")
    return parse_vmdef(tree, run([os.path.join(srcdir, "luajit"), "-e", VMDEF_DUMP], env=env))


def parse_vmdef(tree, out):
    """The tables from VMDEF_DUMP's output."""
    t = {"bcnames": [], "irnames": [], "ffnames": [], "traceerr": []}
    for line in out.splitlines():
        tag, idx, val = line.split(" ", 2)
        if int(idx) != len(t[tag]):
            die("%s: vmdef %s: index %s out of order" % (tree, tag, idx))
        t[tag].append(bytes.fromhex(val[1:]).decode("latin-1"))
    for k, v in t.items():
        if not v:
            die("%s: vmdef %s is empty" % (tree, k))
    return t


# ---------------------------------------------------------------------------
# Symbols

def nm_symbols(path):
    syms = {}
    for line in run(["nm", "--defined-only", path]).splitlines():
        f = line.split()
        if len(f) != 3:
            continue
        addr, name = int(f[0], 16), f[2]
        if name in syms and syms[name] != addr:
            syms[name] = None       # ambiguous: several local symbols
        else:
            syms[name] = addr
    if not syms:
        die("%s: no symbol table (not an unstripped rebuild?)" % path)
    return syms


# GCC clone suffixes that keep the function's entry (".cold" parts do not).
CLONE_RE = re.compile(r"(\.(isra|constprop|part)\.\d+)+")


def pick_symbols(path, nmsyms):
    out = []
    for want, required in SYMBOLS:
        found = []
        for name, addr in nmsyms.items():
            if name != want and not (name.startswith(want + ".") and
                                     CLONE_RE.fullmatch(name[len(want):])):
                continue
            if addr is None:
                die("%s: symbol %s is defined more than once" % (path, name))
            found.append((name, addr))
        if not found and required:
            die("%s: required symbol %s (or a .isra/.constprop clone) not found" % (path, want))
        out += sorted(found)
    return out


def dwarf_inline_sites(path):
    """{function name: [entry pcs of its inlined instances]} for INLINE names."""
    wanted = set(n for n, _ in INLINE)
    text = run(["readelf", "--wide", "--debug-dump=info", path])
    die_re = re.compile(r"^\s*<(\d+)><([0-9a-f]+)>: Abbrev Number: \d+ \((\w+)\)")
    attr_re = re.compile(r"^\s*<[0-9a-f]+>\s+(DW_AT_\w+)\s*:\s*(.*)$")
    dies = []           # (offset, tag, attrs)
    cur = None
    for line in text.splitlines():
        m = die_re.match(line)
        if m:
            cur = (int(m.group(2), 16), m.group(3), {})
            dies.append(cur)
            continue
        if cur is None:
            continue
        m = attr_re.match(line)
        if m:
            cur[2][m.group(1)] = m.group(2)
    # Abstract subprograms with a wanted name.
    origin = {}
    for off, tag, attrs in dies:
        if tag == "DW_TAG_subprogram" and "DW_AT_name" in attrs:
            name = attrs["DW_AT_name"].rsplit(":", 1)[-1].strip()
            if name in wanted:
                origin[off] = name
    sites = {n: [] for n in wanted}
    for off, tag, attrs in dies:
        if tag != "DW_TAG_inlined_subroutine":
            continue
        m = re.search(r"<0x([0-9a-f]+)>", attrs.get("DW_AT_abstract_origin", ""))
        if not m or int(m.group(1), 16) not in origin:
            continue
        name = origin[int(m.group(1), 16)]
        pc = attrs.get("DW_AT_entry_pc") or attrs.get("DW_AT_low_pc")
        if pc is None:
            die("%s: inlined %s at DIE 0x%x has no entry pc" % (path, name, off))
        sites[name].append(int(pc.split()[-1], 16))
    return sites


def pick_inline(path):
    sites = dwarf_inline_sites(path)
    out = []
    for name, required in INLINE:
        pcs = sorted(set(sites.get(name, [])))
        if not pcs and required:
            die("%s: no inlined instance of %s in DWARF" % (path, name))
        for i, pc in enumerate(pcs):
            out.append(("%s@inline%s" % (name, "" if i == 0 else ".%d" % (i + 1)), pc))
    return out


# ---------------------------------------------------------------------------
# Output

def cstr(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= o < 127:
            out.append(ch)
        else:
            out.append("\\%03o" % o)
    return '"' + "".join(out) + '"'


def str_array(name, items):
    lines = ["static const char *const %s[] = {" % name]
    for i, s in enumerate(items):
        lines.append("\t/* %3d */ %s," % (i, cstr(s)))
    lines.append("};")
    return "\n".join(lines)


def emit(builds, trees, fields, outpath):
    o = ["/* Generated by scripts/gen-registry.py from luajit/pins. Do not edit. */",
         "#include <string.h>", '#include "luajit/lj_build.h"', ""]
    for t in trees:
        c = t["cname"]
        o.append("/* %s: %s %s */" % (t["tree"], t["src"], t["version"]))
        for tab in ("ffnames", "bcnames", "irnames", "traceerr"):
            o.append(str_array("%s_%s" % (c, tab), t["vmdef"][tab]))
        o.append(str_array("%s_mmnames" % c, t["mmnames"]))
        o.append("static const struct lj_bcmode %s_bcmode[] = {" % c)
        for i, (a, mm) in enumerate(t["bcmode"]):
            o.append("\t/* %-6s */ { %d, %d }," % (t["vmdef"]["bcnames"][i], a, mm))
        o.append("};")
        o.append("")
    for b in builds:
        o.append("static const struct lj_sym %s_syms[] = {" % b["cname"])
        for name, addr in b["syms"]:
            o.append("\t{ %s, 0x%x }," % (cstr(name), addr))
        o.append("\t{ NULL, 0 },")
        o.append("};")
    o.append("")
    o.append("const struct lj_build lj_known_builds[] = {")
    for b in builds:
        t = b["t"]
        c = t["cname"]
        o.append("\t{")
        o.append("\t\t.id = %s," % cstr(b["id"]))
        o.append("\t\t.package = %s," % cstr("%s %s" % (t["src"], t["version"])))
        o.append("\t\t.tree = %s," % cstr(t["tree"]))
        o.append("\t\t.kind = %s," % cstr(b["kind"]))
        o.append("\t\t.text_sha256 = { %s }," % ", ".join("0x%02x" % x for x in b["sha"]))
        o.append("\t\t.text_size = %d," % b["size"])
        o.append("\t\t.layout = {")
        for f in fields:
            o.append("\t\t\t.%s = %d," % (f, t["vals"][f]))
        o.append("\t\t},")
        o.append("\t\t.syms = %s_syms," % b["cname"])
        for tab in ("ffnames", "bcnames", "irnames", "traceerr"):
            o.append("\t\t.%s = %s_%s, .n%s = %d," % (tab, c, tab, tab, len(t["vmdef"][tab])))
        o.append("\t\t.bcmode = %s_bcmode," % c)
        o.append("\t\t.mmnames = %s_mmnames, .nmmnames = %d," % (c, len(t["mmnames"])))
        o.append("\t\t.bcm_base = %d, .bcm_dst = %d," % (t["vals"]["BCMbase"], t["vals"]["BCMdst"]))
        o.append("\t\t.mm_call = %d, .mm_max = %d," % (t["vals"]["MM_call"], t["vals"]["MM__MAX"]))
        o.append("\t},")
    o.append("};")
    o.append("")
    o.append("const int lj_nknown_builds = %d;" % len(builds))
    o.append("")
    o.append("__u64 lj_build__sym(const struct lj_build *b, const char *name)")
    o.append("{")
    o.append("\tconst struct lj_sym *s;")
    o.append("")
    o.append("\tfor (s = b->syms; s->name; s++)")
    o.append("\t\tif (strcmp(s->name, name) == 0)")
    o.append("\t\t\treturn s->addr;")
    o.append("\treturn 0;")
    o.append("}")
    tmp = outpath + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(o) + "\n")
    os.replace(tmp, outpath)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory (default build)")
    ap.add_argument("--pins", default="luajit/pins")
    ap.add_argument("--layout-header", default="bpf/lj_layout.h")
    ap.add_argument("--out", default=None, help="default BUILD/gen/lj_builds.c")
    ap.add_argument("--print", action="store_true", help="print layouts and symbols")
    args = ap.parse_args()
    B = args.build
    gendir = os.path.join(B, "gen")
    os.makedirs(gendir, exist_ok=True)
    out = args.out or os.path.join(gendir, "lj_builds.c")

    fields = layout_fields(args.layout_header)
    missing = [f for f in fields if f not in LAYOUT]
    if missing:
        die("struct lj_layout fields with no entry in LAYOUT: %s" % " ".join(missing))

    trees, builds = [], []
    for pin in read_pins(args.pins):
        tree = pin["tree"]
        tdir = os.path.join(B, "luajit", tree)
        srcdir = os.path.join(tdir, "src")
        stamp = os.path.join(tdir, ".nupp-built")
        want = "%s %s" % (pin["src"], pin["version"])
        try:
            have = open(stamp).read().strip()
        except OSError:
            have = None
        if have != want:
            die("%s: no build of %s in %s (run `make luajit`)" % (tree, want, tdir))
        t = dict(pin, cname=re.sub(r"\W", "_", tree))
        t["vals"], t["bcmode"], t["mmnames"] = c_values(tree, srcdir, gendir)
        t["vmdef"] = vmdef_tables(tree, srcdir)
        if len(t["vmdef"]["bcnames"]) != len(t["bcmode"]):
            die("%s: vmdef has %d bcnames, lj_bc.h %d ops" %
                (tree, len(t["vmdef"]["bcnames"]), len(t["bcmode"])))
        trees.append(t)

        libdir = os.path.join(B, "stock", tree, "usr", "lib", MULTIARCH)
        stock_lib = None
        if os.path.isdir(libdir):
            libs = sorted(f for f in os.listdir(libdir)
                          if re.fullmatch(r"libluajit.*\.so\.\d+\.\d+\.\d+", f)
                          and not os.path.islink(os.path.join(libdir, f)))
            stock_lib = os.path.join(libdir, libs[0]) if libs else None
        files = [("exe", "bin", os.path.join(srcdir, "luajit"),
                  os.path.join(B, "stock", tree, "usr", "bin", "luajit"), pin["exe_pkg"]),
                 ("lib", "lib", os.path.join(srcdir, "libluajit.so"), stock_lib, pin["lib_pkg"])]
        for kind, idkind, path, stock, pkg in files:
            addr, text = text_section(path)
            sha = hashlib.sha256(text).digest()
            if not stock or not os.path.isfile(stock):
                die("%s: stock file from %s not found in %s (run `make luajit`)"
                    % (tree, pkg, os.path.join(B, "stock", tree)))
            saddr, stext = text_section(stock)
            ssha = hashlib.sha256(stext).digest()
            if ssha != sha or saddr != addr:
                die("%s: .text of the rebuild %s (addr 0x%x, %d bytes, sha256 %s) differs from "
                    "the stock Debian file %s (addr 0x%x, %d bytes, sha256 %s); the rebuild's "
                    "symbols would not be valid for the Debian binary. Was the build toolchain "
                    "or the build command changed?"
                    % (tree, path, addr, len(text), sha.hex(), stock, saddr, len(stext), ssha.hex()))
            syms = pick_symbols(path, nm_symbols(path)) + pick_inline(path)
            builds.append(dict(t=t, kind=kind, id="debian-%s-%s" % (tree, idkind),
                               cname=re.sub(r"\W", "_", "%s_%s" % (tree, kind)),
                               sha=sha, size=len(text), syms=syms, path=path))

    emit(builds, trees, fields, out)

    for b in builds:
        print("  %-20s .text %s.. %7d bytes == stock" % (b["id"], b["sha"].hex()[:16], b["size"]))
    if args.print:
        for t in trees:
            print("\n[%s] %s %s" % (t["tree"], t["src"], t["version"]))
            for k in fields + list(EXTRA):
                print("  %-20s %d" % (k, t["vals"][k]))
            print("  ffnames %d bcnames %d irnames %d traceerr %d mmnames %d: %s"
                  % (len(t["vmdef"]["ffnames"]), len(t["vmdef"]["bcnames"]),
                     len(t["vmdef"]["irnames"]), len(t["vmdef"]["traceerr"]),
                     len(t["mmnames"]), " ".join(t["mmnames"])))
        for b in builds:
            print("\n[%s] %s" % (b["id"], b["path"]))
            for name, addr in b["syms"]:
                print("  %-28s 0x%x" % (name, addr))


if __name__ == "__main__":
    main()
