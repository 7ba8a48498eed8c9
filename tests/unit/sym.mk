# tests/unit/sym.mk - unit tests of the symbolizer, site printing and JSON writer
#
# Included by tests/tests.mk.  Both tests build with the analyzer's flags
# (sanitizers too under make SANITIZE=...) and end with "N passed, N failed".
#
#   make unit-json        analyzer/json.c: escaping, nesting, pretty layout
#   make unit-symbolize   analyzer/symbolize.c + site.c against libsymtarget.so,
#                         a -O2 library whose call sites know their lines

SYMU_DIR = $(BUILD)/unit
SYMU_TDIR = $(SYMU_DIR)/symtarget
SYMU_TLIBS = $(SYMU_TDIR)/libsymtarget.so $(SYMU_TDIR)/libsymtarget_stripped.so \
	     $(SYMU_TDIR)/libsymtarget_other.so $(SYMU_TDIR)/libsymtarget_split.so
SYMU_TFLAGS = -g -O2 -fPIC -fno-omit-frame-pointer -Wall -Wextra -Werror

$(SYMU_DIR)/test_json: tests/unit/test_json.c $(BUILD)/obj/analyzer/json.o analyzer/json.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/json.o -lm

# Absolute source paths, so that DWARF names the files the test reads.
$(SYMU_TDIR)/symtarget.o: tests/unit/symtarget.c tests/unit/symtarget.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(SYMU_TFLAGS) -c $(CURDIR)/$< -o $@

$(SYMU_TDIR)/symtarget_cpp.o: tests/unit/symtarget_cpp.cpp tests/unit/symtarget.h
	@mkdir -p $(dir $@)
	$(CXX) $(SYMU_TFLAGS) -fno-exceptions -fno-rtti -c $(CURDIR)/$< -o $@

SYMU_TOBJ = $(SYMU_TDIR)/symtarget.o $(SYMU_TDIR)/symtarget_cpp.o

$(SYMU_TDIR)/libsymtarget.so: $(SYMU_TOBJ)
	$(CC) -shared -Wl,--build-id=sha1 -o $@ $(SYMU_TOBJ)

# The same library rebuilt with another build-id: "changed since recorded".
$(SYMU_TDIR)/libsymtarget_other.so: $(SYMU_TOBJ)
	$(CC) -shared -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 \
		-o $@ $(SYMU_TOBJ)

$(SYMU_TDIR)/libsymtarget_stripped.so: $(SYMU_TDIR)/libsymtarget.so
	strip --strip-all -o $@ $<

# DWARF moved to a separate file found through .gnu_debuglink.
$(SYMU_TDIR)/libsymtarget_split.so: $(SYMU_TDIR)/libsymtarget.so
	objcopy --only-keep-debug $< $(SYMU_TDIR)/libsymtarget_split.debug
	cd $(SYMU_TDIR) && objcopy --strip-debug \
		--add-gnu-debuglink=libsymtarget_split.debug libsymtarget.so libsymtarget_split.so

SYMU_SYM_OBJ = $(BUILD)/obj/analyzer/symbolize.o $(BUILD)/obj/analyzer/sympool.o \
	       $(BUILD)/obj/analyzer/rustdemangle.o \
	       $(BUILD)/obj/analyzer/site.o \
	       $(BUILD)/obj/analyzer/json.o

$(SYMU_DIR)/test_symbolize: tests/unit/test_symbolize.c tests/unit/symtarget.h $(SYMU_SYM_OBJ) \
		$(wildcard analyzer/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -DSYM_SRCDIR='"$(CURDIR)/tests/unit"' -o $@ $< \
		$(SYMU_SYM_OBJ) $(ANA_LIBS) -ldl

unit-json: $(SYMU_DIR)/test_json
	$(SYMU_DIR)/test_json

unit-symbolize: $(SYMU_DIR)/test_symbolize $(SYMU_TLIBS)
	$(SYMU_DIR)/test_symbolize $(abspath $(SYMU_TDIR))

.PHONY: unit-json unit-symbolize
