#!/usr/bin/env python3
"""seeds.py - write the seed inputs of the walk, symbolize and writers fuzz targets.

Each seed is a small memory image of a LuaJIT (x86-64, GC64) process laid
out as the registry's builds lay it out (the offsets below are those of
build/gen/lj_builds.c): a Lua stack with a dummy bottom frame, a main chunk
called from C, a function called from Lua by a global's name, a local
function with debug info, a C function and a builtin called from Lua, a
vararg function with its pseudo-frame, a continuation frame; the GCfunc
headers, protos, bytecode, string constants, line and variable info they
point to. The fuzzer mutates them into what a torn or misread stack holds.
The writers' seeds are profiles and abort sites whose names hold what breaks
a line or a CSV field: ';', '"', commas, CR, LF, NUL, backslashes.

    python3 tests/fuzz/seeds.py    # rewrites tests/fuzz/corpus/{walk,symbolize,writers}/seed-*
"""
import os
import struct

BASE = 0x40000000          # IMAGE_BASE in tests/fuzz/fuzz_image.h
ITYPE_FUNC = 0x1fff7       # a GC64 TValue's top 17 bits for a function
FRAME_LUA, FRAME_C, FRAME_CONT, FRAME_VARG = 0, 1, 2, 3
# GCfunc, GCproto, GCstr field offsets (lj_builds.c); the bytecode follows a
# 104-byte GCproto, the characters a 24-byte GCstr.
GCT, FFID, FN_PC, FN_F = 9, 10, 32, 40
PT_SIZE, PT_SIZEBC, PT_K, PT_SIZEUV, PT_CHUNK = 104, 12, 32, 60, 64
PT_FIRST, PT_NUML, PT_LINEINFO, PT_UVINFO, PT_VARINFO = 72, 76, 80, 88, 96
STR_LEN, STR_SIZE = 20, 24
GCT_STR, GCT_FUNC, GCT_PROTO = 4, 8, 7
# Opcodes of LuaJIT 2.1 (jit.vmdef.bcnames), the same in every registry build.
OP = {"MOV": 18, "KSHORT": 41, "GGET": 54, "CALL": 66, "RET0": 75, "FUNCF": 89, "FUNCV": 92}
HERE = os.path.dirname(os.path.abspath(__file__))


class Image:
    """Bytes at BASE, objects placed one after another from 0x400 up."""

    def __init__(self):
        self.b = bytearray(0x400)

    def alloc(self, n, align=8):
        while len(self.b) % align:
            self.b.append(0)
        at = len(self.b)
        self.b += bytes(n)
        return BASE + at

    def put(self, addr, fmt, *v):
        struct.pack_into("<" + fmt, self.b, addr - BASE, *v)

    def string(self, s):
        s = s.encode()
        a = self.alloc(STR_SIZE + len(s) + 1)
        self.b[a - BASE + GCT] = GCT_STR
        self.put(a + STR_LEN, "I", len(s))
        self.b[a - BASE + STR_SIZE:a - BASE + STR_SIZE + len(s)] = s
        return a

    def proto(self, chunk, first, bc, consts=(), lines=None, varinfo=None):
        """A GCproto with its bytecode (opcode, a, d), constants (strings, at
        negative indexes) and one line per instruction after the header."""
        kbase = self.alloc(8 * len(consts))
        for i, s in enumerate(consts):
            self.put(kbase + 8 * (len(consts) - 1 - i), "Q", self.string(s))
        pt = self.alloc(PT_SIZE + 4 * len(bc))
        self.b[pt - BASE + GCT] = GCT_PROTO
        self.put(pt + PT_SIZEBC, "I", len(bc))
        self.put(pt + PT_K, "Q", kbase + 8 * len(consts))
        self.put(pt + PT_CHUNK, "Q", self.string(chunk))
        self.put(pt + PT_FIRST, "I", first)
        self.put(pt + PT_NUML, "I", len(bc))
        for i, (op, a, d) in enumerate(bc):
            self.put(pt + PT_SIZE + 4 * i, "I", OP[op] | a << 8 | d << 16)
        if lines:
            li = self.alloc(len(lines), 1)
            self.b[li - BASE:li - BASE + len(lines)] = bytes(lines)
            self.put(pt + PT_LINEINFO, "Q", li)
        if varinfo:
            vi = self.alloc(len(varinfo), 1)
            self.b[vi - BASE:vi - BASE + len(varinfo)] = varinfo
            self.put(pt + PT_VARINFO, "Q", vi)
        return pt

    def func(self, ffid, pt=0, f=0):
        fn = self.alloc(64)
        self.b[fn - BASE + GCT] = GCT_FUNC
        self.b[fn - BASE + FFID] = ffid
        self.put(fn + FN_PC, "Q", pt + PT_SIZE if pt else 0)
        self.put(fn + FN_F, "Q", f)
        return fn


def tv_func(fn):
    return ITYPE_FUNC << 47 | fn


def program():
    """The image and the frames (innermost first) of a stack:
    main chunk -> update (a global) -> step (a local, with varinfo) ->
    a C function -> ... and the slot of the innermost frame's link."""
    im = Image()
    L = BASE + 0x3f8                        # the lua_State (only compared)
    main = im.proto("@/srv/app/main.lua", 0,
                    [("FUNCF", 3, 0), ("GGET", 1, 0), ("CALL", 1, 1), ("RET0", 0, 1)],
                    consts=["update"], lines=[1, 2, 3])
    # varinfo: "step" live from pc 1 for 3 instructions, then the end.
    upd = im.proto("@/srv/app/update.lua", 10,
                   [("FUNCF", 4, 0), ("KSHORT", 2, 7), ("MOV", 1, 0), ("CALL", 1, 1), ("RET0", 0, 1)],
                   lines=[1, 2, 3, 4], varinfo=b"step\x00\x01\x03\x00")
    step = im.proto("=stdin", 20, [("FUNCV", 3, 0), ("GGET", 0, 0), ("CALL", 0, 1), ("RET0", 0, 1)],
                    consts=["print;\n\\x"], lines=[1, 1, 2])
    fmain, fupd, fstep = im.func(0, main), im.func(0, upd), im.func(0, step)
    fc = im.func(1, f=0x7f00dead0010)
    fff = im.func(20, f=0x55d0c0a1b2c0)
    # The stack, slot by slot: (func, link) pairs, each frame's link slot f.
    slots = [tv_func(L), 0]                         # the dummy bottom frame: f = bot
    def frame(func, link):
        slots.extend([func, link])
        return BASE + 8 * (len(slots) - 1)
    bot = BASE + 8
    f1 = frame(tv_func(fmain), (BASE + 8 * 3 - bot) | FRAME_C)   # called from C
    slots.append(0)                                              # main's slot 0
    # update: called by main's CALL A=1 at pc 2; its frame is 2 + A slots up.
    f2 = frame(tv_func(fupd), main + PT_SIZE + 4 * 3)
    assert f2 == f1 + 8 * (2 + 1)
    slots.append(0)
    f3 = frame(tv_func(fstep), upd + PT_SIZE + 4 * 4)            # CALL A=1 at pc 3
    assert f3 == f2 + 8 * (2 + 1)
    # step is vararg: its pseudo-frame, 3 slots above, links down to it.
    f3v = frame(tv_func(fstep), (8 * 2) | FRAME_VARG)
    f4 = frame(tv_func(fc), step + PT_SIZE + 4 * 3)              # CALL A=0 at pc 2 (over the pseudo-frame)
    f5 = frame(tv_func(fff), (8 * 2) | FRAME_CONT)               # a continuation over it
    slots.append(step + PT_SIZE + 4 * 2)                         # (its contpc sits below: unused)
    for i, v in enumerate(slots):
        im.put(BASE + 8 * i, "Q", v)
    frames = [(2, 20, 0), (1, fc - BASE, 0 | 0), (0, step - BASE, 4 * 3),
              (0, upd - BASE, 4 * 4 + PT_SIZE), (0, main - BASE, 4 * 3 + PT_SIZE)]
    return im, L, bot, [f1, f2, f3, f3v, f4, f5], frames, (main, upd, step)


def walk_seed(im, flags, maxf, f, bot, L):
    return struct.pack("<BBHHH", flags, maxf - 1, (f - BASE) // 8, (bot - BASE) // 8,
                       (L - BASE) // 8) + bytes(im.b)


def sym_seed(im, flags, frames):
    hdr = struct.pack("<BB", flags, len(frames) - 1)
    for kind, v, pc in frames:
        hdr += struct.pack("<BII", kind, v, pc)
    return hdr + bytes(im.b)


def lstr(s):
    """A string of the writers' input: a length byte and its bytes."""
    return bytes([len(s)]) + s


def writers_seed(opts, root, zone, rows, sites):
    """rows: (zone path, [frame names], pid, tid, counts by state);
    sites: eight fields and a count each."""
    b = bytes([opts]) + lstr(root) + lstr(zone) + bytes([len(rows)])
    for path, names, pid, tid, counts in rows:
        b += lstr(path) + bytes([len(names) - 1])
        for n in names:
            b += lstr(n) + bytes([0])
        b += bytes([pid, tid]) + bytes(counts)
    b += bytes([len(sites)])
    for fields, count in sites:
        b += b"".join(lstr(f) for f in fields) + bytes([count])
    return b


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def main():
    im, L, bot, fs, _, (main, upd, step) = program()
    write("walk", "lua-c-vararg-cont", walk_seed(im, 0, 16, fs[-1], bot, L))
    write("walk", "lua-calls", walk_seed(im, 0, 16, fs[2], bot, L))
    write("walk", "cut-at-max", walk_seed(im, 0, 2, fs[-1], bot, L))
    write("walk", "wrapping", walk_seed(im, 1, 128, fs[-1], bot, L))
    pc = lambda pt, pos, call: pt - BASE + PT_SIZE + 4 * pos | call
    stack = [(0, step - BASE, pc(step, 3, 0)), (0, upd - BASE, pc(upd, 4, 0)),
             (0, main - BASE, pc(main, 3, 2))]
    write("symbolize", "named-lua", sym_seed(im, 0, stack))
    write("symbolize", "lines", sym_seed(im, 2, stack))
    write("symbolize", "c-builtin", sym_seed(im, 2, [(2, 20, 0), (1, 0x12345, pc(step, 3, 0))] + stack))
    write("symbolize", "wrapping", sym_seed(im, 3, stack))
    rows = [(b"frame/render", [b"main.lua:0", b"app.lua:update"], 1, 1, [3, 1, 0, 0, 0]),
            (b"a;b\nc", [b"main.lua:0", b"x;y\\z"], 1, 2, [0, 2, 1, 0, 0]),
            (b"", [b"main.lua:0", b"app.lua:update"], 2, 2, [1, 0, 0, 1, 1])]
    write("writers", "zones-threads", writers_seed(3, b"", b"", rows, []))
    write("writers", "root-zone-filter", writers_seed(12, b"app.lua", b"frame", rows, []))
    sites = [([b"blacklist", b"", b"NYI: bytecode FNEW", b"trace.nyi-bytecode.FNEW", b"blocker",
               b"NYI: bytecode 51", b"app.lua:12", b"frame/render"], 7),
             ([b"warn", b"", b'error "x", y', b"trace.unknown", b"risk",
               b"line1\r\nline2\x00cut", b'"str":3', b"z,\n"], 2)]
    write("writers", "csv-quotes-newlines", writers_seed(0, b"", b"", [], sites))


if __name__ == "__main__":
    main()
