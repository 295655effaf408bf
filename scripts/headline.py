#!/usr/bin/python3
"""headline.py [--check] - the README's table of headline numbers, from docs/benchmarks.md.

Each row is one number a user asks first (what a sample costs the target,
what nupp-bpf itself costs, how soon it samples, what a server loses), read
from the section of docs/benchmarks.md that `make bench` wrote for it. The
table replaces what lies between <!-- headline: begin --> and
<!-- headline: end --> in README.md, so the README quotes the last run and
nothing older. doc-section.py runs this after each section it writes.

--check: exit 1 when the README's table is not the one the benchmarks give
(`make check-tree`).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "docs", "benchmarks.md")
README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- headline: begin -->", "<!-- headline: end -->"


def sections(text):
    """{name: its text} of every generated section."""
    return dict(re.findall(r"<!-- ([\w-]+): begin -->(.*?)<!-- \1: end -->", text, re.S))


def rows(section):
    """The cells of every Markdown table row in a section, by row."""
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.strip().startswith("|")]


def row(section, *first):
    """The first table row whose leading cells start with first."""
    for r in rows(section):
        if len(r) >= len(first) and all(r[i].startswith(f) for i, f in enumerate(first)):
            return r
    raise LookupError("no row %s" % " | ".join(first))


def when(section):
    m = re.search(r" on (\d{4}-\d{2}-\d{2})", section)
    return m.group(1) if m else "?"


def line(section, pattern):
    m = re.search(pattern, section)
    if not m:
        raise LookupError(pattern)
    return m.groups()


# (what, how it reads, which section): each a function of the section.
def sampler_rows(s):
    cost = row(s, "`-F 997 --depth 16`")
    own = row(s, "nupp-bpf ≤ 2% of one core")
    first = row(s, "attach to first sample")
    rss = row(s, "nupp-bpf peak RSS")
    return [
        ("BPF time per sample (60-frame stack, `--depth 16`)", "%s ns" % cost[1]),
        ("nupp-bpf's own CPU, `record -F 997`, one target",
         re.sub(r"^(\S+)", r"\1 of a core", own[1])),
        ("attach to first sample (`record -p`)", first[1]),
        ("nupp-bpf's peak memory", rss[1]),
    ]


def trace_rows(s):
    jit = row(s, "jit.attach")[3].split()[0]
    nupp = row(s, "nupp-bpf")[3].split()[0]
    return [("CPU per trace abort, against jit.attach in the same run",
             "%s µs against %s µs" % (nupp, jit))]


def traces_rows(s):
    cost, = line(s, r"The mapping's cost: \*\*([\d.]+ %)\*\*")
    traces, = line(s, r"target: (\d+) traces")
    return [("mapping compiled samples through their traces (%s traces, `-F 997`): nupp-bpf's CPU"
             % traces, "%s of a core" % cost)]


def zone_rows(s):
    # A closed gate costs nothing: its time around 0 may print as -0.00.
    closed, = line(s, r"gate closed:\s+(-?[\d.]+) ns")
    opened, = line(s, r"gate open:\s+(-?[\d.]+) ns")
    return [("a zone's enter and leave in a compiled loop, no profiler / profiled",
             "%.2f ns / %.2f ns" % (float(closed) + 0.0, float(opened) + 0.0))]


def nginx_rows(s):
    out = []
    for mode, what in (("--clock tick", "`record --clock tick`"),
                       ("-F 99", "`record -F 99` (the tick, thinned)"),
                       ("-F 99 --clock cpu", "`record -F 99 --clock cpu`"),
                       ("default job -F 997", "the default job, `-F 997`"),
                       ("record --rotate 60 (4 workers)", "`record --rotate 60`, 4 workers"),
                       ("record --rotate 60 (16 workers)", "`record --rotate 60`, 16 workers"),
                       ("record --wall", "`record --wall`")):
        r = row(s, "`/cpu`", mode)
        out.append(("nginx requests/s, CPU-bound Lua handler: %s" % what,
                    "%s (90 %% interval %s); nupp-bpf %s of a core, its BPF programs %s"
                    % (r[3].split()[0], r[3].split()[1].strip("()"), r[4], r[5])))
    # Every allocation traps: what it costs a handler that allocates.
    r = row(s, "`/alloc`", "record --alloc")
    out.append(("nginx requests/s, a handler allocating ~1.2 KB a request: `record --alloc` "
                "(mean 512 KiB)", "%s (90 %% interval %s)" % (r[3].split()[0], r[3].split()[1].strip("()"))))
    return out


def heap_rows(s):
    r = rows(s)[-1]         # the largest heap measured
    return [("`nupp-bpf heap`: a census of a %s heap" % r[1], "%s wall (%s per GB), %s counted"
             % (r[3], r[5], r[2]))]


def offcpu_rows(s):
    lower, = line(s, r"Throughput: \*\*([-\d.]+ %)\*\* lower")
    ns, share = line(s, r"own time: \*\*(\d+) ns\*\* a run.*?\*\*([\d.]+ %)\*\* of the target")
    rate, = line(s, r"\| alone \| [\d,]+ \| ([\d,]+) \|")
    ref = re.search(r"perf's tracing of the same tracepoint, \*\*([-\d.]+ %)\*\*", s)
    out = [("`record --off-cpu`, two processes switching %s times a second: throughput lost "
            "(perf's own tracing of the switches); the switch program's time" % rate,
            "%s (%s); %s ns a switch, %s of their CPU"
            % (lower, ref[1] if ref else "not measured", ns, share))]
    swept = re.search(r"swept at 99 Hz \(`--off-cpu -F 99`\), \*\*([-\d.]+ %)\*\* lower, "
                      r"nupp-bpf's own CPU \*\*([\d.]+ %)\*\*", s)
    floor = re.search(r"next to nothing \(`--clock tick -F 1`\) costs \*\*([-\d.]+ %)\*\*", s)
    if swept:
        out.append(("`record --off-cpu -F 99` (sweeps), the same two processes: throughput lost "
                    "(a session sampling at 1 Hz); nupp-bpf's own CPU",
                    "%s (%s); %s of a core" % (swept[1], floor[1] if floor else "not measured",
                                               swept[2])))
    return out


def alloc_rows(s):
    out = []
    for r in rows(s)[2:]:
        out.append(("`record --alloc` (mean 512 KiB): CPU time of `%s`, which only allocates"
                    % r[0].strip("`").split()[0], "%s s alone, %s s profiled: %s" % (r[1], r[2], r[3])))
    return out


def check_rows(s):
    r = row(s, "the repository's Lua")
    return [("`nupp-bpf check`, lines of Lua per second on one core", "{:,}".format(int(r[5])))]


TABLE = (("bench-sampler", sampler_rows), ("bench-trace", trace_rows), ("bench-traces", traces_rows),
         ("bench-zone", zone_rows),
         ("bench-nginx", nginx_rows), ("bench-check", check_rows), ("bench-heap", heap_rows),
         ("bench-offcpu", offcpu_rows), ("bench-alloc", alloc_rows))


def table(bench_text):
    secs = sections(bench_text)
    out = ["| what | measured | on |", "|---|---|---|"]
    for name, rows_of in TABLE:
        if name not in secs:
            out.append("| (`%s` has not run) | | |" % name)
            continue
        try:
            for what, value in rows_of(secs[name]):
                out.append("| %s | %s | %s |" % (what, value, when(secs[name])))
        except (LookupError, IndexError, ValueError) as e:
            out.append("| (`%s`: %s) | | |" % (name, e))
    return "\n".join(out)


def main():
    text = open(README).read()
    if BEGIN not in text or END not in text:
        sys.exit("headline.py: README.md has no %s ... %s" % (BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    want = "\n" + table(open(BENCH).read()) + "\n"
    if sys.argv[1:] == ["--check"]:
        if body != want:
            sys.exit("headline.py: README.md's headline table is not docs/benchmarks.md's: "
                     "run scripts/headline.py")
        return
    with open(README, "w") as f:
        f.write(head + BEGIN + want + END + tail)


if __name__ == "__main__":
    main()
