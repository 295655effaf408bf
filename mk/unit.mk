# unit.mk - tests that need no root and no BPF.
#   make unit-test     build and run every tests/unit/test_*.c
# A test links the build registry and the userspace sources listed for it
# below, compiled here without the BPF skeletons.

UNIT_DIR    := $(B)/unit
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
UNIT_TESTS  := $(patsubst tests/unit/%.c,$(UNIT_DIR)/%,$(UNIT_SRCS))
LUAJIT_INC  ?= /usr/include/luajit-2.1
UNIT_LDLIBS := -lluajit-5.1 -ldw -lelf -lz -lmd -lcapstone -ldl

.PHONY: unit-test
test: unit-test

$(UNIT_DIR)/%.o: user/%.c | $(GEN_HEADERS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -c $< -o $@

$(UNIT_DIR)/test_%.o: tests/unit/test_%.c | $(GEN_HEADERS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(DEPFLAGS) -I$(LUAJIT_INC) $(CFLAGS) -c $< -o $@

$(UNIT_DIR)/test_bcpath: $(UNIT_DIR)/sampler/bcpath.o
$(UNIT_DIR)/test_ksyms: $(UNIT_DIR)/base/ksyms.o
SYMBOLIZE_OBJS := luajit/symbolize base/pairmap base/text base/procmem luajit/elf_file luajit/cfunc_names luajit/codemap
$(UNIT_DIR)/test_symbolize: $(patsubst %,$(UNIT_DIR)/%.o,$(SYMBOLIZE_OBJS))
$(UNIT_DIR)/test_code_sites: $(patsubst %,$(UNIT_DIR)/%.o,luajit/code_sites luajit/code_layout luajit/x86_code luajit/elf_file)
$(UNIT_DIR)/test_profile: $(patsubst %,$(UNIT_DIR)/%.o,profile/profile base/keymap $(SYMBOLIZE_OBJS))
# The writers (the flame graph's tree) come from libnupp.a.
$(UNIT_DIR)/test_profile: $(B)/libnupp.a
$(UNIT_DIR)/test_profile: UNIT_LDLIBS += $(LDLIBS)
$(UNIT_DIR)/test_interval: $(patsubst %,$(UNIT_DIR)/%.o,profile/interval profile/profile base/keymap $(SYMBOLIZE_OBJS))
# test_tracer compiles user/trace/trace.c into itself (its logic is static) and
# takes the rest of the collector from libnupp.a.
$(UNIT_DIR)/test_tracer.o: user/trace/trace.c $(B)/trace.skel.h $(GEN_HEADERS)
$(UNIT_DIR)/test_tracer: $(B)/libnupp.a
$(UNIT_DIR)/test_tracer: UNIT_LDLIBS += $(LDLIBS)

# test_replay runs bpf/lj_sample.h as plain C, and the trace mapper, over
# tests/fixtures/replay/; `make replay-fixtures` (as root) captures them
# again (tests/replay/make-fixtures.py), to be reviewed.
.PHONY: replay-fixtures
replay-fixtures: $(B)/tests/replay-capture $(UNIT_DIR)/test_replay
	$(Q)$(PYTHON) tests/replay/make-fixtures.py
$(UNIT_DIR)/test_replay: $(patsubst %,$(UNIT_DIR)/%.o,sampler/describe sampler/tracemap sampler/bcpath \
			  luajit/x86_code $(SYMBOLIZE_OBJS))
$(B)/tests/replay-capture: tests/replay/capture.c tests/replay/capture.h $(B)/libnupp.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) $< $(B)/libnupp.a $(LDLIBS) -o $@

$(UNIT_DIR)/test_%: $(UNIT_DIR)/test_%.o $(B)/obj/lj_builds.o
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(UNIT_LDLIBS) -o $@

unit-test: $(UNIT_TESTS)
	$(Q)for t in $(UNIT_TESTS); do echo "== $$t"; $$t || exit 1; done
