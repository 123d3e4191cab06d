/*
** status.c - what the replica says about itself, and what a host sets.
**
**   sync_status()              JSON: replica, epoch, last applied, gap,
**                              open snapshot, tables held, last error
**   sync_progress()            JSON, per table: unsent, unfiled, set_aside,
**                              refused, waiting (in the server's inbox),
**                              dropped (edits the server did not take),
**                              with the reasons of those dropped; why a
**                              table is not held (not_held: the host's own
**                              has its name, or it broke the table); the
**                              rows set aside (the newest ten: key, reason,
**                              SQLSTATE, since when)
**   sync_init(uuid)            the replica's uuid, before anything arrives
**   sync_config(name[, value]) a setting, read or set; a new
**                              max_upload_bytes tries again the rows set
**                              aside as too large
**   sync_retry()               rows set aside, and rows waiting in the
**                              server's inbox, go up again
**   sync_retry('too large')    rows set aside as too large go up again
**   sync_resync()              the replica asks to be provisioned again
**                              (a gap after its last applied message),
**                              keeping every write it has not had filed
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

static void
json_hex_or_null(ms_buf *b, bool has, const uint8_t *p, size_t n)
{
	if (!has)
	{
		ms_buf_str(b, "null");
		return;
	}
	ms_buf_byte(b, '"');
	ms_buf_hex(b, p, n);
	ms_buf_byte(b, '"');
}

static void
status_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ms_buf		out = {0};
	ms_state   *s = &c.st;
	int			rc;
	int			held = 0;
	int64_t		applied_at = 0;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_status");
	rc = ms_begin(&c, "_sync_status");
	if (rc != SQLITE_OK)
	{
		ms_ctx_finish(&c, ctx, rc, &out);
		return;
	}
	rc = ms_state_load(&c);
	if (rc == SQLITE_OK)
		rc = ms_schema_load(&c);
	if (rc == SQLITE_OK && c.have_state)
	{
		sqlite3_stmt *st;

		rc = ms_prepare(&c, &st, "SELECT applied_at FROM _sync_state WHERE id = 1");
		if (rc == SQLITE_OK && ms_step(&c, st) == SQLITE_ROW)
			applied_at = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	/* a table the replica never made (the host has its name) is not held */
	for (int i = 0; rc == SQLITE_OK && i < c.schema->n; i++)
		held += !c.schema->t[i].unmade;
	if (rc == SQLITE_OK)
	{
		ms_buf_str(&out, "{\"replica\":");
		if (s->has_replica)
			ms_buf_printf(&out, "\"%s\"", s->replica_text);
		else
			ms_buf_str(&out, "null");
		ms_buf_str(&out, ",\"epoch\":");
		json_hex_or_null(&out, s->has_epoch, s->epoch, MS_EPOCH_BYTES);
		ms_buf_printf(&out, ",\"applied\":%llu,\"generation\":%llu,\"applied_at\":",
					  (unsigned long long) s->number, (unsigned long long) s->generation);
		if (applied_at)
			ms_buf_printf(&out, "%lld", (long long) applied_at);
		else
			ms_buf_str(&out, "null");
		ms_buf_printf(&out, ",\"gap\":%llu,\"gap_epoch\":", (unsigned long long) s->gap);
		json_hex_or_null(&out, s->gap != 0 && s->has_gap_epoch, s->gap_epoch, MS_EPOCH_BYTES);
		ms_buf_str(&out, ",\"snapshot\":");
		if (s->snapshot)
			ms_buf_printf(&out, "%llu", (unsigned long long) s->snapshot);
		else
			ms_buf_str(&out, "null");
		ms_buf_printf(&out, ",\"tables\":%d,\"digest_due\":%s,\"last_error\":", held,
					  s->digest_due ? "true" : "false");
		if (s->last_error)
			ms_buf_json_string(&out, s->last_error, strlen(s->last_error));
		else
			ms_buf_str(&out, "null");
		ms_buf_str(&out, ",\"error_at\":");
		if (s->last_error)
			ms_buf_printf(&out, "%lld", (long long) s->error_at);
		else
			ms_buf_str(&out, "null");
		ms_buf_byte(&out, '}');
	}
	rc = ms_end(&c, "_sync_status", rc);
	ms_ctx_finish(&c, ctx, rc, &out);
}

/* the reasons of the edits of table the server dropped, as a JSON array (a few) */
static int
dropped_reasons(ms_ctx *c, const char *table, ms_buf *out)
{
	sqlite3_stmt *st;
	int			n = 0;
	int			rc = ms_prepare(c, &st, "SELECT reason FROM _sync_dropped WHERE tbl = ?1"
								" GROUP BY reason ORDER BY max(at) DESC LIMIT 5");

	ms_buf_str(out, ",\"dropped_reasons\":[");
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *why = (const char *) sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (n++)
			ms_buf_byte(out, ',');
		ms_buf_json_string(out, why ? why : "", why ? strlen(why) : 0);
	}
	sqlite3_finalize(st);
	ms_buf_byte(out, ']');
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* the newest rows of table set aside, as a JSON array: key, reason, SQLSTATE, since when (Unix seconds) */
static int
aside_rows(ms_ctx *c, const char *table, ms_buf *out)
{
	sqlite3_stmt *st;
	int			n = 0;
	int			rc = ms_prepare(c, &st, "SELECT key, set_aside, aside_sqlstate, aside_at FROM _sync_notes"
								" WHERE tbl = ?1 AND set_aside IS NOT NULL"
								" ORDER BY coalesce(aside_at, 0) DESC, key LIMIT 10");

	ms_buf_str(out, ",\"set_aside_rows\":[");
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *key = (const char *) sqlite3_column_text(st, 0);
		const char *why = (const char *) sqlite3_column_text(st, 1);
		const char *state = (const char *) sqlite3_column_text(st, 2);
		const char **parts;
		size_t	   *lens;
		int			nparts = key ? ms_key_parts(c, key, (size_t) sqlite3_column_bytes(st, 0), &parts, &lens) : -1;

		rc = nparts == -2 ? SQLITE_NOMEM : SQLITE_OK;
		ms_buf_str(out, n++ ? ",{\"key\":" : "{\"key\":");
		if (nparts < 0)
			ms_buf_str(out, "null");
		else
		{
			ms_buf_byte(out, '[');
			for (int i = 0; i < nparts; i++)
			{
				if (i)
					ms_buf_byte(out, ',');
				ms_buf_json_string(out, parts[i], lens[i]);
			}
			ms_buf_byte(out, ']');
		}
		ms_buf_str(out, ",\"reason\":");
		ms_buf_json_string(out, why ? why : "", why ? strlen(why) : 0);
		ms_buf_str(out, ",\"sqlstate\":");
		if (state != NULL && ms_sqlstate_ok(state))
			ms_buf_printf(out, "\"%s\"", state);
		else
			ms_buf_str(out, "null");
		if (sqlite3_column_type(st, 3) == SQLITE_NULL)
			ms_buf_str(out, ",\"since\":null}");
		else
			ms_buf_printf(out, ",\"since\":%lld}", (long long) sqlite3_column_int64(st, 3));
	}
	sqlite3_finalize(st);
	ms_buf_byte(out, ']');
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void
progress_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ms_buf		out = {0};
	sqlite3_stmt *st = NULL;
	ms_buf		names = {0};
	int			rc;
	int			n = 0;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_progress");
	rc = ms_begin(&c, "_sync_progress");
	if (rc != SQLITE_OK)
	{
		ms_ctx_finish(&c, ctx, rc, &out);
		return;
	}
	rc = ms_state_exists(&c);
	ms_buf_byte(&out, '{');
	if (rc == SQLITE_OK && c.have_state)
		rc = ms_sends_ensure(&c);
	if (rc == SQLITE_OK)
		rc = ms_schema_load(&c);
	if (rc == SQLITE_OK && c.have_state)
		rc = ms_prepare(&c, &st, "%s", ms_backlog_sql);
	while (rc == SQLITE_OK && st && (rc = ms_step(&c, st)) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		const ms_tbl *t;

		rc = SQLITE_OK;
		if (n++)
			ms_buf_byte(&out, ',');
		ms_buf_json_string(&out, name ? name : "", name ? strlen(name) : 0);
		ms_buf_printf(&out, ":{\"unsent\":%lld,\"unfiled\":%lld,\"set_aside\":%lld,\"refused\":%lld,"
					  "\"waiting\":%lld,\"dropped\":%lld",
					  sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
					  sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4),
					  sqlite3_column_int64(st, 5), sqlite3_column_int64(st, 6));
		/* a table not held as the snapshot made it (the host's own has its name, or it broke it): why */
		if (name && (t = ms_schema_find(&c, name)) != NULL && t->broken != NULL)
		{
			ms_buf_str(&out, ",\"not_held\":");
			ms_buf_json_string(&out, t->broken, strlen(t->broken));
		}
		/* a setting table's wishes, newest first (wish.c) */
		if (name)
			rc = ms_wish_progress(&c, name, &out);
		/* the reasons and the rows set aside, once the walk ends: a mark where they go */
		if ((sqlite3_column_int64(st, 6) > 0 || sqlite3_column_int64(st, 3) > 0) && name)
		{
			size_t		at = out.len;
			uint8_t		what = (uint8_t) ((sqlite3_column_int64(st, 6) > 0 ? 1 : 0) |
										  (sqlite3_column_int64(st, 3) > 0 ? 2 : 0));

			ms_buf_add(&names, &at, sizeof at);
			ms_buf_add(&names, &what, 1);
			ms_buf_add(&names, name, strlen(name) + 1);
		}
		ms_buf_byte(&out, '}');
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	ms_buf_byte(&out, '}');
	/* each table with dropped edits says why, and one with rows set aside which, before its closing brace */
	if (rc == SQLITE_OK && names.len > 0 && !names.oom && !out.oom)
	{
		ms_buf		done = {0};
		size_t		from = 0;

		for (size_t pos = 0; rc == SQLITE_OK && pos < names.len;)
		{
			size_t		at;
			uint8_t		what;
			const char *name;

			memcpy(&at, names.data + pos, sizeof at);
			what = (uint8_t) names.data[pos + sizeof at];
			name = names.data + pos + sizeof at + 1;
			pos += sizeof at + 1 + strlen(name) + 1;
			ms_buf_add(&done, out.data + from, at - from);
			if (what & 1)
				rc = dropped_reasons(&c, name, &done);
			if (rc == SQLITE_OK && (what & 2))
				rc = aside_rows(&c, name, &done);
			from = at;
		}
		ms_buf_add(&done, out.data + from, out.len - from);
		ms_buf_free(&out);
		out = done;
	}
	ms_buf_free(&names);
	rc = ms_end(&c, "_sync_progress", rc);
	ms_ctx_finish(&c, ctx, rc, &out);
}

static void
init_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ms_buf		out = {0};
	uint8_t		uuid[16];
	int			rc;
	int			type = sqlite3_value_type(argv[0]);

	(void) argc;
	ms_ctx_init(&c, ctx, "sync_init");
	if (type == SQLITE_TEXT)
	{
		if (!ms_uuid_parse((const char *) sqlite3_value_text(argv[0]),
						   (size_t) sqlite3_value_bytes(argv[0]), uuid))
		{
			ms_ctx_finish(&c, ctx, ms_fail(&c, SQLITE_ERROR, "not a uuid: expected 36 characters such as "
									"'7c9e6679-7425-40de-944b-e07fc1f90ae7'"), &out);
			return;
		}
	}
	else if (type == SQLITE_BLOB && sqlite3_value_bytes(argv[0]) == 16)
		memcpy(uuid, sqlite3_value_blob(argv[0]), 16);
	else
	{
		ms_ctx_finish(&c, ctx, ms_fail(&c, SQLITE_ERROR, "the replica's uuid must be TEXT (36 characters)"
								" or a BLOB of 16 bytes"), &out);
		return;
	}
	rc = ms_begin(&c, "_sync_init");
	if (rc != SQLITE_OK)
	{
		ms_ctx_finish(&c, ctx, rc, &out);
		return;
	}
	rc = ms_state_ensure(&c);
	if (rc == SQLITE_OK)
		rc = ms_state_load(&c);
	if (rc == SQLITE_OK && c.st.has_replica && memcmp(c.st.replica, uuid, 16) != 0)
		rc = ms_fail(&c, SQLITE_ERROR, "this replica is already %s: a replica's uuid never changes",
					 c.st.replica_text);
	if (rc == SQLITE_OK && !c.st.has_replica)
	{
		sqlite3_stmt *st;

		rc = ms_prepare(&c, &st, "UPDATE _sync_state SET replica = ?1 WHERE id = 1");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_blob(st, 1, uuid, 16, SQLITE_STATIC);
			rc = ms_done(&c, st);
		}
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK)
	{
		char		text[37];

		ms_uuid_text(uuid, text);
		ms_buf_str(&out, text);
	}
	rc = ms_end(&c, "_sync_init", rc);
	ms_ctx_finish(&c, ctx, rc, &out);
}

static void
config_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	const ms_setting *set;
	const char *name;
	int64_t		value = 0;
	int			rc;

	ms_ctx_init(&c, ctx, "sync_config");
	name = sqlite3_value_type(argv[0]) == SQLITE_TEXT ? (const char *) sqlite3_value_text(argv[0]) : NULL;
	set = name ? ms_setting_find(name) : NULL;
	if (set == NULL)
	{
		ms_buf		names = {0};

		for (int i = 0; i < ms_nsettings; i++)
			ms_buf_printf(&names, "%s%s", i ? ", " : "", ms_settings[i].name);
		rc = ms_fail(&c, SQLITE_ERROR, "unknown setting%s%s%s: the settings are %s",
					 name ? " \"" : "", name ? name : "", name ? "\"" : "", names.oom ? "" : names.data);
		ms_buf_free(&names);
		ms_ctx_error(&c, ctx, rc);
		ms_ctx_done(&c);
		return;
	}
	if (argc == 2)
	{
		if (sqlite3_value_type(argv[1]) != SQLITE_INTEGER)
			rc = ms_fail(&c, SQLITE_ERROR, "%s takes an integer (%s)", set->name, set->what);
		else
		{
			value = sqlite3_value_int64(argv[1]);
			if (value < set->min || value > set->max)
				rc = ms_fail(&c, SQLITE_ERROR, "%s is %lld to %lld (%s), not %lld", set->name,
							 (long long) set->min, (long long) set->max, set->what, (long long) value);
			else
				rc = ms_begin(&c, "_sync_config");
		}
		if (rc == SQLITE_OK)
		{
			sqlite3_stmt *st;

			rc = ms_state_ensure(&c);
			int64_t		was = 0;

			if (rc == SQLITE_OK)
				rc = ms_config(&c, set->name, &was);
			c.config_read = false;	/* read again when next asked */
			if (rc == SQLITE_OK)
				rc = ms_prepare(&c, &st, "INSERT OR REPLACE INTO _sync_config(name, value) VALUES (?1, ?2)");
			if (rc == SQLITE_OK)
			{
				sqlite3_bind_text(st, 1, set->name, -1, SQLITE_STATIC);
				sqlite3_bind_int64(st, 2, value);
				rc = ms_done(&c, st);
				sqlite3_finalize(st);
			}
			/* the bound changed: what was too large for it is tried again */
			if (rc == SQLITE_OK && strcmp(set->name, "max_upload_bytes") == 0 && value != was)
				rc = ms_exec(&c, "UPDATE _sync_notes SET set_aside = NULL WHERE set_aside LIKE 'too large%%'");
			rc = ms_end(&c, "_sync_config", rc);
		}
	}
	else
	{
		rc = ms_state_exists(&c);
		if (rc == SQLITE_OK)
			rc = ms_config(&c, set->name, &value);
	}
	if (rc == SQLITE_OK)
		sqlite3_result_int64(ctx, value);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

static void
retry_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	int			rc;
	int			n = 0;
	const char *kind = argc > 0 && sqlite3_value_type(argv[0]) == SQLITE_TEXT ?
		(const char *) sqlite3_value_text(argv[0]) : NULL;
	bool		too_large = kind != NULL && strcmp(kind, "too large") == 0;

	ms_ctx_init(&c, ctx, "sync_retry");
	if (argc > 0 && !too_large)
	{
		ms_ctx_error(&c, ctx, ms_fail(&c, SQLITE_ERROR, "retries every row set aside (no argument), or those"
									  " set aside as too large ('too large')"));
		ms_ctx_done(&c);
		return;
	}
	rc = ms_begin(&c, "_sync_retry");
	if (rc == SQLITE_OK)
	{
		rc = ms_state_exists(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_sends_ensure(&c);
		if (rc == SQLITE_OK && c.have_state)
		{
			rc = ms_exec(&c, too_large ? "UPDATE _sync_notes SET set_aside = NULL WHERE set_aside LIKE 'too large%%'"
						 : "UPDATE _sync_notes SET set_aside = NULL WHERE set_aside IS NOT NULL");
			n = sqlite3_changes(c.db);
		}
		/* and rows the server keeps in its inbox go again now, not after their backoff */
		if (rc == SQLITE_OK && c.have_state && !too_large)
		{
			rc = ms_exec(&c, "UPDATE _sync_waits SET retry_at = 0 WHERE retry_at > 0");
			n += sqlite3_changes(c.db);
		}
		rc = ms_end(&c, "_sync_retry", rc);
	}
	if (rc == SQLITE_OK)
		sqlite3_result_int(ctx, n);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

/*
 * resync_func: sync_resync() opens a gap after the last message applied, as
 * a lost message would: the next upload says it, the server provisions the
 * replica again, and until the snapshot begins no message is applied.  A
 * row written and not filed keeps its note, so the snapshot's end never lets
 * go of it (docs/protocol.md 5.2), and it goes up as before.  1 when asked;
 * 0 when a snapshot is already due or open, or none was ever applied.
 */
static void
resync_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	int			rc;
	int			n = 0;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_resync");
	rc = ms_begin(&c, "_sync_resync");
	if (rc == SQLITE_OK)
	{
		rc = ms_state_exists(&c);
		if (rc == SQLITE_OK && c.have_state)
		{
			rc = ms_exec(&c, "UPDATE _sync_state SET gap = number + 1, gap_epoch = epoch"
						 " WHERE id = 1 AND epoch IS NOT NULL AND number > 0 AND gap = 0 AND snapshot = 0");
			n = sqlite3_changes(c.db);
		}
		rc = ms_end(&c, "_sync_resync", rc);
	}
	if (rc == SQLITE_OK)
		sqlite3_result_int(ctx, n);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

int
ms_status_register(sqlite3 *db)
{
	int			rc;
	int			flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;

	rc = sqlite3_create_function(db, "sync_status", 0, flags, NULL, status_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_progress", 0, flags, NULL, progress_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_init", 1, flags, NULL, init_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_config", 1, flags, NULL, config_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_config", 2, flags, NULL, config_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_retry", 0, flags, NULL, retry_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_retry", 1, flags, NULL, retry_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_resync", 0, flags, NULL, resync_func, NULL, NULL);
	return rc;
}
