# bench.mk - `make bench` (as root): what profiling costs, tables in docs/benchmarks.md.
#   make bench                      the sampler (about 5 minutes), then every
#                                   scripts/bench-trace.* and scripts/bench-zone.*
#   make bench BENCH_ARGS='--rounds 3'   options for scripts/bench-sampler.py
# Each script replaces its own section of docs/benchmarks.md.

BENCH_OTHERS := $(sort $(wildcard scripts/bench-trace.* scripts/bench-zone.*))

bench: $(B)/nupp-bpf $(if $(filter %.lua,$(BENCH_OTHERS)),lua)
	$(call msg,BENCH,scripts/bench-sampler.py)
	$(Q)$(PYTHON) scripts/bench-sampler.py --luajit $(LUAJIT) $(BENCH_ARGS)
	$(Q)for s in $(BENCH_OTHERS); do \
		printf '  %-8s %s\n' BENCH "$$s"; \
		case "$$s" in \
		*.py) $(PYTHON) "$$s" ;; \
		*.lua) $(LUA_TEST_ENV) $(LUAJIT) "$$s" ;; \
		*.sh) sh "$$s" ;; \
		*) echo "bench: no way to run $$s" >&2; false ;; \
		esac || exit 1; \
	done
