# formats.mk - what the output formats' writers are built from.
#   make build/gen/profile.pb-c.c    pprof's messages, generated from
#                                    proto/profile.proto by protoc-c (protobuf-c)
#   make build/gen/flamegraph_js.h   the flame graph's script (user/profile/flamegraph.js)
#                                    as a C string, written into every SVG

PROTO_GEN := $(B)/gen/profile.pb-c.c $(B)/gen/profile.pb-c.h

$(B)/gen/profile.pb-c.c: proto/profile.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(@D) && protoc-c --proto_path=proto --c_out=$(@D) $<
$(B)/gen/profile.pb-c.h: $(B)/gen/profile.pb-c.c

$(B)/obj/profile.pb-c.o: $(PROTO_GEN)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(B)/libnupp.a: $(B)/obj/profile.pb-c.o

LDLIBS += -lprotobuf-c -lm

# Each line a C string literal; the script is ASCII, and must not close the
# SVG's CDATA section.
$(B)/gen/flamegraph_js.h: user/profile/flamegraph.js
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(@D) && ! grep -q ']]>' $< && \
		{ echo '/* Generated from user/profile/flamegraph.js by mk/formats.mk. */'; \
		  echo 'static const char flamegraph_js[] ='; \
		  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
		  echo ';'; } > $@

GEN_HEADERS += $(B)/gen/profile.pb-c.h $(B)/gen/flamegraph_js.h
