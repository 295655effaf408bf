# SPDX-License-Identifier: MIT
"""Build identity: LuaJIT builds the registry does not know.

Two such builds are made here by changing one byte of alignment padding in
.text (after a `ret`, never executed), which changes the .text digest and
nothing else: one from the stripped stock executable (unknown and without
symbols: refused with a one-line error naming the file), one from the
pinned rebuild (unknown but with .symtab: sampled through its own symbols;
the trace collector, whose probe site is an inlined one only the registry
knows, says it cannot attach and the sampler goes on).
"""
import struct
import subprocess

import pytest

from conftest import NUPP, PINNED, WORKLOADS, parse_collapsed

UNSUPPORTED = ("nupp-bpf: error: unsupported build: LuaJIT found in {exe}, but this build is "
               "unknown (.text sha256 ")


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
    target = subprocess.Popen([str(unknown_stripped), str(WORKLOADS / "mixed.lua"), "30"],
                              stdout=subprocess.DEVNULL)
    try:
        out = tmp_path / "x.collapsed"
        r = subprocess.run([str(NUPP), "record", "-p", str(target.pid), "-d", "1", "-o", str(out)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert r.stderr.startswith(UNSUPPORTED.format(exe=unknown_stripped)), r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert not out.exists(), "a refused session leaves no output file"
        assert target.poll() is None, "the target runs on"
    finally:
        target.kill()
        target.wait()


def test_unknown_stripped_build_launch(privileged, unknown_stripped, tmp_path):
    out = tmp_path / "x.collapsed"
    r = subprocess.run([str(NUPP), "record", "-o", str(out), "--", str(unknown_stripped), "-e",
                        "print('ran')"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stdout == "ran\n", "the command still runs, untouched"
    assert r.stderr.startswith(UNSUPPORTED.format(exe=unknown_stripped)), r.stderr
    assert not out.exists()


def test_unknown_symbolized_build(privileged, unknown_symbolized, tmp_path):
    r = subprocess.run([str(NUPP), "-F", "997", "-o", str(tmp_path / "s"), "--",
                        str(unknown_symbolized), str(WORKLOADS / "mixed.lua"), "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (f"nupp-bpf: note: trace aborts are not collected: {unknown_symbolized}: "
            "the build has no trace_abort() site") in r.stderr
    assert "recording PID" in r.stderr and "(symbolized)" in r.stderr
    rows = parse_collapsed((tmp_path / "s.collapsed").read_text())
    n = sum(c for _, c in rows)
    hot = sum(c for s, c in rows if s.endswith(";mixed.lua:compiled") or
              s.endswith(";mixed.lua:interpreted"))
    assert n > 1000 and hot >= 0.95 * n, rows
