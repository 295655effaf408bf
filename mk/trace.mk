# trace.mk - the trace-abort collector: reason catalog, test driver, tests, bench.
#   make build/gen/trace_reasons.c   C catalog (and build/lua/nupp/profile/reasons.lua)
#   make trace-dev                   build/tests/nupp-trace-dev, the test driver
#   make test-trace                  tests/trace/test_trace.py (root)
#   make bench-trace                 per-abort cost, BPF collector vs jit.attach (also in make bench)

.PHONY: trace-dev test-trace bench-trace

TRACE_GEN := $(B)/gen/trace_reasons.h $(B)/gen/trace_reasons.c $(B)/lua/nupp/profile/reasons.lua

$(B)/gen/trace_reasons.c: catalog/trace-reasons.tsv scripts/gen-reasons.py
	$(call msg,GEN,$@)
	$(Q)$(PYTHON) scripts/gen-reasons.py --tsv $< --c-dir $(B)/gen --lua $(B)/lua/nupp/profile/reasons.lua
$(B)/gen/trace_reasons.h $(B)/lua/nupp/profile/reasons.lua: $(B)/gen/trace_reasons.c

GEN_HEADERS += $(B)/gen/trace_reasons.h

$(B)/obj/trace_reasons.o: $(B)/gen/trace_reasons.c $(B)/gen/trace_reasons.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(B)/libnupp.a: $(B)/obj/trace_reasons.o

lua: $(B)/lua/nupp/profile/reasons.lua

$(B)/tests/nupp-trace-dev: tests/trace/trace_dev.c $(B)/libnupp.a
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) $^ $(LDLIBS) -o $@

trace-dev: $(B)/tests/nupp-trace-dev

test-trace: $(B)/tests/nupp-trace-dev $(TRACE_GEN)
	$(PYTHON) -m pytest -q tests/trace/test_trace.py

bench-trace: $(B)/nupp-bpf $(TRACE_GEN)
	$(PYTHON) scripts/bench-trace.py --luajit $(LUAJIT)
