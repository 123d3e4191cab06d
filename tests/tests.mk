# tests.mk: the tests and benchmarks that need no server, and the names that
# run the others (included by the Makefile, after PGXS).
#   make unit-test      C tests of src/shared
#   make sqlite-test    the replica extension: C suite, then SQL through sqlite3
#   make bench-replica  the replica's benchmark (ratios against plain SQLite)
#   make bench-replica-schema  a snapshot of many tables or columns: its growth
#   make bench-apply-fixed  the agent's calls a message, against plain upserts
#   make installcheck   pg_regress and isolation specs (PGXS), against a running server
#   make test           scripts/test, every suite;  make demo: scripts/demo
#   make check-long     the long walk: the oracle walk, the storm for
#                       CHECK_LONG_STEPS steps each, and the zbugs walk
#                       (ZBUGS_SCALE; not in scripts/test)

# Under AddressSanitizer and UBSan.
SAN_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -g \
	-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	-Isrc/shared -Isrc/sqlite -Itests/unit $(MS_VERSION_FLAG)
build/san/%.o: %.c $(SHARED_HDRS) $(wildcard src/sqlite/*.h tests/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -c $< -o $@

# The unit tests hold the server's seal (seal.c, libcrypto), its signature
# (sign.c) and the check of it (verify.c, both libsodium) to the
# vectors; the replica's suites link what a replica links, and seal and sign
# their pretend server's messages themselves (tests/sqlite/seal.c).
build/test_shared: $(patsubst %.c,build/san/%.o,$(wildcard tests/unit/*.c) $(ALL_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(SQLITE_LIBS) -lcrypto
build/test_sqlite: $(patsubst %.c,build/san/%.o,$(wildcard tests/sqlite/*.c) tests/unit/vectors.c $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
build/fuzz_seeds: $(patsubst %.c,build/san/%.o,$(wildcard tests/fuzz/*.c) tests/sqlite/msgs.c tests/sqlite/seal.c tests/unit/vectors.c $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
# the agent under the sanitizers, for tests/sqlite/test_sneakernet.py (AGENT=build/agent_san)
build/san/src/agent/%.o: src/agent/%.c $(wildcard src/agent/*.h) $(SHARED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -c $< -o $@
build/agent_san: $(patsubst %.c,build/san/%.o,$(AGENT_SRCS) $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -L$(shell $(PG_CONFIG) --libdir) -lpq -lsqlite3 $(SQLITE_LIBS)
# the agent's SQLite side (src/agent/replica.c) against the replica extension
build/test_agent_replica: $(patsubst %.c,build/san/%.o,tests/agent/test_replica.c src/agent/replica.c src/agent/replica_up.c tests/sqlite/msgs.c tests/sqlite/seal.c $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
build/bench_replica_apply: $(addprefix build/rel/,bench/replica_apply.o tests/sqlite/msgs.o tests/sqlite/seal.o $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
build/bench_apply_fixed: $(addprefix build/rel/,bench/apply_fixed.o tests/sqlite/msgs.o tests/sqlite/seal.o $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
# the agent's own replica.c, its SQLite side of a round
build/bench_apply_agent: $(addprefix build/rel/,bench/apply_agent.o src/agent/replica.o src/agent/replica_up.o tests/sqlite/msgs.o tests/sqlite/seal.o $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
build/bench_apply_dump: $(addprefix build/rel/,bench/apply_dump.o $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)
build/bench_replica_schema: $(addprefix build/rel/,bench/replica_schema.o tests/sqlite/msgs.o tests/sqlite/seal.o $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

EXTRA_CLEAN += results regression.diffs regression.out tests/isolation/output_iso

.PHONY: test unit-test sqlite-test demo bench-replica bench-replica-schema bench-apply-fixed check-long
unit-test: build/test_shared
	build/test_shared
sqlite-test: build/test_sqlite build/test_agent_replica magic_sync_sqlite.so
	build/test_sqlite
	build/test_agent_replica
	# again as the agent runs it: statements kept between calls (sync_keep_statements)
	MS_TEST_KEEP=1 MS_TESTS_SKIP=oom build/test_sqlite
	# and out of memory with statements kept, every 8th allocation (15 s; all of them: 2 min)
	MS_TEST_KEEP=1 MS_TESTS=oom MS_OOM_STRIDE=8 build/test_sqlite
	tests/sqlite/run-sql
bench-replica: build/bench_replica_apply
	build/bench_replica_apply
bench-replica-schema: build/bench_replica_schema
	build/bench_replica_schema
bench-apply-fixed: build/bench_apply_fixed
	build/bench_apply_fixed
test:
	scripts/test
demo:
	scripts/demo
CHECK_LONG_STEPS ?= 100000
check-long:
	CHECK_LONG_STEPS=$(CHECK_LONG_STEPS) tests/e2e/long.sh
include tests/cross/cross.mk
