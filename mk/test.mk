# test.mk - the whole test suite.
#   make test      build everything, run the unit tests (unit.mk hooks
#                  `unit-test` in as a prerequisite of `test`), then every
#                  pytest test under tests/, as root: the BPF tests load and
#                  attach for real. The Lua API tests run three times: on
#                  the in-process backend, on the BPF backend, and on the
#                  BPF backend in a PID namespace (as in a container).
# A skipped test fails the run, like a failed one: conftest.py turns skips
# into failures, and the summary lines are checked here as well.

PYTEST_LOG := $(B)/pytest.log
PYTEST     := $(PYTHON) -m pytest -q -p no:cacheprovider -rs --strict-markers

# Run pytest with $(1) as arguments (and environment), log to $(2); fail on
# a failure or on a skip.
define pytest_run
	$(Q){ $(1); echo $$? > $(2).rc; } 2>&1 | tee $(2); \
	rc=$$(cat $(2).rc); rm -f $(2).rc; \
	if tail -n 1 $(2) | grep -Eq '[0-9]+ skipped'; then \
		echo "make test: tests were skipped, which counts as a failure (see $(2))"; \
		exit 1; \
	fi; \
	[ $$rc -eq 0 ]
endef

# The tree's own rules, checked before anything runs: includes only downward
# between user/'s folders and no circle; docs and comments name what exists;
# the README's headline numbers are the benchmarks' own.
.PHONY: test check-tree
check-tree:
	$(call msg,CHECK,scripts/check-includes.py scripts/check-docs.py scripts/headline.py)
	$(Q)$(PYTHON) scripts/check-includes.py && $(PYTHON) scripts/check-docs.py && \
		$(PYTHON) scripts/headline.py --check

test: check-tree all trace-dev
	$(call msg,PYTEST,tests/)
	$(call pytest_run,$(PYTEST) tests/,$(PYTEST_LOG))
	$(call msg,PYTEST,tests/lua_api/test_lua_api.py on the BPF backend)
	$(call pytest_run,NUPP_BACKEND=bpf $(PYTEST) tests/lua_api/test_lua_api.py,$(PYTEST_LOG).bpf)
	$(call msg,PYTEST,tests/lua_api/test_lua_api.py on the BPF backend in a PID namespace)
	$(call pytest_run,NUPP_BACKEND=bpf NUPP_PIDNS=1 $(PYTEST) tests/lua_api/test_lua_api.py,$(PYTEST_LOG).pidns)
