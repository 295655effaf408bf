# SPDX-License-Identifier: MIT
"""Build identity: LuaJIT builds the registry does not know.

Two such builds are made here by changing one byte of alignment padding in
.text (after a `ret`, never executed), which changes the .text digest and
nothing else: one from the stripped stock executable (unknown and without
symbols), one from the pinned rebuild (unknown, with .symtab and DWARF).
Neither is in the registry: both are described from their own files
(user/luajit/lj_derive.c) and profiled on both channels.
"""
import struct
import subprocess

import pytest

from helpers import (FNEW, NUPP, PINNED, WORKLOADS, assert_mixed, cpu_seconds,
                     parse_collapsed, parse_truth)


def patched_copy(src, dst):
    """Copy src to dst with one padding byte of .text changed."""
    data = bytearray(open(src, "rb").read())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)

    def section(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)

    strtab = section(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = section(i)
        if data[strtab + name:data.index(0, strtab + name)] == b".text":
            at = data.find(b"\xc3\x0f\x1f\x40\x00", off, off + size)	# ret; nopl 0(%rax)
            assert at > 0, "no padding after a ret in .text"
            data[at + 3] = 0x80
    dst.write_bytes(bytes(data))
    dst.chmod(0o755)
    return dst


@pytest.fixture
def unknown_stripped(tmp_path):
    return patched_copy("/usr/bin/luajit", tmp_path / "luajit")


@pytest.fixture
def unknown_symbolized(tmp_path):
    src = PINNED / "luajit" / "src" / "luajit"
    assert src.exists(), f"{src} is not built; run `make`"
    return patched_copy(src, tmp_path / "luajit")


def test_unknown_stripped_build_attach(privileged, unknown_stripped, tmp_path):
    """Unknown and stripped: described from its version string, the revision
    table (the layout that verifies in the live VM) and its machine code;
    both channels run."""
    target = subprocess.Popen([str(unknown_stripped), str(WORKLOADS / "mixed.lua"), "30"],
                              stdout=subprocess.DEVNULL)
    try:
        out = tmp_path / "x"
        cpu = cpu_seconds(target.pid)
        r = subprocess.run([str(NUPP), "-F", "997", "-p", str(target.pid), "-d", "1", "-o", str(out)],
                           capture_output=True, text=True, timeout=30)
        cpu = cpu_seconds(target.pid) - cpu
        assert r.returncode == 0, r.stderr
        assert f"recording PID {target.pid}: {unknown_stripped} (derived)" in r.stderr, r.stderr
        assert "not collected" not in r.stderr, r.stderr
        assert_mixed(parse_collapsed((tmp_path / "x.collapsed").read_text()), cpu)
        assert target.poll() is None, "the target runs on"
    finally:
        target.kill()
        target.wait()


def test_unknown_stripped_build_launch(privileged, unknown_stripped, tmp_path):
    """Launched, before its VM exists: the layout is the one its code
    agrees with; every abort of nyi_fnew.lua is collected."""
    out = tmp_path / "a.csv"
    r = subprocess.run([str(NUPP), "trace", "-o", str(out), "--", str(unknown_stripped),
                        str(FNEW)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "45000150000\n", "the program's output passes through unchanged"
    assert "11 trace aborts, 1 blacklisted, 2 sites" in r.stderr, r.stderr


def test_unknown_symbolized_build(privileged, unknown_symbolized, tmp_path):
    """Unknown with .symtab and DWARF: its layout from its own DWARF, sites
    from its symbols (checked against its code); both channels run."""
    r = subprocess.run([str(NUPP), "-F", "997", "-o", str(tmp_path / "s"), "--",
                        str(unknown_symbolized), str(WORKLOADS / "mixed.lua"), "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "(derived)" in r.stderr and "not collected" not in r.stderr, r.stderr
    assert_mixed(parse_collapsed((tmp_path / "s.collapsed").read_text()),
                 parse_truth(r.stdout)["cpu"])
    info = subprocess.run([str(NUPP), "inspect", str(unknown_symbolized)], capture_output=True,
                          text=True).stdout
    assert "layout from DWARF" in info and "sites from symbols" in info, info
