/*
** keys.c - canonical keys and digests in SQL: sync_key(...) and the
** aggregate sync_digest_keys(key), computed by src/shared byte for byte as
** the server computes them.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "digest.h"
#include "key.h"

/* sync_key(part, ...): the canonical key of its parts, as TEXT. */
static void
key_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const char **parts;
	size_t	   *lens;
	sqlite3_uint64 size;
	char	   *out;

	if (argc == 0)
	{
		sqlite3_result_error(ctx, "sync_key: a key has at least one part", -1);
		return;
	}
	parts = sqlite3_malloc64(sizeof(char *) * (sqlite3_uint64) argc);
	lens = sqlite3_malloc64(sizeof(size_t) * (sqlite3_uint64) argc);
	if (parts == NULL || lens == NULL)
	{
		sqlite3_free(parts);
		sqlite3_free(lens);
		sqlite3_result_error_nomem(ctx);
		return;
	}
	for (int i = 0; i < argc; i++)
	{
		if (sqlite3_value_type(argv[i]) == SQLITE_NULL)
		{
			sqlite3_free(parts);
			sqlite3_free(lens);
			sqlite3_result_error(ctx, "sync_key: a key part is NULL", -1);
			return;
		}
		/* text of the value first, then its length: the order SQLite asks for */
		parts[i] = (const char *) sqlite3_value_text(argv[i]);
		lens[i] = (size_t) sqlite3_value_bytes(argv[i]);
		if (parts[i] == NULL)
		{
			sqlite3_free(parts);
			sqlite3_free(lens);
			sqlite3_result_error_nomem(ctx);
			return;
		}
	}
	size = ms_key_size((size_t) argc, parts, lens);
	out = sqlite3_malloc64(size + 1);
	if (out == NULL)
	{
		sqlite3_free(parts);
		sqlite3_free(lens);
		sqlite3_result_error_nomem(ctx);
		return;
	}
	ms_key_write(out, (size_t) argc, parts, lens);
	sqlite3_result_text64(ctx, out, size, sqlite3_free, SQLITE_UTF8);
	sqlite3_free(parts);
	sqlite3_free(lens);
}

/* The aggregate's state: copies of the keys seen. */
typedef struct digest_state
{
	ms_keyref  *refs;
	size_t		n;
	size_t		cap;
	int			failed;
} digest_state;

static void
digest_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	digest_state *st = sqlite3_aggregate_context(ctx, sizeof(digest_state));
	const char *key;
	int			len;
	char	   *copy;

	(void) argc;
	if (st == NULL)
	{
		sqlite3_result_error_nomem(ctx);
		return;
	}
	if (st->failed || sqlite3_value_type(argv[0]) == SQLITE_NULL)
		return;
	key = (const char *) sqlite3_value_text(argv[0]);
	len = sqlite3_value_bytes(argv[0]);
	if (key == NULL || ms_key_count_parts(key, (size_t) len) <= 0)
	{
		st->failed = 1;
		return;
	}
	if (st->n == st->cap)
	{
		size_t		cap = st->cap ? st->cap * 2 : 64;
		ms_keyref  *refs = sqlite3_realloc64(st->refs, sizeof(ms_keyref) * cap);

		if (refs == NULL)
		{
			st->failed = 2;
			return;
		}
		st->refs = refs;
		st->cap = cap;
	}
	copy = sqlite3_malloc64((sqlite3_uint64) len + 1);
	if (copy == NULL)
	{
		st->failed = 2;
		return;
	}
	memcpy(copy, key, (size_t) len);
	st->refs[st->n].key = copy;
	st->refs[st->n].len = (size_t) len;
	st->n++;
}

static void
digest_final(sqlite3_context *ctx)
{
	digest_state *st = sqlite3_aggregate_context(ctx, 0);
	ms_digest	d;
	char		hex[17];

	if (st != NULL && st->failed == 1)
		sqlite3_result_error(ctx, "sync_digest_keys: a value is not a canonical key (build keys with sync_key)", -1);
	else if (st != NULL && st->failed)
		sqlite3_result_error_nomem(ctx);
	else
	{
		if (st == NULL)
			ms_digest_init(&d);
		else
			ms_digest_keys(&d, st->refs, st->n);
		ms_digest_hex(d.fnv, hex);
		sqlite3_result_text(ctx,
							sqlite3_mprintf("{\"count\":%llu,\"fnv\":\"%s\"}",
											(unsigned long long) d.count, hex),
							-1, sqlite3_free);
	}
	if (st != NULL)
	{
		for (size_t i = 0; i < st->n; i++)
			sqlite3_free((void *) st->refs[i].key);
		sqlite3_free(st->refs);
	}
}

int
ms_keys_register(sqlite3 *db)
{
	int			rc;
	int			flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;

	/* INNOCUOUS: pure functions of their arguments, no state read or written */
	rc = sqlite3_create_function(db, "sync_key", -1, flags, NULL, key_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_digest_keys", 1, flags, NULL,
									 NULL, digest_step, digest_final);
	return rc;
}
