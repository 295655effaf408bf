# formats.mk - what the output formats' writers are built from.
#   make build/gen/profile.pb-c.c    pprof's messages, generated from
#                                    proto/profile.proto by protoc-c (protobuf-c)

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

GEN_HEADERS += $(B)/gen/profile.pb-c.h
