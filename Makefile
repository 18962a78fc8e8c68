# bulkhead: plain GNU make. Sources are found by directory, so adding a file
# to sentry/, oci/, supervisor/ or tests/ needs no edit here.
#
#   make                 all binaries into build/
#   make SANITIZE=address,undefined   the same objects instrumented, into build/san/
#   make test            unit tests, end-to-end tests, leak check (test build:
#                        build/test, with the test hooks compiled in)
#   make demo            Python and Node run in a sandbox on the embedded default
#   make bench [BENCH_ARGS=--quick]
#   make install PREFIX=/usr/local
#   make deps            the Debian packages the build and tests need

CC       ?= cc
PREFIX   ?= /usr/local
SANITIZE ?=
PKGS     := libseccomp libcap libnl-3.0 libnl-route-3.0 libprotobuf-c jansson

ifeq ($(SANITIZE),)
BUILD    ?= build
SANFLAGS :=
else
BUILD    ?= build/san
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
export LSAN_OPTIONS := suppressions=$(abspath tests/lsan.supp):print_suppressions=0
export UBSAN_OPTIONS := print_stacktrace=1
endif

# The front end and the sentry are exec'd once per sandbox, on the start-up
# path: static-pie, so no loader maps libraries or resolves symbols before
# main (sentry/README.md, "Speed"). Sanitizer runtimes need the loader.
# glibc warns at link time that libnl's unused getaddrinfo/getprotobyname
# would need NSS at run time; neither binary calls them.
ifeq ($(SANITIZE),)
STARTUP_LINK := -static-pie
STARTUP_LIBS  = $(PKG_LIBS) -lpthread
else
STARTUP_LINK :=
STARTUP_LIBS  = -Wl,-Bstatic $(PKG_LIBS) -Wl,-Bdynamic -lpthread
endif

# Test hooks (BULKHEAD_TEST_BREAK, sentry/probe.h) exist only in the test
# build: `make test`, `test-run`, `unit` and `e2e` build everything again into
# $(BUILD)/test with BH_TEST_HOOKS, a tree of its own, so the binaries `make`
# and `make demo` build never read a hook and neither rebuilds the other's.
TEST_BUILD := $(BUILD)/test
ifeq ($(BH_TEST_HOOKS),1)
HOOKFLAGS := -DBH_TEST_HOOKS
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -fno-strict-aliasing \
            -Isentry -I$(BUILD)/gen $(PKG_CFLAGS) $(SANFLAGS) $(HOOKFLAGS) -MMD -MP
LDFLAGS  += $(SANFLAGS)
LDLIBS   += $(PKG_LIBS) -lpthread

# The sentry program and the probe have their own main; everything else in
# sentry/ is the core library every front end links.
SENTRY_MAINS := sentry/sentry-main.c sentry/probe-main.c
LIB_SRC      ?= $(filter-out $(SENTRY_MAINS),$(wildcard sentry/*.c))
OCI_SRC      ?= $(wildcard oci/*.c)
SUP_SRC      ?= $(wildcard supervisor/*.c)
PROTO        := $(wildcard proto/*.proto)
PROTO_C      := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTO))
PROTO_H      := $(PROTO_C:.c=.h)
UNIT_SRC     ?= $(wildcard tests/unit/*.c)
E2E_SRC      ?= $(wildcard tests/e2e/*.c)
BENCH_SRC    := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB      := $(BUILD)/libsentry.a
# The control protocol's generated code: only its speakers link it.
PROTO_LIB := $(BUILD)/libbhproto.a
BINS     := $(BUILD)/bulkhead $(BUILD)/bulkheadd $(BUILD)/bulkhead-sentry $(BUILD)/bulkhead-probe
POLICIES := $(patsubst seccomp-policies/%,$(BUILD)/seccomp-policies/%,$(wildcard seccomp-policies/*.policy))
RUNNERS  := $(patsubst supervisor/runners/%,$(BUILD)/runners/%,$(wildcard supervisor/runners/*.py supervisor/runners/*.js))

.PHONY: all test test-run unit e2e leakcheck demo bench bench-quick fuzz install clean deps format lint
.DEFAULT_GOAL := all

all: $(BINS) $(POLICIES) $(RUNNERS)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	protoc-c --proto_path=proto --c_out=$(BUILD)/gen $<

# Generated headers must exist before any object that may include them.
$(call obj,$(LIB_SRC) $(OCI_SRC) $(SUP_SRC) $(UNIT_SRC) $(E2E_SRC) $(BENCH_SRC) $(SENTRY_MAINS)): | $(PROTO_H)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# `bulkhead --version` prints the commit, as runc's does.
$(BUILD)/obj/oci/main.o: CFLAGS += -DBH_GIT_COMMIT='"$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)"'

$(BUILD)/obj/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wno-unused-parameter -c -o $@ $<

PROTO_OBJ := $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_C))

$(LIB): $(call obj,$(LIB_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(PROTO_LIB): $(PROTO_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bulkhead: $(call obj,$(OCI_SRC)) $(PROTO_LIB) $(LIB)
	$(CC) $(LDFLAGS) $(STARTUP_LINK) -o $@ $^ $(LDLIBS)

$(BUILD)/bulkheadd: $(call obj,$(SUP_SRC)) $(PROTO_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bulkhead-sentry: $(call obj,sentry/sentry-main.c) $(LIB)
	$(CC) $(LDFLAGS) $(STARTUP_LINK) -o $@ $^ $(STARTUP_LIBS)

# The probe runs inside any rootfs, so it carries its own libc. It is never
# instrumented: sanitizer runtimes make syscalls the probe must not.
$(BUILD)/bulkhead-probe: sentry/probe-main.c sentry/probe-report.h sentry/proc-status.h \
                          sentry/kernel-compat.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isentry -static -o $@ $<

$(BUILD)/seccomp-policies/%: seccomp-policies/%
	@mkdir -p $(@D)
	cp $< $@

$(BUILD)/runners/%: supervisor/runners/%
	@mkdir -p $(@D)
	cp $< $@

# ---- tests ---------------------------------------------------------------
$(BUILD)/tests/unit: $(call obj,$(UNIT_SRC) supervisor/alloc.c) $(PROTO_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

$(BUILD)/tests/e2e: $(call obj,$(E2E_SRC)) $(PROTO_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

# Where bulkhead's cgroups live, as the core answers it (tests/leakcheck).
$(BUILD)/tests/cgroup-where: $(call obj,tests/tools/cgroup-where.c) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Criterion runs each test in its own process; -j2 matches the machine.
CRITERION_ARGS ?= --jobs 2
export BULKHEAD_BUILD := $(abspath $(BUILD))

# test and demo are the README's set-up commands: on a fresh machine they
# install what is missing first, then re-read this Makefile (pkg-config
# flags are computed when it is read).
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory test-run

ifneq ($(BH_TEST_HOOKS),1)
# The production build too: a test checks that its binaries hold no hook.
test-run unit e2e: all
	@BULKHEAD_PRODUCTION_BUILD=$(abspath $(BUILD)) \
	    $(MAKE) --no-print-directory BUILD=$(TEST_BUILD) BH_TEST_HOOKS=1 $@
else
test-run: all $(BUILD)/tests/unit $(BUILD)/tests/e2e $(BUILD)/tests/cgroup-where
	tests/run-tests $(BUILD) $(CRITERION_ARGS)

unit: all $(BUILD)/tests/unit
	$(BUILD)/tests/unit $(CRITERION_ARGS)

e2e: all $(BUILD)/tests/e2e $(BUILD)/tests/cgroup-where
	$(BUILD)/tests/e2e $(CRITERION_ARGS)
endif

leakcheck:
	tests/leakcheck

demo:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	tests/demo $(BUILD)

# The syscall benchmark runs inside any rootfs, so it is static like the probe.
$(BUILD)/bench/syscalls: bench/syscalls.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -static -o $@ $<

$(BUILD)/bench/%: bench/%.c $(PROTO_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: all $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
	bench/run --build $(BUILD) $(BENCH_ARGS)

bench-quick:
	$(MAKE) bench BENCH_ARGS=--quick

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/bulkhead/seccomp-policies \
	    $(DESTDIR)$(PREFIX)/lib/bulkhead/runners
	install -m 0755 $(BUILD)/bulkhead $(BUILD)/bulkheadd $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/bulkhead-sentry $(BUILD)/bulkhead-probe $(DESTDIR)$(PREFIX)/lib/bulkhead/
	install -m 0644 seccomp-policies/*.policy $(DESTDIR)$(PREFIX)/lib/bulkhead/seccomp-policies/
	if ls supervisor/runners/*.* >/dev/null 2>&1; then \
	    install -m 0644 supervisor/runners/*.* $(DESTDIR)$(PREFIX)/lib/bulkhead/runners/; fi

clean:
	rm -rf build

# Exactly what building and testing need; tests/deps-e2e adds docker and friends.
DEB_PACKAGES := build-essential pkg-config libseccomp-dev libcap-dev libnl-3-dev libnl-route-3-dev \
    protobuf-c-compiler libprotobuf-c-dev libcriterion-dev libjansson-dev python3 nodejs iproute2 \
    python3-matplotlib protobuf-compiler

# make fuzz needs clang's libFuzzer as well: `make deps DEPS_EXTRA="clang libclang-rt-14-dev"`.
DEPS_EXTRA ?=

deps:
	@missing=$$(for p in $(DEB_PACKAGES) $(DEPS_EXTRA); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	    | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@# clients/typescript's tests; a nodejs that ships its own npm (NodeSource) conflicts with Debian's
	@command -v npm >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	    --inline-suppr -D_GNU_SOURCE -D__x86_64__ -D__linux__ -Isentry \
	    --suppress=missingIncludeSystem --suppress=missingInclude \
	    sentry oci supervisor

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# libFuzzer targets for every parser of outside input (tests/fuzz/).
-include tests/fuzz/fuzz.mk
