#!/usr/bin/python3
"""doc-section.py [--markdown] NAME TITLE COMMAND... - run COMMAND, put its output in docs/benchmarks.md.

Replaces the section between <!-- NAME: begin --> and <!-- NAME: end -->
(appends it when absent) with TITLE, the command line and what it printed:
as it is with --markdown (a script that prints tables), else as a block of
text. For benchmark scripts that only print. Then the README's table of
headline numbers is written again from the sections (scripts/headline.py).
"""
import datetime
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")

args = sys.argv[1:]
markdown = args[:1] == ["--markdown"]
if markdown:
    args = args[1:]
name, title, cmd = args[0], args[1], args[2:]
# Its stderr passes through: its progress, and why it failed when it does.
try:
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
except subprocess.CalledProcessError as e:
    sys.exit("doc-section.py: %s exited %d; %s left as it was" % (" ".join(cmd), e.returncode, name))
begin, end = "<!-- %s: begin -->" % name, "<!-- %s: end -->" % name
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
section = "\n".join([begin, "## " + title, "",
                     "Produced by `make bench` → `%s` on %s:" % (" ".join(os.path.relpath(c, ROOT)
                     if c.startswith(ROOT) else c for c in cmd), when), "",
                     *([out.rstrip("\n")] if markdown else ["```", out.rstrip("\n"), "```"]), "", end])
print(out, end="")
text = open(DOC).read() if os.path.exists(DOC) else "# Benchmarks\n"
if begin in text and end in text:
    head, rest = text.split(begin, 1)
    text = head + section + rest.split(end, 1)[1]
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
with open(DOC, "w") as f:
    f.write(text)
# The README's headline numbers follow the sections they come from.
subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "headline.py")], check=True)
