# SPDX-License-Identifier: MIT
"""The LuaJIT builds a test can run a script with, each by name."""
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from .paths import BUILD, LUAHOST, MULTIARCH, PINNED, ROOT, STOCK, WORKLOADS


@dataclass(frozen=True)
class LuaBuild:
    """A way to run a Lua script: `argv + [script, args...]` with `env` added."""
    name: str
    argv: tuple
    env: tuple = ()			# (("LD_LIBRARY_PATH", "..."), ...)
    embedded: bool = False		# a C host embedding libluajit (no luajit main)

    def command(self, script, *args):
        return [*self.argv, str(script), *map(str, args)]

    def environ(self, base=None):
        e = dict(os.environ if base is None else base)
        e.update(dict(self.env))
        return e


def _host(name, libdir):
    return LuaBuild(name, (str(LUAHOST),), (("LD_LIBRARY_PATH", str(libdir)),), True)


def _pinned_libdir(tree):
    """The pinned rebuild's libluajit.so under its soname, for LD_LIBRARY_PATH."""
    d = BUILD / "tests" / "lib" / tree
    lib = PINNED / tree / "src" / "libluajit.so"
    link = d / "libluajit-5.1.so.2"
    if lib.exists() and not link.exists():
        d.mkdir(parents=True, exist_ok=True)
        link.symlink_to(lib)
    return d


BUILDS = {
    "stock-luajit": LuaBuild("stock-luajit", ("/usr/bin/luajit",)),
    "stock-luajit-host": _host("stock-luajit-host", STOCK / "luajit" / MULTIARCH),
    # luajit2's executable links LuaJIT statically (no libluajit NEEDED).
    "stock-luajit2": LuaBuild("stock-luajit2", (str(STOCK / "luajit2/usr/bin/luajit"),)),
    "stock-luajit2-host": _host("stock-luajit2-host", STOCK / "luajit2" / MULTIARCH),
    "pinned-luajit": LuaBuild("pinned-luajit", (str(PINNED / "luajit/src/luajit"),)),
    "pinned-luajit2": LuaBuild("pinned-luajit2", (str(PINNED / "luajit2/src/luajit"),)),
    "pinned-luajit-host": _host("pinned-luajit-host", BUILD / "tests/lib/luajit"),
    "pinned-luajit2-host": _host("pinned-luajit2-host", BUILD / "tests/lib/luajit2"),
}
# Other distributions' stock builds, run as a container runs them (a mount
# namespace and a root of their own: tests/helpers/container), profiled from
# the host: Debian 13 and sid ship OpenResty's LuaJIT as luajit.
CONTAINER = ROOT / "tests" / "helpers" / "container"
ROOTS = BUILD / "roots"
for _suite in ("trixie", "sid"):
    BUILDS[f"{_suite}-luajit"] = LuaBuild(f"{_suite}-luajit",
                                          (str(CONTAINER), str(ROOTS / _suite), "/usr/bin/luajit"))
    BUILDS[f"{_suite}-luajit-host"] = LuaBuild(f"{_suite}-luajit-host",
                                               (str(CONTAINER), str(ROOTS / _suite), str(LUAHOST)),
                                               embedded=True)
STOCK_LUAJIT = BUILDS["stock-luajit"]


def ready_build(name):
    """Build name, its files checked (the test FAILS when one is missing)."""
    b = BUILDS[name]
    if name.startswith("pinned-") and b.embedded:
        _pinned_libdir(name[len("pinned-"):-len("-host")])
    missing = [p for p in [b.argv[0]] + [v for k, v in b.env if k == "LD_LIBRARY_PATH"]
               if not Path(p).exists()]
    if b.argv[0] == str(CONTAINER):	# its root (`make roots`) and program
        missing += [p for p in (b.argv[1] + "/usr/bin/luajit", b.argv[2])
                    if not Path(p).exists() and not p.startswith("/usr/")]
    elif b.embedded:
        libdir = Path(dict(b.env)["LD_LIBRARY_PATH"])
        if not (libdir / "libluajit-5.1.so.2").exists():
            missing.append(str(libdir / "libluajit-5.1.so.2"))
    if missing:
        pytest.fail(f"LuaJIT build {name} is not built ({', '.join(missing)}); run `make`",
                    pytrace=False)
    return b


def workload(name):
    p = WORKLOADS / name
    assert p.exists(), f"missing workload {p}"
    return p

