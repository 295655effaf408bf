#!/usr/bin/env python3
"""check-includes.py - the include lines of user/ agree with its architecture.

user/ has one folder per subsystem, ranked from the bottom up (LAYERS). A
file may include a header of its own folder by its bare name, and a header
of a folder below its own as "folder/file.h"; never one of a folder at its
level or above. Headers of bpf/ (shared with the BPF programs) and generated
ones (build/, build/gen/) are below everything.

Within a folder, a unit (file.c with file.h) must not include, through its
headers, a unit that includes it back: no circle. And the README's
architecture section names exactly the folders there are.

Exit 0 when all holds; otherwise one line per finding and exit 1.
Run by `make test`; `scripts/check-includes.py` from the top of the tree.
"""
import os
import re
import sys

# Bottom first. Folders on one line share a level and may not include each other.
LAYERS = [
    ["base"],			# errors and messages, text buffers, JSON, process memory
    ["luajit"],			# a LuaJIT build: ELF, DWARF, layouts, code sites; its process
    ["profile", "zones", "channel", "heap"],	# the profile model and its writers; zone
				# paths; what every channel does for a session; a heap's census
    ["sampler", "trace"],	# the two BPF channels
    ["check", "session"],	# the static half; one session of channels and outputs
    ["cli", "lua"],		# the command line; the Lua C module
]
RANK = {folder: i for i, level in enumerate(LAYERS) for folder in level}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit(folder, name):
    """A file's unit: file.c with file.h, and a subsystem's internal header
    file_int.h with them (what file.c and its siblings share)."""
    stem = os.path.splitext(name)[0]
    return f"{folder}/{stem[:-4] if stem.endswith('_int') else stem}"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    user, bpf = os.path.join(root, "user"), os.path.join(root, "bpf")
    bad = []
    folders = sorted(d for d in os.listdir(user) if os.path.isdir(os.path.join(user, d)))
    for d in folders:
        if d not in RANK:
            bad.append(f"user/{d}/: a folder with no place in LAYERS (scripts/check-includes.py)")
    for f in os.listdir(user):
        if os.path.isfile(os.path.join(user, f)):
            bad.append(f"user/{f}: a file outside every subsystem's folder")

    units = {}		# "folder/unit" -> set of "folder/unit" it includes
    for d in folders:
        for f in sorted(os.listdir(os.path.join(user, d))):
            if not f.endswith((".c", ".h", ".def")):
                continue
            here = unit(d, f)
            deps = units.setdefault(here, set())
            text = open(os.path.join(user, d, f), encoding="utf-8").read()
            for inc in INCLUDE.findall(text):
                where = f"user/{d}/{f}: #include \"{inc}\""
                if "/" in inc:
                    to, name = inc.split("/", 1)
                    if to not in RANK or not os.path.exists(os.path.join(user, inc)):
                        bad.append(f"{where}: no such file under user/")
                    elif to == d:
                        bad.append(f"{where}: a header of its own folder is included by its bare name")
                    elif RANK.get(d, -1) <= RANK[to]:
                        bad.append(f"{where}: {to}/ is not below {d}/")
                    else:
                        deps.add(unit(to, name))
                elif os.path.exists(os.path.join(user, d, inc)):
                    deps.add(unit(d, inc))
                elif os.path.exists(os.path.join(bpf, inc)) or inc.endswith(".skel.h") \
                        or inc.startswith("gen/") or not any(
                            os.path.exists(os.path.join(user, o, inc)) for o in folders):
                    pass	# bpf/, generated, or a system header in quotes
                else:
                    bad.append(f"{where}: a header of another folder, included without its folder")

    # Circles between units: Tarjan's strongly connected components.
    index, low, stack, on, order = {}, {}, [], set(), [0]

    def visit(u):
        index[u] = low[u] = order[0]
        order[0] += 1
        stack.append(u)
        on.add(u)
        for v in units.get(u, ()):
            if v == u or v not in units:
                continue
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in on:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            scc = []
            while True:
                v = stack.pop()
                on.discard(v)
                scc.append(v)
                if v == u:
                    break
            if len(scc) > 1:
                bad.append("a circle of includes: " + " -> ".join(sorted(scc)))

    sys.setrecursionlimit(10000)
    for u in sorted(units):
        if u not in index:
            visit(u)

    # The README's architecture section names the folders there are.
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Architecture\n(.*?)(?=^## )", readme, re.S | re.M)
    if not m:
        bad.append("README.md: no '## Architecture' section")
    else:
        named = set(re.findall(r"`user/([a-z_]+)/`", m[1]))
        for d in sorted(set(folders) - named):
            bad.append(f"README.md, Architecture: user/{d}/ is not described")
        for d in sorted(named - set(folders)):
            bad.append(f"README.md, Architecture: user/{d}/ does not exist")

    for line in bad:
        print(f"check-includes: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
