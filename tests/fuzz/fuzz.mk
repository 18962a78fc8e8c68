# libFuzzer targets for every parser of outside input (tests/fuzz/fuzz_*.c),
# included by the top Makefile.
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="control policy"]
#       builds every target and runs each for FUZZ_SECONDS (nice 10, one at a
#       time), then prints executions, coverage (cov/ft), corpus size and
#       crashes per target; fails when any target crashed, leaked or hung.
#   make fuzz-build      only builds them, into $(FUZZ_DIR)/
#       To run two targets at once on a 2-core machine, build first, then start
#       two `make fuzz FUZZ_TARGETS=...` (two makes building one FUZZ_DIR at the
#       same time race on its archive).
#   make fuzz-replay     runs every committed seed and reproducer once, under
#                        the sanitizers (tests/fuzz/regressions/NAME/ holds the
#                        reproducers whose defect only a sanitizer sees)
#
# Needs clang and its runtime: `apt-get install clang libclang-rt-14-dev`
# (Debian bookworm; clang 14 ships libFuzzer in libclang-rt-14-dev).
#
# Targets (each frees everything it allocates: ASan's leak check is on):
#   control      bytes from a client -> bulkheadd's frame reader, Request
#                decoding, version check and each procedure's validation
#                (no session can open: max_sessions is 0 in the harness)
#   cell_files   a RunCell's file list -> the daemon's checks of paths,
#                sizes and UTF-8, with an oracle for anything accepted
#   agent_reply  frames from the in-sandbox agent -> bhd_box_run's parser
#   oci_config   config.json -> oci_config_parse into a bh_sandbox_spec
#   oci_process  process.json (exec --process) and LinuxResources (update)
#   policy       seccomp policy text -> bh_policy_parse, and compile
#
# Working corpora and crash artifacts live in $(FUZZ_DIR)/{corpus,artifacts};
# the hand-written seeds in tests/fuzz/corpus/NAME/ are read, never written.
# Each target is also built with $(CC) into $(BUILD)/libfuzz-replay.a, which
# the unit tests link: tests/unit/test_fuzz_regressions.c replays every seed
# and every reproducer through the same entry points without clang.

FUZZ_CC      ?= clang
FUZZ_DIR     ?= $(BUILD)/fuzz-bin
FUZZ_SECONDS ?= 60
# Known findings the oracles may step over so fuzzing goes on past them while
# their fix is pending (each has a regression test in
# tests/unit/test_fuzz_regressions.c): FUZZ_TOLERATE=nul-truncation leaves
# cell file lists holding a NUL byte unjudged. Empty: every oracle is strict.
FUZZ_TOLERATE ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Others' files are compiled without -Werror: clang warns about things gcc
# does not, and a warning must not stop the fuzzing of a parser.
FUZZ_CFLAGS  := -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -fno-strict-aliasing \
                -Isentry -Isupervisor -Ioci -I$(BUILD)/gen $(PKG_CFLAGS) \
                -fsanitize=fuzzer-no-link $(FUZZ_SAN) -MMD -MP
FUZZ_LDFLAGS := -fsanitize=fuzzer $(FUZZ_SAN)

FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_COMMON  := tests/fuzz/fuzz-common.c
FUZZ_SUP_SRC := supervisor/daemon.c supervisor/box.c supervisor/server.c
FUZZ_OCI_SRC := $(filter-out oci/main.c,$(OCI_SRC))

fobj = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(1))

$(FUZZ_DIR)/obj/tests/fuzz/%.o: tests/fuzz/%.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Werror -DBH_LIBFUZZER -c -o $@ $<

$(FUZZ_DIR)/obj/%.o: %.c | $(PROTO_H)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-unused-parameter -c -o $@ $<

FUZZ_LIB := $(FUZZ_DIR)/libsentry-fuzz.a
$(FUZZ_LIB): $(call fobj,$(LIB_SRC) $(FUZZ_SUP_SRC) $(FUZZ_OCI_SRC) $(FUZZ_COMMON)) \
             $(patsubst $(BUILD)/gen/%.c,$(FUZZ_DIR)/obj/gen/%.o,$(PROTO_C))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $^ $(LDLIBS)

.PHONY: fuzz-build fuzz-replay
fuzz-build: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))

# One target at a time, niced: the machine is shared. The summary lines come
# from libFuzzer's own final report (-print_final_stats) and its last status.
fuzz: fuzz-build
	@fail=0; summary=""; \
	for t in $(FUZZ_TARGETS); do \
	    corpus=$(FUZZ_DIR)/corpus/$$t; art=$(FUZZ_DIR)/artifacts/$$t/; log=$(FUZZ_DIR)/$$t.log; \
	    mkdir -p $$corpus $$art; \
	    dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	    echo "==> fuzz_$$t for $(FUZZ_SECONDS) s"; \
	    BH_FUZZ_TOLERATE="$(FUZZ_TOLERATE)" nice -n 10 $(FUZZ_DIR)/fuzz_$$t $$corpus tests/fuzz/corpus/$$t $$dict \
	        -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	        -print_final_stats=1 -artifact_prefix=$$art >$$log 2>&1; rc=$$?; \
	    execs=$$(grep -a 'stat::number_of_executed_units' $$log | awk '{print $$2}'); \
	    last=$$(grep -a -E '^#[0-9]+' $$log | tail -n 1); \
	    cov=$$(echo "$$last" | LC_ALL=C grep -a -o 'cov: [0-9]*' | head -n 1 | cut -d' ' -f2); \
	    ft=$$(echo "$$last" | LC_ALL=C grep -a -o 'ft: [0-9]*' | head -n 1 | cut -d' ' -f2); \
	    files=$$(ls $$corpus | wc -l); crashes=$$(ls $$art | wc -l); \
	    line="fuzz_$$t: execs=$${execs:-?} cov=$${cov:-?} ft=$${ft:-?} corpus=$$files crashes=$$crashes exit=$$rc"; \
	    echo "$$line"; summary="$$summary$$line\n"; \
	    if [ $$rc -ne 0 ]; then fail=1; grep -a -A30 'ERROR: \|SUMMARY\|==ERROR' $$log | head -60; \
	        echo "log: $$log  artifacts: $$art"; fi; \
	done; \
	printf "\n== fuzz summary ($(FUZZ_SECONDS) s each)\n$$summary"; exit $$fail

# Replays with libFuzzer's own runner (no fuzzing): seeds and artifacts.
fuzz-replay: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	    BH_FUZZ_TOLERATE="$(FUZZ_TOLERATE)" $(FUZZ_DIR)/fuzz_$$t -runs=0 tests/fuzz/corpus/$$t \
	        $$(ls -d tests/fuzz/regressions/$$t 2>/dev/null) || exit 1; done

# ---- the replay archive the unit tests link ------------------------------
# The same harness sources built with $(CC) and $(CFLAGS) (no libFuzzer
# entry point), with the front-end objects they drive and the core library,
# so one archive resolves everything test_fuzz_regressions.c reaches.
FUZZ_REPLAY_SRC := $(FUZZ_COMMON) $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY     := $(BUILD)/libfuzz-replay.a
$(call obj,$(FUZZ_REPLAY_SRC)): CFLAGS += -Isupervisor -Ioci
$(call obj,$(FUZZ_REPLAY_SRC)): | $(PROTO_H)
$(FUZZ_REPLAY): $(call obj,$(FUZZ_REPLAY_SRC) $(FUZZ_SUP_SRC) $(FUZZ_OCI_SRC) $(LIB_SRC)) $(PROTO_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
# Only when the regression tests are part of this build (UNIT_SRC may be
# narrowed), so nobody else's unit build compiles the front ends for it.
ifneq ($(filter tests/unit/test_fuzz_regressions.c,$(UNIT_SRC)),)
$(BUILD)/tests/unit: $(FUZZ_REPLAY)
endif
$(call obj,tests/unit/test_fuzz_regressions.c): CFLAGS += -Itests/fuzz -Isupervisor -Ioci \
    -DBH_FUZZ_CORPUS_DIR='"$(CURDIR)/tests/fuzz/corpus"'

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
