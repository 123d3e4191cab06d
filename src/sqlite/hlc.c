/*
** hlc.c - the replica's hybrid logical clock (docs/protocol.md 12; the
** arithmetic is src/shared/hlc.h): a record table declared version => 'hlc'
** has its version column stamped on every write, in the writing
** transaction, by triggers of plain SQL (a connection without the
** extension loaded stamps too), from the clock kept in _sync_state.hlc:
**
**   stamp = max(hlc + 1, physical ms << 16)
**
** so a physical clock that went back keeps counting on from the last stamp,
** and the counter's carry borrows the next millisecond.  Every message
** applied merges the server's clock (ToReplica.clock) into it, bounded: one
** more than a day ahead of this device's time is not merged and says so in
** last_error (sync_status()), the message applied as ever.  Every upload
** carries it (Up.clock).
**
**   _sync_hlc_ins_<t>  AFTER INSERT: stamps the row, unless it was written
**                      with the clock's own last stamp (sync_hlc() itself;
**                      0, a clock that never ticked, is no stamp)
**   _sync_hlc_upd_<t>  AFTER UPDATE: stamps the row unless this update set
**                      the version to the clock's last stamp (the stamp's
**                      own update, or sync_hlc())
**
** sync_hlc() -> INTEGER: the next stamp, advancing the clock (a write).
** sync_test_clock_offset(ms) -> INTEGER: for tests only, shifts this file's
**   physical clock by ms (negative: back); refused unless the process has
**   MAGIC_SYNC_TEST_CLOCK=1 in its environment, which no production host
**   sets; sync_test_clock_offset(0) ends it.  Returns the offset set.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>

#include "hlc.h"

/* this file's physical time in ms, as SQLite's 'now' reads it, with the test offset */
#define PHYSICAL_SQL \
	"(CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)" \
	" + test_clock_offset)"
/* the next stamp: last + 1 (not past the greatest), or the physical time's */
#define TICK_SQL \
	"UPDATE _sync_state SET hlc = max(CASE WHEN hlc < 9223372036854775807 THEN hlc + 1 ELSE hlc END," \
	" max(0, min(" PHYSICAL_SQL ", 140737488355327)) << 16) WHERE id = 1"
#define LAST_SQL "(SELECT hlc FROM _sync_state WHERE id = 1)"

_Static_assert(MS_HLC_COUNTER_BITS == 16 && MS_HLC_MAX_MS == INT64_C(140737488355327),
			   "TICK_SQL spells the encoding of hlc.h");

int
ms_hlc_ensure(ms_ctx *c)
{
	bool		yes = true;
	int			rc = ms_has_column(c, "_sync_state", "hlc", &yes);

	if (rc == SQLITE_OK && !yes)
		rc = ms_exec(c, "ALTER TABLE _sync_state ADD COLUMN hlc INTEGER NOT NULL DEFAULT 0;"
					 " ALTER TABLE _sync_state ADD COLUMN test_clock_offset INTEGER NOT NULL DEFAULT 0");
	return rc;
}

/* the version column of an hlc record table, or -1 */
static int
version_column(const ms_tbl *t)
{
	if (!t->record || !t->msg->hlc || t->msg->version == NULL || t->msg->version[0] == '\0')
		return -1;
	return ms_tbl_column(t, t->msg->version, strlen(t->msg->version));
}

int
ms_hlc_trigger_sql(ms_ctx *c, const ms_tbl *t, const char *quiet, char **ins, char **upd)
{
	int			v = version_column(t);
	ms_buf		match = {0};
	const char *vq;

	*ins = *upd = NULL;
	if (v < 0)
		return SQLITE_OK;
	vq = t->cols[v].q;
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&match, "%s%s IS NEW.%s", k ? " AND " : "", t->cols[t->key[k]].q, t->cols[t->key[k]].q);
	if (match.oom)
		return SQLITE_NOMEM;
	*ins = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_hlc_ins_%w\" AFTER INSERT ON %s WHEN %s AND (NEW.%s IS NOT %s OR %s <= 0) BEGIN"
					 " %s; UPDATE %s SET %s = %s WHERE %s; END",
					 t->name, t->q, quiet, vq, LAST_SQL, LAST_SQL, TICK_SQL, t->q, vq, LAST_SQL, match.data);
	*upd = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_hlc_upd_%w\" AFTER UPDATE ON %s WHEN %s AND"
					 " (NEW.%s IS OLD.%s OR NEW.%s IS NOT %s OR %s <= 0) BEGIN"
					 " %s; UPDATE %s SET %s = %s WHERE %s; END",
					 t->name, t->q, quiet, vq, vq, vq, LAST_SQL, LAST_SQL, TICK_SQL, t->q, vq, LAST_SQL, match.data);
	ms_buf_free(&match);
	return *ins == NULL || *upd == NULL ? SQLITE_NOMEM : SQLITE_OK;
}

int
ms_hlc_drop_triggers(ms_ctx *c, const char *name)
{
	return ms_exec(c, "DROP TRIGGER IF EXISTS \"_sync_hlc_ins_%w\"; DROP TRIGGER IF EXISTS \"_sync_hlc_upd_%w\"",
				   name, name);
}

/* has_clock: SQLITE_OK when the file has a clock, else why not (in c) */
static int
has_clock(ms_ctx *c)
{
	bool		yes = false;
	int			rc = ms_state_exists(c);

	if (rc == SQLITE_OK && c->have_state)
		rc = ms_has_column(c, "_sync_state", "hlc", &yes);
	if (rc == SQLITE_OK && !yes)
		rc = ms_fail(c, SQLITE_ERROR, "this file has no clock yet: it is a replica once it applied its first snapshot");
	return rc;
}

/* read one integer of _sync_state's row: sql is a column expression */
static int
read_state(ms_ctx *c, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT %s FROM _sync_state WHERE id = 1", sql);

	*out = 0;
	return ms_int_read(c, st, rc, out);
}

int
ms_hlc_current(ms_ctx *c, int64_t *clock)
{
	bool		yes = false;
	int			rc = ms_has_column(c, "_sync_state", "hlc", &yes);

	*clock = 0;
	if (rc == SQLITE_OK && yes)
		rc = read_state(c, "hlc", clock);
	return rc;
}

int
ms_hlc_heard(ms_ctx *c, uint64_t remote)
{
	int64_t		clock;
	int64_t		now_ms;
	int64_t		merged;
	int64_t		both[2] = {0, 0};
	sqlite3_stmt *st = NULL;
	int			rc;

	if (remote == 0)
		return SQLITE_OK;
	rc = ms_hlc_ensure(c);
	/* both in one statement: each of sync_apply's statements is prepared again after a large message */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "%s", "SELECT hlc, " PHYSICAL_SQL " FROM _sync_state WHERE id = 1");
	rc = ms_ints_read(c, st, rc, both, 2);
	if (rc != SQLITE_OK)
		return rc;
	clock = both[0];
	now_ms = both[1];
	merged = clock;
	/* a uint64 beyond INT64_MAX is no clock: as negative, refused */
	if (!ms_hlc_merge(&merged, (int64_t) remote, now_ms))
	{
		char		theirs[MS_HLC_TEXT];
		char		ours[MS_HLC_TEXT];

		ms_hlc_text((int64_t) remote, theirs);
		ms_hlc_text(ms_hlc_of_ms(now_ms), ours);
		return ms_state_error(c, "the server's clock %s is more than a day ahead of this device's time %s:"
							  " not merged (is this device's clock right?)", theirs, ours);
	}
	if (merged == clock)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "UPDATE _sync_state SET hlc = ?1 WHERE id = 1 AND hlc < ?1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, merged);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	return rc;
}

/* sync_hlc(): the next stamp; the clock advanced in the caller's transaction */
static void
hlc_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	int64_t		stamp = 0;
	int			rc;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_hlc");
	rc = has_clock(&c);
	if (rc == SQLITE_OK)
		rc = ms_exec(&c, "%s", TICK_SQL);
	if (rc == SQLITE_OK)
		rc = read_state(&c, "hlc", &stamp);
	if (rc == SQLITE_OK)
		sqlite3_result_int64(ctx, stamp);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

/* sync_test_clock_offset(ms): tests only (see the head of this file) */
static void
offset_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	const char *env = getenv("MAGIC_SYNC_TEST_CLOCK");
	sqlite3_stmt *st;
	int64_t		ms;
	int			rc;

	(void) argc;
	ms_ctx_init(&c, ctx, "sync_test_clock_offset");
	ms = sqlite3_value_int64(argv[0]);
	if (env == NULL || strcmp(env, "1") != 0)
		rc = ms_fail(&c, SQLITE_ERROR, "sync_test_clock_offset is for tests: it runs only in a process"
					 " with MAGIC_SYNC_TEST_CLOCK=1 in its environment");
	else if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER || ms < -MS_HLC_MAX_AHEAD_MS * 3650 ||
			 ms > MS_HLC_MAX_AHEAD_MS * 3650)
		rc = ms_fail(&c, SQLITE_MISMATCH, "the offset is an integer of milliseconds, within ten years");
	else
		rc = has_clock(&c);
	if (rc == SQLITE_OK)
		rc = ms_prepare(&c, &st, "UPDATE _sync_state SET test_clock_offset = ?1 WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, ms);
		rc = ms_done(&c, st);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK)
		sqlite3_result_int64(ctx, ms);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

int
ms_hlc_register(sqlite3 *db)
{
	int			rc = sqlite3_create_function(db, "sync_hlc", 0, SQLITE_UTF8, NULL, hlc_func, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_test_clock_offset", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
									 NULL, offset_func, NULL, NULL);
	return rc;
}
