# SPDX-License-Identifier: MIT
"""C functions on a Lua stack are named the same in every process.

dumpstack names a C function by its address, which ASLR moves from run to
run; nupp-bpf names it by its symbol where the build has one (luajit's
pmain), else by its file and ELF address (luajit+0x92c0), so that the
stacks of two runs merge. --dumpstack-names keeps dumpstack's rendering.
"""
import re
import subprocess

from helpers import LUAJIT_ROOT, NUPP, WORKLOADS, parse_collapsed, share, total
from helpers import stripped

MIXED = WORKLOADS / "mixed.lua"


def record(tmp_path, *args):
    out = tmp_path / "p.collapsed"
    r = subprocess.run([str(NUPP), "record", "-F", "997", "-o", str(out), *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return parse_collapsed(out.read_text())


def roots(rows):
    return {st.split(";")[0] for st, _ in rows}


def test_two_runs_share_one_root(privileged, tmp_path):
    """Two processes of the stripped stock luajit, one after the other under
    one session: one root frame, luajit+0xADDR, for both."""
    rows = record(tmp_path, "--", "sh", "-c", f"luajit {MIXED} 1; luajit {MIXED} 1")
    assert total(rows) > 1000, rows
    lua_rows = [(st, c) for st, c in rows if "mixed.lua:outer" in st]
    assert share(rows, lambda f: "mixed.lua:outer" in f) >= 0.97, rows
    assert len(roots(lua_rows)) == 1 and re.fullmatch(r"luajit\+0x[0-9a-f]+", roots(lua_rows).pop())


def test_root_named_by_symbol(privileged, tmp_path):
    """A build with its symbols: the root is pmain, by name."""
    exe = stripped("luajit-gcc-O3", tmp_path, keep="symbols")
    rows = record(tmp_path, "--", exe, MIXED, 1)
    lua_rows = [(st, c) for st, c in rows if "mixed.lua:outer" in st]
    assert roots(lua_rows) == {"pmain"}, rows
    assert re.fullmatch(LUAJIT_ROOT, "pmain")


def test_dumpstack_names_keep_addresses(privileged, tmp_path):
    """--dumpstack-names: the root by its address, as dumpstack writes it."""
    rows = record(tmp_path, "--dumpstack-names", "--", "luajit", MIXED, 1)
    lua_rows = [(st, c) for st, c in rows if "mixed.lua:outer" in st]
    (root,) = roots(lua_rows)
    assert re.fullmatch(r"@0x[0-9a-f]{8,}", root), rows
