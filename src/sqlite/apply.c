/*
** apply.c - sync_apply(message): apply one ToReplica, all of it or nothing.
**
** The message is decoded under max_message_bytes (sync_config) and checked
** by src/shared/wire.c; one that fails changes nothing and is an error.
** Then, in a savepoint (a transaction of its own when the caller has none):
**
**   Filed        outside the chain, applied whenever it comes (sends.c):
**                the notes still stamped with its send id are let go of
**                when it accounts for them, those it refused set aside.
**   Down, End    the chain of docs/protocol.md 5.1: a later protocol is
**                neither applied nor acknowledged; another replica's
**                message is refused; so is one of a generation older than
**                the one the replica follows (an old primary's, a stale
**                snapshot replayed), whatever its epoch; a new epoch only
**                begins with a snapshot; within a generation, a number at
**                or below the last is a duplicate; a message that does not
**                follow the last applied opens a gap, and nothing but a
**                snapshot's start is applied until one begins -- or, for a
**                gap a lost message opened, the message that follows the
**                last applied, sent again.
**
** A Filed answer of an older generation is refused too: it answers for a
** server whose history was lost (an old primary), and its notes go again.
** A state found impossible as it is loaded (state.c) is written back as a
** chain that applied nothing with a gap open, before anything else.
**
** Applying a Down: a Begin applies the schema (tables.c) and opens the
** snapshot; upserts of every table (applyrows.c), parents first,
** overwrite the row except
** the columns the replica owns (a record of its own origin with a pending
** note is kept whole), make a retired row live, clear its refusal; a row
** that does not decode, whose key columns are not its key, that a local
** constraint refuses, or of a table the replica does not hold is refused
** (recorded in _sync_refused) and the rest goes on; then deletes, children
** first, let go of rows (letgo.c); a Down of many rows runs with the
** connection's triggers off while every trigger of the file is ours, each
** silent while sync_apply writes (quiet_triggers).  An EndSnapshot lets
** go of every row of its tables the snapshot did not name (_sync_named).
** A catalog table empty when the snapshot began is named whole instead (the
** key '', which no row has): only sync_apply adds its rows (its guards), so
** every row it has at the end came with the snapshot, and neither its keys
** nor a scan of it at the end cost anything.  The last applied number,
** nonce and seal are recorded, then retired rows nothing points at go for
** good in a savepoint of their own: a failure there is only noted in
** last_error.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "applier.h"
#include "key.h"

/*
 * fresh_tables: each catalog table the snapshot begins with empty is named
 * whole (the key '', which no row has).  Its guards let no one but
 * sync_apply add rows to it, so at the snapshot's end it holds only rows the
 * snapshot sent: naming each of them, and looking at each at the end for
 * one not named, would double the cost of a first sync's rows.  A record
 * takes rows of the replica's own: its rows are named one by one.
 */
static int
fresh_tables(ms_ctx *c)
{
	int			rc = SQLITE_OK;

	for (int i = 0; i < c->schema->n && rc == SQLITE_OK; i++)
	{
		const ms_tbl *t = &c->schema->t[i];
		sqlite3_stmt *st = NULL;

		if (t->record || t->broken != NULL)
			continue;
		rc = ms_prepare(c, &st, "INSERT OR IGNORE INTO _sync_named(tbl, key)"
						" SELECT %s, '' WHERE NOT EXISTS (SELECT 1 FROM %s)", t->lit, t->q);
		if (rc == SQLITE_OK)
			rc = ms_done(c, st);
		sqlite3_finalize(st);
	}
	return rc;
}

/* begin_snapshot: a new chain, perhaps a new epoch, and the schema */
static int
begin_snapshot(applier *a)
{
	ms_ctx	   *c = a->c;
	Sync__ToReplica *m = a->m;
	sqlite3_stmt *st;
	ms_backfill backfill = {0};
	bool		first = !c->st.has_epoch;	/* a file's first snapshot: its rows are backfilled */
	int			rc;

	rc = ms_prepare(c, &st, "UPDATE _sync_state SET replica = coalesce(replica, ?1), epoch = ?2,"
					" snapshot = ?3, gap = 0, gap_epoch = NULL WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, m->replica.data, MS_REPLICA_BYTES, SQLITE_STATIC);
		sqlite3_bind_blob(st, 2, m->epoch.data, MS_EPOCH_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64) m->number);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return rc;
	if (!c->st.has_replica)
	{
		c->st.has_replica = true;
		memcpy(c->st.replica, m->replica.data, MS_REPLICA_BYTES);
		ms_uuid_text(c->st.replica, c->st.replica_text);
	}
	c->st.has_epoch = true;
	memcpy(c->st.epoch, m->epoch.data, MS_EPOCH_BYTES);
	c->st.snapshot = m->number;
	c->st.gap = 0;
	c->backfill = first ? &backfill : NULL;
	rc = ms_schema_begin(c, m->down->begin);
	c->backfill = NULL;
	if (rc == SQLITE_OK && backfill.n > 0)
		rc = ms_backfill_rows(c, &backfill);
	return rc == SQLITE_OK ? fresh_tables(c) : rc;
}

static int
prepare(applier *a)
{
	return ms_letgo_open(a->c, &a->lg);
}

static void
finish(applier *a)
{
	sqlite3_finalize(a->refuse);
	sqlite3_finalize(a->unrefuse);
	sqlite3_finalize(a->unretire);
	sqlite3_finalize(a->named);
	sqlite3_finalize(a->note);
	ms_letgo_close(a->lg);
	a->refuse = a->unrefuse = a->unretire = a->named = a->note = NULL;
	a->lg = NULL;
	ms_buf_free(&a->key);
	ms_buf_free(&a->rowkey);
	ms_buf_free(&a->evolved);
}

/*
 * A Down of at least this many rows is applied with the connection's
 * triggers off when every trigger of the file is ours (quiet_triggers).
 * Turning them off and on expires the connection's statements: the agent's
 * few are prepared again for less than 16 rows' triggers cost
 * (bench/apply_fixed.c: a 100-row message 7 % fewer instructions, a 16-row
 * one 4 %); a host with many statements kept pays more, so not below 64.
 */
#define QUIET_ROWS 64

/* how every trigger of ours begins: silent while sync_apply writes (ddl.c, reach.c, hlc.c) */
static const char *const ours_when = "WHEN (SELECT applying FROM _sync_state WHERE id = 1) = 0";

/*
 * quiet_triggers: turn the connection's triggers off for the rows of a
 * large Down (SQLITE_DBCONFIG_ENABLE_TRIGGER), when each trigger of the
 * file is one of ours, all silent while sync_apply writes: each row's guard
 * or noting trigger would otherwise run a subprogram reading _sync_state
 * for nothing, which was a third of a snapshot's apply.  A trigger of the
 * host's (any other name or body, or any TEMP trigger) keeps them on, so it
 * fires on every row as before.  Turning them off and on expires the
 * connection's statements, as DDL does (util.c's sentinel covers an undo):
 * only for many rows.  *off: they were turned off, and must be turned on.
 */
static int
quiet_triggers(applier *a, const Sync__Down *d, bool *off, bool *held)
{
	ms_ctx	   *c = a->c;
	sqlite3_stmt *st = NULL;
	size_t		rows = 0;
	int			on = 0;
	int			ours;
	int			rc = SQLITE_OK;

	*off = *held = false;
	for (size_t i = 0; i < d->n_tables; i++)
		rows += d->tables[i]->n_upserts + d->tables[i]->n_deletes;
	if (rows < QUIET_ROWS || sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, -1, &on) != SQLITE_OK || !on)
		return SQLITE_OK;
	/* asked once while the kept schema holds: its prepare and scan were a tenth of a large message's own cost */
	ours = ms_schema_quiet_kept(c);
	*held = ours != 0;
	if (ours == 0)
	{
		rc = ms_prepare(c, &st, "SELECT EXISTS (SELECT 1 FROM main.sqlite_master WHERE type = 'trigger'"
						" AND NOT (name GLOB '_sync_*' AND instr(sql, %Q) > 0) AND %s"
						" UNION ALL SELECT 1 FROM temp.sqlite_master WHERE type = 'trigger')", ours_when, ms_gen_triggers);
		if (rc == SQLITE_OK)
			rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
		{
			rc = SQLITE_OK;
			ours = sqlite3_column_int(st, 0) == 0 ? 1 : -1;
		}
		sqlite3_finalize(st);
		if (rc == SQLITE_OK)
			*held = ms_schema_quiet_keep(c, ours > 0);
	}
	if (rc == SQLITE_OK && ours > 0 &&
		sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *) NULL) == SQLITE_OK)
		*off = true;
	return rc;
}

/*
 * let_go_retired: retired rows nothing points at let go of for good, in a
 * savepoint of their own: a failure there is only noted in last_error (out
 * of memory, I/O and a full disk are the message's).  None retired (nearly
 * every message): no savepoint.
 */
static int
let_go_retired(applier *a, int *let_go)
{
	ms_ctx	   *c = a->c;
	bool		due = true;
	int			rc;
	int			rc2;

	*let_go = 0;
	rc = ms_let_go_due(a->lg, &due);
	if (rc == SQLITE_NOMEM || rc == SQLITE_IOERR || rc == SQLITE_FULL)
		return rc;
	if (rc == SQLITE_OK && !due)
		return SQLITE_OK;
	/* any other failure of the question: asked again in the savepoint, and noted as before */
	sqlite3_free(c->err);
	c->err = NULL;
	rc = ms_begin(c, "_sync_let_go");
	if (rc != SQLITE_OK)
		return rc;
	rc2 = ms_let_go_retired(a->lg, let_go);
	if (rc2 != SQLITE_OK && rc2 != SQLITE_NOMEM && rc2 != SQLITE_IOERR && rc2 != SQLITE_FULL)
	{
		char	   *why = sqlite3_mprintf("letting go of retired rows failed: %s",
										  c->err ? c->err : sqlite3_errstr(rc2));

		sqlite3_free(c->err);
		c->err = NULL;
		rc = ms_end(c, "_sync_let_go", rc2);
		*let_go = 0;
		/* noted, unless it could not be undone as it should */
		if (rc == rc2)
			rc = why ? ms_state_error(c, "%s", why) : SQLITE_NOMEM;
		sqlite3_free(why);
		return rc;
	}
	return ms_end(c, "_sync_let_go", rc2);
}

/* apply: a message that follows the chain */
static int
apply(applier *a, ms_buf *out)
{
	ms_ctx	   *c = a->c;
	Sync__ToReplica *m = a->m;
	bool		begins = m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->begin != NULL;
	bool		reschema = begins || (m->body_case == SYNC__TO_REPLICA__BODY_DOWN &&
									  (m->down->n_schema > 0 || m->down->n_let_go > 0));
	sqlite3_stmt *st = NULL;
	int			rc;
	int			let_go = 0;
	int			made = 0;
	const char *snapshot;
	ms_vsum    *vs = NULL;
	bool		off = false;	/* the connection's triggers are off (quiet_triggers) */
	bool		held = false;

	rc = ms_exec_one(c, "UPDATE _sync_state SET applying = 2 WHERE id = 1");
	/* rows written since the last message are dated by it (reach.c) */
	if (rc == SQLITE_OK)
		rc = ms_reach_date(c);
	/* a table that waited for a name the host had is made once the host renamed its own (tables.c) */
	if (rc == SQLITE_OK && !begins)
		rc = ms_schema_host(c, &made);
	/* the foreign-key triggers read their parents: gone while the tables change */
	if (rc == SQLITE_OK && reschema)
		rc = ms_reach_untrigger(c);
	if (rc == SQLITE_OK && begins)
		rc = begin_snapshot(a);
	/* schema changes, before the rows that need them (docs/protocol.md 5.3) */
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		rc = ms_evolve_apply(c, m->down, &a->evolved);
	if (rc == SQLITE_OK)
		rc = reschema ? ms_reach_trigger(c) : ms_reach_ensure(c);
	if (rc == SQLITE_OK)
		rc = prepare(a);
	/* the values sums kept: the old rows' hashes out (vsum.c) */
	if (rc == SQLITE_OK)
		rc = ms_vsum_before(c, m, &vs);
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_DOWN)
	{
		const Sync__Down *d = m->down;

		rc = quiet_triggers(a, d, &off, &held);
		for (size_t i = 0; i < d->n_tables && rc == SQLITE_OK; i++)
			rc = ms_upserts(a, d->tables[i]);
		for (size_t i = d->n_tables; i > 0 && rc == SQLITE_OK; i--)
			rc = ms_deletes(a, d->tables[i - 1]);
		/* the server's wishes, kept to be decided at the next upload (wish.c) */
		if (rc == SQLITE_OK)
			rc = ms_wish_receive(c, d);
	}
	snapshot = begins ? "begin" : c->st.snapshot ? "open" : NULL;
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_END_SNAPSHOT)
	{
		snapshot = c->st.snapshot ? "end" : NULL;
		rc = ms_end_snapshot(a, m->end_snapshot);
	}
	/* retired rows nothing points at: for good, in a step of their own */
	if (rc == SQLITE_OK)
		rc = let_go_retired(a, &let_go);
	/* and the new rows' in */
	rc = ms_vsum_after(c, vs, rc);
	/*
	 * the message applied, and the triggers heard again: one write of the
	 * row, the last of the message's (an UPDATE of _sync_state is ~10 k
	 * instructions, a fifth of what a one-row message writes)
	 */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET number = ?1, nonce = ?2, seal = ?3, applied_at = ?4,"
						" generation = ?5, applying = 0 WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, (sqlite3_int64) m->number);
		sqlite3_bind_blob(st, 2, m->nonce.data, MS_NONCE_BYTES, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, m->seal.data, MS_SEAL_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, c->now);
		/* never older than the one it followed: the chain refused those */
		sqlite3_bind_int64(st, 5, (sqlite3_int64) m->generation);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	/*
	 * on again once the message's last write is done: nothing from the rows
	 * on writes what a trigger of ours hears (_sync_tables, _sync_made), nor
	 * anything a trigger of ours would not be silent for (the last write
	 * sets applying from 2 to 0, which _sync_vsum_hand ignores), and each
	 * statement prepared meanwhile is prepared without the triggers' programs
	 * (which were most of preparing that last UPDATE)
	 */
	if (off)
	{
		int			rc2;

		sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 1, (int *) NULL);
		/* the expiry was ours: the tables found whole, and what quiet_triggers found, still hold */
		rc2 = ms_schema_own_expiry(c, held);
		if (rc == SQLITE_OK)
			rc = rc2;
	}
	/* what the row now holds (ms_state_said tells the agent) */
	if (rc == SQLITE_OK)
	{
		c->st.number = m->number;
		memcpy(c->st.nonce, m->nonce.data, MS_NONCE_BYTES);
		memcpy(c->st.seal, m->seal.data, MS_SEAL_BYTES);
		c->st.generation = m->generation;
	}
	a->n.let_go = let_go;
	if (rc == SQLITE_OK)
	{
		/* a snapshot's first message says how many rows the snapshot carries (the agent's bar) */
		ms_buf_printf(out, "{\"result\":\"applied\",\"number\":%llu,\"snapshot\":%s%s%s,"
					  "\"upserts\":%d,\"deletes\":%d,\"retired\":%d,\"kept\":%d,\"refused\":%d,\"let_go\":%d%s",
					  (unsigned long long) m->number, snapshot ? "\"" : "", snapshot ? snapshot : "null",
					  snapshot ? "\"" : "", a->n.upserts, a->n.deletes, a->n.retired, a->n.kept,
					  a->n.refused, a->n.let_go, a->evolved.len ? a->evolved.data : "");
		if (begins)
			ms_buf_printf(out, ",\"begin_rows\":%llu", (unsigned long long) m->down->begin->rows);
		/* tables made now that the host renamed its own of their names */
		ms_buf_printf(out, made ? ",\"made\":%d}" : "}", made);
	}
	finish(a);
	return rc;
}

/* open_gap: M does not follow; remember the newest such message */
static int
open_gap(ms_ctx *c, Sync__ToReplica *m, const char *why, ms_buf *out)
{
	ms_state   *s = &c->st;
	bool		newer = !(s->gap != 0 && s->has_gap_epoch &&
						  memcmp(s->gap_epoch, m->epoch.data, MS_EPOCH_BYTES) == 0 &&
						  s->gap >= m->number);
	int			rc = SQLITE_OK;

	if (newer)
	{
		sqlite3_stmt *st;

		rc = ms_prepare(c, &st, "UPDATE _sync_state SET gap = ?1, gap_epoch = ?2 WHERE id = 1");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_int64(st, 1, (sqlite3_int64) m->number);
			sqlite3_bind_blob(st, 2, m->epoch.data, MS_EPOCH_BYTES, SQLITE_STATIC);
			rc = ms_done(c, st);
		}
		sqlite3_finalize(st);
		if (rc == SQLITE_OK)
			s->gap = m->number;
	}
	ms_buf_printf(out, "{\"result\":\"gap\",\"number\":%llu,\"gap\":%llu,\"reason\":\"%s\"}",
				  (unsigned long long) m->number, (unsigned long long) s->gap, why);
	return rc;
}

/*
 * older: M is of a generation older than the one the replica follows: an
 * old primary's message, queued before a standby was promoted past it, or a
 * stale one replayed (a snapshot's Begin of any epoch included).  Neither
 * applied nor acknowledged.
 */
static int
older(ms_ctx *c, Sync__ToReplica *m, ms_buf *out)
{
	ms_buf_printf(out, "{\"result\":\"older_generation\",\"number\":%llu,\"generation\":%llu,\"follows\":%llu}",
				  (unsigned long long) m->number, (unsigned long long) m->generation,
				  (unsigned long long) c->st.generation);
	return ms_state_error(c, "message %llu is of generation %llu, older than the generation %llu this replica follows"
						  " (an old primary's, or replayed): refused",
						  (unsigned long long) m->number, (unsigned long long) m->generation,
						  (unsigned long long) c->st.generation);
}

/* the chain of docs/protocol.md 5.1, rules 2 to 8 */
static int
chain(ms_ctx *c, Sync__ToReplica *m, ms_buf *out)
{
	ms_state   *s = &c->st;
	bool		begins = m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->begin != NULL;
	bool		same_epoch = s->has_epoch && memcmp(s->epoch, m->epoch.data, MS_EPOCH_BYTES) == 0;
	bool		follows;
	applier		a;
	int			rc;

	memset(&a, 0, sizeof a);
	a.c = c;
	a.m = m;
	if (m->body_case == SYNC__TO_REPLICA__BODY_FILED)
	{
		if (m->generation < s->generation)
			return older(c, m, out);
		/* the server's clock, merged from every message it sends this replica */
		rc = ms_hlc_heard(c, m->clock);
		return rc == SQLITE_OK ? ms_apply_filed(c, m, out) : rc;
	}
	if (s->has_replica && memcmp(m->replica.data, s->replica, MS_REPLICA_BYTES) != 0)
	{
		char		other[37];

		ms_uuid_text(m->replica.data, other);
		ms_buf_printf(out, "{\"result\":\"wrong_replica\",\"number\":%llu,\"replica\":\"%s\"}",
					  (unsigned long long) m->number, other);
		return ms_state_error(c, "message %llu is for replica %s, not this one (%s): refused",
							  (unsigned long long) m->number, other, s->replica_text);
	}
	if (m->generation < s->generation)
		return older(c, m, out);
	rc = ms_hlc_heard(c, m->clock);
	if (rc != SQLITE_OK)
		return rc;
	if (!same_epoch && !begins)
		return open_gap(c, m, s->has_epoch ? "another epoch" : "no snapshot yet", out);
	/* a newer generation is a newer position, whatever its number */
	if (same_epoch && m->generation == s->generation && m->number <= s->number)
	{
		sqlite3_stmt *st = NULL;
		int			rc;

		/*
		 * Applied none of it: say again what was applied, so that a server
		 * restored from an older copy, numbering again, hears of it (docs/design.md 4.8).
		 */
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET report = NULL WHERE id = 1");
		if (rc == SQLITE_OK)
			rc = ms_done(c, st);
		sqlite3_finalize(st);
		ms_buf_printf(out, "{\"result\":\"duplicate\",\"number\":%llu,\"last\":%llu}",
					  (unsigned long long) m->number, (unsigned long long) s->number);
		return rc;
	}
	if (begins)
		return apply(&a, out);
	follows = same_epoch && m->previous == s->number && m->previous_nonce.len == MS_NONCE_BYTES &&
		memcmp(m->previous_nonce.data, s->nonce, MS_NONCE_BYTES) == 0;
	/*
	 * A gap a lost message opened (a later one came: its number is beyond the
	 * next) closes when the message that follows the last applied comes after
	 * all, sent again (docs/protocol.md 8.1); a gap sync_resync() opened (the
	 * next number) waits for a snapshot.
	 */
	if (s->gap != 0 && !(follows && s->gap > s->number + 1))
		return open_gap(c, m, "a gap is open", out);
	if (follows)
	{
		if (s->gap != 0)
		{
			rc = ms_exec(c, "UPDATE _sync_state SET gap = 0, gap_epoch = NULL WHERE id = 1");
			if (rc != SQLITE_OK)
				return rc;
			s->gap = 0;
			s->has_gap_epoch = false;
		}
		return apply(&a, out);
	}
	return open_gap(c, m, "it does not follow the last applied", out);
}

static void
apply_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ProtobufCAllocator pa;
	Sync__ToReplica *m;
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	int64_t		bound = MS_MAX_MESSAGE_DEFAULT;
	const uint8_t *bytes;
	size_t		n;
	int			rc;
	ms_buf		out = {0};

	(void) argc;
	ms_ctx_init(&c, ctx, "sync_apply");
	pa = ms_arena_allocator(&c.arena);
	if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
	{
		rc = ms_fail(&c, SQLITE_ERROR, "the message must be a BLOB, not %s",
					 sqlite3_value_type(argv[0]) == SQLITE_NULL ? "NULL" :
					 sqlite3_value_type(argv[0]) == SQLITE_TEXT ? "TEXT" : "a number");
		goto done;
	}
	rc = ms_state_exists(&c);
	if (rc == SQLITE_OK)
		rc = ms_begin(&c, "_sync_apply");
	if (rc != SQLITE_OK)
		goto done;
	/* in the transaction: the settings read here are those ms_state_load checks (one read) */
	rc = ms_config(&c, "max_message_bytes", &bound);
	n = (size_t) sqlite3_value_bytes(argv[0]);
	bytes = sqlite3_value_blob(argv[0]);
	if (rc == SQLITE_OK && (int64_t) n > bound)
		rc = ms_fail(&c, SQLITE_TOOBIG, "the message is %llu bytes, over max_message_bytes (%lld)",
					 (unsigned long long) n, (long long) bound);
	/*
	 * the server's signature, on the bytes as they came: nothing of a
	 * message it does not sign is read; in the transaction that applies it,
	 * so the key it is checked with is the one the file has then
	 */
	if (rc == SQLITE_OK)
		rc = ms_trust_check(&c, bytes, n);
	m = rc == SQLITE_OK ? ms_to_replica_read(bytes, n, (size_t) bound, &pa, &status, reason) : NULL;
	if (rc == SQLITE_OK && status == MS_WIRE_LATER_PROTOCOL)
	{
		/* neither applied nor acknowledged */
		ms_buf_printf(&out, "{\"result\":\"later_protocol\",\"protocol\":%u,\"number\":%llu}",
					  m->protocol, (unsigned long long) m->number);
		m = NULL;
	}
	else if (rc == SQLITE_OK && m == NULL)
		rc = status == MS_WIRE_NO_MEMORY ? SQLITE_NOMEM :
			ms_fail(&c, SQLITE_ERROR, "the message cannot be applied: %s", reason);
	if (rc == SQLITE_OK && m != NULL)
		rc = ms_state_ensure(&c);
	if (rc == SQLITE_OK && m != NULL)
		rc = ms_state_load(&c);
	if (rc == SQLITE_OK && m != NULL)
		rc = ms_state_repair(&c);
	if (rc == SQLITE_OK && m != NULL)
		rc = ms_schema_load(&c);
	if (rc == SQLITE_OK && m != NULL)
		rc = chain(&c, m, &out);
	/* the state it leaves, for the agent's next pull: its last '}' reopened */
	if (rc == SQLITE_OK && m != NULL && !out.oom && out.len > 0 && out.data[out.len - 1] == '}')
	{
		out.len--;
		rc = ms_state_said(&c, &out);
		ms_buf_byte(&out, '}');
	}
	/* the result is whole before anything is kept */
	if (rc == SQLITE_OK && out.oom)
		rc = SQLITE_NOMEM;
	rc = ms_end(&c, "_sync_apply", rc);
done:
	if (rc == SQLITE_OK && out.oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
	{
		/* handed over, not copied: nothing may fail once the work is kept */
		sqlite3_result_text(ctx, out.data, -1, sqlite3_free);
		out.data = NULL;
	}
	else
		ms_ctx_error(&c, ctx, rc);
	ms_buf_free(&out);
	ms_ctx_done(&c);
}

int
ms_apply_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "sync_apply", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								   NULL, apply_func, NULL, NULL);
}
