# layouts.mk - struct layouts and jit.vmdef tables by LuaJIT source revision.
# See kernel-notes/layouts.md.
#   make build/tools/nupp-layout   print the struct lj_layout of a file with DWARF
#   make layouts                   regenerate luajit/revisions.json from the git
#                                  mirrors and Debian sources (slow; cached in
#                                  build/layouts-cache/)
#
# build/gen/lj_revisions.c (user/luajit/lj_revision.h) is made from the committed
# luajit/revisions.json alone, so a build needs no mirror.

NUPP_LAYOUT    := $(B)/tools/nupp-layout
LAYOUTS_JSON   := luajit/revisions.json
LAYOUTS_ARGS   ?=

.PHONY: layouts

# Compiled from the sources, not through libnupp.a: the tool needs libdw
# only, and none of the BPF skeletons libnupp.a waits for.
$(NUPP_LAYOUT): tools/layout_dump.c user/luajit/dwarf_layout.c user/luajit/dwarf_layout.h user/luajit/lj_layout.def bpf/lj_layout.h
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) tools/layout_dump.c user/luajit/dwarf_layout.c \
		-ldw -lelf -o $@

all: $(NUPP_LAYOUT)

$(B)/gen/lj_revisions.c: $(LAYOUTS_JSON) scripts/gen-layouts.py scripts/gen-registry.py user/luajit/dwarf_layout.c user/luajit/lj_layout.def \
		bpf/lj_layout.h user/luajit/lj_revision.h
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && $(PYTHON) scripts/gen-layouts.py --emit-c $@

$(B)/obj/lj_revisions.o: $(B)/gen/lj_revisions.c user/luajit/lj_revision.h user/luajit/lj_build.h bpf/lj_layout.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(B)/libnupp.a: $(B)/obj/lj_revisions.o

layouts: $(NUPP_LAYOUT) $(LJ_STAMPS) $(LJ_SUITE_STAMPS)
	$(PYTHON) scripts/gen-layouts.py --build $(B) --nupp-layout $(NUPP_LAYOUT) $(LAYOUTS_ARGS)
