# SPDX-License-Identifier: MIT
"""test_corpus.py - the default job on programs shaped as real ones are (root).

Each program in tests/fixtures/corpus/ (coroutine rings and pairs, generated code,
0.1-s programs, big allocations at start-up, recursion, string building,
objects with metatables, ...) is launched under the default job at -F 997,
inside tests/fixtures/aborts/truth.lua, which counts the trace aborts jit.attach sees
in the same run. For each:
- its output and exit status are those of a run without nupp-bpf, and the
  checksum it prints is the one in tests/fixtures/corpus/expected.txt;
- the trace channel's CSV equals jit.attach's, row for row;
- a sample is a Lua stack, or "outside Lua" (no function on the thread's
  Lua stack, the process had no VM yet, or it closed its VM), or
  unresolved: a reason the summary names, or a stack with an [unknown]
  frame. At least 99.5 % of the corpus's samples are resolved, taken
  together (test_corpus_whole); each program, with a few hundred samples,
  may have 0.5 % and PER_RUN_SLACK samples more unresolved: launches lose
  1-5 samples to the millisecond between the VM's creation and the scan
  that finds it, and to walks caught mid-switch (the README's Limits).
"""
import csv
import subprocess

import pytest

from helpers import NUPP, ROOT, STOCK_LUAJIT, parse_collapsed, parse_summary, \
    wait_for_teardowns

pytestmark = pytest.mark.slow

CORPUS = ROOT / "tests" / "fixtures" / "corpus"
TRUTH = ROOT / "tests" / "fixtures" / "aborts" / "truth.lua"
PROGRAMS = sorted(p.name for p in CORPUS.glob("*.lua"))
EXPECTED = dict(line.split("\t", 1) for line in (CORPUS / "expected.txt").read_text().splitlines())
RESOLVED = 0.995
PER_RUN_SLACK = 5
RUNS = {}		# prog -> (unresolved, samples), for test_corpus_whole


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def run_plain(prog):
    return subprocess.run([*STOCK_LUAJIT.argv, prog], capture_output=True, text=True,
                          cwd=CORPUS, timeout=30)


def run_default_job(prog, out):
    """nupp-bpf -F 997 -o OUT -- luajit truth.lua OUT.truth.csv PROG."""
    wait_for_teardowns()
    return subprocess.run([str(NUPP), "-F", "997", "-o", str(out), "--", *STOCK_LUAJIT.argv,
                           str(TRUTH), f"{out}.truth.csv", prog],
                          capture_output=True, text=True, cwd=CORPUS, timeout=60)


def test_corpus_size():
    assert len(PROGRAMS) >= 20, PROGRAMS
    assert sorted(EXPECTED) == [p[:-len(".lua")] for p in PROGRAMS]


@pytest.mark.parametrize("prog", PROGRAMS)
def test_corpus_program(prog, privileged, tmp_path):
    plain = run_plain(prog)
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    assert plain.stdout == f"{prog[:-len('.lua')]}\t{EXPECTED[prog[:-len('.lua')]]}\n"

    out = tmp_path / prog[:-len(".lua")]
    job = run_default_job(prog, out)
    assert job.returncode == plain.returncode, job.stderr
    assert job.stdout == plain.stdout, job.stderr

    truth = read_csv(f"{out}.truth.csv")
    assert read_csv(f"{out}-aborts.csv") == truth, job.stderr

    s = parse_summary(job.stderr)
    rows = parse_collapsed(out.with_suffix(".collapsed").read_text())
    unknown = sum(c for stack, c in rows if "[unknown]" in stack.split(";"))
    assert s.unreadable == unknown, job.stderr
    total = s.unresolved_of or s.samples + s.outside	# every sample of the run
    bad = s.unresolved + unknown
    assert total >= 50, job.stderr
    RUNS[prog] = (bad, total)
    assert bad <= (1 - RESOLVED) * total + PER_RUN_SLACK, \
        f"{bad} of {total} samples unresolved ({s.reasons}, {unknown} [unknown]):\n{job.stderr}"


def test_corpus_whole():
    """The corpus's samples taken together: at least 99.5 % resolved (runs
    after every test_corpus_program of this file)."""
    assert sorted(RUNS) == PROGRAMS, "run the whole file: every program's run counts"
    bad, total = (sum(x) for x in zip(*RUNS.values()))
    assert bad <= (1 - RESOLVED) * total, f"{bad} of {total} samples unresolved: {RUNS}"

