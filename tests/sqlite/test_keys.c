/*
 * test_keys.c - the replica computes the canonical keys and the digests of
 * docs/protocol.md exactly (the vectors of tests/unit/vectors.c).
 */
#include "harness.h"

#include <string.h>

#include "vectors.h"

void		test_keys(void);

void
test_keys(void)
{
	sqlite3    *db = t_open(NULL);
	char	   *s;

	s = t_text(db, "SELECT sync_key(42)");
	CHECK(s && strcmp(s, "2:42") == 0, "sync_key(42) is 2:42, got %s", s ? s : "NULL");
	sqlite3_free(s);
	s = t_text(db, "SELECT sync_key('a', 'bc') || ' ' || sync_key('ab', 'c') || ' ' || sync_key('', 'x')");
	CHECK(s && strcmp(s, "1:a2:bc 2:ab1:c 0:1:x") == 0, "composite keys, got %s", s ? s : "NULL");
	sqlite3_free(s);
	CHECK(t_exec(db, "SELECT sync_key()", NULL) == SQLITE_ERROR, "no parts is an error");
	CHECK(t_exec(db, "SELECT sync_key(1, NULL)", NULL) == SQLITE_ERROR, "a NULL part is an error");
	CHECK(t_exec(db, "SELECT sync_digest_keys('01:a')", NULL) == SQLITE_ERROR,
		  "a value that is not a canonical key is an error");

	for (int v = 0; v < ms_vector_ndigests; v++)
	{
		const ms_vector_digest *vd = &ms_vector_digests[v];
		sqlite3_stmt *st;
		char		expected[128];

		t_exec(db, "DROP TABLE IF EXISTS k; CREATE TABLE k(a, b)", NULL);
		sqlite3_prepare_v2(db, "INSERT INTO k VALUES (?, ?)", -1, &st, NULL);
		for (int i = 0; i < vd->nkeys; i++)
		{
			sqlite3_bind_text(st, 1, vd->keys[i][0], -1, SQLITE_STATIC);
			if (vd->nparts > 1 && vd->keys[i][1] != NULL)
				sqlite3_bind_text(st, 2, vd->keys[i][1], -1, SQLITE_STATIC);
			else
				sqlite3_bind_null(st, 2);
			sqlite3_step(st);
			sqlite3_reset(st);
		}
		sqlite3_finalize(st);
		s = t_text(db, "SELECT sync_digest_keys(CASE WHEN b IS NULL THEN sync_key(a) ELSE sync_key(a, b) END) FROM k");
		snprintf(expected, sizeof expected, "{\"count\":%llu,\"fnv\":\"%s\"}",
				 (unsigned long long) vd->count, vd->fnv);
		CHECK(s && strcmp(s, expected) == 0, "vector %s: %s, expected %s", vd->name, s ? s : "NULL", expected);
		sqlite3_free(s);
	}
	sqlite3_close(db);
}
