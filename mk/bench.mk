# bench.mk - `make bench` (as root): what profiling costs, tables in docs/benchmarks.md.
#   make bench                           all three, about 8 minutes
#   make bench BENCH_ARGS='--rounds 3'   options for scripts/bench-sampler.py
# Each script replaces its own section of docs/benchmarks.md. Run it on an
# otherwise idle machine: CPU-time comparisons here are noisy (±10%).

bench: $(B)/nupp-bpf lua
	$(call msg,BENCH,scripts/bench-sampler.py)
	$(Q)$(PYTHON) scripts/bench-sampler.py --luajit $(LUAJIT) $(BENCH_ARGS)
	$(call msg,BENCH,scripts/bench-trace.py)
	$(Q)$(PYTHON) scripts/bench-trace.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-zone.lua)
	$(Q)$(LUA_TEST_ENV) $(PYTHON) scripts/doc-section.py bench-zone \
		"Zones: ns per enter+leave pair in a compiled loop (\`scripts/bench-zone.lua\`)" \
		$(LUAJIT) scripts/bench-zone.lua
.PHONY: bench
