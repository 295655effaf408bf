# check.mk - what each LuaJIT revision's recorder refuses, for `nupp-bpf check`.
#
# build/gen/lj_recorders.c (user/luajit/lj_recorder.h) is made from the committed
# luajit/recorders.json. `make recorders` regenerates that JSON from git
# mirrors of upstream LuaJIT and OpenResty's luajit2 (RECORDERS_ARGS:
# --luajit GITDIR --luajit2 GITDIR) and the Debian trees of luajit/pins and
# luajit/suite-pins: see scripts/gen-recorders.py.

RECORDERS_JSON := luajit/recorders.json

$(B)/gen/lj_recorders.c: $(RECORDERS_JSON) scripts/gen-recorders.py user/luajit/lj_recorder.h
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && $(PYTHON) scripts/gen-recorders.py --emit-c $@ --json $<

$(B)/obj/lj_recorders.o: $(B)/gen/lj_recorders.c user/luajit/lj_recorder.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) -Iuser -fPIC -c $< -o $@

$(B)/libnupp.a: $(B)/obj/lj_recorders.o

recorders: $(LJ_STAMPS) $(LJ_SUITE_STAMPS)
	$(PYTHON) scripts/gen-recorders.py $(RECORDERS_ARGS) \
		--debian-source "debian bookworm luajit $$(awk '$$1 == "luajit" { print $$3 }' luajit/pins)=$(B)/luajit/luajit" \
		--debian-source "debian bookworm luajit2 $$(awk '$$1 == "luajit2" { print $$3 }' luajit/pins)=$(B)/luajit/luajit2" \
		--debian-source "debian trixie luajit $$(awk '$$1 == "trixie" { print $$3 }' luajit/suite-pins)=$(B)/luajit/suites/trixie-luajit" \
		--debian-source "debian sid luajit $$(awk '$$1 == "sid" { print $$3 }' luajit/suite-pins)=$(B)/luajit/suites/sid-luajit"

.PHONY: recorders

$(B)/obj/check/check_cli.o: $(B)/gen/version.h

# The SARIF 2.1.0 JSON schema the tests validate check's output against:
# Debian's python-sarif-python-om source ships it (sarif-2.1.0-rtm.4.json).
SARIF_SCHEMA := $(B)/sarif/sarif-schema-2.1.0.json

$(SARIF_SCHEMA):
	$(call msg,FETCH,$@)
	$(Q)mkdir -p $(@D) && cd $(@D) && rm -rf src && mkdir src && cd src && \
		apt-get source -q --download-only --only-source python-sarif-python-om >/dev/null 2>&1; \
		t=$$(ls python-sarif-python-om_*.orig.tar.* 2>/dev/null | head -n 1); \
		[ -n "$$t" ] || { echo "make: cannot fetch the source of python-sarif-python-om (deb-src?)"; exit 1; }; \
		tar xf "$$t" --wildcards --strip-components=1 '*/sarif-2.1.0-rtm.4.json' && \
		mv sarif-2.1.0-rtm.4.json ../sarif-schema-2.1.0.json

.PHONY: sarif-schema
sarif-schema: $(SARIF_SCHEMA)

test: sarif-schema
