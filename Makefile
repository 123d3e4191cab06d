# magic_sync: the PostgreSQL extension (PGXS), and beside it the SQLite
# replica extension and the agent, from one tree.  Tests and benchmarks:
# tests/tests.mk.  scripts/test runs them all.

EXTENSION = magic_sync
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)
# The one version: the replica extension and the agent are built with it.
MS_VERSION_FLAG = -DMS_VERSION='"$(EXTVERSION)"'
# The newest script is put together from one part per concept (src/pg/sql);
# every shipped script is frozen (sql/shipped.sha256): a change goes into an upgrade.
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql))

REGRESS = $(basename $(notdir $(wildcard sql/[0-9]*.sql)))
REGRESS_OPTS = --load-extension=$(EXTENSION)
ISOLATION = $(basename $(notdir $(wildcard tests/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=tests/isolation --load-extension=$(EXTENSION)

# src/pg reads in the data path's order: declare/, relay/, transport/, read/,
# over the module's ground in src/pg itself; src/shared is both sides' core.
MODULE_big = $(EXTENSION)
PG_DIRS = src/pg src/pg/declare src/pg/relay src/pg/transport src/pg/read
PG_SRCS = $(wildcard $(addsuffix /*.c,$(PG_DIRS)))
ALL_SHARED_SRCS = $(filter-out src/shared/sync.pb-c.c,$(wildcard src/shared/*.c)) src/shared/sync.pb-c.c
SHARED_SRCS = $(ALL_SHARED_SRCS)
OBJS = $(PG_SRCS:.c=.o) $(SHARED_SRCS:.c=.o)
SHLIB_LINK = -lprotobuf-c -lcrypto -lsodium
PG_CONFIG ?= pg_config
# Server headers are system headers to us: our own code must be warning-free.
PG_CPPFLAGS = -isystem $(shell $(PG_CONFIG) --includedir-server) -Isrc/shared $(addprefix -I,$(PG_DIRS))
PG_CFLAGS = -std=gnu11 -Wall -Wextra -Werror
EXTRA_CLEAN = src/shared/sync.pb-c.c src/shared/sync.pb-c.h magic_sync_sqlite.so magic_sync_agent build

# No JIT bitcode: it would need clang wherever we are built.  PGXS's
# Makefile.global sets with_llvm, and pgxs.mk decides on it as it is read, so
# only an override set before the include wins.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

all: shipped magic_sync_sqlite.so magic_sync_agent

# A shipped script is never edited: a change goes into the next upgrade script.
.PHONY: shipped
shipped:
	@sha256sum --check --quiet sql/shipped.sha256 || { echo "a shipped extension script changed:" \
		"put the change into the next version's upgrade script instead (sql/shipped.sha256)"; exit 1; }
$(DATA_built): $(sort $(wildcard src/pg/sql/*.sql)) | shipped
	cat $^ > $@

# The wire's protobuf-c code is generated from the .proto.
src/shared/sync.pb-c.c src/shared/sync.pb-c.h: src/shared/sync.proto
	protoc-c --c_out=src/shared --proto_path=src/shared $<
# An object is rebuilt when a header of its part changes, coarsely: a
# struct's layout must never differ between two objects of one library.
# The control file too: its default_version is every build's (-DMS_VERSION).
SHARED_HDRS = src/shared/sync.pb-c.h $(wildcard src/shared/*.h) $(EXTENSION).control
$(OBJS): $(wildcard $(addsuffix /*.h,$(PG_DIRS))) $(SHARED_HDRS)

# The replica extension and the agent, built without PostgreSQL's flags.
# A replica links SQLite, protobuf-c and libsodium (to check signatures,
# verify.c): not seal.c nor sign.c (HMAC and the CSPRNG through libcrypto,
# and signing: the server's), since it never computes a seal nor signs.
SQLITE_SRCS = $(wildcard src/sqlite/*.c)
REPLICA_SHARED_SRCS = $(filter-out src/shared/seal.c src/shared/sign.c,$(ALL_SHARED_SRCS))
AGENT_SRCS = $(wildcard src/agent/*.c)
OWN_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -g -fPIC -Isrc/shared $(MS_VERSION_FLAG)
SQLITE_LIBS = -lprotobuf-c -lsodium
build/rel/%.o: %.c $(SHARED_HDRS) $(wildcard src/sqlite/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(OWN_CFLAGS) -c $< -o $@
build/rel/src/agent/%.o: src/agent/%.c $(wildcard src/agent/*.h) $(SHARED_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(OWN_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -c $< -o $@
magic_sync_sqlite.so: $(addprefix build/rel/,$(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -shared -o $@ $^ $(SQLITE_LIBS)
# The agent links the replica extension in (sqlite3_auto_extension): no .so at run time.
magic_sync_agent: $(addprefix build/rel/,$(AGENT_SRCS:.c=.o) $(SQLITE_SRCS:.c=.o) $(REPLICA_SHARED_SRCS:.c=.o))
	$(CC) -o $@ $^ -L$(shell $(PG_CONFIG) --libdir) -lpq -lsqlite3 $(SQLITE_LIBS)

# make install also puts the agent on the PATH and the replica extension
# where SQLite's .load finds it by name (dlopen's path), and takes away what
# an older build installed: JIT bitcode (JIT would inline it against this
# one), the agent and replica extension in PostgreSQL's own directories.  Each part has a directory and a DESTDIR of its own, so that the
# Debian packages (debian/rules) put each in its own package.
AGENT_BINDIR ?= /usr/local/bin
REPLICA_LIBDIR ?= /usr/local/lib
AGENT_DESTDIR ?= $(DESTDIR)
REPLICA_DESTDIR ?= $(DESTDIR)
install: install-agent install-replica install-no-older
uninstall: uninstall-agent uninstall-replica install-no-older
.PHONY: install-agent install-replica install-no-older uninstall-agent uninstall-replica
install-no-older:
	rm -rf '$(DESTDIR)$(pkglibdir)/bitcode/$(EXTENSION)' '$(DESTDIR)$(pkglibdir)/bitcode/$(EXTENSION).index.bc' \
		'$(DESTDIR)$(pkglibdir)/magic_sync_sqlite.so' '$(DESTDIR)$(bindir)/magic_sync_agent'
install-agent: magic_sync_agent
	$(MKDIR_P) '$(AGENT_DESTDIR)$(AGENT_BINDIR)'
	$(INSTALL_PROGRAM) magic_sync_agent '$(AGENT_DESTDIR)$(AGENT_BINDIR)/magic_sync_agent'
install-replica: magic_sync_sqlite.so
	$(MKDIR_P) '$(REPLICA_DESTDIR)$(REPLICA_LIBDIR)'
	$(INSTALL_SHLIB) magic_sync_sqlite.so '$(REPLICA_DESTDIR)$(REPLICA_LIBDIR)/magic_sync_sqlite.so'
uninstall-agent:
	rm -f '$(AGENT_DESTDIR)$(AGENT_BINDIR)/magic_sync_agent'
uninstall-replica:
	rm -f '$(REPLICA_DESTDIR)$(REPLICA_LIBDIR)/magic_sync_sqlite.so'

include tests/tests.mk
include tests/fuzz/fuzz.mk
