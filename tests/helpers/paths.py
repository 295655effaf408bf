# SPDX-License-Identifier: MIT
"""Where the build products, workloads and LuaJIT builds are."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = ROOT / "build"
NUPP = BUILD / "nupp-bpf"
WORKLOADS = ROOT / "tests" / "fixtures" / "workloads"
LUAHOST = BUILD / "tests" / "luahost"
LUAHOST_LIBS = BUILD / "tests" / "luahost-libs"  # linked to many libraries (mk/luajit.mk)
STOCK = BUILD / "stock"
PINNED = BUILD / "luajit"
MULTIARCH = "usr/lib/x86_64-linux-gnu"
BTF = Path("/sys/kernel/btf/vmlinux")
# The frame a luajit executable's stacks start with, its C function pmain:
# by name where the build has symbols, else as file+0xADDR (the address in
# the file, the same in every process). dumpstack writes @0xADDRESS.
LUAJIT_ROOT = r"(?:pmain|luajit[\w.-]*\+0x[0-9a-f]+)"

# The suite's build cache (user/luajit/build_cache.h), emptied as a run starts.
BUILD_CACHE = BUILD / "tmp" / "build-cache"
