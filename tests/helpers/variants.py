# SPDX-License-Identifier: MIT
"""LuaJIT builds compiled here (build/variants/, `make variants`) and what
several test files expect of a build: mixed.lua's stacks, nyi_fnew.lua's
abort sites."""
import csv
import re
import shutil
import subprocess

import pytest

from .paths import BUILD, LUAJIT_ROOT, NUPP, ROOT

VARIANT_DIR = BUILD / "variants"

# mixed.lua's two stacks, as every build must show them.
MIXED = re.compile(r"^" + LUAJIT_ROOT + r";mixed\.lua:0;mixed\.lua:outer;mixed\.lua:(compiled|interpreted)$")

# nyi_fnew.lua's abort sites, as `trace` writes them (CSV rows after the header).
FNEW = ROOT / "tests" / "fixtures" / "aborts" / "nyi_fnew.lua"
FNEW_SITES = [
    ["blacklist", "1", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
     "NYI: bytecode 51", "nyi_fnew.lua:4", ""],
    ["warn", "10", "NYI: bytecode FNEW", "trace.nyi-bytecode.FNEW", "blocker",
     "NYI: bytecode 51", "nyi_fnew.lua:4", ""],
]


def stripped(name, tmp_path, keep="nothing"):
    """A copy of variant name's luajit as a distribution ships it: stripped
    (keep="nothing"), with its symbols but no DWARF ("symbols"), or whole
    ("dwarf")."""
    src = VARIANT_DIR / name / "src" / "luajit"
    if not src.exists():
        pytest.fail(f"variant {name} is not built ({src}): run `make variants`", pytrace=False)
    dst = tmp_path / "luajit"
    flag = {"nothing": ["--strip-all"], "symbols": ["--strip-debug"], "dwarf": []}[keep]
    if flag:
        subprocess.run(["strip", *flag, "-o", str(dst), str(src)], check=True)
    else:
        shutil.copy(src, dst)
    out = subprocess.run(["readelf", "-S", str(dst)], capture_output=True, text=True).stdout
    assert (".symtab" in out) == (keep != "nothing") and (".debug_info" in out) == (keep == "dwarf")
    return dst


def assert_mixed(rows, cpu):
    """mixed.lua's two stacks: at least half the samples the target's CPU
    time (cpu seconds, nupp-bpf's start-up included: on a loaded host it took
    a fifth of the target's second) makes at 997 Hz, 97 % of them on those
    stacks."""
    n = sum(c for _, c in rows)
    good = sum(c for s, c in rows if MIXED.match(s))
    assert n >= 0.5 * 997 * cpu and good >= 0.97 * n, (cpu, rows)


def run_nupp(args, **kw):
    """nupp-bpf with args (str() of each), its output captured as text."""
    return subprocess.run([str(NUPP), *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))
