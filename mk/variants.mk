# variants.mk - LuaJIT rebuilt in ways no registry holds (scripts/build-variants.sh):
# other compilers and -O levels, frame pointers, build options.
#   make variants      the sample tests/test_other_builds.py runs in `make test`
#   make test-builds   every variant of the matrix whose source is at hand, tested
# Sources: the Debian trees make luajit unpacks (deb:), git revisions when the
# repositories are at hand (git:, skipped otherwise).

VARIANTS ?= luajit-gcc-O3 luajit-clang-O2 luajit-gcc-nummode2 luajit2-clang-Os \
	    luajit2-gcc-noffi luajit-gcc-nojit luajit-gcc-nogc64

.PHONY: variants test-builds

variants: $(LJ_STAMPS)
	$(Q)B=$(B) scripts/build-variants.sh $(VARIANTS)

test: variants

test-builds: all $(LJ_STAMPS)
	$(Q)B=$(B) scripts/build-variants.sh
	$(Q)NUPP_VARIANTS="$$(cd $(B)/variants && ls -d */ | tr -d / | grep -v nogc64 | grep -v nojit | tr '\n' ' ')" \
		$(PYTEST) tests/test_other_builds.py
unit-test: variants
