# test.mk - the whole test suite.
#   make test      build everything, run the unit tests (unit.mk hooks
#                  `unit-test` in as a prerequisite of `test`), then every
#                  pytest test under tests/, as root: the BPF tests load and
#                  attach for real.
# A skipped test fails the run, like a failed one: conftest.py turns skips
# into failures, and the summary line is checked here as well.

PYTEST_LOG := $(B)/pytest.log

.PHONY: test
test: all
	$(call msg,PYTEST,tests/)
	$(Q){ $(PYTHON) -m pytest -q -p no:cacheprovider -rs tests/; echo $$? > $(PYTEST_LOG).rc; } \
		2>&1 | tee $(PYTEST_LOG); \
	rc=$$(cat $(PYTEST_LOG).rc); rm -f $(PYTEST_LOG).rc; \
	if tail -n 1 $(PYTEST_LOG) | grep -Eq '[0-9]+ skipped'; then \
		echo "make test: tests were skipped, which counts as a failure (see $(PYTEST_LOG))"; \
		exit 1; \
	fi; \
	exit $$rc
