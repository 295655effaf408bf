# lua.mk - the Lua API: nupp.profile and its submodules, plus zone_state.so.
#   make lua           build/lua/ holds the modules as they install
#   make test-lua      the API tests, in-process backend unless NUPP_BACKEND=bpf
#   make bench-zone    ns per zone enter+leave, gate closed and open
#   make install-lua   LUA_LMOD_DIR / LUA_CMOD_DIR, derived from PREFIX
# Another makefile adds generated modules with `lua: $(B)/lua/nupp/...`.

LUAJIT   ?= /usr/bin/luajit
LUA_DIR  := $(B)/lua
LUA_SRCS := $(shell find lua -name '*.lua')
LUA_MODS := $(patsubst lua/%,$(LUA_DIR)/%,$(LUA_SRCS))
ZONE_SO  := $(LUA_DIR)/nupp/profile/zone_state.so
SDT_INC  ?= /usr/include/x86_64-linux-gnu

# Where /usr/bin/luajit's package.path and package.cpath look: Debian's
# multiarch directory for PREFIX=/usr, the plain Lua layout elsewhere.
LUA_LMOD_DIR ?= $(PREFIX)/share/lua/5.1
ifeq ($(PREFIX),/usr)
LUA_CMOD_DIR ?= $(PREFIX)/lib/x86_64-linux-gnu/lua/5.1
else
LUA_CMOD_DIR ?= $(PREFIX)/lib/lua/5.1
endif

.PHONY: lua test-lua bench-zone install-lua

all: lua
lua: $(LUA_MODS) $(ZONE_SO)

$(LUA_DIR)/%.lua: lua/%.lua
	$(call msg,CP,$@)
	$(Q)mkdir -p $(@D) && cp $< $@

$(ZONE_SO): user/zones/zone_state.c user/zones/zone_state.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CFLAGS) -fPIC -shared -Iuser -I$(SDT_INC) \
		$< -o $@ -lpthread

# The tests find the modules (and the generated reason catalog) in the build tree.
LUA_TEST_ENV = LUA_PATH='$(CURDIR)/$(LUA_DIR)/?.lua;;' \
	LUA_CPATH='$(CURDIR)/$(LUA_DIR)/?.so;;' LUAJIT=$(LUAJIT)


test-lua: lua
	$(call msg,TEST,tests/lua_api/test_lua_api.py)
	$(Q)$(LUA_TEST_ENV) $(PYTHON) -m pytest -q tests/lua_api/test_lua_api.py

bench-zone: lua
	$(Q)$(LUA_TEST_ENV) $(LUAJIT) scripts/bench-zone.lua

install: install-lua
install-lua: lua
	$(call msg,INSTALL,$(DESTDIR)$(LUA_LMOD_DIR) $(DESTDIR)$(LUA_CMOD_DIR))
	$(Q)cd $(LUA_DIR) && find . -name '*.lua' | while read -r f; do \
		install -D -m 644 "$$f" "$(DESTDIR)$(LUA_LMOD_DIR)/$$f" || exit 1; done
	$(Q)install -D -m 755 $(ZONE_SO) $(DESTDIR)$(LUA_CMOD_DIR)/nupp/profile/zone_state.so
	$(Q)install -D -m 644 types/nupp/profile.d.tl $(DESTDIR)$(LUA_LMOD_DIR)/nupp/profile.d.tl
