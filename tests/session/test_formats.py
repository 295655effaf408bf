# SPDX-License-Identifier: MIT
"""The profile's output formats, each read back by the tool it is for.

One run of examples/demo.lua (a JIT-compiled loop, an interpreted one that
allocates, C string work) writes the same profile four ways with repeated
-o: collapsed stacks, pprof, speedscope and the SVG flame graph. Collapsed
stacks are the reference, and every other format must say exactly what they
say:

* pprof: Go's `go tool pprof` reads the file; its -top flat and cum counts
  equal the collapsed stacks' per function, -tags splits the samples by
  VM state as the summary does, -tagroot=vmstate roots the stacks there,
  and -raw shows the chunk and first line of Lua functions, a C function's
  address inside the mapping of its file, the period and the duration;
* speedscope: the file validates against the JSON schema of speedscope's
  own npm release, its samples expand to the collapsed stacks, and that
  release's viewer, in headless Chromium, opens it under its name;
* the flame graph: in headless Chromium (tests/helpers/flamegraph.html
  clicks and types as a person would), its title says what was profiled for
  how long, a click zooms to a frame and Reset zoom back, a search
  highlights exactly the matching frames and gives their share of the
  samples, a hovered frame shows its VM-state split, cut names end in "..".
"""
import gzip
import html
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET
from decimal import ROUND_HALF_UP, Decimal
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from helpers import browser
from helpers import (BUILD, NUPP, ROOT, STOCK_LUAJIT, frames, go_pprof, parse_collapsed, parse_summary,
                      workload)

DEMO = ROOT / "examples" / "demo.lua"
FREQ = 997
STATES = ("compiled", "interpreted", "C", "GC", "compiling")
HIT_FILL = "rgb(224, 56, 156)"		# .hit rect in the flame graph's style


def js_fixed1(x):
    """x as JavaScript's x.toFixed(1) writes it: the exact binary value,
    halves rounded up (Python's format rounds them to even: 13.25 is
    "13.2" there and "13.3" in the page; a CI run met it)."""
    return str(Decimal(x).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def line_of(path, text):
    """The line number of the first line of path containing text."""
    return next(i for i, l in enumerate(Path(path).read_text().splitlines(), 1) if text in l)


TOP_RE = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$")


def pprof_top(path, *extra):
    """{function: (flat, cum)} in samples, every node shown."""
    out = go_pprof("-top", "-sample_index=samples", "-nodecount=100000", "-nodefraction=0",
                   "-edgefraction=0", *extra, path)
    rows = {}
    for line in out.splitlines():
        m = TOP_RE.match(line)
        if m:
            rows[m[3]] = (int(m[1]), int(m[2]))
    assert rows, f"no rows in pprof -top:\n{out}"
    return rows


def pprof_tags(path):
    """{label key: {value: samples}} from pprof -tags."""
    out = go_pprof("-tags", "-sample_index=samples", path)
    tags, key = {}, None
    for line in out.splitlines():
        m = re.match(r"^\s*(\w+): Total (\d+)(?:\.0)?$", line)
        if m:
            key = m[1]
            tags[key] = {}
            continue
        m = re.match(r"^\s+(\d+)(?:\.0)? \(\s*[\d.]+%\): (.+)$", line)
        if m and key:
            tags[key][m[2]] = int(m[1])
    return tags


def collapsed_by_function(rows):
    """{frame: (flat, cum)}: samples with it as leaf, samples with it anywhere."""
    flat, cum = Counter(), Counter()
    for stack, count in rows:
        fs = frames(stack)
        flat[fs[-1]] += count
        for f in set(fs):
            cum[f] += count
    return {f: (flat[f], cum[f]) for f in cum}


def expand_speedscope(doc, profile):
    """The collapsed text of a speedscope sampled profile: {stack: weight}."""
    names = [f["name"] for f in doc["shared"]["frames"]]
    out = Counter()
    for stack, weight in zip(profile["samples"], profile["weights"]):
        out[";".join(names[i] for i in stack)] += weight
    return out


# --- one run, four formats ----------------------------------------------------------

class DemoRun:
    """`nupp-bpf record -o demo.collapsed -o demo.pb.gz -o demo.json -o demo.svg`."""

    def __init__(self, tmp):
        self.dir = tmp
        self.paths = {ext: tmp / f"demo.{ext}" for ext in ("collapsed", "pb.gz", "json", "svg")}
        argv = [str(NUPP), "record", "-F", str(FREQ)]
        for p in self.paths.values():
            argv += ["-o", str(p)]
        self.t0 = time.time()
        self.proc = subprocess.run([*argv, "--", *STOCK_LUAJIT.argv, str(DEMO), "2"],
                                   capture_output=True, text=True, timeout=90)
        self.t1 = time.time()
        assert self.proc.returncode == 0, self.proc.stderr
        self.rows = parse_collapsed(self.paths["collapsed"].read_text())
        self.total = sum(c for _, c in self.rows)
        self.summary = parse_summary(self.proc.stderr)
        m = re.search(r"^nupp-bpf: recording PID (\d+)", self.proc.stderr, re.M)
        assert m, self.proc.stderr
        self.pid = int(m[1])
        self.title = f"{STOCK_LUAJIT.argv[0]} {DEMO} 2 (PID {self.pid})"


@pytest.fixture(scope="module")
def demo(privileged, tmp_path_factory):
    return DemoRun(tmp_path_factory.mktemp("formats"))


def test_every_format_written_from_one_session(demo):
    """Each -o got its format from its extension; the summary names each."""
    assert demo.total > 1500, f"only {demo.total} samples"
    for path in demo.paths.values():
        assert f"nupp-bpf: wrote {path}\n" in demo.proc.stderr
    assert gzip.decompress(demo.paths["pb.gz"].read_bytes())	# gzip'd
    assert demo.paths["json"].read_text().startswith("{")
    assert demo.paths["svg"].read_text().startswith("<?xml")


# --- pprof ---------------------------------------------------------------------------

def test_pprof_top_equals_collapsed(demo):
    """pprof's flat and cum samples per function are the collapsed stacks'."""
    top = pprof_top(demo.paths["pb.gz"])
    want = collapsed_by_function(demo.rows)
    assert top == want
    assert sum(flat for flat, _ in top.values()) == demo.total


def test_pprof_tags_split_by_vm_state(demo):
    """-tags: the vmstate label splits the samples as the summary does."""
    tags = pprof_tags(demo.paths["pb.gz"])
    assert set(tags) == {"vmstate"}, tags
    split = tags["vmstate"]
    assert sum(split.values()) == demo.total
    assert {"compiled", "interpreted", "C", "GC"} <= set(split), split
    for state in STATES:
        share = round(100 * split.get(state, 0) / demo.total, 1)
        assert share == demo.summary.states[state], (state, split, demo.summary.states)


def test_pprof_tagroot_vmstate(demo):
    """-tagroot=vmstate puts each state at the root: its cum is its count."""
    top = pprof_top(demo.paths["pb.gz"], "-tagroot=vmstate")
    split = pprof_tags(demo.paths["pb.gz"])["vmstate"]
    for state, n in split.items():
        assert top[state] == (0, n), (state, top.get(state), n)


def test_pprof_raw_functions_locations_mappings(demo):
    """-raw: Lua functions have their chunk and first line, the line that
    ran is within the function; the C function at the root (luajit's
    pmain, named luajit+0xADDR in the stripped build) lies in
    /usr/bin/luajit's mapping, at that ELF address; the
    period is the -F interval and the time and duration are the run's."""
    raw = go_pprof("-raw", demo.paths["pb.gz"])
    assert "PeriodType: cpu nanoseconds" in raw
    assert re.search(rf"^Period: {10**9 // FREQ}$", raw, re.M), raw[:500]
    assert re.search(rf"^Comment: {re.escape(demo.title)}$", raw, re.M), raw[:500]
    assert 1.5 < float(re.search(r"^Duration: ([\d.]+)", raw, re.M)[1]) < demo.t1 - demo.t0 + 0.1
    locs = re.findall(r"^\s+\d+: (0x[0-9a-f]+) (?:M=(\d+) )?(\S+) (.+):(\d+) s=(\d+)$", raw, re.M)
    by_name = {name: (int(addr, 16), m, path, int(line), int(start))
               for addr, m, name, path, line, start in locs}
    physics = line_of(DEMO, "local function physics")
    addr, m, path, line, start = by_name["demo.lua:physics"]
    assert (m, path, start) == ("", str(DEMO), physics), by_name["demo.lua:physics"]
    assert line == 0 or physics < line < physics + 8, line
    root = demo.rows[0][0].split(";")[0]
    named = re.fullmatch(r"luajit\+0x([0-9a-f]+)", root)	# stripped: file and ELF address
    assert named, root
    addr, m, path, line, start = by_name[root]
    assert path == "/usr/bin/luajit" and m, by_name[root]
    mapping = re.search(rf"^{m}: (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)", raw, re.M)
    assert mapping and mapping[4] == "/usr/bin/luajit", raw
    assert int(mapping[1], 16) <= addr < int(mapping[2], 16)
    file_off = addr - int(mapping[1], 16) + int(mapping[3], 16)
    assert elf_vaddr("/usr/bin/luajit", file_off) == int(named[1], 16), (root, hex(file_off))


def elf_vaddr(path, off):
    """The virtual address of file offset off, through the PT_LOAD headers."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    for o, v, sz in re.findall(r"^\s+LOAD\s+(0x[0-9a-f]+) (0x[0-9a-f]+) 0x[0-9a-f]+ (0x[0-9a-f]+)",
                               out, re.M):
        if int(o, 16) <= off < int(o, 16) + int(sz, 16):
            return off - int(o, 16) + int(v, 16)
    return None


# --- speedscope ----------------------------------------------------------------------

def test_speedscope_valid_and_equal_to_collapsed(demo):
    """The file validates against speedscope's published schema, names what
    was profiled, and its one profile expands to the collapsed stacks."""
    schema = json.loads((browser.speedscope_release() / "file-format-schema.json").read_text())
    doc = json.loads(demo.paths["json"].read_text())
    jsonschema.Draft7Validator(schema).validate(doc)
    assert doc["name"] == demo.title and doc["exporter"] == "nupp-bpf"
    [profile] = doc["profiles"]
    assert profile["name"] == demo.title and profile["unit"] == "none"
    assert profile["endValue"] == sum(profile["weights"]) == demo.total
    assert expand_speedscope(doc, profile) == Counter(dict(demo.rows))
    physics = next(f for f in doc["shared"]["frames"] if f["name"] == "demo.lua:physics")
    assert physics == {"name": "demo.lua:physics", "file": str(DEMO),
                       "line": line_of(DEMO, "local function physics")}


def test_speedscope_opens_in_speedscope(demo, tmp_path):
    """speedscope's own viewer (its npm release) loads the file: the page
    takes the profile's name, its toolbar shows it, and no error."""
    www = tmp_path / "www"
    shutil.copytree(browser.speedscope_release(), www)
    shutil.copy(demo.paths["json"], www / "profile.json")
    with browser.serve(www) as url:
        dom = browser.chromium(f"{url}/index.html#profileURL={url}/profile.json",
                               budget_ms=8000)
    assert f"<title>{html.escape(demo.title, quote=False)} - speedscope</title>" in dom, dom[:2000]
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    assert text.count(demo.title) >= 2, f"the toolbar does not name the profile:\n{text[:2000]}"
    assert "Something went wrong" not in text and "Unrecognized format" not in text, text[:2000]
    assert "<canvas" in dom


# --- the flame graph ---------------------------------------------------------------

def drive(svg, steps, tmp):
    """Run steps on the flame graph in headless Chromium: the snapshots."""
    www = tmp / "www"
    www.mkdir(exist_ok=True)
    shutil.copy(svg, www / "graph.svg")
    shutil.copy(ROOT / "tests" / "helpers" / "flamegraph.html", www / "harness.html")
    with browser.serve(www) as url:
        dom = browser.chromium(f"{url}/harness.html#svg=graph.svg&steps="
                               + urllib.parse.quote(json.dumps(steps)))
    result = browser.result_of(dom)
    assert "error" not in result, result["error"]
    return result["snapshots"]


def shown(snap):
    return {f["name"]: f for f in snap["frames"] if f["shown"]}


def assert_labels_fit(snap):
    """A shown frame's label is its name when the name fits in its width
    (3 px of margin each side), else as much as fits with "..", else
    nothing. Returns how many were cut."""
    cut = 0
    for f in snap["frames"]:
        if not f["shown"]:
            continue
        fits = int((f["width"] - 6) // snap["charWidth"])
        name = f["name"]
        want = name if len(name) <= fits else name[:fits - 2] + ".." if fits >= 3 else ""
        assert f["label"] == want, (f, fits)
        cut += want.endswith("..")
    return cut


def test_flamegraph_title_zoom_search_hover(demo, tmp_path):
    cum = {f: c for f, (_, c) in collapsed_by_function(demo.rows).items()}
    regex = "sort|layout"
    matched = sum(c for s, c in demo.rows if any(re.search(regex, f) for f in frames(s)))
    snaps = drive(demo.paths["svg"], [
        ["snapshot"],
        ["click", "demo.lua:physics"], ["snapshot"],
        ["click-id", "unzoom"], ["snapshot"],
        ["search", regex], ["hover", "demo.lua:particles"], ["snapshot"],
        ["click-id", "search"], ["snapshot"],
    ], tmp_path)
    first, zoomed, unzoomed, searched, cleared = snaps

    # The title: what was profiled, for how long, how many samples at what rate.
    assert first["title"] == demo.title
    m = re.fullmatch(r"(\d+\.\d) s from \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, (\d+) samples at "
                     rf"{FREQ} Hz", first["subtitle"])
    assert m and int(m[2]) == demo.total and 1.5 < float(m[1]) < 60, first["subtitle"]
    # Width is samples; every frame is drawn, its name cut to fit.
    frames0 = shown(first)
    assert frames0["all"]["x"] == 10 and frames0["all"]["width"] == 1180
    for name in ("demo.lua:physics", "demo.lua:particles", "demo.lua:layout"):
        assert abs(frames0[name]["width"] - 1180 * cum[name] / demo.total) < 0.02, name
    assert_labels_fit(first)
    assert not first["unzoomShown"] and first["search"] == "Search"

    # A click zooms: the frame spans the width, its ancestors stay (faded),
    # anything beside it goes, what is above it scales.
    frames1 = shown(zoomed)
    p = frames1["demo.lua:physics"]
    assert (p["x"], p["width"], p["ancestor"]) == (10, 1180, False)
    for name in ("all", "demo.lua:0"):
        assert frames1[name]["ancestor"] and frames1[name]["width"] == 1180
    assert "demo.lua:particles" not in frames1 and "demo.lua:layout" not in frames1
    assert zoomed["unzoomShown"]
    assert_labels_fit(zoomed)

    # Reset zoom restores every frame as it was drawn.
    assert [(f["shown"], f["x"], f["width"], f["label"]) for f in unzoomed["frames"]] == \
           [(f["shown"], f["x"], f["width"], f["label"]) for f in first["frames"]]
    assert not unzoomed["unzoomShown"]

    # A search highlights exactly the matching frames and gives their share.
    for f in searched["frames"]:
        assert f["hit"] == bool(re.search(regex, f["name"])), f
        assert (f["fill"] == HIT_FILL) == f["hit"], f
    assert searched["matched"] == f"Matched {js_fixed1(100 * matched / demo.total)}% of the samples: /{regex}/"
    assert searched["search"] == "Reset search"
    # Hovering shows the frame's samples and VM-state split, and its bar.
    d = re.fullmatch(r"demo\.lua:particles: (\d+) samples \(([\d.]+)%\), (.+)", searched["details"])
    assert d and int(d[1]) == cum["demo.lua:particles"], searched["details"]
    states = dict((k, float(v)) for k, v in re.findall(r"(\w+) ([\d.]+)%", d[3]))
    assert set(states) <= set(STATES) and abs(sum(states.values()) - 100) < 0.3, states
    assert "interpreted" in states, states
    assert abs(sum(searched["splitWidths"]) - 120) < 0.05
    # Search again: the search is reset.
    assert not any(f["hit"] for f in cleared["frames"]) and cleared["matched"] == ""
    # Every view cuts names that do not fit with ".."; the views together
    # (the particle loop zoomed, where its closures are narrow, among them)
    # cut at least one: which frame is narrow enough depends on the samples.
    [particles] = drive(demo.paths["svg"], [["click", "demo.lua:particles"], ["snapshot"]],
                        tmp_path)
    cut = sum(assert_labels_fit(v) for v in (first, zoomed, unzoomed, searched, cleared, particles))
    assert cut >= 1, shown(particles)


def test_flamegraph_screenshot_of_zoom_and_search(demo, tmp_path):
    """What a person sees is rendered: a screenshot of the zoomed, searched
    graph (kept in build/ for a look) is a real picture."""
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(demo.paths["svg"], www / "graph.svg")
    shutil.copy(ROOT / "tests" / "helpers" / "flamegraph.html", www / "harness.html")
    steps = [["click", "demo.lua:0"], ["search", "physics"], ["hover", "demo.lua:particles"]]
    out = ROOT / "build" / "flamegraph-test.png"
    with browser.serve(www) as url:
        browser.chromium(f"{url}/harness.html#svg=graph.svg&steps="
                         + urllib.parse.quote(json.dumps(steps)), screenshot=out, size=(1200, 260))
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000


# --- names, threads, file names ------------------------------------------------------

def test_odd_names_survive_every_format(privileged, tmp_path):
    """Chunk names with ';', XML and JSON specials, a byte that is not UTF-8
    and control characters: every file is UTF-8 (the byte escaped as \\xff,
    as control characters are), the JSON and the SVG parse and name the
    frames as the collapsed stacks do; so does pprof."""
    paths = [tmp_path / f"odd.{ext}" for ext in ("collapsed", "json", "svg", "pb.gz")]
    argv = [str(NUPP), "record", "-F", str(FREQ)]
    for p in paths:
        argv += ["-o", str(p)]
    r = subprocess.run([*argv, "--", *STOCK_LUAJIT.argv, str(workload("oddnames.lua")), "1"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    text = paths[0].read_bytes().decode("utf-8")	# strict: no byte that is not UTF-8
    rows = parse_collapsed(text)
    names = {f for s, _ in rows for f in frames(s)}
    for odd in ("semi\\x3bcolon:", "<tag> & \"quote\" 'single':", "bad\\xffbyte:",
                "tab\\x09and\\x0anewline:", "\u00fcn\u00efc\u00f8d\u00e9:"):
        assert any(n.startswith(odd) for n in names), (odd, names)
    doc = json.loads(paths[1].read_text(encoding="utf-8"))
    assert expand_speedscope(doc, doc["profiles"][0]) == Counter(dict(rows))
    svg_names = {g.get("data-n") for g in ET.parse(paths[2]).getroot().iter("{http://www.w3.org/2000/svg}g")}
    assert names <= svg_names, names - svg_names
    # pprof's output is read as strict UTF-8; -top shortens some names for
    # display ("<tag> " goes, as a C++ template would), -raw shows them whole.
    top = pprof_top(paths[3])
    assert sum(f for f, _ in top.values()) == sum(c for _, c in rows)
    raw = go_pprof("-raw", paths[3])
    assert all(f" {n} " in raw for n in names), [n for n in names if f" {n} " not in raw]


def test_threads_as_labels_and_profiles(privileged, lua_build_ready, tmp_path):
    """--threads: collapsed stacks start with a [pid/tid vm ADDR] frame;
    pprof carries pid, tid and vm as labels instead, with the same counts;
    speedscope has one profile per thread, named so."""
    b = lua_build_ready("stock-luajit-host")
    paths = [tmp_path / f"t.{ext}" for ext in ("collapsed", "pb.gz", "json")]
    argv = [str(NUPP), "record", "-F", str(FREQ), "--threads"]
    for p in paths:
        argv += ["-o", str(p)]
    r = subprocess.run([*argv, "--", *b.command(workload("threads.lua"), "--threads", 2, 1, 2)],
                       capture_output=True, text=True, env=b.environ(), timeout=60)
    assert r.returncode == 0, r.stderr
    per_thread = Counter()
    for stack, count in parse_collapsed(paths[0].read_text()):
        m = re.match(r"^\[(\d+)/(\d+) vm (0x[0-9a-f]+)\];", stack)
        assert m, stack
        per_thread[m.groups()] += count
    assert len(per_thread) == 2, per_thread
    tags = pprof_tags(paths[1])
    assert tags["tid"] == {tid: n for (_, tid, _), n in per_thread.items()}, tags
    assert tags["vm"] == {vm: n for (_, _, vm), n in per_thread.items()}, tags
    assert set(tags["pid"]) == {pid for pid, _, _ in per_thread}
    doc = json.loads(paths[2].read_text())
    got = {p["name"]: sum(p["weights"]) for p in doc["profiles"]}
    assert got == {f"{pid}/{tid} vm {vm}": n for (pid, tid, vm), n in per_thread.items()}


def test_zones_as_labels_and_frames(privileged, tmp_path):
    """--zones on a script that uses nupp.profile.zone: collapsed stacks and
    speedscope start each stack with its [zone PATH] frame, alike; pprof
    labels each sample with its zone, with the same counts."""
    env = {"LUA_PATH": f"{BUILD}/lua/?.lua;;", "LUA_CPATH": f"{BUILD}/lua/?.so;;"}
    script = subprocess.Popen(["/usr/bin/luajit", str(workload("zonecost.lua")), "6"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        script.stdout.readline()		# its first window: it runs
        paths = [tmp_path / f"z.{ext}" for ext in ("collapsed", "pb.gz", "json")]
        argv = [str(NUPP), "record", "-p", str(script.pid), "-F", "499", "-d", "2", "--zones"]
        for p in paths:
            argv += ["-o", str(p)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        script.kill()
        script.wait()
    assert r.returncode == 0, r.stderr
    rows = parse_collapsed(paths[0].read_text())
    by_zone = Counter()
    for stack, count in rows:
        m = re.match(r"^\[zone ([^\]]*)\];", stack)
        if m:
            by_zone[m[1]] += count
    assert len(by_zone) >= 2, by_zone
    assert pprof_tags(paths[1])["zone"] == by_zone
    doc = json.loads(paths[2].read_text())
    assert expand_speedscope(doc, doc["profiles"][0]) == Counter(dict(rows))


def run_in(tmp_path, *args):
    p = subprocess.run([str(NUPP), "-F", str(FREQ), *args], capture_output=True, cwd=tmp_path,
                       timeout=60)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    m = re.search(rb"^nupp-bpf: recording PID (\d+)", p.stderr, re.M)
    return p, int(m[1]) if m else None


def test_format_names_the_default_file(privileged, tmp_path):
    """record --format F without -o writes nupp-PID with F's extension."""
    mixed = workload("mixed.lua")
    for fmt, ext in (("speedscope", "json"), ("pprof", "pb.gz"), ("svg", "svg")):
        d = tmp_path / fmt
        d.mkdir()
        _, pid = run_in(d, "record", "--format", fmt, "--", *STOCK_LUAJIT.argv, mixed, "0.3")
        assert sorted(p.name for p in d.iterdir()) == [f"nupp-{pid}.{ext}"], fmt


def test_format_in_the_default_job(privileged, tmp_path):
    """The default job keeps its three files; --format changes the stack
    file's format and extension (svg: the flame graph is that file)."""
    mixed = workload("mixed.lua")
    for fmt, files in (("pprof", ["m-aborts.csv", "m.pb.gz", "m.svg"]),
                       ("svg", ["m-aborts.csv", "m.svg"]),
                       (None, ["m-aborts.csv", "m.collapsed", "m.svg"])):
        d = tmp_path / str(fmt)
        d.mkdir()
        run_in(d, "-o", "m", *(["--format", fmt] if fmt else []), "--", *STOCK_LUAJIT.argv,
               mixed, "0.3")
        assert sorted(p.name for p in d.iterdir()) == files, fmt


def test_format_to_stdout(privileged, tmp_path):
    """-o - --format pprof writes the gzip'd protobuf to stdout."""
    p, _ = run_in(tmp_path, "record", "-o", "-", "--format", "pprof", "--",
                  *STOCK_LUAJIT.argv, workload("mixed.lua"), "0.3")
    out = p.stdout[p.stdout.index(b"\x1f\x8b"):]	# after the workload's own lines
    (tmp_path / "s.pb.gz").write_bytes(out)
    assert sum(flat for flat, _ in pprof_top(tmp_path / "s.pb.gz").values()) > 100
