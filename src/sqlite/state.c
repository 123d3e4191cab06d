/*
** state.c - the extension's own tables (all named _sync_*), the state row
** and the settings.
**
**   _sync_state    one row: replica, epoch, last applied (number, nonce,
**                  seal), gap, open snapshot, digests due, last report,
**                  last error; "applying" silences the noting triggers
**                  while sync_apply writes
**   _sync_config   settings changed with sync_config(name, value)
**   _sync_tables   the Table message of every table of the last snapshot
**   _sync_notes    one per row the replica wrote: writes counted, the send
**                  that carries it, or why it is set aside
**   _sync_refused  rows from the server the replica could not take
**   _sync_retired  retired rows of tables without a retired column
**   _sync_named    keys the open snapshot named so far
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
"  last_error TEXT, error_at INTEGER);"
"INSERT OR IGNORE INTO _sync_state(id) VALUES (1);"
"CREATE TABLE IF NOT EXISTS _sync_config("
"  name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_tables("
"  name TEXT PRIMARY KEY, position INTEGER NOT NULL, schema BLOB NOT NULL);"
"CREATE TABLE IF NOT EXISTS _sync_notes("
"  tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  writes INTEGER NOT NULL DEFAULT 1,"
"  send_id BLOB, sent_at INTEGER, set_aside TEXT,"
"  PRIMARY KEY (tbl, key)) WITHOUT ROWID;"
"CREATE INDEX IF NOT EXISTS _sync_notes_send ON _sync_notes(send_id)"
"  WHERE send_id IS NOT NULL;"
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

const ms_setting ms_settings[] = {
	{"max_message_bytes", MS_MAX_MESSAGE_DEFAULT, 1024, 1000000000,
	"the largest message sync_apply decodes"},
	{"max_upload_bytes", MS_MAX_UPLOAD_DEFAULT, 1024, 1000000000,
	"the largest upload sync_upload returns"},
	{"digest_interval", 3600, 0, INT64_C(315360000),
	"seconds between digests in uploads"},
	{"resend_after", 300, 0, INT64_C(315360000),
	"seconds before rows sent and not filed go again"},
};
const int	ms_nsettings = sizeof ms_settings / sizeof ms_settings[0];

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
	sqlite3_stmt *st;
	int			rc;

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

	if (rc == SQLITE_OK && !c->have_state)
	{
		rc = ms_exec(c, "%s", state_ddl);
		if (rc == SQLITE_OK)
			c->have_state = true;
	}
	return rc;
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

int
ms_state_load(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	int			rc = SQLITE_OK;
	ms_state   *s = &c->st;

	memset(s, 0, sizeof *s);
	s->report_filed = true;
	if (!c->have_state)
		rc = ms_state_exists(c);
	if (rc != SQLITE_OK || !c->have_state)
		return rc;
	rc = ms_prepare(c, &st,
					"SELECT replica, epoch, number, nonce, seal, gap, gap_epoch, snapshot,"
					" digest_due, digest_at, report, report_filed, report_at, report_send_id,"
					" last_error, error_at FROM _sync_state WHERE id = 1");
	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		s->has_replica = blob_col(st, 0, s->replica, MS_REPLICA_BYTES);
		if (s->has_replica)
			ms_uuid_text(s->replica, s->replica_text);
		s->has_epoch = blob_col(st, 1, s->epoch, MS_EPOCH_BYTES);
		s->number = (uint64_t) sqlite3_column_int64(st, 2);
		blob_col(st, 3, s->nonce, MS_NONCE_BYTES);
		blob_col(st, 4, s->seal, MS_SEAL_BYTES);
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
		rc = SQLITE_OK;
	}
	else if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
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
	sqlite3_stmt *st;
	int			rc;

	*out = s ? s->def : 0;
	if (!c->have_state)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "SELECT value FROM _sync_config WHERE name = ?1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
			*out = sqlite3_column_int64(st, 0);
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}
