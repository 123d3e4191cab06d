/*
** uprows.c - the rows of an upload (upload.c): each noted row of a table
** read as it is now, as its codec writes it, while the upload has room.
**
** A catalog row goes as its key and the columns the replica owns, a record
** whole; a record that is gone as a delete of its key when the table's key
** holds its origin (otherwise, and for a catalog row that is gone, the note
** is dropped).  A row that cannot be encoded, or that cannot fit even
** alone, is set aside with the reason and its SQLSTATE; a record's key
** spelled otherwise than its types print it is spelled so in the row
** first (src/shared/canon.h).  What the walk over a table's notes finds to
** set aside, drop or key again is done once the walk ends.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "canon.h"
#include "key.h"
#include "upload.h"

/* a wire Key of a canonical key; NULL with *why when it cannot travel */
Sync__Key *
ms_up_wire_key(ms_ctx *c, const char *key, size_t len, size_t *size, const char **why)
{
	const char **parts;
	size_t	   *lens;
	int			n = ms_key_parts(c, key, len, &parts, &lens);
	Sync__Key  *k;

	*why = NULL;
	if (n == -2)
		return NULL;
	if (n < 0)
	{
		*why = "its key is not canonical";
		return NULL;
	}
	k = ms_alloc(&c->arena, sizeof(Sync__Key));
	if (k == NULL)
		return NULL;
	sync__key__init(k);
	k->n_parts = (size_t) n;
	k->parts = ms_alloc(&c->arena, sizeof(char *) * (size_t) n);
	if (k->parts == NULL)
		return NULL;
	*size = 0;
	for (int i = 0; i < n; i++)
	{
		if (!ms_utf8_valid(parts[i], lens[i]))
		{
			*why = "its key is not valid UTF-8 text (or holds a NUL byte)";
			return NULL;
		}
		k->parts[i] = ms_alloc(&c->arena, lens[i] + 1);
		if (k->parts[i] == NULL)
			return NULL;
		memcpy(k->parts[i], parts[i], lens[i]);
		*size += ms_up_field(lens[i]);
	}
	return k;
}

/*
 * later: set a note aside, drop it, or key it again, once the walk over the
 * notes has ended: SQLite does not promise what a SELECT sees of the rows
 * written under it.
 */
static int
later(uploader *u, later_kind kind, const char *key, size_t len, const char *text, size_t tlen)
{
	uint8_t		k = (uint8_t) kind;

	ms_buf_add(&u->later, &k, 1);
	ms_buf_add(&u->later, &len, sizeof len);
	ms_buf_add(&u->later, key, len);
	ms_buf_add(&u->later, &tlen, sizeof tlen);
	ms_buf_add(&u->later, text, tlen);
	return u->later.oom ? SQLITE_NOMEM : SQLITE_OK;
}

static int
set_aside(uploader *u, const char *key, size_t len, const char *sqlstate, const char *why)
{
	size_t		n = strlen(why);
	char	   *text = ms_alloc(&u->c->arena, 5 + n + 1);

	if (text == NULL)
		return SQLITE_NOMEM;
	memcpy(text, sqlstate, 5);
	memcpy(text + 5, why, n + 1);
	return later(u, LATER_ASIDE, key, len, text, 5 + n + 1);
}

static int
drop(uploader *u, const char *key, size_t len)
{
	return later(u, LATER_DROP, key, len, "", 0);
}

/*
 * rekey: the row of key spells it otherwise than its types print it: its
 * key columns are written as canonical spells them, silently (the write is
 * no change of the row's), and its note follows.  A row already there under
 * that key is another copy of this one: the note is set aside.
 */
static int
rekey(uploader *u, const ms_tbl *t, const char *key, size_t len, const char *canonical, size_t clen)
{
	ms_ctx	   *c = u->c;
	ms_buf		sql = {0};
	sqlite3_stmt *st = NULL;
	size_t		pos = 0;
	const char *part;
	size_t		plen;
	int			rc;

	ms_buf_printf(&sql, "UPDATE %s SET ", t->q);
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&sql, "%s%s = ?%d", k ? ", " : "", t->cols[t->key[k]].q, t->nkey + k + 1);
	ms_buf_printf(&sql, " WHERE %s", t->keymatch);
	rc = sql.oom ? SQLITE_NOMEM : ms_exec(c, "UPDATE _sync_state SET applying = 2 WHERE id = 1");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "%s", sql.data);
	ms_buf_free(&sql);
	if (rc == SQLITE_OK)
		rc = ms_bind_key(c, st, 1, t, key, len);
	for (int k = 0; rc == SQLITE_OK && ms_key_next_part(canonical, clen, &pos, &part, &plen) == 1; k++)
		sqlite3_bind_text(st, t->nkey + k + 1, part, (int) plen, SQLITE_STATIC);
	if (rc == SQLITE_OK)
	{
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc == SQLITE_CONSTRAINT ? SQLITE_CONSTRAINT : ms_dberr(c, rc);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_CONSTRAINT)
	{
		sqlite3_stmt *aside;

		rc = ms_prepare(c, &aside, "UPDATE _sync_notes SET set_aside = ?3, aside_sqlstate = '23505', aside_at = ?4"
						" WHERE tbl = ?1 AND key = ?2");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_text(aside, 1, t->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(aside, 2, key, (int) len, SQLITE_STATIC);
			sqlite3_bind_text(aside, 3, "its key, spelled as its types print it, is another row's: one of the two must go",
							  -1, SQLITE_STATIC);
			sqlite3_bind_int64(aside, 4, c->now);
			rc = ms_done(c, aside);
		}
		sqlite3_finalize(aside);
	}
	else if (rc == SQLITE_OK)
	{
		/* the note follows, with the writes it counted; the old key's is gone */
		static const char *const moves[] = {
			"INSERT INTO _sync_notes(tbl, key, writes) SELECT tbl, ?3, writes FROM _sync_notes"
			" WHERE tbl = ?1 AND key = ?2 ON CONFLICT (tbl, key) DO UPDATE SET"
			" writes = writes + excluded.writes, send_id = NULL, sent_at = NULL, set_aside = NULL",
			"DELETE FROM _sync_notes WHERE tbl = ?1 AND key = ?2 AND ?3 IS NOT NULL"
		};

		for (int i = 0; i < 2 && rc == SQLITE_OK; i++)
		{
			sqlite3_stmt *move;

			rc = ms_prepare(c, &move, "%s", moves[i]);
			if (rc == SQLITE_OK)
			{
				sqlite3_bind_text(move, 1, t->name, -1, SQLITE_STATIC);
				sqlite3_bind_text(move, 2, key, (int) len, SQLITE_STATIC);
				sqlite3_bind_text(move, 3, canonical, (int) clen, SQLITE_STATIC);
				rc = ms_done(c, move);
			}
			sqlite3_finalize(move);
		}
	}
	/* the key is hashed with the row: its values sum is walked again (vsum.c) */
	if (rc == SQLITE_OK)
		rc = ms_vsum_stale(c, t->name);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "UPDATE _sync_state SET applying = 0 WHERE id = 1");
	return rc;
}

/* run what later() put off, for table t */
static int
run_later(uploader *u, const ms_tbl *t)
{
	size_t		pos = 0;
	int			rc = SQLITE_OK;

	while (rc == SQLITE_OK && pos < u->later.len)
	{
		later_kind	kind = (later_kind) (uint8_t) u->later.data[pos++];
		size_t		len,
					tlen;
		const char *key;
		const char *text;
		sqlite3_stmt *st;

		memcpy(&len, u->later.data + pos, sizeof len);
		pos += sizeof len;
		key = u->later.data + pos;
		pos += len;
		memcpy(&tlen, u->later.data + pos, sizeof tlen);
		pos += sizeof tlen;
		text = u->later.data + pos;
		pos += tlen;
		if (kind == LATER_REKEY)
		{
			rc = rekey(u, t, key, len, text, tlen);
			continue;
		}
		st = kind == LATER_ASIDE ? u->aside : u->drop;
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, key, (int) len, SQLITE_STATIC);
		if (kind == LATER_ASIDE)
		{
			sqlite3_bind_text(st, 3, text + 5, -1, SQLITE_STATIC);
			sqlite3_bind_text(st, 4, text, 5, SQLITE_STATIC);
			sqlite3_bind_int64(st, 5, u->c->now);
		}
		rc = ms_done(u->c, st);
	}
	u->later.len = 0;
	return rc;
}

static int
remember(uploader *u, const ms_tbl *t, const char *key, size_t len)
{
	const ms_tbl *tp = t;

	ms_buf_add(&u->carried, &tp, sizeof tp);
	ms_buf_add(&u->carried, &len, sizeof len);
	ms_buf_add(&u->carried, key, len);
	return u->carried.oom ? SQLITE_NOMEM : SQLITE_OK;
}

/*
 * add: one row (row != NULL) or one delete of t to the upload, when it fits.
 * *fits is false when it does not; *never when it could not fit even alone.
 */
static int
add(uploader *u, const ms_tbl *t, table_rows *tr, Sync__Key *k, size_t ksize,
	const ms_buf *row, bool *fits, bool *never)
{
	ms_ctx	   *c = u->c;
	size_t		extra = row ? ms_up_field(row->len) + ms_up_field(ksize) : ms_up_field(ksize);
	size_t		name = ms_up_field(strlen(t->name));
	size_t		before = tr->content ? ms_up_field(tr->content) : 0;
	size_t		after = ms_up_field((tr->content ? tr->content : name) + extra);

	*never = u->minimal + ms_up_field(name + extra) > u->bound;
	*fits = !*never && u->size - before + after <= u->bound;
	if (!*fits)
		return SQLITE_OK;
	if (tr->content == 0)
	{
		sync__rows__init(&tr->msg);
		tr->msg.table = (char *) t->name;
		tr->content = name;
	}
	if (row)
	{
		uint8_t    *copy = ms_alloc(&c->arena, row->len ? row->len : 1);

		tr->msg.upserts = ms_up_grow(c, tr->msg.upserts, sizeof(ProtobufCBinaryData), tr->msg.n_upserts, &tr->cap_up);
		if (tr->msg.upserts == NULL)
			return SQLITE_NOMEM;
		tr->msg.keys = ms_up_grow(c, tr->msg.keys, sizeof(Sync__Key *), tr->msg.n_keys, &tr->cap_keys);
		if (tr->msg.keys == NULL || copy == NULL)
			return SQLITE_NOMEM;
		if (row->len)
			memcpy(copy, row->data, row->len);
		tr->msg.upserts[tr->msg.n_upserts].data = copy;
		tr->msg.upserts[tr->msg.n_upserts].len = row->len;
		tr->msg.n_upserts++;
		tr->msg.keys[tr->msg.n_keys++] = k;
	}
	else
	{
		tr->msg.deletes = ms_up_grow(c, tr->msg.deletes, sizeof(Sync__Key *), tr->msg.n_deletes, &tr->cap_del);
		if (tr->msg.deletes == NULL)
			return SQLITE_NOMEM;
		tr->msg.deletes[tr->msg.n_deletes++] = k;
	}
	tr->content += extra;
	u->size = u->size - before + after;
	return SQLITE_OK;
}

/*
 * canonical_key: key as its columns' types print it (a record's: its parts
 * are the replica's to spell), into out; *same when it is key.  False, with
 * why, when a part is no value of its type.
 */
static bool
canonical_key(const ms_tbl *t, const char *key, size_t len, ms_buf *out, bool *same,
			  char why[MS_REASON_MAX])
{
	size_t		pos = 0;
	const char *part;
	size_t		plen;

	out->len = 0;
	for (int k = 0; k < t->nkey && ms_key_next_part(key, len, &pos, &part, &plen) == 1; k++)
	{
		const ms_col *col = &t->cols[t->key[k]];
		const Sync__Column *mc = t->msg->columns[t->key[k]];
		/* a server that says how the part is spelled says it for a domain too */
		ms_key_kind kind = ms_key_kind_named(mc->key_type[0] ? mc->key_type : mc->server_type,
											 col->type == MS_INTEGER);
		char	   *canon;
		size_t		clen;
		bool		ok;

		if (kind == MS_KEY_TEXT)
		{
			ms_key_append(out, part, plen);
			continue;
		}
		if ((canon = sqlite3_malloc64(MS_KEY_CANON_ROOM(plen))) == NULL)
		{
			out->oom = true;
			return false;
		}
		if ((ok = ms_key_canon(kind, part, plen, canon, &clen, why)))
			ms_key_append(out, canon, clen);
		sqlite3_free(canon);
		if (!ok)
			return false;
	}
	if (out->oom)
		return false;			/* the caller says SQLITE_NOMEM, not a key of another spelling */
	*same = out->len == len && memcmp(out->data, key, len) == 0;
	return true;
}

/* The walk over one table's notes. */
typedef struct table_walk
{
	uploader   *u;
	const ms_tbl *t;
	table_rows *tr;
	sqlite3_stmt *row;			/* the carried columns and the key of the row of a key */
	int		   *cols;
	int			ncols;
	ms_buf		enc;
	ms_buf		canon;
} table_walk;

/* one note: into the upload, or set aside, dropped, or keyed again */
static int
one_note(table_walk *w, const char *key, size_t len)
{
	uploader   *u = w->u;
	ms_ctx	   *c = u->c;
	const ms_tbl *t = w->t;
	const char *why = NULL;
	size_t		ksize = 0;
	Sync__Key  *k;
	bool		present = false;
	bool		same = true;
	bool		fits,
				never;
	char		reason[MS_REASON_MAX];
	int			rc;

	k = ms_up_wire_key(c, key, len, &ksize, &why);
	if (k == NULL)
		return why == NULL ? SQLITE_NOMEM : set_aside(u, key, len, strstr(why, "UTF-8") ? "22021" : "22P02", why);
	if (ms_bind_key(c, w->row, 1, t, key, len) != SQLITE_OK)
		return drop(u, key, len);	/* a key of another shape: a note from before the key changed */
	if (t->record && !canonical_key(t, key, len, &w->canon, &same, reason))
		return w->canon.oom ? SQLITE_NOMEM : set_aside(u, key, len, "22P02", reason);
	if (!same)
	{
		u->rekeyed = true;
		return later(u, LATER_REKEY, key, len, w->canon.data, w->canon.len);
	}
	rc = ms_step(c, w->row);
	if (rc == SQLITE_ROW)
	{
		const char *has = (const char *) sqlite3_column_text(w->row, w->ncols);

		present = has != NULL && (size_t) sqlite3_column_bytes(w->row, w->ncols) == len &&
			memcmp(has, key, len) == 0;
		rc = SQLITE_OK;
	}
	else if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	if (rc != SQLITE_OK)
		return rc;
	if (present && !ms_row_encode(t, w->row, w->cols, w->ncols, &w->enc, reason))
	{
		sqlite3_reset(w->row);
		return w->enc.oom ? SQLITE_NOMEM : set_aside(u, key, len, "22000", reason);
	}
	sqlite3_reset(w->row);
	if (!present && !(t->record && t->origin_in_key))
		return drop(u, key, len);	/* gone, and not the server's to delete: the note has nothing to say */
	if (u->max_rows >= 0 && u->rows >= u->max_rows)
	{
		u->full = true;
		return SQLITE_OK;
	}
	rc = add(u, t, w->tr, k, ksize, present ? &w->enc : NULL, &fits, &never);
	if (rc != SQLITE_OK)
		return rc;
	if (never)
	{
		char	   *msg = sqlite3_mprintf("too large: %llu bytes, over max_upload_bytes (%llu) with what an upload must carry",
										  (unsigned long long) (w->enc.len + ksize), (unsigned long long) u->bound);

		rc = msg ? set_aside(u, key, len, "54000", msg) : SQLITE_NOMEM;
		sqlite3_free(msg);
		return rc;
	}
	if (!fits)
	{
		u->full = true;
		return SQLITE_OK;
	}
	u->rows++;
	return remember(u, t, key, len);
}

/* the noted rows of one table: those not sent (or sent resend_after ago), not waiting on the server's inbox */
int
ms_up_rows_of(uploader *u, const ms_tbl *t, table_rows *tr)
{
	ms_ctx	   *c = u->c;
	table_walk	w = {u, t, tr, NULL, NULL, 0, {0}, {0}};
	sqlite3_stmt *notes = NULL;
	ms_buf		cl = {0};
	int			rc;

	w.cols = ms_alloc(&c->arena, sizeof(int) * (size_t) (t->ncols + 1));
	if (w.cols == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < t->ncols; i++)
	{
		const ms_col *col = &t->cols[i];

		if (col->retired || (!t->record && !col->key && !col->owned))
			continue;
		w.cols[w.ncols++] = i;
		ms_buf_printf(&cl, "%s, ", col->q);
	}
	if (t->broken != NULL)
	{
		/* the host dropped the table or a column: its rows cannot be read */
		char	   *why = sqlite3_mprintf("cannot be read: %s", t->broken);

		ms_buf_free(&cl);
		rc = why ? ms_prepare(c, &notes, "UPDATE _sync_notes SET set_aside = %Q, aside_sqlstate = %Q, aside_at = %lld,"
							  " send_id = NULL, sent_at = NULL WHERE tbl = %Q AND set_aside IS NULL", why,
							  strstr(t->broken, "no column") ? "42703" : "42P01", (long long) c->now, t->name) : SQLITE_NOMEM;
		if (rc == SQLITE_OK)
			rc = ms_done(c, notes);
		sqlite3_finalize(notes);
		sqlite3_free(why);
		return rc;
	}
	rc = cl.oom ? SQLITE_NOMEM : ms_prepare(c, &w.row, "SELECT %s%s FROM %s WHERE %s",
											cl.data, t->keyexpr, t->q, t->keymatch);
	ms_buf_free(&cl);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &notes, "SELECT key FROM _sync_notes n WHERE tbl = ?1 AND set_aside IS NULL"
						" AND (send_id IS NULL OR sent_at <= ?2)"
						" AND NOT EXISTS (SELECT 1 FROM _sync_waits w WHERE w.tbl = n.tbl AND w.key = n.key"
						"   AND w.writes = n.writes AND w.retry_at > ?3)"
						" ORDER BY key");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(notes, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(notes, 2, c->now - u->resend_after);
		sqlite3_bind_int64(notes, 3, c->now);
	}
	while (rc == SQLITE_OK && !u->full && (rc = ms_step(c, notes)) == SQLITE_ROW)
	{
		size_t		len = (size_t) sqlite3_column_bytes(notes, 0);
		char	   *key = ms_alloc(&c->arena, len + 1);

		if (key == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		memcpy(key, sqlite3_column_text(notes, 0), len);
		rc = one_note(&w, key, len);
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	ms_buf_free(&w.enc);
	ms_buf_free(&w.canon);
	sqlite3_finalize(notes);
	sqlite3_finalize(w.row);
	if (rc == SQLITE_OK)
		rc = run_later(u, t);
	return rc;
}
