# SPDX-License-Identifier: MIT
"""What the compiled BPF objects must keep, checked on the objects the build
made (no kernel needed).

The sampler runs on every timer interrupt of every CPU. The x86-64 JIT of
this kernel moves a program whose stack, rounded up to 16 bytes, reaches 64
bytes to a per-CPU private stack (kernel-notes/sampler.md): a page that the
interrupt has not just warmed, set up in the prologue of every run. The
sampler keeps what lives across helper calls in its per-CPU scratch instead
(struct lj_walk_mem), and this test keeps it that way.
"""
import re
import subprocess

import pytest

from helpers import BUILD

PRIV_STACK_MIN = 64		# BPF_PRIV_STACK_MIN_SIZE


def stack_depths(obj):
    """{program: deepest r10 offset it uses}, from llvm-objdump."""
    text = subprocess.run(["llvm-objdump", "-d", "--no-show-raw-insn", str(obj)],
                          capture_output=True, text=True, check=True).stdout
    depths, prog = {}, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\w+)>:$", line)
        if m and not m[1].startswith("LBB"):	# LBB...: a branch target within prog
            prog = m[1]
            depths[prog] = 0
            continue
        for off in re.findall(r"r10 - (\d+)\)", line):
            depths[prog] = max(depths[prog], int(off))
    return depths


@pytest.mark.parametrize("func", ["on_cpu_clock", "on_tick", "walk_steps", "announce_slot",
                                  "capture_names", "capture_sites", "capture_site",
                                  "trace_head_at"])
def test_sampler_stack_stays_off_the_private_stack(func):
    """The kernel decides for each function on its own: a program and the
    global functions it calls (walk_steps, capture_names)."""
    depths = stack_depths(BUILD / "sampler.bpf.o")
    assert func in depths, f"no function {func} in sampler.bpf.o: {sorted(depths)}"
    rounded = (depths[func] + 15) // 16 * 16
    assert rounded < PRIV_STACK_MIN, \
        f"{func} uses {depths[func]} bytes of stack (rounded {rounded}): the kernel would " \
        f"run it on a private per-CPU stack"


def kernel_build_id():
    """The running kernel's GNU build-id note, or None."""
    import struct
    try:
        notes = open("/sys/kernel/notes", "rb").read()
    except OSError:
        return None
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, ntype = struct.unpack_from("<III", notes, at)
        desc = at + 12 + ((namesz + 3) & ~3)
        if ntype == 3 and notes[at + 12:at + 12 + namesz] == b"GNU\0":
            return notes[desc:desc + descsz]
        at = desc + ((descsz + 3) & ~3)
    return None


def test_kernel_btf_is_the_minimal_one_on_this_kernel(privileged):
    """Built on this kernel, the objects load against the kernel types the
    build kept (user/base/libbpf_setup.h), not the kernel's whole BTF; a kernel
    without a build-id to check them by gets its whole BTF."""
    from helpers import NUPP, WORKLOADS
    r = subprocess.run([str(NUPP), "record", "-v", "-d", "1", "-o", "/dev/null", "--", "luajit",
                        str(WORKLOADS / "mixed.lua"), "0.3"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    whole = "loading kernel BTF '/sys/kernel/btf/vmlinux'" in r.stderr
    assert whole == (kernel_build_id() is None), r.stderr[-3000:]
    assert "CO-RE relocating" in r.stderr, "the objects have CO-RE relocations to resolve"
