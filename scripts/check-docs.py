#!/usr/bin/env python3
"""check-docs.py - the docs and comments name things that exist.

- Every path in backticks in the Markdown files (README.md, CONTRIBUTING.md,
  docs/, kernel-notes/) names a file or folder of the tree, or one the build
  makes (named in Makefile or mk/*.mk).
- Every code name in backticks shaped as this project names its functions
  (`module__verb`, `module__verb()`) is defined in user/, bpf/ or tests/.
- Every file of the tree a comment names (`user/x/y.c`, `bpf/y.h`, `y.c`)
  exists; LuaJIT's own files (lj_*, lib_*, vm_*) and the system's are not
  ours to check.

Exit 0, or one line per finding and 1. Run by `make test`.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ("user/", "bpf/", "tests/", "scripts/", "mk/", "docs/", "kernel-notes/", "lua/",
       "luajit/", "tools/", "examples/", "types/", "catalog/", ".ci/")
PATH = re.compile(r"^(?:%s)[\w./*{},+-]*$" % "|".join(re.escape(t) for t in TOP))
CODE_NAME = re.compile(r"^([a-z][a-z0-9_]*__[a-z0-9_]+)(?:\(\))?$")
COMMENT_FILE = re.compile(r"(?<![\w./-])((?:(?:%s)[\w./-]*/)?[a-z][\w-]*\.(?:c|h|py|sh|lua|mk|def|js|md))\b"
                          % "|".join(re.escape(t[:-1]) for t in TOP))
NOT_OURS = re.compile(r"^(lj_|lib_|vm_|luajit|lua|lauxlib|lualib|luaconf|buildvm|sdt\.h)")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split("\n") if f and os.path.exists(os.path.join(ROOT, f))]


def main():
    files = tracked()
    dirs = {os.path.dirname(f) for f in files}
    for d in list(dirs):
        while d:
            d = os.path.dirname(d)
            dirs.add(d)
    basenames = {os.path.basename(f) for f in files}
    made = "\n".join(open(os.path.join(ROOT, f), encoding="utf-8").read()
                     for f in files if f == "Makefile" or f.startswith("mk/"))
    sources = "\n".join(open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
                        for f in files if f.startswith(("user/", "bpf/", "tests/unit/", "tests/fuzz/"))
                        and f.endswith((".c", ".h")))
    defined = set(re.findall(r"\b([a-z][a-z0-9_]*__[a-z0-9_]+)\s*\(", sources))
    bad = []

    def path_exists(p):
        p = p.rstrip("/").split("::")[0]
        if any(c in p for c in "*{}") or re.search(r"(?<![a-z])[A-Z]{2,}(?![a-z])", p):
            return True		# a pattern or a placeholder (NAME), not a name
        return p in dirs or os.path.exists(os.path.join(ROOT, p)) or os.path.basename(p) in made

    docs = [f for f in files if f.endswith(".md") and
            (f in ("README.md", "CONTRIBUTING.md") or f.startswith(("docs/", "kernel-notes/")))]
    for f in docs:
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        text = re.sub(r"```.*?```", lambda m: "\n" * m[0].count("\n"), text, flags=re.S)	# code blocks
        for n, line in enumerate(text.split("\n"), 1):
            for span in re.findall(r"`([^`\n]+)`", line):
                span = span.strip()
                m = re.match(r"^([\w./*{},+-]+?)(?::\d+(?:-\d+)?)?$", span)
                if m and PATH.match(m[1]) and not path_exists(m[1]):
                    bad.append(f"{f}:{n}: `{span}`: no such file in the tree")
                m = CODE_NAME.match(span)
                if m and m[1] not in defined:
                    bad.append(f"{f}:{n}: `{span}`: no such function in user/ or bpf/")

    for f in files:
        if not (f.startswith(("user/", "bpf/", "tests/unit/", "tests/fuzz/", "tools/"))
                and f.endswith((".c", ".h", ".def"))):
            continue
        text = open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S):
            for name in COMMENT_FILE.findall(m[0]):
                base = os.path.basename(name)
                if "/" in name:
                    ok = path_exists(name)
                elif base.endswith((".lua", ".md")):
                    ok = True	# an example's name ("app.lua"), not a file of ours
                else:
                    ok = NOT_OURS.match(base) or base in basenames or base in made
                if not ok:
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"{f}:{line}: a comment names {name}, which is not in the tree")

    for line in bad:
        print(f"check-docs: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
