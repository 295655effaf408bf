# fuzz.mk - libFuzzer targets (tests/fuzz/fuzz_*.c), no root needed.
#   make fuzz                  every target for FUZZ_SECONDS (15) each, from its
#                              committed corpus tests/fuzz/corpus/TARGET/
#   make fuzz-walk FUZZ_SECONDS=600    one target, longer
# A target first runs every input of its corpus (the seeds, and each crash
# found once, kept as a regression input), then mutates them. What it finds
# new goes to build/fuzz/found/TARGET/, a crash to build/fuzz/TARGET-crash-*;
# to keep a crash as a test, copy it into the corpus with the fix.

FUZZ_DIR     := $(B)/fuzz
FUZZ_SECONDS ?= 15
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_CFLAGS  := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
		-fno-sanitize-recover=undefined

.PHONY: fuzz $(addprefix fuzz-,$(FUZZ_TARGETS))
test: fuzz

# The project's sources, instrumented for coverage and the sanitizers.
$(FUZZ_DIR)/obj/%.o: user/%.c | $(GEN_HEADERS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CLANG) $(CPPFLAGS) $(DEPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/obj/lj_builds.o: $(B)/gen/lj_builds.c user/luajit/lj_build.h bpf/lj_layout.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CLANG) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@

# What each target links beyond its own file (the rest comes from libnupp.a).
$(FUZZ_DIR)/fuzz_walk: $(FUZZ_DIR)/obj/lj_builds.o
$(FUZZ_DIR)/fuzz_symbolize: $(FUZZ_DIR)/obj/luajit/symbolize.o $(FUZZ_DIR)/obj/base/text.o $(FUZZ_DIR)/obj/lj_builds.o
$(FUZZ_DIR)/fuzz_writers: $(patsubst %,$(FUZZ_DIR)/obj/%.o,profile/profile base/keymap trace/trace_report luajit/symbolize base/text)
$(FUZZ_DIR)/fuzz_registry: $(FUZZ_DIR)/obj/luajit/lj_derive.o
$(FUZZ_DIR)/fuzz_build_cache: $(FUZZ_DIR)/obj/luajit/build_cache.o

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_image.h $(B)/libnupp.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CLANG) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer \
		$< $(filter %.o,$^) $(B)/libnupp.a $(LDLIBS) -o $@

# Run target $(1) for FUZZ_SECONDS over its corpus.
define fuzz_run
	$(call msg,FUZZ,$(1) for $(FUZZ_SECONDS) s)
	$(Q)mkdir -p $(FUZZ_DIR)/found/$(1) && \
	$(FUZZ_DIR)/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=0 \
		-artifact_prefix=$(FUZZ_DIR)/$(1)- $(FUZZ_DIR)/found/$(1) tests/fuzz/corpus/$(1) \
		> $(FUZZ_DIR)/$(1).log 2>&1 || { tail -n 40 $(FUZZ_DIR)/$(1).log; exit 1; }
endef

$(foreach t,$(FUZZ_TARGETS),$(eval fuzz-$(t): $(FUZZ_DIR)/fuzz_$(t) ; $$(call fuzz_run,$(t))))

fuzz: $(addprefix fuzz-,$(FUZZ_TARGETS))
