# bench.mk - `make bench` (as root): what profiling costs, tables in docs/benchmarks.md.
#   make bench                           all of them, bench-nginx's 45 minutes among them
#   make bench-dump                      `nupp-bpf dump` alone, about 1 minute
#   make bench-nginx                     nginx's throughput under profiling, about 45 minutes
#   make bench BENCH_ARGS='--rounds 3'   options for scripts/bench-sampler.py
# Each script replaces its own section of docs/benchmarks.md, and the
# README's headline table follows (scripts/headline.py). Run it on an
# otherwise idle machine: CPU-time comparisons here are noisy (±10%).

# The build no registry holds that bench-sampler.py attaches to (a stripped
# copy of it): built here, so that `make bench` needs no `make test` first.
# On the `luajit` target, not on LJ_STAMPS: luajit.mk is read after this
# file (mk/*.mk in name order), so LJ_STAMPS would still be empty here.
BENCH_UNSEEN := $(B)/variants/luajit-clang-O2/src/luajit
$(BENCH_UNSEEN): | luajit
	$(Q)B=$(B) scripts/build-variants.sh luajit-clang-O2

bench: $(B)/nupp-bpf lua $(BENCH_UNSEEN) $(B)/tests/luahost
	$(call msg,BENCH,scripts/bench-sampler.py)
	$(Q)$(PYTHON) scripts/bench-sampler.py --luajit $(LUAJIT) --unseen $(BENCH_UNSEEN) $(BENCH_ARGS)
	$(call msg,BENCH,scripts/bench-trace.py)
	$(Q)$(PYTHON) scripts/bench-trace.py --luajit $(LUAJIT)
	$(Q)$(PYTHON) scripts/headline.py
	$(call msg,BENCH,scripts/bench-traces.py)
	$(Q)$(PYTHON) scripts/doc-section.py --markdown bench-traces \
		"Compiled samples mapped through their traces: what the mapping costs (\`scripts/bench-traces.py\`)" \
		$(PYTHON) scripts/bench-traces.py --luajit $(LUAJIT) --traces 1000 --seconds 10 --rounds 5
	$(call msg,BENCH,scripts/bench-zone.lua)
	$(Q)$(LUA_TEST_ENV) $(PYTHON) scripts/doc-section.py bench-zone \
		"Zones: ns per enter+leave pair in a compiled loop (\`scripts/bench-zone.lua\`)" \
		$(LUAJIT) scripts/bench-zone.lua
	$(call msg,BENCH,scripts/bench-top.py)
	$(Q)$(PYTHON) scripts/doc-section.py bench-top \
		"Live jobs: nupp-bpf's own CPU with top and --rotate, next to record (\`scripts/bench-top.py\`)" \
		$(PYTHON) scripts/bench-top.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-large.py)
	$(Q)$(PYTHON) scripts/doc-section.py bench-large \
		"A large program: nupp-bpf's own CPU (\`scripts/bench-large.py\`)" \
		$(PYTHON) scripts/bench-large.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-check.py)
	$(Q)$(PYTHON) scripts/doc-section.py bench-check \
		"\`nupp-bpf check\`: lines of Lua read per second on one core (\`scripts/bench-check.py\`)" \
		$(PYTHON) scripts/bench-check.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-offcpu.py)
	$(Q)$(PYTHON) scripts/doc-section.py --markdown bench-offcpu \
		"\`record --off-cpu\`: two processes on one CPU that switch ~140,000 times a second (\`scripts/bench-offcpu.py\`)" \
		$(PYTHON) scripts/bench-offcpu.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-heap.py)
	$(Q)$(PYTHON) scripts/doc-section.py --markdown bench-heap \
		"\`nupp-bpf heap\`: a census's time per GB of heap (\`scripts/bench-heap.py\`)" \
		$(PYTHON) scripts/bench-heap.py --luajit $(LUAJIT)
	$(call msg,BENCH,scripts/bench-alloc.py)
	$(Q)$(PYTHON) scripts/doc-section.py --markdown bench-alloc \
		"\`record --alloc\`: allocation-heavy programs' CPU time (\`scripts/bench-alloc.py\`)" \
		$(PYTHON) scripts/bench-alloc.py --luajit $(LUAJIT)
	$(Q)$(MAKE) --no-print-directory bench-dump bench-nginx

bench-dump: $(B)/nupp-bpf $(B)/tests/luahost
	$(call msg,BENCH,scripts/bench-dump.py)
	$(Q)$(PYTHON) scripts/doc-section.py bench-dump \
		"\`nupp-bpf dump\`: end-to-end time (\`scripts/bench-dump.py\`)" \
		$(PYTHON) scripts/bench-dump.py --luajit $(LUAJIT)

# A production server's throughput under each way of profiling it, with
# nupp-bpf's own CPU (wrk comes from scripts/install-deps.sh).
# nginx, the target of nginx.mk: mk/*.mk are read in name order, so
# NGINX_STAMP is still empty here, and `make bench` after `make` stopped at
# bench-nginx with no nginx to run.
bench-nginx: $(B)/nupp-bpf nginx
	$(call msg,BENCH,scripts/bench-nginx.py)
	$(Q)$(PYTHON) scripts/doc-section.py --markdown bench-nginx \
		"A production server: nginx's requests/s under each way of profiling it (\`scripts/bench-nginx.py\`)" \
		$(PYTHON) scripts/bench-nginx.py

.PHONY: bench bench-dump bench-nginx
