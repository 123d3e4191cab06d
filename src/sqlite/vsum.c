/*
** vsum.c - each table's values digest (docs/protocol.md 8) kept as rows
** are written, so that a digest reads the keys alone.
**
** The values digest is a sum, modulo 2^64, of each counted row's hash
** (counted.c): what a write changes is the old row's hash taken out and the
** new one's put in.  _sync_vsum keeps per table the sum a full walk found,
** whether it is still the table's (fresh), and how many digests used it
** since (digests, at):
**
**   sync_apply     a Down of rows (no Begin, schema, let_go, nor snapshot
**                  open): before its writes, the hash of each row its keys
**                  name is taken out, after them (let-go of retired rows
**                  included) the hash of each put in, the rows found by
**                  their keys in the file as the walk would count them;
**                  anything else it applies (a snapshot, a schema change),
**                  a table with unique indexes that travel (a row making
**                  room is another key's), a TEMP trigger or SQLite's
**                  foreign keys enforced on the connection (they write
**                  other rows), a key twice or spelled otherwise than its row's,
**                  more than MS_VSUM_ROWS rows of a table in one Down, or
**                  more since the last walk than an eighth of the table
**                  (the look-ups then cost more than the walk spared),
**                  leaves the sums it may change stale
**   a local write  the noting triggers of a record (plain SQL, ddl.c) mark
**                  its table stale: they cannot hash, and run without the
**                  extension too; a catalog's guards let no counted value be
**                  written but by sync_apply; a key spelled again
**                  (uprows.c) marks it stale; a writer that sets
**                  _sync_state.applying to 1 by hand (sync_apply sets 2)
**                  makes every sum stale (_sync_vsum_hand), and so does any
**                  DDL (the schema version kept with each sum: triggers
**                  dropped around a write and made again)
**   a digest       a stale table, a table whose sum served MS_VSUM_EVERY
**                  digests, or one kept for MS_VSUM_AGE, is walked whole
**                  and its sum stored fresh (when its triggers mark it and
**                  the file has no trigger of the host's);
**                  else its keys alone are read and the sum kept is its
**                  values digest
**
** The full walk at least every 8th digest, and at least once a day, catches
** what no trigger sees: a page restored or flipped under SQLite, a
** connection with triggers turned off.  A file of an
** older build (no _sync_vsum, or triggers that do not mark) is walked whole
** each time, as before.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "wire.h"

/* a full walk at least every MS_VSUM_EVERY-th digest of a table, and MS_VSUM_AGE seconds */
#define MS_VSUM_EVERY 8
#define MS_VSUM_AGE 86400
/*
 * rows of a table a Down may write and have them followed one by one (more:
 * its sum is walked again), and, with an eighth of the table, how many
 * between two walks: two look-ups a row cost 40-80 % of the upsert's CPU
 * (make bench-replica), which a large Down should not pay for an eighth of
 * a walk a digest; apply.c's QUIET_ROWS is the same bound
 */
#define MS_VSUM_ROWS 64

/* how every trigger of ours begins (ddl.c, reach.c, hlc.c; apply.c's quiet_triggers) */
static const char *const ours_when = "WHEN (SELECT applying FROM _sync_state WHERE id = 1) = 0";

/*
 * ms_vsum_ensure: _sync_vsum, and _sync_vsum_hand: a writer that sets
 * _sync_state.applying to 1 by hand, to write past the guards as sync_apply
 * does (which sets 2), makes every sum stale, both as it sets it and as it
 * clears it.  The trigger begins as every trigger of ours does, so that
 * apply.c's quiet_triggers and others_write below take it for ours.
 */
int
ms_vsum_ensure(ms_ctx *c)
{
	return ms_exec(c, "CREATE TABLE IF NOT EXISTS _sync_vsum(tbl TEXT PRIMARY KEY, sum INTEGER NOT NULL,"
				   " fresh INTEGER NOT NULL, digests INTEGER NOT NULL, at INTEGER NOT NULL, schema INTEGER NOT NULL,"
				   " rows INTEGER NOT NULL, kept INTEGER NOT NULL);"
				   "CREATE TRIGGER IF NOT EXISTS \"_sync_vsum_hand\" AFTER UPDATE OF applying ON _sync_state %s"
				   " AND OLD.applying = 1 OR NEW.applying = 1 BEGIN UPDATE _sync_vsum SET fresh = 0 WHERE fresh = 1; END",
				   ours_when);
}

/* the file's schema version: DDL (a trigger dropped and made again around a write) makes every sum stale */
static int
schema_version(ms_ctx *c, sqlite3_int64 *v)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "PRAGMA main.schema_version");

	*v = -1;
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/*
 * whether the file has _sync_vsum (a file of an older build has not):
 * SQLite's schema in memory, no read; not found there (or out of memory
 * looking), asked of sqlite_master, so that a failure is an error and
 * never a sum left as it was
 */
static int
has_vsum(ms_ctx *c, bool *yes)
{
	sqlite3_stmt *st;
	int			rc = sqlite3_table_column_metadata(c->db, "main", "_sync_vsum", NULL, NULL, NULL, NULL, NULL, NULL);

	*yes = rc == SQLITE_OK;
	if (*yes)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = '_sync_vsum'");
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	*yes = rc == SQLITE_ROW;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int	others_write(ms_ctx *c, bool file, bool *yes);

/* ---- the digest's side ------------------------------------------------ */

int
ms_vsum_get(ms_ctx *c, const ms_tbl *t, bool *kept, uint64_t *sum)
{
	sqlite3_stmt *st;
	bool		have;
	int			rc = has_vsum(c, &have);

	sqlite3_int64 version = -1;

	*kept = false;
	*sum = 0;
	if (rc != SQLITE_OK || !have)
		return rc;
	rc = schema_version(c, &version);
	/* a full walk, then MS_VSUM_EVERY - 1 digests from the sum kept, while the schema stays */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT sum FROM _sync_vsum WHERE tbl = ?1 AND fresh = 1 AND digests < %d"
						" AND at > ?2 - %d AND at <= ?2 AND schema = ?3", MS_VSUM_EVERY - 1, MS_VSUM_AGE);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, c->now);
	sqlite3_bind_int64(st, 3, version);
	rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		*kept = true;
		*sum = (uint64_t) sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/*
 * marked: whether every local write of t that changes a counted value
 * marks its sum stale: a record's three noting triggers name _sync_vsum; a
 * catalog's three guards are there
 */
static int
marked(ms_ctx *c, const ms_tbl *t, bool *yes)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT count(*) FROM main.sqlite_master WHERE type = 'trigger'"
								" AND tbl_name = ?1 AND name IN (?2, ?3, ?4) AND instr(sql, ?6) > 0"
								" AND (?5 = 0 OR instr(sql, '_sync_vsum') > 0)");
	char	   *names[3];
	const char *const kinds[2][3] = {{"guard_ins", "guard_upd", "guard_del"}, {"ins", "upd", "del"}};

	*yes = false;
	if (rc != SQLITE_OK)
		return rc;
	for (int i = 0; i < 3; i++)
		names[i] = sqlite3_mprintf("_sync_%s_%s", kinds[t->record][i], t->name);
	if (names[0] == NULL || names[1] == NULL || names[2] == NULL)
		rc = SQLITE_NOMEM;
	else
	{
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
		for (int i = 0; i < 3; i++)
			sqlite3_bind_text(st, 2 + i, names[i], -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, t->record);
		sqlite3_bind_text(st, 6, ours_when, -1, SQLITE_STATIC);
		rc = ms_step(c, st);
		*yes = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 3;
		rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
	}
	for (int i = 0; i < 3; i++)
		sqlite3_free(names[i]);
	sqlite3_finalize(st);
	return rc;
}

int
ms_vsum_put(ms_ctx *c, const ms_tbl *t, bool walked, uint64_t sum, uint64_t rows)
{
	sqlite3_stmt *st;
	bool		have;
	bool		fresh = false;
	sqlite3_int64 version;
	int			rc = has_vsum(c, &have);

	/* a file opened read-only gives its digest all the same, keeping nothing */
	if (rc != SQLITE_OK || !have || sqlite3_db_readonly(c->db, "main") == 1)
		return rc;
	if (!walked)
		return ms_exec(c, "UPDATE _sync_vsum SET digests = digests + 1 WHERE tbl = %Q", t->name);
	rc = marked(c, t, &fresh);
	if (rc == SQLITE_OK && fresh)
	{
		bool		others;

		rc = others_write(c, true, &others);
		fresh = !others;
	}
	if (rc == SQLITE_OK)
		rc = schema_version(c, &version);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "INSERT OR REPLACE INTO _sync_vsum(tbl, sum, fresh, digests, at, schema, rows, kept)"
						" VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, 0)");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64) sum);
	sqlite3_bind_int(st, 3, fresh);
	sqlite3_bind_int64(st, 4, c->now);
	sqlite3_bind_int64(st, 5, version);
	sqlite3_bind_int64(st, 6, (sqlite3_int64) rows);
	rc = ms_done(c, st);
	sqlite3_finalize(st);
	return rc;
}

int
ms_vsum_stale(ms_ctx *c, const char *table)
{
	bool		have;
	int			rc = has_vsum(c, &have);

	if (rc != SQLITE_OK || !have)
		return rc;
	if (table == NULL)
		return ms_exec(c, "UPDATE _sync_vsum SET fresh = 0 WHERE fresh = 1");
	return ms_exec(c, "UPDATE _sync_vsum SET fresh = 0 WHERE tbl = %Q AND fresh = 1", table);
}

/* ---- sync_apply's side ------------------------------------------------- */

/* a table a Down writes whose sum is kept: the keys it names, and the sum as it goes */
typedef struct kept_table
{
	const ms_tbl *t;
	uint64_t	sum;
	ms_buf		keys;			/* the wire keys, canonical, one after the other */
	size_t	   *ends;
	size_t		n;
	size_t		cap;
	sqlite3_stmt *row;			/* the row of a key, its key parts and counted values */
} kept_table;

struct ms_vsum
{
	kept_table *t;
	int			n;
	sqlite3_stmt *marks;		/* whether a key is retired or refused */
	sqlite3_stmt *any;			/* whether a table has any */
};

static void
vsum_free(ms_vsum *v)
{
	if (v == NULL)
		return;
	for (int i = 0; i < v->n; i++)
	{
		ms_buf_free(&v->t[i].keys);
		sqlite3_free(v->t[i].ends);
		sqlite3_finalize(v->t[i].row);
	}
	sqlite3_finalize(v->marks);
	sqlite3_finalize(v->any);
	sqlite3_free(v->t);
	sqlite3_free(v);
}

/* a wire key of a table's, for finding two alike */
typedef struct keyref
{
	const char *key;
	size_t		len;
} keyref;

static int
keyref_cmp(const void *x, const void *y)
{
	const keyref *a = x;
	const keyref *b = y;

	return ms_key_cmp(a->key, a->len, b->key, b->len);
}

/*
 * set_aside: whether _sync_retired or _sync_refused marks a row of t (key NULL:
 * any row of it; else the row of key), through *st, prepared once
 */
static int
set_aside(ms_ctx *c, sqlite3_stmt **st, const ms_tbl *t, const char *key, size_t len, bool *yes)
{
	int			rc = SQLITE_OK;

	if (*st == NULL)
		rc = ms_prepare(c, st, key == NULL
						? "SELECT EXISTS (SELECT 1 FROM _sync_retired WHERE tbl = ?1)"
						" OR EXISTS (SELECT 1 FROM _sync_refused WHERE tbl = ?1)"
						: "SELECT EXISTS (SELECT 1 FROM _sync_retired WHERE tbl = ?1 AND key = ?2)"
						" OR EXISTS (SELECT 1 FROM _sync_refused WHERE tbl = ?1 AND key = ?2)");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(*st, 1, t->name, -1, SQLITE_STATIC);
	if (key != NULL)
		sqlite3_bind_text(*st, 2, key, (int) len, SQLITE_STATIC);
	rc = ms_step(c, *st);
	*yes = rc == SQLITE_ROW && sqlite3_column_int(*st, 0) != 0;
	sqlite3_reset(*st);
	return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/*
 * phase: the sum of the hashes of the counted rows kt's keys name now.
 * *odd: a row found under a key that is not its own (an INTEGER key spelled
 * "07"): another key could name it too, so the table is walked instead.
 */
static int
phase(ms_ctx *c, ms_vsum *v, kept_table *kt, uint64_t *total, bool *odd)
{
	const ms_tbl *t = kt->t;
	ms_buf		one = {0};
	sqlite3_value **vals = NULL;
	int			ncols = 0;
	bool		marks = false;
	int			rc = SQLITE_OK;

	*total = 0;
	*odd = false;
	if (kt->row == NULL)
	{
		ms_buf		cols = {0};

		for (int i = 0; i < t->ncols; i++)
			if (ms_digest_counted(t, i))
				ms_buf_printf(&cols, ", %s", t->cols[i].q);
		ms_buf_byte(&cols, '\0');
		rc = cols.oom ? SQLITE_NOMEM :
			ms_prepare(c, &kt->row, "SELECT %s%s FROM %s WHERE %s%s%s%s", t->keycols, cols.data, t->q, t->keymatch,
					   t->retired >= 0 ? " AND " : "", t->retired >= 0 ? t->cols[t->retired].q : "",
					   t->retired >= 0 ? " IS NULL" : "");
		ms_buf_free(&cols);
	}
	if (rc == SQLITE_OK)
		rc = set_aside(c, &v->any, t, NULL, 0, &marks);
	if (rc == SQLITE_OK)
	{
		ncols = sqlite3_column_count(kt->row);
		if ((vals = sqlite3_malloc64(sizeof(sqlite3_value *) * (size_t) (ncols ? ncols : 1))) == NULL)
			rc = SQLITE_NOMEM;
	}
	for (size_t i = 0; i < kt->n && rc == SQLITE_OK && !*odd; i++)
	{
		size_t		start = i ? kt->ends[i - 1] : 0;
		const char *key = kt->keys.data + start;
		size_t		len = kt->ends[i] - start;
		uint64_t	h;
		bool		out = false;

		if (ms_bind_key(c, kt->row, 1, t, key, len) != SQLITE_OK)
		{
			sqlite3_reset(kt->row);
			continue;			/* a key of another shape names no row */
		}
		rc = ms_step(c, kt->row);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		else if (rc == SQLITE_ROW)
		{
			rc = SQLITE_OK;
			for (int k = 0; k < ncols; k++)
				vals[k] = sqlite3_column_value(kt->row, k);
			if (!ms_counted_one(t, ncols, vals, &one, &h))
				rc = one.oom ? SQLITE_NOMEM : SQLITE_OK;	/* a NULL key part: not counted */
			else if (one.len != len || memcmp(one.data, key, len) != 0)
				*odd = true;
			else
			{
				if (marks)
					rc = set_aside(c, &v->marks, t, key, len, &out);
				if (rc == SQLITE_OK && !out)
					*total += h;
			}
		}
		sqlite3_reset(kt->row);
	}
	sqlite3_free(vals);
	ms_buf_free(&one);
	return rc;
}

/*
 * others_write: whether anything but sync_apply's own statements may write
 * held rows while it applies: a trigger of the host's in the file (asked
 * when a sum is stored: a trigger made since moves the schema version kept
 * with it), or, on this connection, a TEMP trigger or SQLite's foreign keys
 * enforced (asked at each message: neither moves the file's schema)
 */
static int
others_write(ms_ctx *c, bool file, bool *yes)
{
	sqlite3_stmt *st;
	int			fk = 0;
	int			rc;

	*yes = false;
	if (!file && (sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_FKEY, -1, &fk) != SQLITE_OK || fk))
	{
		*yes = true;
		return SQLITE_OK;
	}
	if (file)
		rc = ms_prepare(c, &st, "SELECT EXISTS (SELECT 1 FROM main.sqlite_master WHERE type = 'trigger'"
						" AND NOT (name GLOB '_sync_*' AND instr(sql, %Q) > 0) AND %s)", ours_when, ms_gen_triggers);
	else
		rc = ms_prepare(c, &st, "SELECT EXISTS (SELECT 1 FROM temp.sqlite_master WHERE type = 'trigger')");
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	*yes = rc == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* add: the wire keys of r (upserts, deletes) to kt */
static int
add_keys(kept_table *kt, Sync__Key **keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		size_t		len = ms_wire_key_size(keys[i]);
		size_t	   *e = ms_counted_room(kt->ends, sizeof(size_t), kt->n, &kt->cap);

		if (e == NULL)
			return SQLITE_NOMEM;
		kt->ends = e;
		if (kt->keys.len + len + 1 > kt->keys.cap)
		{
			size_t		ncap = (kt->keys.len + len + 1) * 2;
			char	   *d = sqlite3_realloc64(kt->keys.data, ncap);

			if (d == NULL)
				return SQLITE_NOMEM;
			kt->keys.data = d;
			kt->keys.cap = ncap;
		}
		kt->keys.len += ms_wire_key_write(keys[i], kt->keys.data + kt->keys.len);
		kt->ends[kt->n++] = kt->keys.len;
	}
	return SQLITE_OK;
}

/* twice: whether two of kt's keys are alike (a row written twice in one Down) */
static int
twice(kept_table *kt, bool *yes)
{
	keyref	   *refs;

	*yes = false;
	if (kt->n < 2)
		return SQLITE_OK;
	if ((refs = sqlite3_malloc64(sizeof(keyref) * kt->n)) == NULL)
		return SQLITE_NOMEM;
	for (size_t i = 0; i < kt->n; i++)
	{
		size_t		start = i ? kt->ends[i - 1] : 0;

		refs[i].key = kt->keys.data + start;
		refs[i].len = kt->ends[i] - start;
	}
	qsort(refs, kt->n, sizeof(keyref), keyref_cmp);
	for (size_t i = 1; i < kt->n && !*yes; i++)
		*yes = keyref_cmp(&refs[i - 1], &refs[i]) == 0;
	sqlite3_free(refs);
	return SQLITE_OK;
}

int
ms_vsum_before(ms_ctx *c, const Sync__ToReplica *m, ms_vsum **out)
{
	const Sync__Down *d = m->body_case == SYNC__TO_REPLICA__BODY_DOWN ? m->down : NULL;
	ms_vsum    *v;
	sqlite3_stmt *st = NULL;
	bool		have,
				others = false;
	int			rc;

	*out = NULL;
	if (d == NULL && m->body_case != SYNC__TO_REPLICA__BODY_END_SNAPSHOT)
		return SQLITE_OK;		/* a Filed answer writes no held row */
	rc = has_vsum(c, &have);
	if (rc != SQLITE_OK || !have)
		return rc;
	/* a snapshot, a schema change: every sum walked again */
	if (d == NULL || d->begin != NULL || d->n_schema > 0 || d->n_let_go > 0 || c->st.snapshot != 0)
		return ms_vsum_stale(c, NULL);
	if (d->n_tables == 0)
		return SQLITE_OK;
	if ((v = sqlite3_malloc64(sizeof *v)) == NULL)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof *v);
	if ((v->t = sqlite3_malloc64(sizeof(kept_table) * d->n_tables)) == NULL)
	{
		sqlite3_free(v);
		return SQLITE_NOMEM;
	}
	/*
	 * A sum of another schema version is followed all the same (DDL of the
	 * replica's own may come first, as reach.c's triggers made again): it is
	 * not used (ms_vsum_get), the next digest walks the table
	 */
	rc = ms_prepare(c, &st, "SELECT sum, ?2 > %d OR kept + ?2 > rows / %d + %d FROM _sync_vsum WHERE tbl = ?1"
					" AND fresh = 1", MS_VSUM_ROWS, MS_VSUM_EVERY, MS_VSUM_ROWS);
	for (size_t i = 0; i < d->n_tables && rc == SQLITE_OK; i++)
	{
		const Sync__Rows *r = d->tables[i];
		const ms_tbl *t = ms_schema_find(c, r->table);
		kept_table *kt;
		uint64_t	before = 0;
		bool		dup = false;
		bool		many = false;
		bool		odd = false;

		if (t == NULL || t->broken != NULL || r->n_upserts + r->n_deletes == 0)
			continue;
		for (int j = 0; j < v->n; j++)
			dup = dup || v->t[j].t == t;
		if (dup)
		{
			/* a table twice in one Down: walked again rather than counted twice */
			rc = ms_vsum_stale(c, t->name);
			for (int j = 0; j < v->n; j++)
				if (v->t[j].t == t)
					v->t[j].t = NULL;
			continue;
		}
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64) (r->n_upserts + r->n_deletes));
		rc = ms_step(c, st);
		if (rc == SQLITE_DONE)
		{
			sqlite3_reset(st);
			rc = SQLITE_OK;
			continue;			/* stale already */
		}
		if (rc != SQLITE_ROW)
			break;
		rc = SQLITE_OK;
		kt = &v->t[v->n++];
		memset(kt, 0, sizeof *kt);
		kt->t = t;
		kt->sum = (uint64_t) sqlite3_column_int64(st, 0);
		many = sqlite3_column_int(st, 1) != 0;
		sqlite3_reset(st);
		/*
		 * Walked again instead: more rows written since the last walk than
		 * an eighth of the table (two look-ups a row cost more than the
		 * eighth of a walk a digest saves), a row making room for a unique
		 * value that travels (another key's, evolve.c)
		 */
		if (many || (t->msg->n_unique > 0 && r->n_upserts > 0))
		{
			kt->t = NULL;
			rc = ms_vsum_stale(c, t->name);
			continue;
		}
		rc = add_keys(kt, r->keys, r->n_upserts);
		if (rc == SQLITE_OK)
			rc = add_keys(kt, r->deletes, r->n_deletes);
		if (rc == SQLITE_OK)
			rc = twice(kt, &odd);
		if (rc == SQLITE_OK && !odd)
			rc = phase(c, v, kt, &before, &odd);
		if (rc == SQLITE_OK && odd)
		{
			kt->t = NULL;
			rc = ms_vsum_stale(c, t->name);
		}
		kt->sum -= before;
	}
	sqlite3_finalize(st);
	/* asked only when a sum is followed */
	for (int i = 0; i < v->n && rc == SQLITE_OK && !others; i++)
		if (v->t[i].t != NULL)
		{
			rc = others_write(c, false, &others);
			if (rc == SQLITE_OK && others)
				rc = ms_vsum_stale(c, NULL);
		}
	if (rc != SQLITE_OK || others)
	{
		vsum_free(v);
		return rc;
	}
	*out = v;
	return SQLITE_OK;
}

int
ms_vsum_after(ms_ctx *c, ms_vsum *v, int rc)
{
	sqlite3_stmt *st = NULL;

	if (v == NULL || rc != SQLITE_OK)
	{
		vsum_free(v);
		return rc;
	}
	rc = ms_prepare(c, &st, "UPDATE _sync_vsum SET sum = ?2, kept = kept + ?3 WHERE tbl = ?1 AND fresh = 1");
	for (int i = 0; i < v->n && rc == SQLITE_OK; i++)
	{
		kept_table *kt = &v->t[i];
		uint64_t	after = 0;
		bool		odd = false;

		if (kt->t == NULL)
			continue;
		rc = phase(c, v, kt, &after, &odd);
		if (rc == SQLITE_OK && odd)
			rc = ms_vsum_stale(c, kt->t->name);
		if (rc != SQLITE_OK || odd)
			continue;
		sqlite3_bind_text(st, 1, kt->t->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64) (kt->sum + after));
		sqlite3_bind_int64(st, 3, (sqlite3_int64) kt->n);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	vsum_free(v);
	return rc;
}
