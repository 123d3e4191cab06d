# tests/fuzz/fuzz.mk: the libFuzzer targets, included by the Makefile.
#
#   make fuzz                          each target for FUZZ_SECONDS (30), as scripts/test does
#   make fuzz-long FUZZ_SECONDS=3600   each target for as long as asked
#   make fuzz-build                    only build them (build/fuzz/bin/)
#   make fuzz-corpus                   write the seed corpus (tests/fuzz/corpus/) again
#
# The targets (tests/fuzz/targets/, and tests/fuzz/fuzz_seeds.c as a
# libFuzzer target) are built with clang, -fsanitize=fuzzer,address,undefined;
# tests/fuzz/run runs them and fails on any finding (crash, leak, UB, timeout).
# FUZZ_TARGETS names a subset.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 30
FUZZ_TARGETS ?= apply_raw apply_chain wire key up bundle
FUZZ_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -g \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	-Isrc/shared -Isrc/sqlite -Itests/sqlite -Itests/unit -Itests/fuzz/targets $(MS_VERSION_FLAG)
FUZZ_LINK = -fsanitize=fuzzer,address,undefined

# the replica's share of src/shared (no seal.c, no libcrypto), as the replica links it
FUZZ_SHARED_OBJS = $(addprefix build/fuzz/,$(REPLICA_SHARED_SRCS:.c=.o))
FUZZ_SQLITE_OBJS = $(addprefix build/fuzz/,$(SQLITE_SRCS:.c=.o) tests/sqlite/msgs.o tests/sqlite/seal.o)
FUZZ_HDRS = $(SHARED_HDRS) $(wildcard src/sqlite/*.h tests/sqlite/msgs.h tests/fuzz/targets/*.h)

build/fuzz/%.o: %.c src/shared/sync.pb-c.h $(FUZZ_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

# fuzz_seeds.c's own libFuzzer entry, raw bytes through sync_apply (its seed runner unused)
build/fuzz/apply_raw.o: tests/fuzz/fuzz_seeds.c src/shared/sync.pb-c.h $(FUZZ_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DMS_LIBFUZZER -Wno-unused-function -c $< -o $@

build/fuzz/bin/apply_raw: build/fuzz/apply_raw.o $(FUZZ_SQLITE_OBJS) $(FUZZ_SHARED_OBJS)
build/fuzz/bin/apply_chain: build/fuzz/tests/fuzz/targets/apply_chain.o build/fuzz/tests/fuzz/targets/chain_values.o \
	build/fuzz/tests/fuzz/targets/fuzz.o \
	$(FUZZ_SQLITE_OBJS) $(FUZZ_SHARED_OBJS)
build/fuzz/bin/wire build/fuzz/bin/key build/fuzz/bin/bundle: build/fuzz/bin/%: build/fuzz/tests/fuzz/targets/%.o \
	build/fuzz/tests/fuzz/targets/fuzz.o $(FUZZ_SHARED_OBJS)
build/fuzz/bin/up: build/fuzz/tests/fuzz/targets/up.o build/fuzz/tests/fuzz/targets/fuzz.o \
	build/fuzz/tests/sqlite/msgs.o build/fuzz/tests/sqlite/seal.o $(FUZZ_SHARED_OBJS)
$(addprefix build/fuzz/bin/,$(FUZZ_TARGETS)):
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LINK) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

# the corpus writer: an ordinary program (gcc, ASan), over the test helpers
build/fuzz_corpus: $(patsubst %.c,build/san/%.o,tests/fuzz/targets/write_corpus.c tests/sqlite/msgs.c tests/sqlite/seal.c \
	tests/unit/vectors.c $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

.PHONY: fuzz fuzz-long fuzz-build fuzz-corpus
fuzz-build: $(addprefix build/fuzz/bin/,$(FUZZ_TARGETS))
fuzz: fuzz-build
	tests/fuzz/run $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-long: fuzz-build
	FUZZ_JOBS=$${FUZZ_JOBS:-1} tests/fuzz/run $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-corpus: build/fuzz_corpus
	build/fuzz_corpus tests/fuzz/seeds tests/fuzz/corpus
