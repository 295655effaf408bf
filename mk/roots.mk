# roots.mk - Debian 13 (trixie) and sid roots for the tests of other
# distributions' LuaJIT, run as containers run them (tests/helpers/container).
#   make roots     debootstrap each suite once into build/roots/SUITE

ROOT_SUITES := trixie sid

.PHONY: roots
roots:
	$(Q)B=$(B) scripts/make-roots.sh $(ROOT_SUITES)

test: roots
