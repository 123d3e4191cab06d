/*
** upload.c - sync_upload(): the next Up, or NULL when there is nothing to
** say (docs/protocol.md 7).
**
** An Up carries, within max_upload_bytes:
**   - the last message applied, with its seal, and the gap when one is open;
**   - the backlog of every table (written not sent, sent not filed, set
**     aside, refused), always whole;
**   - the digests, when due (a snapshot ended, or digest_interval passed),
**     of the tables with no pending note, and never while a snapshot or a
**     gap is open;
**   - refusals not yet filed;
**   - the noted rows as they are now, parents' tables first: a catalog
**     row as its key and the columns the replica owns, a record whole; a
**     record that is gone as a delete of its key when the table's key holds
**     its origin (otherwise, and for a catalog row that is gone, the note is
**     dropped: not the server's to delete);
**   - its send number (sends.c), its length first and its check last
**     (src/shared/upcheck.h): the server files it whole or not at all.
** Notes and refusals sent and not filed go again after resend_after; rows
** the server keeps in its inbox go again after their backoff (sends.c).  A
** row that cannot be encoded, or that cannot fit even alone, is set aside
** with the reason and its SQLSTATE (54000 too large, 22P02 a key no value
** of its type, 22021 not UTF-8, 22000 a value that does not encode, 23505
** a key another row's once spelled as its types print it, 42P01 or 42703
** a table the host broke) and counted; a write clears that.  The backlog
** says why of each table's rows set aside: a few reasons, the most rows
** first, each with its SQLSTATE, its rows, the newest key and since when
** (left out when they would not fit).  A record's key is sent
** as its columns' types print it (src/shared/canon.h): a key spelled
** otherwise (an upper-case uuid) is spelled so in the row first, so that
** server and replica hold one key for it.  Everything carried is stamped
** with the upload's random send id in the same transaction, and what it
** carried of each table recorded; its Filed answer (sync_apply) lets go of
** what is still stamped with it when it accounts for it.
**
** sync_upload(lane), sync_upload(max_rows, lane) upload one lane
** (lanes.c): only the rows of the tables its Table puts in it, numbered by
** its own send numbers; every other lane's, and the first's (sync_upload()),
** are uploaded apart, so a busy table never keeps another's rows waiting.
** Only the first lane says what the replica says of itself (the applied
** message, gap, backlog, refusals, digests): another carries its rows and
** the applied message that dates them, and has nothing to say without rows.
**
** sync_upload(max_rows) carries at most max_rows rows and no refusals or
** digests, for a host narrowing down an upload the server refused for good
** (docs/operations.md); sync_upload(0) always says what every upload says.
** Nothing to say: no rows, refusals or digests to carry, and the applied
** message, gap and backlog as the last upload said them, which was filed
** (or sent less than resend_after ago); and a replica that knows no uuid.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "canon.h"
#include "key.h"
#include "pbwrite.h"
#include "upcheck.h"
#include "upload.h"

/*
 * Per table: unsent, unfiled, set aside, refused (rows of the server's it
 * could not take), waiting (in the server's inbox), dropped (edits the
 * server did not take).  A note waits while its row is as it was when the
 * server kept it.  One walk of each table, summed by name: every upload
 * and every pass of the agent reads it, and a subquery per figure and
 * table cost more to prepare and run than the rest of an upload.
 */
const char *const ms_backlog_sql =
"SELECT tbl, sum(unsent), sum(unfiled), sum(aside), sum(refused), sum(waiting), sum(dropped) FROM ("
"  SELECT name AS tbl, 0 AS unsent, 0 AS unfiled, 0 AS aside, 0 AS refused, 0 AS waiting, 0 AS dropped"
"   FROM _sync_tables"
"  UNION ALL"
"  SELECT tbl, NOT sent AND NOT aside AND NOT waits, sent, aside, 0, NOT sent AND NOT aside AND waits, 0"
"   FROM (SELECT n.tbl, n.send_id IS NOT NULL AS sent, n.set_aside IS NOT NULL AS aside,"
"          EXISTS (SELECT 1 FROM _sync_waits w WHERE w.tbl = n.tbl AND w.key = n.key AND w.writes = n.writes)"
"           AS waits FROM _sync_notes n)"
"  UNION ALL SELECT tbl, 0, 0, 0, 1, 0, 0 FROM _sync_refused"
"  UNION ALL SELECT tbl, 0, 0, 0, 0, 0, 1 FROM _sync_dropped)"
" GROUP BY tbl ORDER BY 1";

/* a length-delimited field of n bytes, with a one-byte tag */
size_t
ms_up_field(size_t n)
{
	return 1 + ms_pb_varint_size(n) + n;
}

/* clip: the longest prefix that is valid UTF-8 without NUL */
static void
clip(char *s)
{
	size_t		n = strlen(s);

	while (n > 0 && !ms_utf8_valid(s, n))
		n--;
	s[n] = '\0';
}

void *
ms_up_grow(ms_ctx *c, void *old, size_t elem, size_t n, size_t *cap)
{
	void	   *p;
	size_t		ncap;

	if (n < *cap)
		return old;
	ncap = *cap ? *cap * 2 : 8;
	p = ms_alloc(&c->arena, elem * ncap);
	if (p != NULL && n > 0)
		memcpy(p, old, elem * n);
	*cap = ncap;
	return p;
}

/* refusals not filed, while they fit */
static int
refusals(uploader *u)
{
	ms_ctx	   *c = u->c;
	sqlite3_stmt *st;
	sqlite3_stmt *stamp = NULL;
	size_t		cap = 0;
	ms_buf		keys = {0};
	int			rc;

	rc = ms_prepare(c, &st, "SELECT tbl, key, reason FROM _sync_refused WHERE filed = 0"
					" AND (send_id IS NULL OR sent_at <= ?1) ORDER BY tbl, key");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &stamp, "UPDATE _sync_refused SET send_id = ?3, sent_at = ?4"
						" WHERE tbl = ?1 AND key = ?2");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, c->now - u->resend_after);
		sqlite3_bind_blob(stamp, 3, u->send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(stamp, 4, c->now);
	}
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *table = (const char *) sqlite3_column_text(st, 0);
		const char *key = (const char *) sqlite3_column_text(st, 1);
		size_t		len = (size_t) sqlite3_column_bytes(st, 1);
		Sync__Refusal *r = ms_alloc(&c->arena, sizeof(Sync__Refusal));
		size_t		ksize = 0;
		const char *why;
		size_t		size;

		rc = SQLITE_OK;
		if (r == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		sync__refusal__init(r);
		r->table = ms_strdup(&c->arena, table);
		r->reason = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 2));
		r->key = ms_up_wire_key(c, key, len, &ksize, &why);
		if (r->table == NULL || r->reason == NULL || (r->key == NULL && why == NULL))
		{
			rc = SQLITE_NOMEM;
			break;
		}
		if (r->key == NULL || strlen(r->table) == 0 || strlen(r->table) > MS_NAME_MAX ||
			!ms_utf8_valid(r->table, strlen(r->table)))
			continue;			/* cannot be said in an Up: counted in the backlog only */
		clip(r->reason);
		size = ms_up_field(sync__refusal__get_packed_size(r));
		if (u->size + size > u->bound)
			break;
		u->up.refusals = ms_up_grow(c, u->up.refusals, sizeof(Sync__Refusal *), u->up.n_refusals, &cap);
		if (u->up.refusals == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		u->up.refusals[u->up.n_refusals++] = r;
		u->size += size;
		u->refusals++;
		/* the key as stored, to stamp once the walk ends */
		ms_buf_add(&keys, &len, sizeof len);
		ms_buf_add(&keys, key, len);
		if (keys.oom)
			rc = SQLITE_NOMEM;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	for (size_t i = 0, pos = 0; rc == SQLITE_OK && i < u->up.n_refusals; i++)
	{
		size_t		len;

		memcpy(&len, keys.data + pos, sizeof len);
		pos += sizeof len;
		sqlite3_bind_text(stamp, 1, u->up.refusals[i]->table, -1, SQLITE_STATIC);
		sqlite3_bind_text(stamp, 2, keys.data + pos, (int) len, SQLITE_STATIC);
		rc = ms_done(c, stamp);
		pos += len;
	}
	sqlite3_finalize(stamp);
	ms_buf_free(&keys);
	return rc;
}

/*
 * Why a table's rows are set aside: a few reasons, the most rows first, each
 * with its SQLSTATE, its rows, since when, and the newest of them.
 */
static const char *const aside_sql =
"SELECT n.set_aside, coalesce(n.aside_sqlstate, ''), count(*), min(n.aside_at),"
" (SELECT k.key FROM _sync_notes k WHERE k.tbl = n.tbl AND k.set_aside = n.set_aside"
"   AND k.aside_sqlstate IS n.aside_sqlstate ORDER BY k.aside_at DESC, k.key DESC LIMIT 1)"
" FROM _sync_notes n WHERE n.tbl = ?1 AND n.set_aside IS NOT NULL"
" GROUP BY n.set_aside, n.aside_sqlstate ORDER BY 3 DESC, 4, 1 LIMIT 4";

/* aside_of: why b's rows are set aside (st: aside_sql), into b and what the backlog says */
static int
aside_of(uploader *u, sqlite3_stmt *st, Sync__Backlog *b, ms_buf *fingerprint)
{
	ms_ctx	   *c = u->c;
	int			rc;

	b->aside = ms_alloc(&c->arena, sizeof(Sync__SetAside *) * MS_ASIDE_MAX);
	if (b->aside == NULL)
		return SQLITE_NOMEM;
	sqlite3_bind_text(st, 1, b->table, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW && b->n_aside < MS_ASIDE_MAX)
	{
		Sync__SetAside *a = ms_alloc(&c->arena, sizeof(Sync__SetAside));
		const char *why = (const char *) sqlite3_column_text(st, 0);
		const char *state = (const char *) sqlite3_column_text(st, 1);
		const char *key = (const char *) sqlite3_column_text(st, 4);
		size_t		klen = (size_t) sqlite3_column_bytes(st, 4);
		const char **parts;
		size_t	   *lens;
		int			n;

		if (a == NULL || why == NULL || state == NULL)
			return SQLITE_NOMEM;
		sync__set_aside__init(a);
		/* at most MS_ASIDE_REASON_MAX bytes, cut where a character ends */
		a->reason = ms_printf(&c->arena, "%.*s", MS_ASIDE_REASON_MAX, why);
		if (a->reason == NULL)
			return SQLITE_NOMEM;
		clip(a->reason);
		a->sqlstate = ms_sqlstate_ok(state) ? ms_strdup(&c->arena, state) : "";
		a->rows = (uint64_t) sqlite3_column_int64(st, 2);
		a->since = sqlite3_column_int64(st, 3);
		n = key != NULL ? ms_key_parts(c, key, klen, &parts, &lens) : -1;
		if (n == -2 || a->sqlstate == NULL)
			return SQLITE_NOMEM;
		if (n > 0)
		{
			a->key = ms_alloc(&c->arena, sizeof(Sync__Key));
			if (a->key == NULL)
				return SQLITE_NOMEM;
			sync__key__init(a->key);
			a->key->parts = ms_alloc(&c->arena, sizeof(char *) * (size_t) n);
			if (a->key->parts == NULL)
				return SQLITE_NOMEM;
			for (int i = 0; i < n && a->key != NULL; i++)
			{
				/* a key that cannot travel is not told */
				if (lens[i] > MS_KEY_PART_MAX || !ms_utf8_valid(parts[i], lens[i]))
					a->key = NULL;
				else if ((a->key->parts[a->key->n_parts++] = ms_printf(&c->arena, "%.*s", (int) lens[i], parts[i])) == NULL)
					return SQLITE_NOMEM;
			}
		}
		b->aside[b->n_aside++] = a;
		ms_buf_printf(fingerprint, "/%s:%s:%llu", a->reason, a->sqlstate, (unsigned long long) a->rows);
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/*
 * backlog: every table's, into the upload (with_aside: and why rows are set
 * aside); fingerprint: what it says; *noteless: the replica has no note at
 * all (none unsent, unfiled, set aside or waiting)
 */
static int
backlog(uploader *u, ms_buf *fingerprint, bool with_aside, bool *noteless)
{
	ms_ctx	   *c = u->c;
	sqlite3_stmt *st;
	sqlite3_stmt *aside = NULL;
	size_t		cap = 0;
	int			rc = ms_prepare(c, &st, "%s", ms_backlog_sql);

	if (rc == SQLITE_OK && with_aside)
		rc = ms_prepare(c, &aside, "%s", aside_sql);

	u->up.n_backlog = 0;
	*noteless = true;
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		Sync__Backlog *b = ms_alloc(&c->arena, sizeof(Sync__Backlog));
		const char *name = (const char *) sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (b == NULL || name == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		if (name[0] == '\0' || strlen(name) > MS_NAME_MAX || !ms_utf8_valid(name, strlen(name)))
			continue;
		sync__backlog__init(b);
		b->table = ms_strdup(&c->arena, name);
		b->unsent = (uint64_t) sqlite3_column_int64(st, 1);
		b->unfiled = (uint64_t) sqlite3_column_int64(st, 2);
		b->set_aside = (uint64_t) sqlite3_column_int64(st, 3);
		b->refused = (uint64_t) sqlite3_column_int64(st, 4);
		if (b->unsent > 0 || b->unfiled > 0 || b->set_aside > 0 || sqlite3_column_int64(st, 5) > 0)
			*noteless = false;
		u->up.backlog = ms_up_grow(c, u->up.backlog, sizeof(Sync__Backlog *), u->up.n_backlog, &cap);
		if (b->table == NULL || u->up.backlog == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		u->up.backlog[u->up.n_backlog++] = b;
		ms_buf_printf(fingerprint, "|%s:%llu:%llu:%llu:%llu", name, (unsigned long long) b->unsent,
					  (unsigned long long) b->unfiled, (unsigned long long) b->set_aside,
					  (unsigned long long) b->refused);
		if (with_aside && b->set_aside > 0)
			rc = aside_of(u, aside, b, fingerprint);
	}
	if (rc == SQLITE_DONE)
		rc = fingerprint->oom ? SQLITE_NOMEM : SQLITE_OK;
	sqlite3_finalize(st);
	sqlite3_finalize(aside);
	return rc;
}

/* digests: when due, of the tables with no pending note */
static int
digests(uploader *u, bool *carried)
{
	ms_ctx	   *c = u->c;
	ms_state   *s = &c->st;
	int64_t		interval = 3600;
	sqlite3_stmt *pending = NULL;
	size_t		cap = 0;
	int			rc = ms_config(c, "digest_interval", &interval);

	*carried = false;
	if (rc != SQLITE_OK || !s->has_epoch || s->snapshot != 0 || s->gap != 0)
		return rc;
	if (!s->digest_due && c->now - s->digest_at < interval)
		return SQLITE_OK;
	rc = ms_prepare(c, &pending, "SELECT 1 FROM _sync_notes WHERE tbl = ?1 LIMIT 1");
	for (int i = 0; i < c->schema->n && rc == SQLITE_OK; i++)
	{
		ms_tbl	   *t = &c->schema->t[i];
		ms_table_digest d;
		Sync__Digest *dg;

		sqlite3_bind_text(pending, 1, t->name, -1, SQLITE_STATIC);
		rc = ms_step(c, pending);
		sqlite3_reset(pending);
		if (rc == SQLITE_ROW)
		{
			rc = SQLITE_OK;
			continue;			/* a row written and not filed is not drift */
		}
		if (rc != SQLITE_DONE)
			break;
		rc = SQLITE_OK;
		if (t->broken != NULL)
			continue;			/* a table the host broke has no digest to give */
		rc = ms_digest_table(c, t, &d);
		if (rc != SQLITE_OK)
			break;
		dg = ms_alloc(&c->arena, sizeof(Sync__Digest));
		u->up.digests = ms_up_grow(c, u->up.digests, sizeof(Sync__Digest *), u->up.n_digests, &cap);
		if (dg == NULL || u->up.digests == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		sync__digest__init(dg);
		dg->table = (char *) t->name;
		dg->count = d.count;
		dg->fnv = d.fnv;
		/* the values digest, big-endian (docs/protocol.md 8) */
		dg->values.data = ms_alloc(&c->arena, 8);
		if (dg->values.data == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		for (int b = 0; b < 8; b++)
			dg->values.data[b] = (uint8_t) (d.values >> (56 - 8 * b));
		dg->values.len = 8;
		u->up.digests[u->up.n_digests++] = dg;
	}
	sqlite3_finalize(pending);
	if (rc == SQLITE_OK)
		*carried = true;
	return rc;
}

static int
stamp_rows(uploader *u)
{
	size_t		pos = 0;
	int			rc = SQLITE_OK;

	sqlite3_bind_blob(u->stamp, 3, u->send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
	sqlite3_bind_int64(u->stamp, 4, u->c->now);
	while (rc == SQLITE_OK && pos < u->carried.len)
	{
		const ms_tbl *t;
		size_t		len;

		memcpy(&t, u->carried.data + pos, sizeof t);
		pos += sizeof t;
		memcpy(&len, u->carried.data + pos, sizeof len);
		pos += sizeof len;
		sqlite3_bind_text(u->stamp, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(u->stamp, 2, u->carried.data + pos, (int) len, SQLITE_STATIC);
		rc = ms_done(u->c, u->stamp);
		pos += len;
	}
	return rc;
}

/*
 * build: what the replica runs (Up.build, docs/protocol.md 7): this library,
 * its protocol, the SQLite under it and the host app's build.  A change of
 * any of them may let a row through that the replica refused: the server
 * tries those again at once.
 */
static int
build(uploader *u)
{
	int64_t		app = 0;
	int			rc = ms_config(u->c, "app_build", &app);

	if (rc != SQLITE_OK)
		return rc;
	if (app != 0)
		sqlite3_snprintf(sizeof u->build, u->build, "magic_sync_sqlite %s protocol %d sqlite %s app %lld",
						 MS_SQLITE_VERSION, MS_PROTOCOL, sqlite3_libversion(), (long long) app);
	else
		sqlite3_snprintf(sizeof u->build, u->build, "magic_sync_sqlite %s protocol %d sqlite %s",
						 MS_SQLITE_VERSION, MS_PROTOCOL, sqlite3_libversion());
	u->up.build = u->build;
	return SQLITE_OK;
}

/* head: what every upload says of the replica, and the statements of the walk */
static int
head(uploader *u)
{
	ms_ctx	   *c = u->c;
	ms_state   *s = &c->st;
	sqlite3_stmt *st = NULL;
	int64_t		clock;
	int			rc;

	sqlite3_randomness(MS_SEND_ID_BYTES, u->send_id);
	sync__up__init(&u->up);
	sync__applied__init(&u->applied);
	u->up.protocol = MS_PROTOCOL;
	/* the clock of version => 'hlc' tables: the server's takes the greater (docs/protocol.md 12) */
	rc = ms_hlc_current(c, &clock);
	if (rc != SQLITE_OK)
		return rc;
	u->up.clock = (uint64_t) clock;
	u->up.replica.data = s->replica;
	u->up.replica.len = MS_REPLICA_BYTES;
	u->up.send_id.data = u->send_id;
	u->up.send_id.len = MS_SEND_ID_BYTES;
	u->up.applied = &u->applied;
	/* since when its writes wait: the server keeps what it took back since (reach.c) */
	rc = ms_reach_since(c, &u->up.unfiled_since);
	if (rc != SQLITE_OK)
		return rc;
	if (s->number != 0 && s->has_epoch)
	{
		u->applied.epoch.data = s->epoch;
		u->applied.epoch.len = MS_EPOCH_BYTES;
		u->applied.number = s->number;
		u->applied.nonce.data = s->nonce;
		u->applied.nonce.len = MS_NONCE_BYTES;
		u->applied.seal.data = s->seal;
		u->applied.seal.len = MS_SEAL_BYTES;
		u->applied.generation = s->generation;
	}
	/* another lane carries its rows only, and the applied message that dates them */
	if (!u->first)
		u->up.lane = (char *) u->lane;
	if (s->gap != 0 && s->has_gap_epoch && u->first)
	{
		u->up.gap = s->gap;
		u->up.gap_epoch.data = s->gap_epoch;
		u->up.gap_epoch.len = MS_EPOCH_BYTES;
	}
	rc = build(u);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &u->stamp, "UPDATE _sync_notes SET send_id = ?3, sent_at = ?4 WHERE tbl = ?1 AND key = ?2");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &u->aside, "UPDATE _sync_notes SET set_aside = ?3, aside_sqlstate = ?4, aside_at = ?5,"
						" send_id = NULL, sent_at = NULL WHERE tbl = ?1 AND key = ?2");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &u->drop, "DELETE FROM _sync_notes WHERE tbl = ?1 AND key = ?2");
	/*
	 * what the server keeps of rows that are gone (the server's delete won)
	 * waits for nothing; mostly nothing waits, looked for first: the DELETE
	 * gathers its rows in a temporary table, for none (a tenth of an upload)
	 */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT 1 FROM _sync_waits LIMIT 1");
	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		rc = ms_exec_one(c, "DELETE FROM _sync_waits WHERE NOT EXISTS (SELECT 1 FROM _sync_notes n"
						 " WHERE n.tbl = _sync_waits.tbl AND n.key = _sync_waits.key)");
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* gather: refusals, digests and rows into the upload, stamped; the backlog as it is then into fp */
static int
gather(uploader *u, ms_buf *fp, bool *with_digests)
{
	ms_ctx	   *c = u->c;
	ms_state   *s = &c->st;
	table_rows *trs = NULL;
	size_t		without;
	size_t		cap = 0;
	size_t		fp_from = fp->len;
	bool		noteless = false;
	int			rc = u->first ? backlog(u, fp, false, &noteless) : SQLITE_OK;
	ms_buf		said = {0};

	/* what the backlog said, for when nothing can have moved it (below) */
	if (rc == SQLITE_OK && u->first && noteless && fp->len > fp_from)
	{
		ms_buf_add(&said, fp->data + fp_from, fp->len - fp_from);
		if (said.oom)
			rc = SQLITE_NOMEM;
	}

	*with_digests = false;
	if (rc == SQLITE_OK)
	{
		/* what every upload carries, with room for the backlog to move by two varints an entry, its number and frame */
		without = sync__up__get_packed_size(&u->up);
		u->minimal = without + 24 * (u->up.n_backlog + 1) + 11 + MS_UP_FRAME;
		/* narrowing down (max_rows): rows only, so that what is blamed is a row */
		if (u->max_rows < 0 && u->first)
			rc = digests(u, with_digests);
		/* answers to the server's range questions (range.c): left out when they do not fit */
		if (rc == SQLITE_OK && u->max_rows < 0 && u->first)
		{
			rc = ms_range_answers(c, &u->up);
			if (rc == SQLITE_OK && u->minimal + (sync__up__get_packed_size(&u->up) - without) > u->bound)
				u->up.n_ranges = 0;
		}
	}
	if (rc == SQLITE_OK)
	{
		u->size = u->minimal + (sync__up__get_packed_size(&u->up) - without);
		if (u->size > u->bound)
			rc = ms_fail(c, SQLITE_TOOBIG, "max_upload_bytes (%llu) is too small for what every upload must carry (%llu bytes)",
						 (unsigned long long) u->bound, (unsigned long long) u->size);
	}
	if (rc == SQLITE_OK && u->max_rows < 0 && u->first)
		rc = refusals(u);
	if (rc == SQLITE_OK && (trs = ms_alloc(&c->arena, sizeof(table_rows) * (size_t) (c->schema->n + 1))) == NULL)
		rc = SQLITE_NOMEM;
	for (int i = 0; i < c->schema->n && rc == SQLITE_OK && !u->full && u->max_rows != 0; i++)
		if (c->schema->t[i].noted && strcmp(ms_tbl_lane(&c->schema->t[i]), u->lane) == 0)
		{
			u->rekeyed = false;
			rc = ms_up_rows_of(u, &c->schema->t[i], &trs[i]);
			/* the keys spelled again go in this upload too */
			if (rc == SQLITE_OK && u->rekeyed && !u->full)
				rc = ms_up_rows_of(u, &c->schema->t[i], &trs[i]);
		}
	for (int i = 0; i < c->schema->n && rc == SQLITE_OK; i++)
	{
		if (trs[i].content == 0)
			continue;
		u->up.rows = ms_up_grow(c, u->up.rows, sizeof(Sync__Rows *), u->up.n_rows, &cap);
		if (u->up.rows == NULL)
			rc = SQLITE_NOMEM;
		else
			u->up.rows[u->up.n_rows++] = &trs[i].msg;
	}
	if (rc == SQLITE_OK)
		rc = stamp_rows(u);
	/* the backlog as it is now that the rows carried wait for their answer */
	if (rc == SQLITE_OK && u->first)
	{
		fp->len = 0;
		ms_buf_printf(fp, "%llu:%llu", (unsigned long long) s->number, (unsigned long long) s->gap);
		if (s->has_epoch)
			ms_buf_hex(fp, s->epoch, MS_EPOCH_BYTES);
		/* a new build is news: the server tries again what the old one refused */
		ms_buf_printf(fp, " %s ", u->build);
		/*
		 * With no note at all and no row carried, the walk changed no note:
		 * the backlog is the one read above, with nothing set aside to say
		 * why of (an acknowledgement's upload, each message applied)
		 */
		if (noteless && u->up.n_rows == 0)
		{
			ms_buf_add(fp, said.data, said.len);
			if (fp->oom)
				rc = SQLITE_NOMEM;
		}
		else
			rc = backlog(u, fp, true, &noteless);
	}
	ms_buf_free(&said);
	/*
	 * why rows are set aside goes where it fits (the rows were fitted without
	 * it): when it does not, the upload says without, and the next says again
	 */
	if (rc == SQLITE_OK && u->first && sync__up__get_packed_size(&u->up) + MS_UP_FRAME > u->bound)
	{
		for (size_t i = 0; i < u->up.n_backlog; i++)
			u->up.backlog[i]->n_aside = 0;
		ms_buf_str(fp, "|untold");
	}
	return rc;
}

/* pack: numbered, its length first and its check last; what it carried recorded for its answer */
static int
pack(uploader *u, bool with_digests, const ms_buf *fp, uint8_t **blob, size_t *blob_len)
{
	ms_ctx	   *c = u->c;
	sqlite3_stmt *st;
	int			rc = ms_send_seq(c, u->lane, &u->up.seq);

	/* what the replica said of itself is the first lane's: another's says nothing of it */
	if (rc == SQLITE_OK && u->first)
	{
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET report = ?1, report_send_id = ?2, report_at = ?3,"
						" report_filed = 0, digest_due = CASE WHEN ?4 THEN 0 ELSE digest_due END,"
						" digest_at = CASE WHEN ?4 THEN ?3 ELSE digest_at END WHERE id = 1");
		if (rc != SQLITE_OK)
			return rc;
		sqlite3_bind_text(st, 1, fp->data, (int) fp->len, SQLITE_STATIC);
		sqlite3_bind_blob(st, 2, u->send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, c->now);
		sqlite3_bind_int(st, 4, with_digests);
		rc = ms_done(c, st);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK)
		rc = ms_wish_carried(c, &u->up, u->send_id);
	if (rc == SQLITE_OK)
		rc = ms_send_carried(c, u->send_id, &u->up);
	if (rc != SQLITE_OK)
		return rc;
	*blob_len = sync__up__get_packed_size(&u->up) + MS_UP_FRAME;
	*blob = sqlite3_malloc64(*blob_len);
	if (*blob == NULL)
		return SQLITE_NOMEM;
	sync__up__pack(&u->up, *blob + MS_UP_LENGTH_FIELD);
	if (!ms_up_close(*blob, *blob_len))
		return ms_fail(c, SQLITE_ERROR, "the upload's check could not be computed");
	return SQLITE_OK;
}

static int
upload(uploader *u, uint8_t **blob, size_t *blob_len)
{
	ms_ctx	   *c = u->c;
	ms_state   *s = &c->st;
	int64_t		bound = MS_MAX_UPLOAD_DEFAULT;
	ms_buf		fp = {0};
	bool		with_digests = false;
	bool		fates_due = false;
	bool		say;
	int			rc;

	*blob = NULL;
	/* a replica that knows no uuid has applied nothing and written nothing: nothing to say */
	if (!s->has_replica)
		return SQLITE_OK;
	rc = ms_config(c, "max_upload_bytes", &bound);
	if (rc == SQLITE_OK)
		rc = ms_config(c, "resend_after", &u->resend_after);
	if (rc == SQLITE_OK)
		rc = ms_sends_ensure(c);
	if (rc != SQLITE_OK)
		return rc;
	u->bound = (size_t) bound;
	rc = head(u);
	/*
	 * the server's wishes decided first: an applied one is a write this upload
	 * carries (wish.c); their fates are the engine's word, the first lane's
	 */
	if (rc == SQLITE_OK && u->first)
		rc = ms_wish_decide(c, &u->up, u->resend_after, &fates_due);
	if (rc == SQLITE_OK)
		rc = gather(u, &fp, &with_digests);
	if (rc == SQLITE_OK && fp.oom)
		rc = SQLITE_NOMEM;
	say = u->rows > 0 || u->refusals > 0 || with_digests || u->max_rows == 0 || fates_due ||
		u->up.n_ranges > 0 ||
		(u->first && (s->report == NULL || (rc == SQLITE_OK && strcmp(s->report, fp.data) != 0) ||
					  (!s->report_filed && c->now - s->report_at >= u->resend_after)));
	if (rc == SQLITE_OK && say)
		rc = pack(u, with_digests, &fp, blob, blob_len);
	ms_buf_free(&fp);
	return rc;
}

static void
upload_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	uploader	u;
	uint8_t    *blob = NULL;
	size_t		len = 0;
	int			rc = SQLITE_OK;

	ms_ctx_init(&c, ctx, "sync_upload");
	memset(&u, 0, sizeof u);
	u.c = &c;
	u.max_rows = -1;
	u.lane = "";
	/* sync_upload(lane): a TEXT alone is a lane; sync_upload(max_rows, lane): NULL max_rows is as many as fit */
	if (argc == 1 && sqlite3_value_type(argv[0]) == SQLITE_TEXT)
		rc = ms_lane_arg(&c, argv[0], &u.lane);
	else if (argc >= 1 && !(argc == 2 && sqlite3_value_type(argv[0]) == SQLITE_NULL) &&
			 (sqlite3_value_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_int64(argv[0]) < 0))
		rc = ms_fail(&c, SQLITE_ERROR, "max_rows is a count of rows, 0 or more");
	else if (argc >= 1 && sqlite3_value_type(argv[0]) == SQLITE_INTEGER)
		u.max_rows = sqlite3_value_int64(argv[0]);
	if (rc == SQLITE_OK && argc == 2)
		rc = ms_lane_arg(&c, argv[1], &u.lane);
	u.first = u.lane[0] == '\0';
	if (rc == SQLITE_OK)
		rc = ms_begin(&c, "_sync_upload");
	if (rc == SQLITE_OK)
	{
		rc = ms_state_exists(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_state_load(&c);
		/* an impossible state is said as a gap, and written back as one */
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_state_repair(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_schema_load(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = upload(&u, &blob, &len);
		sqlite3_finalize(u.stamp);
		sqlite3_finalize(u.aside);
		sqlite3_finalize(u.drop);
		ms_buf_free(&u.carried);
		ms_buf_free(&u.later);
		rc = ms_end(&c, "_sync_upload", rc);
	}
	if (rc != SQLITE_OK)
	{
		sqlite3_free(blob);
		ms_ctx_error(&c, ctx, rc);
	}
	else if (blob == NULL)
		sqlite3_result_null(ctx);
	else
		sqlite3_result_blob64(ctx, blob, len, sqlite3_free);
	ms_ctx_done(&c);
}

int
ms_upload_register(sqlite3 *db)
{
	int			rc = sqlite3_create_function(db, "sync_upload", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
											 NULL, upload_func, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_upload", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
									 NULL, upload_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_upload", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY,
									 NULL, upload_func, NULL, NULL);
	return rc;
}
