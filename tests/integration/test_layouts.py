# SPDX-License-Identifier: MIT
"""The revision table (luajit/revisions.json) and the DWARF layout reader.

No root, no BPF: build/tools/nupp-layout reads the DWARF of the pinned
rebuilds, which must give exactly the registry's layout for that build
(build/gen/lj_builds.c, from gen-registry's offsetof printer) and the
layout of the table's row for the same Debian source package; and the
DWARF of trixie's and sid's `luajit` as the variants build them, which
must give the layout of the table's row for that source package. The table
itself is checked for order, valid indexes and facts known from the
LuaJIT sources. See kernel-notes/layouts.md.
"""
import importlib.util
import json
import re
import subprocess

import pytest

from helpers import BUILD, PINNED, ROOT

NUPP_LAYOUT = BUILD / "tools" / "nupp-layout"
REGISTRY = BUILD / "gen" / "lj_builds.c"
TABLE = ROOT / "luajit" / "revisions.json"
PINS = ROOT / "luajit" / "pins"
SUITES = BUILD / "luajit" / "suites"
# One variant of each later suite's source with the default build options,
# from the sample `make variants` builds (mk/variants.mk).
SUITE_BUILDS = {"trixie": "trixie-luajit-gcc-O2", "sid": "sid-luajit-clang-O2"}
BETA3 = "8271c643c21d1b2f344e339f559f2de6f3663191"


def layout_fields():
    """Field names of struct lj_layout, in order (as gen-registry reads them)."""
    text = (ROOT / "bpf" / "lj_layout.h").read_text()
    body = re.search(r"struct\s+lj_layout\s*\{(.*?)\};", text, re.S).group(1)
    return re.findall(r"__[su]\d+\s+(\w+)\s*;", re.sub(r"/\*.*?\*/", "", body, flags=re.S))


FIELDS = layout_fields()


@pytest.fixture(scope="module")
def table():
    return json.loads(TABLE.read_text())


def dwarf_layout(path):
    assert NUPP_LAYOUT.exists(), f"{NUPP_LAYOUT} is not built; run `make`"
    out = subprocess.run([str(NUPP_LAYOUT), str(path)], check=True, capture_output=True, text=True).stdout
    pairs = [line.split() for line in out.splitlines()]
    assert [k for k, _ in pairs] == FIELDS, "nupp-layout prints other fields than bpf/lj_layout.h has"
    return {k: int(v) for k, v in pairs}


def registry_layouts():
    """{(tree, kind): layout} from the generated registry."""
    assert REGISTRY.exists(), f"{REGISTRY} is not generated; run `make`"
    out = {}
    for entry in re.findall(r"\t\{\n(.*?)\n\t\},", REGISTRY.read_text(), re.S):
        tree = re.search(r'\.tree = "(\w+)"', entry).group(1)
        kind = re.search(r'\.kind = "(\w+)"', entry).group(1)
        body = re.search(r"\.layout = \{(.*?)\}", entry, re.S).group(1)
        out[(tree, kind)] = {k: int(v) for k, v in re.findall(r"\.(\w+) = (-?\d+),", body)}
    return out


def registry_tables(tree):
    """{table: [strings]} of a tree's vmdef tables in the generated registry."""
    text = REGISTRY.read_text()
    out = {}
    for tab in ("ffnames", "bcnames", "irnames", "traceerr", "mmnames"):
        body = re.search(r"static const char \*const %s_%s\[\] = \{\n(.*?)\n\};" % (tree, tab), text, re.S)
        items = re.findall(r'^\t/\* *\d+ \*/ "((?:[^"\\]|\\.)*)",$', body.group(1), re.M)
        out[tab] = [re.sub(r"\\([0-7]{3}|.)", lambda m: chr(int(m.group(1), 8)) if len(m.group(1)) == 3
                           else m.group(1), i) for i in items]
    return out


def pins():
    """{tree: "SRC VERSION"} of luajit/pins."""
    out = {}
    for line in PINS.read_text().splitlines():
        f = line.split("#", 1)[0].split()
        if f:
            out[f[0]] = f"{f[1]} {f[2]}"
    return out


def row_layout(table, row):
    return table["layouts"][row["layout"]]


@pytest.mark.parametrize("tree", ["luajit", "luajit2"])
def test_dwarf_layout_of_pinned_rebuild(tree, table):
    exe = PINNED / tree / "src" / "luajit"
    assert exe.exists(), f"{exe} is not built; run `make`"
    got = dwarf_layout(exe)
    assert got == registry_layouts()[(tree, "exe")]
    assert got == dwarf_layout(PINNED / tree / "src" / "libluajit.so")
    source = f"debian bookworm {pins()[tree]}"
    rows = [r for r in table["revisions"] if r["source"] == source]
    assert len(rows) == 1, f"no row for {source} in {TABLE}"
    assert row_layout(table, rows[0]) == got
    vmdef = table["vmdefs"][rows[0]["vmdef"]]
    for tab, names in registry_tables(tree).items():
        assert names and vmdef[tab] == names, f"{tab} of {source} differ from the registry's"


def gen_registry():
    spec = importlib.util.spec_from_file_location("gen_registry", ROOT / "scripts" / "gen-registry.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def table_row(table, fork, source, time):
    """The row for source, or, when the table predates it (a suite that moved
    on since `make layouts`), the row nupp-bpf takes for a build of that
    time: its fork's last one not after it."""
    rows = [r for r in table["revisions"] if r["source"] == source]
    if rows:
        return rows[0]
    return [r for r in table["revisions"] if r["fork"] == fork and r["time"] <= time][-1]


@pytest.mark.parametrize("suite", SUITE_BUILDS)
def test_dwarf_layout_of_suite_source(suite, table):
    """trixie's and sid's `luajit`, built from the tree
    scripts/fetch-suite-source.sh unpacked (the tree gen-layouts reads):
    DWARF layout, version string and jit.vmdef tables are the table's."""
    pin = (SUITES / f"{suite}-luajit" / ".nupp-pin").read_text().splitlines()
    src, version = pin[1].split()[:2]
    build = BUILD / "variants" / SUITE_BUILDS[suite] / "src"
    assert (build / "luajit").exists(), f"{build}/luajit is not built; run `make variants`"
    banner = subprocess.run([str(build / "luajit"), "-v"], check=True, capture_output=True,
                            text=True).stdout
    m = re.match(r"(LuaJIT 2\.1\.(\d{10})) ", banner)
    assert m, banner
    row = table_row(table, "luajit2", f"debian {suite} {src} {version}", int(m.group(2)))
    assert row["fork"] == "luajit2", "Debian's luajit is OpenResty's fork since trixie"
    assert row["version_string"] == m.group(1)
    assert dwarf_layout(build / "luajit") == row_layout(table, row)
    assert dwarf_layout(build / "libluajit.so") == row_layout(table, row)
    vmdef = table["vmdefs"][row["vmdef"]]
    for tab, names in gen_registry().vmdef_tables(suite, str(build)).items():
        assert vmdef[tab] == names, f"{tab} of {row['source']} differ from the build's jit.vmdef"


def test_nupp_layout_refuses_a_file_without_dwarf(tmp_path):
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(PINNED / "luajit" / "src" / "luajit")], check=True)
    r = subprocess.run([str(NUPP_LAYOUT), str(stripped)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("nupp-layout: error: ") and "no DWARF" in r.stderr
    assert subprocess.run([str(NUPP_LAYOUT), "--present", str(stripped)]).returncode == 1


def test_table_shape(table):
    assert table["fields"] == FIELDS, "luajit/revisions.json is stale: run `make layouts`"
    for lay in table["layouts"]:
        assert list(lay) == FIELDS
    rows = table["revisions"]
    assert rows == sorted(rows, key=lambda r: (r["fork"], r["time"])), "rows not sorted by fork, time"
    for r in rows:
        assert r["fork"] in ("luajit", "luajit2")
        assert 0 <= r["layout"] < len(table["layouts"])
        assert 0 <= r["vmdef"] < len(table["vmdefs"])
        for opts, idx in r.get("variants", {}).items():
            assert opts in table["options"]
            assert isinstance(idx, str) or 0 <= idx < len(table["layouts"])
        if r["source"] == "git":
            assert re.fullmatch(r"[0-9a-f]{40}", r["commit"])
        else:
            assert r["commit"] is None and r["source"].startswith("debian ")
        assert re.fullmatch(r"LuaJIT 2\.1\.(0-beta3|\d{10})", r["version_string"])
        if r["version_string"] != "LuaJIT 2.1.0-beta3":
            assert r["version_string"] == f"LuaJIT 2.1.{r['time']}"
    for vm in table["vmdefs"]:
        assert len(vm["bcmode"]) == len(vm["bcnames"])
        assert vm["ffnames"][:3] == ["Lua", "C", "assert"]
        assert vm["mmnames"][vm["mm_call"]] == "__call" and len(vm["mmnames"]) == vm["mm_max"]


def test_table_known_facts(table):
    rows = table["revisions"]
    git = {r["commit"]: r for r in rows if r["commit"]}
    beta3 = git[BETA3]
    assert beta3["fork"] == "luajit" and beta3["version_string"] == "LuaJIT 2.1.0-beta3"
    assert row_layout(table, beta3)["gg_g"] == 96
    assert beta3["gc64"] == 0       # GC64 became the x86-64 default in December 2019
    assert rows[-1]["fork"] == "luajit2"
    for r in rows:
        lay = row_layout(table, r)
        # Unchanged since beta3 in both forks.
        assert (lay["L_glref"], lay["gc_gct"], lay["fn_ffid"], lay["pt_size"]) == (16, 9, 10, 104)
        assert lay["disp2g"] < 0 and lay["J_penalty"] < lay["J_errinfo"]
        if r["time"] >= 1580515200:      # February 2020 on: GC64 by default in both forks
            assert r["gc64"] == 1 and r["fr2"] == 1
        if r["fork"] == "luajit2" and r["time"] >= 1672531200:   # OpenResty, 2023 on
            assert lay["gg_g"] == 112 and lay["J_state"] == 236
        # A build without the JIT compiler has no jit_State in GG_State.
        nojit = r.get("variants", {}).get("LUAJIT_DISABLE_JIT")
        assert isinstance(nojit, int) and table["layouts"][nojit]["gg_j"] == 0
    debian = {r["source"].split()[1]: r for r in rows if r["source"].startswith("debian ")}
    assert set(debian) >= {"bookworm", "trixie", "sid"}
    assert debian["trixie"]["fork"] == "luajit2"
    assert debian["trixie"]["version_string"] == "LuaJIT 2.1.1737090214"


def test_c_table_compiles(tmp_path):
    out = tmp_path / "lj_revisions.c"
    subprocess.run(["python3", str(ROOT / "scripts" / "gen-layouts.py"), "--emit-c", str(out),
                    "--json", str(TABLE), "--layout-header", str(ROOT / "bpf" / "lj_layout.h")],
                   check=True, cwd=ROOT)
    subprocess.run(["gcc", "-Wall", "-Werror", "-c", "-I" + str(ROOT / "user"), "-I" + str(ROOT / "bpf"),
                    str(out), "-o", str(tmp_path / "lj_revisions.o")], check=True)
