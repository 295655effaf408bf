# LuaJIT builds, stock Debian binaries, the build registry and the test host.
# See kernel-notes/luajit-builds.md.
#
#   make luajit        fetch + build every tree in luajit/pins, unpack the stock debs,
#                      fetch the later suites' sources of luajit/suite-pins
#   make regen         re-pin luajit/pins and luajit/suite-pins to what the mirror
#                      ships now, rebuild what changed, regenerate build/gen/lj_builds.c
#   make clean-luajit  drop the LuaJIT builds and downloads (the slow part to redo)
#
# Products (cached; a second `make` rebuilds nothing):
#   $(B)/luajit/TREE/src/{luajit,libluajit.so,jit/}   unstripped amalg rebuilds
#   $(B)/stock/TREE/usr/...                           Debian binary packages
#   $(B)/luajit/suites/SUITE-SRC/                     trixie's and sid's sources
#                                                     (for the variants, the layouts)
#   $(B)/gen/lj_builds.c                              registry (user/luajit/lj_build.h)
#   $(B)/tests/luahost                                embedding host for tests

LJ_TREES  := $(shell awk '!/^[ \t]*(\#|$$)/ { print $$1 }' luajit/pins)
LJ_STAMPS := $(foreach t,$(LJ_TREES),$(B)/luajit/$(t).stamp)
LJ_SUITES := $(shell awk '!/^[ \t]*(\#|$$)/ { print $$1 }' luajit/suite-pins)
LJ_SUITE_STAMPS := $(foreach s,$(LJ_SUITES),$(B)/luajit/suites/$(s).stamp)
LUAJIT_INC ?= /usr/include/luajit-2.1

.PHONY: luajit regen clean-luajit

# The script keeps its own per-step stamps holding the pinned version and
# skips what is already there; this stamp only tells make that it ran.
$(LJ_STAMPS): $(B)/luajit/%.stamp: luajit/pins scripts/build-luajit.sh
	$(Q)B=$(B) scripts/build-luajit.sh $*
	$(Q)touch $@

$(LJ_SUITE_STAMPS): $(B)/luajit/suites/%.stamp: luajit/suite-pins scripts/fetch-suite-source.sh
	$(Q)B=$(B) scripts/fetch-suite-source.sh $*
	$(Q)touch $@

luajit: $(LJ_STAMPS) $(LJ_SUITE_STAMPS)

$(B)/gen/lj_builds.c: scripts/gen-registry.py user/luajit/dwarf_layout.c user/luajit/lj_layout.def luajit/pins bpf/lj_layout.h \
		user/luajit/lj_build.h $(LJ_STAMPS)
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && $(PYTHON) scripts/gen-registry.py --build $(B) --out $@

regen:
	scripts/build-luajit.sh --repin
	B=$(B) scripts/fetch-suite-source.sh --repin
	$(MAKE) luajit
	$(PYTHON) scripts/gen-registry.py --build $(B) --out $(B)/gen/lj_builds.c

clean-luajit:
	rm -rf $(B)/luajit $(B)/stock $(B)/gen/lj_builds.c

# --- test host embedding LuaJIT (libluajit-5.1.so.2 chosen at run time) ------

# luahost-libs: the same host linked to libraries of nupp-bpf's own dependencies (by
# soname: no -dev package needed), between LuaJIT and the C library in its
# NEEDED list: the loader maps them between the two, so the C library lies
# farther from the interpreter than the 8 files nupp_proc.code[] lists, as in
# a server that links many (pdns_recursor).
HOST_LIBS := bpf.so.1 dw.so.1 elf.so.1 z.so.1 md.so.0 jansson.so.4 zstd.so.1 lzma.so.5 bz2.so.1.0
$(B)/tests/luahost-libs: HOST_LDLIBS := -Wl,--no-as-needed $(patsubst %,-l:lib%,$(HOST_LIBS)) -Wl,--as-needed
$(B)/tests/luahost $(B)/tests/luahost-libs: tests/integration/hosts/luahost.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) -O2 -g -Wall -Wextra -I$(LUAJIT_INC) $< -o $@ -lluajit-5.1 \
		$(HOST_LDLIBS) -lpthread

all: $(B)/gen/lj_builds.c $(B)/tests/luahost $(B)/tests/luahost-libs
