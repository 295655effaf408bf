# SPDX-License-Identifier: MIT
"""The build cache: what a LuaJIT file said of itself, kept between runs.

An entry is named by the SHA-256 of the build's .text; a second attach reads
it instead of decoding the build again, and verifies it as it would a fresh
description: sites decoded before use, the layout checked in the live VM.
An entry that does not hold is dropped and the build described afresh. A
directory others may write is never used.
"""
import hashlib
import os
import re
import subprocess

from helpers import WORKLOADS, cpu_seconds, parse_collapsed, parse_truth
from helpers import FNEW, FNEW_SITES, assert_mixed, read_csv, stripped
from helpers import run_nupp as run

VARIANT = "luajit-clang-O2"


def text_sha256(exe, tmp_path):
    out = tmp_path / "text.bin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(exe), str(out)],
                   check=True)
    return hashlib.sha256(out.read_bytes()).hexdigest()


def cache_env(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o755, exist_ok=True)
    os.chmod(d, 0o755)
    return d, {**os.environ, "NUPP_CACHE_DIR": str(d)}


def inspect(exe, env):
    r = run(["inspect", exe], env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def lines_but_build(text):
    return [l for l in text.splitlines() if not l.startswith("build ")]


def test_entry_named_by_text_digest_and_read_back(tmp_path):
    """First inspect derives and writes one entry named by the .text digest;
    the second reads it: the same sites, described as cached."""
    exe = stripped(VARIANT, tmp_path)
    d, env = cache_env(tmp_path)
    first = inspect(exe, env)
    assert "sites from machine code" in first and "(cached)" not in first, first
    assert [p.name for p in d.iterdir()] == [text_sha256(exe, tmp_path)]
    second = inspect(exe, env)
    assert re.search(r"^build .*sites from machine code \(cached\)$", second, re.M), second
    assert lines_but_build(second) == lines_but_build(first)


def test_tampered_site_is_not_used(tmp_path):
    """An entry whose trace-abort site moved by one byte: the site does not
    decode as the expected jump, the entry is not used, the build is
    described afresh and the entry written right again."""
    exe = stripped(VARIANT, tmp_path)
    d, env = cache_env(tmp_path)
    first = inspect(exe, env)
    entry = next(d.iterdir())
    good = entry.read_text()
    m = re.search(r"^trace-abort\s+0x([0-9a-f]+) verified$", first, re.M)
    assert m, first
    site = int(m[1], 16)
    le = site.to_bytes(8, "little").hex()
    assert le in good, good
    entry.write_text(good.replace(le, (site + 1).to_bytes(8, "little").hex(), 1))
    again = inspect(exe, env)
    assert "(cached)" not in again and lines_but_build(again) == lines_but_build(first), again
    assert entry.read_text() == good


def test_unsafe_directory_is_not_used(tmp_path):
    """A cache directory others can write steers where probes go: unused."""
    exe = stripped(VARIANT, tmp_path)
    d, env = cache_env(tmp_path)
    os.chmod(d, 0o777)
    inspect(exe, env)
    assert "(cached)" not in inspect(exe, env)
    assert list(d.iterdir()) == []


def test_cached_build_profiled_on_both_channels(privileged, tmp_path):
    """Two launches of one stripped build: the second reads the entry the
    first wrote (not written again) and records the same as the first."""
    exe = stripped(VARIANT, tmp_path)
    d, env = cache_env(tmp_path)
    results = []
    for i in range(2):
        r = run(["-F", 997, "-o", tmp_path / f"m{i}", "--", exe, WORKLOADS / "mixed.lua", 1],
                env=env)
        assert r.returncode == 0, r.stderr
        entry = next(d.iterdir())
        results.append(os.stat(entry).st_ino)
        rows = parse_collapsed((tmp_path / f"m{i}.collapsed").read_text())
        assert_mixed(rows, parse_truth(r.stdout)["cpu"])
        out = tmp_path / f"a{i}.csv"
        r = run(["trace", "-o", out, "--", exe, FNEW], env=env)
        assert r.returncode == 0, r.stderr
        assert read_csv(out)[1:] == FNEW_SITES, r.stderr
    assert results[0] == results[1], "the second run wrote the entry again"


def test_entry_whose_layout_fails_in_the_vm_is_dropped(privileged, tmp_path):
    """A build with DWARF whose cached layout was altered (lua_State's base
    and maxstack swapped): attached to a running process, the layout does
    not verify in its VM; the entry is dropped, the build described afresh
    from its DWARF, and the process profiled."""
    exe = stripped(VARIANT, tmp_path, keep="dwarf")
    d, env = cache_env(tmp_path)
    inspect(exe, env)
    entry = next(d.iterdir())
    good = entry.read_text()
    # struct lj_layout: 9 fields, then L_base, L_top, L_stack, L_maxstack (u32 each)
    m = re.search(r"^dwarf ([0-9a-f]{72})([0-9a-f]{8})([0-9a-f]{16})([0-9a-f]{8})", good, re.M)
    assert m, good
    entry.write_text(good.replace(m[0], "dwarf " + m[1] + m[4] + m[3] + m[2], 1))
    target = subprocess.Popen([str(exe), str(WORKLOADS / "mixed.lua"), "30"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert target.stdout.readline() == "ready\n"
        cpu = cpu_seconds(target.pid)
        r = run(["record", "-p", target.pid, "-F", 997, "-d", 1, "-o", tmp_path / "p.collapsed"],
                env=env)
        cpu = cpu_seconds(target.pid) - cpu
        assert r.returncode == 0, r.stderr
        assert_mixed(parse_collapsed((tmp_path / "p.collapsed").read_text()), cpu)
        assert entry.read_text() == good
    finally:
        target.kill()
        target.wait()
