# variants.mk - LuaJIT rebuilt in ways no registry holds (scripts/build-variants.sh):
# every Debian source (bookworm's luajit and luajit2, trixie's and sid's luajit)
# with gcc -O1/-O2/-O3/-Os, clang -O2, frame pointers, NUMMODE=2 + Lua 5.2
# compatibility, no FFI; and a few more builds (no JIT, no GC64, non-PIE, git heads).
#   make variants      the sample tests/integration/test_other_builds.py runs in `make test`
#   make test-builds   the whole matrix, built and tested (both channels on each;
#                      the git heads only when their repositories are at hand)
# Sources: the Debian trees make luajit unpacks (deb:), git revisions when the
# repositories are at hand (git:, skipped otherwise).

VARIANTS ?= luajit-gcc-O3 luajit-clang-O2 luajit-gcc-nummode2 luajit2-clang-Os \
	    luajit2-gcc-noffi luajit-gcc-nojit luajit-gcc-nogc64 \
	    trixie-luajit-gcc-O2 sid-luajit-clang-O2

.PHONY: variants test-builds

variants: $(LJ_STAMPS) $(LJ_SUITE_STAMPS)
	$(Q)B=$(B) scripts/build-variants.sh $(VARIANTS)

test: variants

# Every variant built, but those the refusal tests take (no GC64, no JIT):
# NUPP_VARIANTS runs both channels on each of them.
test-builds: all $(LJ_STAMPS) $(LJ_SUITE_STAMPS)
	$(Q)B=$(B) scripts/build-variants.sh
	$(call msg,PYTEST,tests/integration/test_other_builds.py on every variant)
	$(call pytest_run,NUPP_VARIANTS="$$(scripts/build-variants.sh --list | \
		awk '$$1 !~ /-no(gc64|jit)$$/ { print $$1 }' | \
		while read -r n; do [ ! -f $(B)/variants/$$n/.nupp-variant ] || echo $$n; done | \
		tr '\n' ' ')" $(PYTEST) tests/integration/test_other_builds.py,$(PYTEST_LOG).builds)
unit-test: variants
