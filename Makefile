# magic_sync: the PostgreSQL extension (PGXS), the SQLite loadable extension,
# the replica agent and the tests, from one tree.  scripts/test runs them all.

EXTENSION = magic_sync
MODULE_big = magic_sync
PG_CONFIG ?= pg_config

SHARED_SRCS = $(filter-out src/shared/sync.pb-c.c,$(wildcard src/shared/*.c)) src/shared/sync.pb-c.c
# src/pg reads in the data path's order: declare/, relay/, transport/, read/,
# over the module's ground in src/pg itself.
PG_DIRS = src/pg src/pg/declare src/pg/relay src/pg/transport src/pg/read
PG_SRCS = $(wildcard $(addsuffix /*.c,$(PG_DIRS)))
SQLITE_SRCS = $(wildcard src/sqlite/*.c)
AGENT_SRCS = $(wildcard src/agent/*.c)

OBJS = $(PG_SRCS:.c=.o) $(SHARED_SRCS:.c=.o)
# The extension script is put together from one part per concept (src/pg/sql).
DATA_built = sql/magic_sync--0.1.sql
SHLIB_LINK = -lprotobuf-c -lcrypto

REGRESS = $(basename $(notdir $(wildcard sql/[0-9]*.sql)))
REGRESS_OPTS = --load-extension=magic_sync
ISOLATION = $(basename $(notdir $(wildcard tests/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=tests/isolation --load-extension=magic_sync

# Server headers are system headers to us: our own code must be warning-free.
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server) -Isrc/shared $(addprefix -I,$(PG_DIRS))
PG_CFLAGS = -std=gnu11 -Wall -Wextra -Werror

EXTRA_CLEAN = src/shared/sync.pb-c.c src/shared/sync.pb-c.h magic_sync_sqlite.so \
	magic_sync_agent build results tests/isolation/output_iso regression.diffs regression.out

# No JIT bitcode: it would need clang on every machine that builds us.
with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

all: magic_sync_sqlite.so $(if $(AGENT_SRCS),magic_sync_agent)

# Generated protobuf-c code: produced by the build from the .proto.
src/shared/sync.pb-c.c src/shared/sync.pb-c.h: src/shared/sync.proto
	protoc-c --c_out=src/shared --proto_path=src/shared $<
$(OBJS) $(SQLITE_SRCS:.c=.o) $(AGENT_SRCS:.c=.o): src/shared/sync.pb-c.h
# Headers, coarsely: an object is rebuilt when a header of its part changes
# (a struct's layout must never differ between two objects of one library).
SHARED_HDRS = $(wildcard src/shared/*.h)
$(OBJS): $(wildcard $(addsuffix /*.h,$(PG_DIRS))) $(SHARED_HDRS)
$(addprefix build/rel/,$(SHARED_SRCS:.c=.o)) $(addprefix build/san/,$(SHARED_SRCS:.c=.o)): $(SHARED_HDRS)
$(addprefix build/rel/,$(SQLITE_SRCS:.c=.o)) $(addprefix build/san/,$(SQLITE_SRCS:.c=.o)): $(wildcard src/sqlite/*.h) $(SHARED_HDRS)

sql/magic_sync--0.1.sql: $(sort $(wildcard src/pg/sql/*.sql))
	cat $^ > $@

# The replica side: a SQLite loadable extension, built without PostgreSQL.
OWN_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -g -fPIC -Isrc/shared
SQLITE_LIBS = -lprotobuf-c -lcrypto

build/rel/%.o: %.c src/shared/sync.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(OWN_CFLAGS) -c $< -o $@

magic_sync_sqlite.so: $(addprefix build/rel/,$(SQLITE_SRCS:.c=.o) $(SHARED_SRCS:.c=.o))
	$(CC) -shared -o $@ $^ $(SQLITE_LIBS)

# The replica agent: libpq, SQLite, and the replica extension linked in
# (registered with sqlite3_auto_extension), so it needs no .so at run time.
build/rel/src/agent/%.o: src/agent/%.c src/agent/agent.h src/shared/sync.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(OWN_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -c $< -o $@

magic_sync_agent: $(addprefix build/rel/,$(AGENT_SRCS:.c=.o) $(SQLITE_SRCS:.c=.o) $(SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -L$(shell $(PG_CONFIG) --libdir) -lpq -lsqlite3 $(SQLITE_LIBS)

# make install also puts the agent beside PostgreSQL's programs and the
# replica extension beside the server's library.
install: install-replica
uninstall: uninstall-replica
.PHONY: install-replica uninstall-replica
install-replica: magic_sync_sqlite.so $(if $(AGENT_SRCS),magic_sync_agent)
	$(MKDIR_P) '$(DESTDIR)$(bindir)' '$(DESTDIR)$(pkglibdir)'
	$(INSTALL_SHLIB) magic_sync_sqlite.so '$(DESTDIR)$(pkglibdir)/magic_sync_sqlite.so'
	$(if $(AGENT_SRCS),$(INSTALL_PROGRAM) magic_sync_agent '$(DESTDIR)$(bindir)/magic_sync_agent')
uninstall-replica:
	rm -f '$(DESTDIR)$(pkglibdir)/magic_sync_sqlite.so' '$(DESTDIR)$(bindir)/magic_sync_agent'

# Tests of src/shared and src/sqlite, under AddressSanitizer and UBSan.
SAN_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -g \
	-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Isrc/shared -Isrc/sqlite -Itests/unit

build/san/%.o: %.c src/shared/sync.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -c $< -o $@

build/test_shared: $(addprefix build/san/,tests/unit/test_shared.o tests/unit/vectors.o $(SHARED_SRCS:.c=.o))
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(SQLITE_LIBS)

build/test_sqlite: $(patsubst %.c,build/san/%.o,$(wildcard tests/sqlite/*.c) tests/unit/vectors.c $(SQLITE_SRCS) $(SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

build/fuzz_seeds: $(patsubst %.c,build/san/%.o,$(wildcard tests/fuzz/*.c) tests/sqlite/msgs.c tests/unit/vectors.c $(SQLITE_SRCS) $(SHARED_SRCS))
	$(CC) $(SAN_CFLAGS) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

# Benchmarks of the replica (not tests): ratios against plain SQLite, same run.
build/bench_replica_apply: $(addprefix build/rel/,bench/replica_apply.o tests/sqlite/msgs.o $(SQLITE_SRCS:.c=.o) $(SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -lsqlite3 $(SQLITE_LIBS)

.PHONY: test unit-test sqlite-test demo bench-replica
bench-replica: build/bench_replica_apply
	build/bench_replica_apply
test:
	scripts/test
unit-test: build/test_shared
	build/test_shared
sqlite-test: build/test_sqlite magic_sync_sqlite.so
	build/test_sqlite
	tests/sqlite/run-sql
demo:
	scripts/demo
include tests/fuzz/fuzz.mk
