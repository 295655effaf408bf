-- LuaRocks package of the nupp.profile Lua API. Builds with mk/lua.mk, so the
-- modules, the generated reason catalog and zone_state.so install exactly as
-- `make install-lua` puts them.
rockspec_format = "3.0"
package = "nupp-profile"
version = "scm-1"
source = {
   url = "git+https://github.com/nupp/nupp-bpf.git",
}
description = {
   summary = "LuaJIT sampling and trace-abort profiler API with gated zones",
   detailed = [[
      nupp.profile samples where the time went and collects the JIT's trace
      aborts, attributed to nupp.profile.zone paths. It runs on BPF probes
      when the nupp-bpf C module can attach them, in-process otherwise.
   ]],
   license = "MIT",
}
dependencies = {
   "lua == 5.1",
}
supported_platforms = { "linux" }
build = {
   type = "make",
   build_target = "lua",
   build_variables = {
      CFLAGS = "$(CFLAGS)",
   },
   install_target = "install-lua",
   install_variables = {
      PREFIX = "$(PREFIX)",
      LUA_LMOD_DIR = "$(LUADIR)",
      LUA_CMOD_DIR = "$(LIBDIR)",
   },
}
