/*
** state.c - the extension's own tables (all named _sync_*), the state row
** and the settings.
**
**   _sync_state    one row: replica, epoch, last applied (number, nonce,
**                  seal), the generation it follows, gap, open snapshot,
**                  digests due, last report, last error; "applying"
**                  silences the noting triggers while sync_apply writes;
**                  the clock of version => 'hlc' tables (hlc.c);
**                  tables_gen, a random number set again at every write of
**                  _sync_tables or _sync_made (the triggers _sync_gen_*),
**                  which a schema kept between calls is checked against
**                  (schema.c); reach_version and reach_gen, the
**                  schema_version and tables_gen under which the
**                  foreign-key triggers were last found as the schema
**                  wants them (reach.c)
**   _sync_config   settings changed with sync_config(name, value)
**   _sync_tables   the Table message of every table of the last snapshot
**   _sync_made     the tables the replica made (ddl.c): the only ones it
**                  alters; gone once it found one dropped
**   _sync_notes    one per row the replica wrote: writes counted, the send
**                  that carries it, or why it is set aside, the message
**                  applied before it was written (reach.c)
**   _sync_refused  rows from the server the replica could not take
**   _sync_retired  retired rows of tables without a retired column
**   _sync_named    keys the open snapshot named so far ('': a table named whole, apply.c)
**
** A state no build writes (a file edited by hand: a negative number, a
** message applied without its nonce, a setting outside its range) is
** impossible: loading it says so and reads it as a replica that applied
** nothing of its chain and has a gap, and ms_state_repair writes that back,
** so the replica asks to be provisioned again instead of being wedged.
**
** sync_applied() -> BLOB: the last message applied, as an Applied message
** (epoch, number, nonce, seal, generation), as uploads carry it; an empty
** BLOB before the first.  What the host passes to sync.pull, so the server
** can check what the replica claims (docs/protocol.md 1).
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdarg.h>
#include <string.h>

static const char *const state_ddl =
"CREATE TABLE IF NOT EXISTS _sync_state("
"  id INTEGER PRIMARY KEY CHECK (id = 1),"
"  format INTEGER NOT NULL DEFAULT 1,"
"  replica BLOB, epoch BLOB,"
"  number INTEGER NOT NULL DEFAULT 0, nonce BLOB, seal BLOB,"
"  gap INTEGER NOT NULL DEFAULT 0, gap_epoch BLOB,"
"  snapshot INTEGER NOT NULL DEFAULT 0,"
"  applying INTEGER NOT NULL DEFAULT 0,"
"  applied_at INTEGER,"
"  digest_due INTEGER NOT NULL DEFAULT 0,"
"  digest_at INTEGER NOT NULL DEFAULT 0,"
"  report TEXT, report_send_id BLOB,"
"  report_at INTEGER NOT NULL DEFAULT 0,"
"  report_filed INTEGER NOT NULL DEFAULT 1,"
"  last_error TEXT, error_at INTEGER,"
"  generation INTEGER NOT NULL DEFAULT 0,"
"  hlc INTEGER NOT NULL DEFAULT 0, test_clock_offset INTEGER NOT NULL DEFAULT 0,"
"  tables_gen INTEGER NOT NULL DEFAULT 0,"
"  reach_version INTEGER, reach_gen INTEGER);"
"INSERT OR IGNORE INTO _sync_state(id) VALUES (1);"
"CREATE TABLE IF NOT EXISTS _sync_config("
"  name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_tables("
"  name TEXT PRIMARY KEY, position INTEGER NOT NULL, schema BLOB NOT NULL);"
"CREATE TABLE IF NOT EXISTS _sync_notes("
"  tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  writes INTEGER NOT NULL DEFAULT 1,"
"  send_id BLOB, sent_at INTEGER, set_aside TEXT,"
"  written_after INTEGER,"
"  aside_sqlstate TEXT, aside_at INTEGER,"
"  PRIMARY KEY (tbl, key)) WITHOUT ROWID;"
"CREATE INDEX IF NOT EXISTS _sync_notes_send ON _sync_notes(send_id)"
"  WHERE send_id IS NOT NULL;"
"CREATE INDEX IF NOT EXISTS _sync_notes_undated ON _sync_notes(tbl, key)"
"  WHERE written_after IS NULL;"
"CREATE TABLE IF NOT EXISTS _sync_refused("
"  tbl TEXT NOT NULL, key TEXT NOT NULL, reason TEXT NOT NULL,"
"  at INTEGER NOT NULL, send_id BLOB, sent_at INTEGER,"
"  filed INTEGER NOT NULL DEFAULT 0,"
"  PRIMARY KEY (tbl, key)) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_retired("
"  tbl TEXT NOT NULL, key TEXT NOT NULL, at INTEGER NOT NULL,"
"  PRIMARY KEY (tbl, key)) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_named("
"  tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  PRIMARY KEY (tbl, key)) WITHOUT ROWID;";

/*
 * _sync_made: made with the other tables, or when a file of an older build
 * first applies: that build made (or took) every table it holds.
 */
static const char *const made_ddl =
"CREATE TABLE IF NOT EXISTS _sync_made("
"  name TEXT NOT NULL COLLATE NOCASE PRIMARY KEY,"
"  gone INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
"INSERT OR IGNORE INTO _sync_made(name) SELECT name FROM _sync_tables;";

/*
 * tables_gen: set to a random number by every write of the tables a schema
 * is read from, whoever writes them, even while sync_apply writes (they are
 * not silent as the triggers on held tables are: apply.c and vsum.c know
 * them by name); random, so that a write rolled back and another one after
 * never give a value seen before.  Made with the column (a file of an older
 * build gains both at its first sync_apply).
 */
#define GEN_TRIGGER(tbl, ev) \
	"CREATE TRIGGER IF NOT EXISTS _sync_gen_" tbl "_" ev " AFTER " ev " ON _sync_" tbl \
	" BEGIN UPDATE _sync_state SET tables_gen = random() WHERE id = 1; END;"
const char *const ms_gen_triggers = "NOT (name GLOB '_sync_gen_*' AND tbl_name IN ('_sync_tables', '_sync_made'))";
static const char *const gen_ddl =
GEN_TRIGGER("tables", "insert") GEN_TRIGGER("tables", "update") GEN_TRIGGER("tables", "delete")
GEN_TRIGGER("made", "insert") GEN_TRIGGER("made", "update") GEN_TRIGGER("made", "delete");

const ms_setting ms_settings[] = {
	{"max_message_bytes", MS_MAX_MESSAGE_DEFAULT, 1024, 1000000000,
	"the largest message sync_apply decodes"},
	{"max_upload_bytes", MS_MAX_UPLOAD_DEFAULT, 1024, 1000000000,
	"the largest upload sync_upload returns"},
	{"digest_interval", 3600, 0, INT64_C(315360000),
	"seconds between digests in uploads"},
	{"resend_after", 300, 0, INT64_C(315360000),
	"seconds before rows sent and not filed go again"},
	{"app_build", 0, 0, INT64_MAX,
	"the host app's build, which uploads carry: a new one has the rows the replica refused tried again at once"},
};
const int	ms_nsettings = sizeof ms_settings / sizeof ms_settings[0];

_Static_assert(sizeof ms_settings / sizeof ms_settings[0] <= MS_SETTINGS_MAX, "ms_ctx.config holds every setting");

const ms_setting *
ms_setting_find(const char *name)
{
	for (int i = 0; i < ms_nsettings; i++)
		if (strcmp(ms_settings[i].name, name) == 0)
			return &ms_settings[i];
	return NULL;
}

int
ms_state_exists(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	int			rc;

	/*
	 * The table read, nothing of it: a statement checks the schema it was
	 * prepared under against the file's, as any does, for a fifth of a scan
	 * of sqlite_master.  One that cannot be prepared or run (no such table,
	 * or anything else) leaves the answer to that scan.
	 */
	if (ms_kept_prepare(c->db, "SELECT 1 FROM main._sync_state LIMIT 0", &st) == SQLITE_OK &&
		sqlite3_step(st) == SQLITE_DONE)
	{
		sqlite3_finalize(st);
		c->have_state = true;
		return SQLITE_OK;
	}
	sqlite3_finalize(st);
	rc = ms_prepare(c, &st, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = '_sync_state'");
	if (rc == SQLITE_OK)
	{
		rc = ms_step(c, st);
		c->have_state = rc == SQLITE_ROW;
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

int
ms_state_ensure(ms_ctx *c)
{
	int			rc = c->have_state ? SQLITE_OK : ms_state_exists(c);
	bool		has_generation = true;
	bool		has_made = true;
	bool		has_gen = true;

	if (rc == SQLITE_OK && !c->have_state)
	{
		rc = ms_exec(c, "%s%s%s", state_ddl, made_ddl, gen_ddl);
		if (rc == SQLITE_OK)
			c->have_state = true;
		return rc;
	}
	if (rc == SQLITE_OK)
		rc = ms_has_column(c, "_sync_state", "generation", &has_generation);
	if (rc == SQLITE_OK && !has_generation)
		rc = ms_exec(c, "ALTER TABLE _sync_state ADD COLUMN generation INTEGER NOT NULL DEFAULT 0");
	if (rc == SQLITE_OK)
		rc = ms_has_column(c, "_sync_made", NULL, &has_made);
	if (rc == SQLITE_OK && !has_made)
		rc = ms_exec(c, "%s", made_ddl);
	if (rc == SQLITE_OK)
		rc = ms_has_column(c, "_sync_state", "tables_gen", &has_gen);
	if (rc == SQLITE_OK && !has_gen)
		rc = ms_exec(c, "ALTER TABLE _sync_state ADD COLUMN tables_gen INTEGER NOT NULL DEFAULT 0;%s", gen_ddl);
	/* notes dated by the message applied before them (reach.c) */
	if (rc == SQLITE_OK)
		rc = ms_reach_notes_ensure(c);
	return rc == SQLITE_OK ? ms_hlc_ensure(c) : rc;
}

/* copy a blob column of the expected size; false when NULL or another size */
static bool
blob_col(sqlite3_stmt *st, int i, uint8_t *out, size_t n)
{
	const void *p = sqlite3_column_blob(st, i);

	if (p == NULL || (size_t) sqlite3_column_bytes(st, i) != n)
		return false;
	memcpy(out, p, n);
	return true;
}

/* impossible: the first reason the state cannot be, kept for the call */
static void
impossible(ms_ctx *c, const char *fmt,...)
{
	va_list		ap;
	char	   *what;

	if (c->st.impossible != NULL)
		return;
	va_start(ap, fmt);
	what = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	c->st.impossible = what ? ms_printf(&c->arena, "the replica's state is impossible: %s (was the file edited?):"
										" it asks to be provisioned again", what) : NULL;
	if (c->st.impossible == NULL)
		c->st.impossible = "the replica's state is impossible: it asks to be provisioned again";
	sqlite3_free(what);
}

/*
 * read_config: _sync_config read once a call (ms_config, ms_state_load):
 * each setting within its range, its default otherwise, and the first one
 * outside it.  Nothing is kept of a file without the table.
 */
static int
read_config(ms_ctx *c)
{
	sqlite3_stmt *st;
	int			rc;

	if (c->config_read || !c->have_state)
		return SQLITE_OK;
	for (int i = 0; i < ms_nsettings; i++)
		c->config[i] = ms_settings[i].def;
	c->config_bad = 0;
	rc = ms_prepare(c, &st, "SELECT name, value FROM _sync_config");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const ms_setting *set = ms_setting_find((const char *) sqlite3_column_text(st, 0));
		sqlite3_int64 v = sqlite3_column_int64(st, 1);
		int			i = set ? (int) (set - ms_settings) : -1;

		rc = SQLITE_OK;
		if (set != NULL && v >= set->min && v <= set->max)
			c->config[i] = v;
		else if (set != NULL && c->config_bad == 0)
		{
			c->config_bad = i + 1;
			c->config_bad_value = v;
		}
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	c->config_read = rc == SQLITE_OK;
	return rc;
}

/* check_config: every setting within its range (ms_config reads one outside it as its default) */
static int
check_config(ms_ctx *c)
{
	int			rc = read_config(c);

	if (rc == SQLITE_OK && c->config_read && c->config_bad > 0)
	{
		const ms_setting *set = &ms_settings[c->config_bad - 1];

		impossible(c, "%s is %lld, outside %lld to %lld", set->name, (long long) c->config_bad_value,
				   (long long) set->min, (long long) set->max);
	}
	return rc;
}

/*
 * check_chain: what sync_apply writes always holds; when it does not, the
 * replica has applied nothing of its chain and a gap is open, so its next
 * upload asks for a snapshot (docs/protocol.md 5.1).
 */
static void
check_chain(ms_ctx *c, sqlite3_int64 number, sqlite3_int64 gap, sqlite3_int64 snapshot,
			sqlite3_int64 generation, bool has_nonce, bool has_seal)
{
	ms_state   *s = &c->st;

	if (number < 0)
		impossible(c, "the last applied number is %lld", (long long) number);
	else if (number > 0 && !(s->has_epoch && has_nonce && has_seal))
		impossible(c, "message %lld is recorded applied without its epoch, nonce or seal", (long long) number);
	else if (gap < 0 || snapshot < 0 || snapshot > number)
		impossible(c, "the gap (%lld) or the open snapshot (%lld) is not a message it could have had",
				   (long long) gap, (long long) snapshot);
	else if (generation < 0)
		impossible(c, "the generation it follows is %lld", (long long) generation);
	if (s->impossible == NULL)
		return;
	s->number = 0;
	memset(s->nonce, 0, sizeof s->nonce);
	memset(s->seal, 0, sizeof s->seal);
	s->snapshot = 0;
	if (generation < 0)
		s->generation = 0;
}

int
ms_state_load(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	int			rc = SQLITE_OK;
	ms_state   *s = &c->st;
	bool		has_generation = false;

	memset(s, 0, sizeof *s);
	s->report_filed = true;
	if (!c->have_state)
		rc = ms_state_exists(c);
	if (rc != SQLITE_OK || !c->have_state)
		return rc;
	rc = ms_has_column(c, "_sync_state", "generation", &has_generation);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st,
						"SELECT replica, epoch, number, nonce, seal, gap, gap_epoch, snapshot,"
						" digest_due, digest_at, report, report_filed, report_at, report_send_id,"
						" last_error, error_at, %s FROM _sync_state WHERE id = 1",
						has_generation ? "generation" : "0");
	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		bool		has_nonce;
		bool		has_seal;

		s->has_replica = blob_col(st, 0, s->replica, MS_REPLICA_BYTES);
		if (s->has_replica)
			ms_uuid_text(s->replica, s->replica_text);
		s->has_epoch = blob_col(st, 1, s->epoch, MS_EPOCH_BYTES);
		s->number = (uint64_t) sqlite3_column_int64(st, 2);
		has_nonce = blob_col(st, 3, s->nonce, MS_NONCE_BYTES);
		has_seal = blob_col(st, 4, s->seal, MS_SEAL_BYTES);
		s->gap = (uint64_t) sqlite3_column_int64(st, 5);
		s->has_gap_epoch = blob_col(st, 6, s->gap_epoch, MS_EPOCH_BYTES);
		s->snapshot = (uint64_t) sqlite3_column_int64(st, 7);
		s->digest_due = sqlite3_column_int(st, 8) != 0;
		s->digest_at = sqlite3_column_int64(st, 9);
		if (sqlite3_column_type(st, 10) != SQLITE_NULL)
			s->report = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 10));
		s->report_filed = sqlite3_column_int(st, 11) != 0;
		s->report_at = sqlite3_column_int64(st, 12);
		blob_col(st, 13, s->report_send_id, MS_SEND_ID_BYTES);
		if (sqlite3_column_type(st, 14) != SQLITE_NULL)
			s->last_error = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 14));
		s->error_at = sqlite3_column_int64(st, 15);
		s->generation = (uint64_t) sqlite3_column_int64(st, 16);
		check_chain(c, sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 5), sqlite3_column_int64(st, 7),
					sqlite3_column_int64(st, 16), has_nonce, has_seal);
		rc = SQLITE_OK;
	}
	else if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		rc = check_config(c);
	if (rc == SQLITE_OK && s->impossible != NULL)
	{
		/* read as what it asks for: a snapshot, with a gap to say so */
		s->last_error = (char *) s->impossible;
		s->error_at = c->now;
		if (s->gap == 0)
		{
			s->gap = 1;
			s->has_gap_epoch = s->has_epoch;
			memcpy(s->gap_epoch, s->epoch, MS_EPOCH_BYTES);
		}
	}
	return rc;
}

int
ms_state_repair(ms_ctx *c)
{
	ms_state   *s = &c->st;
	sqlite3_stmt *st = NULL;
	int			rc;

	if (s->impossible == NULL)
		return SQLITE_OK;
	rc = ms_state_ensure(c);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET number = ?1, nonce = CASE WHEN ?1 = 0 THEN NULL ELSE nonce END,"
						" seal = CASE WHEN ?1 = 0 THEN NULL ELSE seal END, snapshot = ?2, gap = ?3, gap_epoch = ?4,"
						" generation = ?5, last_error = ?6, error_at = ?7 WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, (sqlite3_int64) s->number);
		sqlite3_bind_int64(st, 2, (sqlite3_int64) s->snapshot);
		sqlite3_bind_int64(st, 3, (sqlite3_int64) s->gap);
		if (s->has_gap_epoch)
			sqlite3_bind_blob(st, 4, s->gap_epoch, MS_EPOCH_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, (sqlite3_int64) s->generation);
		sqlite3_bind_text(st, 6, s->impossible, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 7, c->now);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK && s->snapshot == 0)
		rc = ms_exec(c, "DELETE FROM _sync_named");
	for (int i = 0; i < ms_nsettings && rc == SQLITE_OK; i++)
	{
		st = NULL;
		c->config_read = false;	/* read again when next asked */
		rc = ms_prepare(c, &st, "DELETE FROM _sync_config WHERE name = ?1 AND (value < ?2 OR value > ?3)");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_text(st, 1, ms_settings[i].name, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, ms_settings[i].min);
			sqlite3_bind_int64(st, 3, ms_settings[i].max);
			rc = ms_done(c, st);
		}
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK)
		s->impossible = NULL;
	return rc;
}

int
ms_state_error(ms_ctx *c, const char *fmt,...)
{
	va_list		ap;
	char	   *msg;
	sqlite3_stmt *st;
	int			rc;

	va_start(ap, fmt);
	msg = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (msg == NULL)
		return SQLITE_NOMEM;
	rc = ms_prepare(c, &st, "UPDATE _sync_state SET last_error = ?1, error_at = ?2 WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, msg, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, c->now);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	sqlite3_free(msg);
	return rc;
}

int
ms_config(ms_ctx *c, const char *name, int64_t *out)
{
	const ms_setting *s = ms_setting_find(name);
	int			rc;

	*out = s ? s->def : 0;
	/* one outside its range is impossible (ms_state_load says so): its default holds */
	rc = s ? read_config(c) : SQLITE_OK;
	if (rc == SQLITE_OK && s != NULL && c->config_read)
		*out = c->config[s - ms_settings];
	return rc;
}

/*
 * applied_pack: the Applied a state says (sync_applied()), packed into a
 * buffer of the arena; 0 bytes before the first message, -1 out of memory
 */
static int64_t
applied_pack(ms_ctx *c, const ms_state *s, uint8_t **out)
{
	Sync__Applied a = SYNC__APPLIED__INIT;
	size_t		n;

	*out = NULL;
	if (s->number != 0 && s->has_epoch)
	{
		a.epoch.data = (uint8_t *) s->epoch;
		a.epoch.len = MS_EPOCH_BYTES;
		a.number = s->number;
		a.nonce.data = (uint8_t *) s->nonce;
		a.nonce.len = MS_NONCE_BYTES;
		a.seal.data = (uint8_t *) s->seal;
		a.seal.len = MS_SEAL_BYTES;
		a.generation = s->generation;
	}
	n = sync__applied__get_packed_size(&a);
	if (n == 0)
		return 0;
	if ((*out = ms_alloc(&c->arena, n)) == NULL)
		return -1;
	sync__applied__pack(&a, *out);
	return (int64_t) n;
}

/*
 * ms_state_said: what sync_status() and sync_applied() would say of the
 * file now, appended to a result as ,"state":{"applied":N,"snapshot":B,
 * "claim":"HEX"}, so that the agent takes it from sync_apply's answer
 * instead of asking both before its next pull.  Said from c->st, which
 * sync_apply keeps as what it wrote: the state it read (an impossible one
 * as what it asks for, and written back so), a snapshot's begin and end,
 * and an applied message's number, nonce, seal and generation
 * (tests/agent/test_replica.c holds it to sync_applied() after each kind).
 */
int
ms_state_said(ms_ctx *c, ms_buf *out)
{
	uint8_t    *claim;
	int64_t		n = applied_pack(c, &c->st, &claim);

	if (n < 0)
		return SQLITE_NOMEM;
	ms_buf_printf(out, ",\"state\":{\"applied\":%llu,\"snapshot\":%s,\"claim\":\"",
				  (unsigned long long) c->st.number, c->st.snapshot ? "true" : "false");
	ms_buf_hex(out, claim, (size_t) n);
	ms_buf_str(out, "\"}");
	return SQLITE_OK;
}

/* sync_applied(): the last message applied, as an Applied; an empty BLOB before the first */
static void
applied_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	uint8_t    *packed = NULL;
	int64_t		n = 0;
	int			rc;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_applied");
	rc = ms_state_load(&c);
	if (rc == SQLITE_OK && (n = applied_pack(&c, &c.st, &packed)) < 0)
		rc = SQLITE_NOMEM;
	if (rc != SQLITE_OK)
		ms_ctx_error(&c, ctx, rc);
	else if (n == 0)
		sqlite3_result_zeroblob(ctx, 0);
	else
		sqlite3_result_blob64(ctx, packed, (sqlite3_uint64) n, SQLITE_TRANSIENT);
	ms_ctx_done(&c);
}

int
ms_state_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "sync_applied", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								   NULL, applied_func, NULL, NULL);
}
