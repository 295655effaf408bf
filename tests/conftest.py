# SPDX-License-Identifier: MIT
"""Shared fixtures and helpers for the nupp-bpf test suite.

What lives here is generic: where the build products are, how to run
nupp-bpf and the LuaJIT builds, and how to read collapsed stacks and the
summary nupp-bpf prints on stderr.

Policy: a test that cannot run is a failure, not a skip. The BPF tests need
root and kernel BTF; without them the `privileged` fixture fails the test
with the reason. A skip from anywhere else is turned into a failure too
(see pytest_runtest_makereport), so `pytest -q tests/` passing means every
test ran. xfail (with a reason) stays allowed.
"""
import os
import shutil
import subprocess

import pytest

from helpers import BTF, BUILD_CACHE, NUPP, Nupp, Target, ready_build, wait_for_teardowns

# Each run of the suite starts with an empty build cache (user/luajit/build_cache.h),
# so that what an earlier run or another nupp-bpf left there decides nothing;
# within the run, later tests of a build use what the first one derived.
shutil.rmtree(BUILD_CACHE, ignore_errors=True)
BUILD_CACHE.parent.mkdir(parents=True, exist_ok=True)
os.environ["NUPP_CACHE_DIR"] = str(BUILD_CACHE)


# --- skip is failure ----------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped, and a skip counts as a failure in this suite: {reason}"



# --- markers --------------------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "root: loads BPF programs for real (root and kernel BTF)")
    config.addinivalue_line("markers", "slow: a test module that takes minutes (`-m 'not slow'`)")


def pytest_collection_modifyitems(items):
    """A test that asks for the privileged fixture (directly or through nupp)
    is a root test; so is every Lua API test on the BPF backend
    (NUPP_BACKEND=bpf: the modules attach BPF probes)."""
    bpf_backend = os.environ.get("NUPP_BACKEND") == "bpf"
    for item in items:
        if ("privileged" in getattr(item, "fixturenames", ())
                or (bpf_backend and item.path.parent.name == "lua_api")):
            item.add_marker(pytest.mark.root)


# --- one test's teardown does not run into the next --------------------------

@pytest.fixture(autouse=True)
def earlier_probes_removed():
    wait_for_teardowns()


def _privilege_problem():
    if os.geteuid() != 0:
        return "the BPF tests must run as root (they load BPF programs for real); run `make test` as root"
    if not BTF.exists():
        return f"the kernel has no BTF ({BTF} is missing); nupp-bpf needs CONFIG_DEBUG_INFO_BTF"
    if not NUPP.exists():
        return f"{NUPP} is not built; run `make` first"
    return None


@pytest.fixture(scope="session")
def privileged():
    """Root, kernel BTF and a built nupp-bpf, or the test FAILS saying which is missing."""
    problem = _privilege_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def lua_build_ready():
    """A getter of the builds by name, each checked (FAILS when not built)."""
    return ready_build


@pytest.fixture
def nupp(privileged, tmp_path):
    return Nupp(tmp_path)


@pytest.fixture
def target():
    """target(build, script, *args, ready=...) starts a process; all are killed after the test."""
    started = []

    def start(build, script, *args, **kw):
        t = Target(build, script, *args, **kw)
        started.append(t)
        return t
    yield start
    for t in started:
        t.kill_all()
        try:
            t.popen.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass

