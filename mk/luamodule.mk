# luamodule.mk - nupp.profile.bpf, the C module behind require("nupp.profile")
# when BPF can be used: the sampler and the trace collector on the own process.

LUA_BPF_SO := $(B)/lua/nupp/profile/bpf.so

$(LUA_BPF_SO): user/lua/lua_module.c $(B)/libnupp.a
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) -I/usr/include/luajit-2.1 $(CFLAGS) -fPIC -shared \
		$< $(B)/libnupp.a $(LDLIBS) -lpthread -o $@

all: $(LUA_BPF_SO)
lua: $(LUA_BPF_SO)

install-lua: install-lua-bpf
install-lua-bpf: $(LUA_BPF_SO)
	$(Q)install -D -m 755 $(LUA_BPF_SO) $(DESTDIR)$(LUA_CMOD_DIR)/nupp/profile/bpf.so
.PHONY: install-lua-bpf
