# SPDX-License-Identifier: MIT
"""Output files, as a root tool must write them (user/base/output.c).

An output is written to a new file in its directory and renamed over its
name at the end: a symlink someone planted at the name in a world-writable
directory is replaced, never followed; an existing file is kept as
NAME.old, as perf record keeps perf.data.old; a run that fails leaves the
directory as it was.
"""
import os
import re
import subprocess

from helpers import NUPP, STOCK_LUAJIT, WORKLOADS, parse_collapsed


def record(out, *target, **kw):
    return subprocess.run([str(NUPP), "record", "-F", "499", "-o", str(out), *map(str, target)],
                          capture_output=True, text=True, timeout=60, **kw)


def test_planted_symlink_is_replaced_not_followed(privileged, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)			# like /tmp
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = shared / "app.collapsed"
    out.symlink_to(victim)
    r = record(out, "--", *STOCK_LUAJIT.argv, WORKLOADS / "mixed.lua", 1)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n", "nupp-bpf wrote through the symlink"
    assert not out.is_symlink() and parse_collapsed(out.read_text()), out.read_text()
    assert (shared / "app.collapsed.old").is_symlink()
    assert sorted(os.listdir(shared)) == ["app.collapsed", "app.collapsed.old"]


def test_existing_output_kept_as_old(privileged, tmp_path):
    out = tmp_path / "app.collapsed"
    out.write_text("earlier run\n")
    r = record(out, "--", *STOCK_LUAJIT.argv, WORKLOADS / "mixed.lua", 1)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "app.collapsed.old").read_text() == "earlier run\n"
    assert parse_collapsed(out.read_text())
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)


def test_failed_run_leaves_the_directory_as_it_was(privileged, tmp_path):
    out = tmp_path / "app.collapsed"
    out.write_text("earlier run\n")
    r = record(out, "-p", 4194303)		# no such process
    assert r.returncode == 1
    assert r.stderr.startswith("nupp-bpf: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert out.read_text() == "earlier run\n"
    assert os.listdir(tmp_path) == ["app.collapsed"]


def test_devices_are_written_in_place(privileged, tmp_path):
    r = record("/dev/null", "--", *STOCK_LUAJIT.argv, WORKLOADS / "mixed.lua", 1)
    assert r.returncode == 0, r.stderr
    assert os.path.exists("/dev/null") and not os.path.exists("/dev/null.old")


def test_dev_stdout_is_written_in_place(privileged):
    """/dev/stdout is a symlink (to /proc/self/fd/1): written through, as
    the devices are, never replaced by a file of ours."""
    r = record("/dev/stdout", "--", *STOCK_LUAJIT.argv, WORKLOADS / "mixed.lua", 1)
    assert r.returncode == 0, r.stderr
    stacks = [line for line in r.stdout.splitlines() if re.fullmatch(r"\S*mixed\.lua:\S* \d+", line)]
    assert stacks, r.stdout			# the program's own lines are there too
    assert os.path.islink("/dev/stdout") and not os.path.exists("/dev/stdout.old")


def test_new_file_mode_follows_the_umask(privileged, tmp_path):
    out = tmp_path / "app.collapsed"
    r = record(out, "--", *STOCK_LUAJIT.argv, WORKLOADS / "mixed.lua", 1,
               preexec_fn=lambda: os.umask(0o077))
    assert r.returncode == 0, r.stderr
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)
