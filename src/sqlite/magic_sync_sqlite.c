/*
** magic_sync_sqlite.c - the replica side of magic_sync, as a SQLite
** loadable extension.
**
**   .load ./magic_sync_sqlite            -- sqlite3 shell
**   conn.load_extension("./magic_sync_sqlite")   -- Python, and so on
**
** SQL functions (see src/sqlite/README.md and docs/protocol.md):
**
**   sync_key(part, ...)        the canonical key of its parts:
**                              sync_key(42) = '2:42'
**   sync_digest_keys(key)      aggregate: the digest of canonical keys, in
**                              any order, as {"count":N,"fnv":"16 hex"}
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT1

#include <stddef.h>

static void *
sqlite_alloc(void *data, size_t size)
{
	(void) data;
	return sqlite3_malloc64(size == 0 ? 1 : size);
}

static void
sqlite_free(void *data, void *pointer)
{
	(void) data;
	sqlite3_free(pointer);
}

static ms_allocator sqlite_allocator = {sqlite_alloc, sqlite_free, NULL};

ms_allocator *
ms_sqlite_allocator(void)
{
	return &sqlite_allocator;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int			sqlite3_magicsyncsqlite_init(sqlite3 *db, char **pzErrMsg,
										 const sqlite3_api_routines *pApi);

int
sqlite3_magicsyncsqlite_init(sqlite3 *db, char **pzErrMsg,
							 const sqlite3_api_routines *pApi)
{
	int			rc;

	SQLITE_EXTENSION_INIT2(pApi);
	(void) pzErrMsg;
	rc = ms_keys_register(db);
	return rc;
}
