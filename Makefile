# nupp-bpf - eBPF profiler for LuaJIT.  `make` builds everything into build/.
#   make            BPF objects, skeletons, libnupp.a, nupp-bpf, the Lua C module
#   make test       the whole test suite (as root; BPF tests run for real)
#   make bench      benchmarks; tables go to docs/benchmarks.md
#   make install    PREFIX=/usr/local DESTDIR=
#   make regen      re-pin the LuaJIT source packages to what Debian ships now
# V=1 shows the commands.

PREFIX  ?= /usr/local
DESTDIR ?=
B       := build
CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
PYTHON  ?= /usr/bin/python3
CFLAGS  ?= -O2 -g -Wall -Wextra -Wno-unused-parameter
CPPFLAGS += -I$(B) -I$(B)/gen -Ibpf -Iuser
LDLIBS  += -lbpf -ldw -lelf -lz -lmd -ljansson -lm
ARCH    := x86

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all test bench install clean deps regen luajit FORCE

all:

include $(sort $(wildcard mk/*.mk))

# --- BPF: %.bpf.c -> %.bpf.o -> %.skel.h -------------------------------------
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(B)/%.skel.h,$(BPF_SRCS)) $(B)/sampler_sweep.skel.h

$(B)/vmlinux.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(B) && $(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

# NUPP_HAVE_TASK_WORK: this kernel's types have BPF task work (Linux 6.18).
TASK_WORK_DEF = $$(grep -q '^struct bpf_task_work {' $(B)/vmlinux.h && echo -DNUPP_HAVE_TASK_WORK)

$(B)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(B)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(B) -Ibpf $(TASK_WORK_DEF) \
		-I/usr/include/x86_64-linux-gnu -c $< -o $@.tmp && \
		llvm-strip -g $@.tmp -o $@ && rm -f $@.tmp

$(B)/%.skel.h: $(B)/%.bpf.o
	$(call msg,GENSKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# The sampler whose sweep (--off-cpu -F) walks, where this kernel has BPF
# task work: a kfunc, which makes libbpf load the kernel's whole BTF to
# resolve it, so only a session that sweeps opens this object, through the
# sampler's skeleton (user/sampler/sampler.c), whose globals must then lie
# as this object's do: checked here. Its own skeleton serves for its ELF
# bytes alone. Without task work it is the sampler as it is.
$(B)/sampler_sweep.bpf.o: bpf/sampler.bpf.c $(wildcard bpf/*.h) $(B)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(B) -Ibpf $(TASK_WORK_DEF) \
		$$(grep -q '^struct bpf_task_work {' $(B)/vmlinux.h && echo -DNUPP_SWEEP_WALKS) \
		-I/usr/include/x86_64-linux-gnu -c $< -o $@.tmp && \
		llvm-strip -g $@.tmp -o $@ && rm -f $@.tmp

$(B)/sampler_sweep.skel.h: $(B)/sampler_sweep.bpf.o $(B)/sampler.skel.h
	$(call msg,GENSKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name sampler_sweep_bpf > $@.tmp && \
		for sec in bss data rodata; do \
			sed -n "/struct sampler_bpf__$$sec {/,/} \*$$sec;/p" $(B)/sampler.skel.h > $@.a; \
			sed -n "/struct sampler_sweep_bpf__$$sec {/,/} \*$$sec;/p" $@.tmp | \
				sed 's/sampler_sweep_bpf__/sampler_bpf__/' > $@.b; \
			cmp -s $@.a $@.b || { echo "$@: the .$$sec of the two sampler objects differ:"; \
				diff $@.a $@.b; rm -f $@.a $@.b $@.tmp; exit 1; }; \
		done && rm -f $@.a $@.b && mv $@.tmp $@

# The kernel types the objects use, cut from this kernel's BTF, for a fast
# load on this kernel (user/base/libbpf_setup.c checks it is the same kernel).
$(B)/gen/min_btf.h: $(patsubst bpf/%.bpf.c,$(B)/%.bpf.o,$(BPF_SRCS)) scripts/gen-min-btf.py
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && $(BPFTOOL) gen min_core_btf /sys/kernel/btf/vmlinux $(B)/min_core.btf \
		$(filter %.bpf.o,$^) && $(PYTHON) scripts/gen-min-btf.py $(B)/min_core.btf $@
GEN_HEADERS += $(B)/gen/min_btf.h

# System call names by number, from the C library's kernel headers (what
# an off-CPU wait's leaf frame is named by).
$(B)/gen/syscall_names.h:
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && echo '#include <asm/unistd_64.h>' | $(CC) -dM -E - | \
		awk '$$1 == "#define" && $$2 ~ /^__NR_/ && $$3 ~ /^[0-9]+$$/ \
		     { printf "\t[%s] = \"%s\",\n", $$3, substr($$2, 6) }' | sort -t[ -k2 -n > $@.tmp && \
		mv $@.tmp $@
GEN_HEADERS += $(B)/gen/syscall_names.h

# Whether the sampler's sweep walks (--off-cpu -F): the kernel's types have
# BPF task work, and sampler_sweep.bpf.o calls it (user/sampler/sampler.c).
$(B)/gen/task_work.h: $(B)/vmlinux.h
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && { grep -q '^struct bpf_task_work {' $< && \
		echo '#define NUPP_SWEEP_WALKS 1' || echo '#define NUPP_SWEEP_WALKS 0'; } > $@
GEN_HEADERS += $(B)/gen/task_work.h

# --- userspace ----------------------------------------------------------------
# user/ has a folder per subsystem (README, "Architecture"); a file includes
# another folder's header as "folder/file.h", and only from a folder below
# its own (scripts/check-includes.py, run by make test).
USER_LIB_SRCS := $(filter-out user/cli/main.c user/lua/lua_module.c user/zones/zone_state.c,\
		 $(wildcard user/*/*.c))
USER_LIB_OBJS := $(patsubst user/%.c,$(B)/obj/%.o,$(USER_LIB_SRCS)) $(B)/obj/lj_builds.o

# Each object depends on the headers it includes (-MMD: build/obj/**/*.d);
# what is generated is made before the first compile.
DEPFLAGS = -MMD -MP
$(B)/obj/%.o: user/%.c | $(BPF_SKELS) $(B)/gen/lj_builds.c $(GEN_HEADERS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -fPIC -c $< -o $@
-include $(shell find $(B)/obj $(B)/unit $(B)/fuzz -name '*.d' 2>/dev/null)

$(B)/obj/lj_builds.o: $(B)/gen/lj_builds.c user/luajit/lj_build.h bpf/lj_layout.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(B)/libnupp.a: $(USER_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# What --version prints: the release, and the commit built ("+" when the
# tree differed from it). Rewritten only when that changes.
NUPP_RELEASE := 0.2
NUPP_COMMIT = $(shell git describe --always --dirty=+ 2>/dev/null || echo "no commit")
$(B)/gen/version.h: FORCE
	$(Q)mkdir -p $(@D) && v='#define NUPP_VERSION "$(NUPP_RELEASE) ($(NUPP_COMMIT))"' && \
		{ [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@; }
FORCE:
$(B)/obj/cli/main.o: $(B)/gen/version.h

$(B)/nupp-bpf: $(B)/obj/cli/main.o $(B)/libnupp.a
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

all: $(B)/nupp-bpf

clean:
	rm -rf $(B)/obj $(B)/*.o $(B)/*.skel.h $(B)/nupp-bpf $(B)/libnupp.a $(B)/gen

# --- set-up, the example, installation ---------------------------------------
deps:
	$(Q)scripts/install-deps.sh

# The default job on the bundled example: samples, trace aborts and a flame
# graph of examples/demo.lua, written to example.{collapsed,svg} and
# example-aborts.csv.
example: deps all
	$(B)/nupp-bpf -o example -- luajit examples/demo.lua 4

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(B)/nupp-bpf $(DESTDIR)$(PREFIX)/bin/nupp-bpf

.PHONY: example
