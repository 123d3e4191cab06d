# cross.mk: the replica extension cross-built, with the SQLite C suite and
# an SQLite shell for each target (included by tests/tests.mk; run by
# tests/cross/run, which runs them under qemu-user and wine).
#
#   aarch64-linux-gnu    Debian's cross compiler; SQLite, protobuf-c and
#                        libsodium for arm64 from Debian's multiarch packages
#                        (libsqlite3-dev:arm64, libprotobuf-c-dev:arm64,
#                        libsodium-dev:arm64)
#   x86_64-w64-mingw32   mingw-w64; Debian ships neither SQLite, protobuf-c nor
#                        libsodium for it, so they are built here from
#                        Debian's source packages (scripts/install-deps fetches
#                        them): the protobuf-c runtime (one file), SQLite's
#                        amalgamation, made on this machine with tclsh from
#                        the source tree, and libsodium (its own configure,
#                        static).  The DLL links protobuf-c and libsodium in
#                        statically and imports nothing but Windows' own DLLs.
#
#   make cross-aarch64-linux-gnu    make cross-x86_64-w64-mingw32
#
# Each builds build/TARGET/: magic_sync_sqlite.so (.dll), test_sqlite (.exe)
# and sqlite3 (.exe).

CROSS_SRC ?= /usr/local/src/magic_sync-cross
CROSS_SQLITE_SRC = $(firstword $(wildcard $(CROSS_SRC)/sqlite3-[0-9]*))
CROSS_PBC_SRC = $(firstword $(wildcard $(CROSS_SRC)/protobuf-c-[0-9]*))
CROSS_SODIUM_SRC = $(firstword $(wildcard $(CROSS_SRC)/libsodium-[0-9]*))
CROSS_AMAL = build/cross-sqlite
CROSS_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -g \
	-Isrc/shared -Isrc/sqlite -Itests/unit $(MS_VERSION_FLAG)
CROSS_TEST_SRCS = $(wildcard tests/sqlite/*.c) tests/unit/vectors.c $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS)
CROSS_EXT_SRCS = $(SQLITE_SRCS) $(REPLICA_SHARED_SRCS)

# SQLite's amalgamation and shell, made from Debian's source package (the
# same version as libsqlite3-dev's headers).
$(CROSS_AMAL)/sqlite3.c $(CROSS_AMAL)/shell.c:
	@test -n "$(CROSS_SQLITE_SRC)" || { echo "no SQLite source package in $(CROSS_SRC): scripts/install-deps"; exit 1; }
	@mkdir -p $(CROSS_AMAL)
	cd $(CROSS_AMAL) && $(abspath $(CROSS_SQLITE_SRC))/configure --disable-tcl >/dev/null && \
		$(MAKE) -s sqlite3.c shell.c >/dev/null

# --- aarch64 Linux: Debian's arm64 libraries
A64 = build/aarch64-linux-gnu
A64_CC = aarch64-linux-gnu-gcc
$(A64)/%.o: %.c $(SHARED_HDRS) $(wildcard src/sqlite/*.h tests/*/*.h)
	@mkdir -p $(dir $@)
	$(A64_CC) $(CROSS_CFLAGS) -fPIC -c $< -o $@
$(A64)/magic_sync_sqlite.so: $(addprefix $(A64)/,$(CROSS_EXT_SRCS:.c=.o))
	$(A64_CC) -shared -o $@ $^ -lprotobuf-c -lsodium
$(A64)/test_sqlite: $(addprefix $(A64)/,$(CROSS_TEST_SRCS:.c=.o))
	$(A64_CC) -o $@ $^ -lsqlite3 -lprotobuf-c -lsodium
$(A64)/sqlite3: $(CROSS_AMAL)/shell.c
	$(A64_CC) -O1 -o $@ $< -lsqlite3
.PHONY: cross-aarch64-linux-gnu
cross-aarch64-linux-gnu: $(A64)/magic_sync_sqlite.so $(A64)/test_sqlite $(A64)/sqlite3

# --- Windows x86-64: SQLite, the protobuf-c runtime and libsodium built here
W64 = build/x86_64-w64-mingw32
W64_CC = x86_64-w64-mingw32-gcc
W64_SODIUM = $(W64)/libsodium
W64_INC = -I$(CROSS_AMAL) -I$(CROSS_SQLITE_SRC)/src -I$(CROSS_PBC_SRC) -I$(W64_SODIUM)/include -DSODIUM_STATIC=1 \
	-D__USE_MINGW_ANSI_STDIO=1
# libsodium, static: Debian's source package has no configure, so a copy of
# it gets one (autoreconf: autoconf, automake, libtool), then is built for
# mingw with only what a replica needs (--enable-minimal keeps crypto_sign)
$(W64_SODIUM)/lib/libsodium.a:
	@test -n "$(CROSS_SODIUM_SRC)" || { echo "no libsodium source package in $(CROSS_SRC): scripts/install-deps"; exit 1; }
	@rm -rf $(W64_SODIUM)-build && mkdir -p $(W64)
	cp -r $(CROSS_SODIUM_SRC) $(W64_SODIUM)-build
	cd $(W64_SODIUM)-build && autoreconf -if >/dev/null 2>&1 && ./configure --host=x86_64-w64-mingw32 \
		--prefix=$(abspath $(W64_SODIUM)) --disable-shared --enable-static --enable-minimal \
		--disable-dependency-tracking >/dev/null && $(MAKE) -s >/dev/null 2>&1 && $(MAKE) -s install >/dev/null
$(W64)/%.o: %.c $(SHARED_HDRS) $(wildcard src/sqlite/*.h tests/*/*.h) | $(CROSS_AMAL)/sqlite3.c $(W64_SODIUM)/lib/libsodium.a
	@mkdir -p $(dir $@)
	$(W64_CC) $(CROSS_CFLAGS) $(W64_INC) -c $< -o $@
$(W64)/protobuf-c.o:
	@test -n "$(CROSS_PBC_SRC)" || { echo "no protobuf-c source package in $(CROSS_SRC): scripts/install-deps"; exit 1; }
	@mkdir -p $(dir $@)
	$(W64_CC) -O2 -I$(CROSS_PBC_SRC) -c $(CROSS_PBC_SRC)/protobuf-c/protobuf-c.c -o $@
$(W64)/sqlite3.o: $(CROSS_AMAL)/sqlite3.c
	@mkdir -p $(dir $@)
	$(W64_CC) -O1 -c $< -o $@
$(W64)/magic_sync_sqlite.dll: $(addprefix $(W64)/,$(CROSS_EXT_SRCS:.c=.o)) $(W64)/protobuf-c.o $(W64_SODIUM)/lib/libsodium.a
	$(W64_CC) -shared -static-libgcc -o $@ $^
$(W64)/test_sqlite.exe: $(addprefix $(W64)/,$(CROSS_TEST_SRCS:.c=.o)) $(W64)/protobuf-c.o $(W64)/sqlite3.o \
		$(W64_SODIUM)/lib/libsodium.a
	$(W64_CC) -static-libgcc -o $@ $^
$(W64)/sqlite3.exe: $(CROSS_AMAL)/shell.c $(W64)/sqlite3.o
	$(W64_CC) -O1 -I$(CROSS_AMAL) -static-libgcc -o $@ $^
.PHONY: cross-x86_64-w64-mingw32
cross-x86_64-w64-mingw32: $(W64)/magic_sync_sqlite.dll $(W64)/test_sqlite.exe $(W64)/sqlite3.exe
