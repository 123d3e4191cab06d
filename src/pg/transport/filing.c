/*-------------------------------------------------------------------------
 * filing.c
 *	  Filing the rows of an upload (docs/design.md 5.2), trusting only what the server
 *	  knows of the sender, never what the rows claim.
 *
 * Each row is filed in a subtransaction of its own (ms_file_row):
 *
 *   record     kept from its first delivery, or the newest wins by its
 *              version; held by the replica at once, or noted again when the
 *              server's copy wins
 *   two-way    only the columns the replica owns, of a row it holds: the
 *              server's change wins when it deleted the row, is taking it
 *              back, or made it again since the replica's edit
 *   delete     a record's, taken only where the replica applied every
 *              message carrying the row
 *
 * A record, or a two-way row's owned columns, pointing at a row the replica
 * may not reach is refused first (reach.c): its rules decide what it
 * reaches, never its writes.
 *
 * and comes out filed, refused (it never can be), dropped (the server's
 * change wins), waiting, or set aside in the inbox (it failed for good:
 * retried after a fix).  A record not taken is filed when the server has
 * it as it came (a resend), and dropped otherwise, saying why: an older
 * version, one edited without raising its version, or a record kept as
 * first filed; those drops are the replica's to fix and are remembered in
 * sync.dropped until the row is filed.
 *
 * A row's key is taken as its columns' types print it (src/shared/canon.h)
 * before it is stored or compared, so that one row has one key however a
 * replica spells it.  Each row's work is done in a memory context reset
 * after it: memory while filing does not grow with the rows filed.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

#include "file.h"
#include "hlc_clock.h"
#include "hlc_file.h"
#include "owner.h"
#include "spi_check.h"
#include "subxact.h"
#include "upread.h"
#include "wire.h"
#include "utils/memutils.h"

/*
 * as_owner: a statement on the mirrored table itself (slot: one of ft's),
 * prepared and run as the table's owner in a security-restricted operation:
 * its defaults, CHECKs, triggers and rules are the owner's code, never run
 * with sync.file's rights (nor the worker's, filing the inbox).
 */
static void
as_owner(ms_filing *f, ms_filed_table *ft, SPIPlanPtr *slot, Datum *values, const char *nulls,
		 bool read_only, long tcount, int expect, const char *what)
{
	ms_as_owner as;

	ms_owner_begin(&as, ft->t->relid);
	ms_filer_run(ms_filed_plan(f->filer, ft, slot), values, nulls, read_only, tcount, expect, what);
	ms_owner_end(&as);
}

/* key parts as a text[] datum */
static Datum
parts_array(char **parts, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(parts[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* how check_row compares a value a row gives its key column: i integer, u uuid, t text */
static char *
kind_of(const ms_column *col)
{
	Oid			type = col->base_type;

	return type == UUIDOID ? "u" : (type == INT2OID || type == INT4OID || type == INT8OID) ? "i" : "t";
}

/*
 * check_row: the upload carries only the columns it may (a catalog's: its key
 * and replica-owned ones), its key columns agree with the key it names, and
 * a record's origin is the replica filing it.  Returns the row as JSON with
 * the key (and origin) filled in, or NULL with *why.
 */
static char *
check_row(ms_filing *f, const ms_table *t, const char *json, char **parts, bool two_way, char **why)
{
	Datum		values[5];
	int			nnames = t->nkey + (t->origin >= 0 ? 1 : 0);
	char	  **names = palloc(sizeof(char *) * nnames);
	char	  **wanted = palloc(sizeof(char *) * nnames);
	char	  **kinds = palloc(sizeof(char *) * nnames);
	char	  **allowed = palloc(sizeof(char *) * t->ncolumns);
	int			nallowed = 0;
	bool		isnull;
	Datum		d;
	char	   *out;

	for (int k = 0; k < t->nkey; k++)
	{
		names[k] = t->columns[t->key[k]].name;
		wanted[k] = parts[k];
		kinds[k] = kind_of(&t->columns[t->key[k]]);
	}
	if (t->origin >= 0)
	{
		names[t->nkey] = t->columns[t->origin].name;
		wanted[t->nkey] = f->replica_text;
		kinds[t->nkey] = kind_of(&t->columns[t->origin]);
	}
	for (int c = 0; c < t->ncolumns; c++)
		if (ms_server_column(t, c) || !two_way || t->columns[c].key || t->columns[c].replica_owned)
			allowed[nallowed++] = t->columns[c].name;
	values[0] = CStringGetTextDatum(json);
	values[1] = parts_array(names, nnames);
	values[2] = parts_array(wanted, nnames);
	values[3] = parts_array(allowed, nallowed);
	values[4] = parts_array(kinds, nnames);
	ms_filer_run(f->filer->check, values, NULL, true, 1, SPI_OK_SELECT, "read an uploaded row");
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		*why = "the row is not a JSON object";
		return NULL;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull);
	if (!isnull)
	{
		*why = psprintf("column \"%s\" is given twice", TextDatumGetCString(d));
		return NULL;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
	{
		if (two_way)
			*why = psprintf("the upload carries columns the replica does not own: %s",
							TextDatumGetCString(d));
		else
			*why = psprintf("the upload carries columns table \"%s\" does not mirror: %s",
							t->name, TextDatumGetCString(d));
		return NULL;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	if (!isnull)
	{
		*why = psprintf("the row's %s disagree with the key it names, or with the replica filing it",
						TextDatumGetCString(d));
		return NULL;
	}
	out = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return out;
}

/* the (replica, table, key) a statement on sync.held takes */
static void
held_args(ms_filing *f, const ms_table *t, const char *key, Datum values[3])
{
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(t->id);
	values[2] = CStringGetTextDatum(key);
}

/* the held row of (replica, t, key): found, its number, whether taken, since when */
static bool
held_row(ms_filing *f, const ms_table *t, const char *key, int64 *number, bool *taken, int64 *since)
{
	Datum		values[3];
	bool		isnull;

	held_args(f, t, key, values);
	ms_filer_run(f->filer->held, values, NULL, true, 1, SPI_OK_SELECT, "read sync.held");
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;
	}
	*number = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*taken = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	*since = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return true;
}

static bool
row_exists(ms_filing *f, ms_filed_table *ft, const char *key)
{
	Datum		values[1] = {CStringGetTextDatum(key)};
	bool		found;

	as_owner(f, ft, &ft->exists, values, NULL, false, 1, SPI_OK_SELECT, "read a mirrored table");
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

/* a statement on sync.held of (replica, t, key) */
static void
on_held(ms_filing *f, SPIPlanPtr plan, const ms_table *t, const char *key, int expect, const char *what)
{
	Datum		values[3];

	held_args(f, t, key, values);
	ms_filer_run(plan, values, NULL, false, 0, expect, what);
}

/*
 * not_taken: a record the insert did not take, against the server's copy:
 * the same copy again is filed (a resend); another is dropped, the
 * server's copy winning, and the row noted so that the replica gets it back
 */
static ms_outcome
not_taken(ms_filing *f, ms_filed_table *ft, const char *key, const char *json, char **why)
{
	const ms_table *t = ft->t;
	Datum		values[2] = {CStringGetTextDatum(json), CStringGetTextDatum(key)};
	Datum		nv[2] = {Int32GetDatum(t->id), CStringGetTextDatum(key)};
	bool		isnull;
	bool		same = false;
	bool		older = false;
	char	   *theirs = NULL;
	char	   *ours = NULL;
	TupleDesc	desc;
	HeapTuple	tup;

	/* its casts to text are the owner's code: as the owner */
	as_owner(f, ft, &ft->compare, values, NULL, true, 1, SPI_OK_SELECT, "compare a record with the server's");
	if (SPI_processed == 1)
	{
		desc = SPI_tuptable->tupdesc;
		tup = SPI_tuptable->vals[0];
		same = DatumGetBool(SPI_getbinval(tup, desc, 1, &isnull)) && !isnull;
		older = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull)) && !isnull;
		theirs = SPI_getvalue(tup, desc, 3);
		ours = SPI_getvalue(tup, desc, 4);
	}
	SPI_freetuptable(SPI_tuptable);
	if (same)
		return MS_FILED;		/* the server has this copy already */
	/* the replica's copy lost: a note, so every replica holding the row gets the server's */
	ms_filer_run(f->filer->note, nv, NULL, false, 0, SPI_OK_INSERT, "note a row");
	f->fix = true;
	if (t->hlc)
		*why = ms_hlc_lost_why(t, theirs, ours);
	else if (t->version < 0)
		*why = "a record is kept as first filed (its table has no version column): the server keeps its copy";
	else if (older)
		*why = psprintf("an older version (%s %s) than the server's (%s): the server's copy wins",
						t->columns[t->version].name, theirs ? theirs : "null", ours ? ours : "null");
	else
		*why = psprintf("edited without raising its version column \"%s\" (%s, as the server's copy): the server keeps its copy",
						t->columns[t->version].name, theirs ? theirs : "null");
	return MS_DROPPED;
}

static ms_outcome
file_record(ms_filing *f, ms_filed_table *ft, const char *key, const char *json, char **why,
			char **sqlstate)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	bool		taken;

	if (ms_reach_refused(f, ft, key, json, why, sqlstate))
		return MS_REFUSED;
	values[0] = CStringGetTextDatum(json);
	values[1] = f->sender;
	if (f->sender == (Datum) 0)
		nulls[1] = 'n';
	as_owner(f, ft, &ft->record, values, nulls, false, 0, SPI_OK_INSERT_RETURNING, "file a record");
	taken = SPI_processed > 0;
	if (taken && ft->t->hlc)
	{
		bool		isnull;
		Datum		stamp = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			ms_hlc_filed(DatumGetInt64(stamp));
	}
	SPI_freetuptable(SPI_tuptable);
	if (!taken)
		return not_taken(f, ft, key, json, why);
	/* the replica holds this version of the row: the newest note of it, at once */
	on_held(f, f->filer->mark_held, ft->t, key, SPI_OK_INSERT, "record a filed row as held");
	return MS_FILED;
}

/*
 * dropped: an edit of the replica's is dropped.  The replica still has its
 * own value in its copy, so the next time the row goes to it, it replaces the
 * copy whole.
 */
static ms_outcome
dropped(ms_filing *f, const ms_table *t, const char *key, char **why, const char *reason)
{
	*why = (char *) reason;
	on_held(f, f->filer->replace, t, key, SPI_OK_UPDATE, "mark a held row");
	return MS_DROPPED;
}

/* a two-way row: only the columns the replica owns, of a row it holds */
static ms_outcome
file_two_way(ms_filing *f, ms_filed_table *ft, const char *key, const char *json, char **why,
			 char **sqlstate)
{
	int64		number;
	bool		taken;
	int64		since;
	Datum		values[2];

	if (!row_exists(f, ft, key))
		return dropped(f, ft->t, key, why, "the server deleted the row: its change wins");
	if (!held_row(f, ft->t, key, &number, &taken, &since))
	{
		if (f->provisioning)
		{
			*why = "the replica is being provisioned again: the edit waits until it holds the row";
			return MS_WAITS;
		}
		*why = "the replica was never sent this row: a replica never creates a two-way row";
		return MS_REFUSED;
	}
	if (taken)
		return dropped(f, ft->t, key, why, "the server is taking the row back: its change wins");
	if (since > f->acked)
		/* the replica edited the row as it was before the server deleted and made it again */
		return dropped(f, ft->t, key, why, "the server made the row again since the replica's edit: its change wins");
	if (ms_reach_refused(f, ft, key, json, why, sqlstate))
		return MS_REFUSED;
	values[0] = CStringGetTextDatum(json);
	values[1] = CStringGetTextDatum(key);
	as_owner(f, ft, &ft->two_way, values, NULL, false, 0, SPI_OK_UPDATE, "file a two-way row");
	return MS_FILED;
}

/* a record's delete: its copy goes only where the replica applied every message carrying it */
static ms_outcome
file_delete(ms_filing *f, ms_filed_table *ft, const char *key, char **why)
{
	int64		number;
	bool		taken;
	int64		since;
	Datum		values[1] = {CStringGetTextDatum(key)};

	if (held_row(f, ft->t, key, &number, &taken, &since) && number > f->acked)
	{
		*why = "a message carrying the row is on its way to the replica: the server keeps it";
		return MS_DROPPED;
	}
	as_owner(f, ft, &ft->delete_row, values, NULL, false, 0, SPI_OK_DELETE, "file a delete");
	on_held(f, f->filer->unhold, ft->t, key, SPI_OK_DELETE, "file a delete");
	return MS_FILED;
}

/*
 * file_row_inner: what the rules say of one row; raises what the database
 * says (a constraint refusing it).
 */
static ms_outcome
file_row_inner(ms_filing *f, ms_filed_table *ft, char **parts, const char *key,
			   const uint8 *bytes, size_t len, bool del, char **why, char **sqlstate)
{
	const ms_table *t = ft->t;
	bool		two_way = !t->record;
	char	   *json;

	if (two_way)
	{
		if (!ft->owned)
		{
			*why = psprintf("table \"%s\" is a catalog: replicas do not write the server's tables", t->name);
			return MS_REFUSED;
		}
		if (del)
		{
			*why = "a replica deletes only its own records";
			return MS_REFUSED;
		}
	}
	else if (t->origin >= 0)
	{
		/* a record's key includes its origin: the replica's own uuid */
		for (int k = 0; k < t->nkey; k++)
			if (t->key[k] == t->origin && pg_strcasecmp(parts[k], f->replica_text) != 0)
			{
				*why = "a replica writes and deletes only its own records";
				return MS_REFUSED;
			}
	}
	if (del)
		return file_delete(f, ft, key, why);
	json = ms_row_json(ft, bytes, len, why);
	if (json == NULL)
		return MS_REFUSED;
	json = check_row(f, t, json, parts, two_way, why);
	if (json == NULL)
		return MS_REFUSED;
	return two_way ? file_two_way(f, ft, key, json, why, sqlstate) :
		file_record(f, ft, key, json, why, sqlstate);
}

/* a row to file, for ms_try */
typedef struct row_job
{
	ms_filing  *f;
	ms_filed_table *ft;
	char	  **parts;
	const char *key;
	const uint8 *bytes;
	size_t		len;
	bool		del;
	ms_outcome	out;
	char	   *why;
	char	   *sqlstate;		/* a refusal's, when it has one */
} row_job;

static void
row_job_run(void *arg)
{
	row_job    *j = arg;

	j->out = file_row_inner(j->f, j->ft, j->parts, j->key, j->bytes, j->len, j->del, &j->why, &j->sqlstate);
}

ms_outcome
ms_file_row(ms_filing *f, ms_filed_table *ft, char **parts, const char *key,
			const uint8 *bytes, size_t len, bool del, char **why, char **sqlstate)
{
	row_job		j = {f, ft, parts, key, bytes, len, del, MS_FILED, NULL, NULL};
	ErrorData  *err = NULL;

	*sqlstate = NULL;
	f->fix = false;
	if (ms_try(row_job_run, &j, &err))
	{
		*why = j.why;
		*sqlstate = j.sqlstate;
		/* whatever refused it, the replica's copy is not the server's: the row goes again */
		if (j.out == MS_REFUSED)
			ms_refusal_answer(f, ft, parts, key, del);
		return j.out;
	}
	*why = err->message;
	*sqlstate = pstrdup(unpack_sql_state(err->sqlerrcode));
	return MS_SET_ASIDE;
}

/* clip: a reason of at most 500 bytes, cut where a character ends */
static char *
clip(const char *why)
{
	int			n = strlen(why);

	return n <= 500 ? pstrdup(why) : pnstrdup(why, pg_mbcliplen(why, n, 500));
}

/*
 * named: a row not filed, with why (and a refusal's SQLSTATE), for the Filed
 * answer (MS_ANSWER_NAMED_MAX in all); counted_as, its table's name as its
 * counts keep it, or NULL
 */
static void
named(ms_filing *f, ms_outcome out, const char *table, const char *counted_as, char **parts, int nparts,
	  const char *why, const char *sqlstate)
{
	Sync__Refusal *r;
	Sync__Key  *k;
	int			i = out == MS_SET_ASIDE ? MS_WAITS : out;

	if (f->nnamed >= MS_ANSWER_NAMED_MAX)
		return;					/* the answer's counts say the rest, and the replica sends them again */
	f->nnamed++;
	r = palloc(sizeof(Sync__Refusal));
	k = palloc(sizeof(Sync__Key));
	sync__refusal__init(r);
	sync__key__init(k);
	k->n_parts = nparts;
	k->parts = palloc(sizeof(char *) * Max(nparts, 1));
	for (int p = 0; p < nparts; p++)
		k->parts[p] = pstrdup(parts[p]);
	/* the name its counts keep, when they do (as long as the call): not a copy per row */
	r->table = counted_as != NULL ? (char *) counted_as : pstrdup(table);
	r->key = k;
	r->reason = clip(why);
	/* a refusal is told with its SQLSTATE: 42501 (not the replica's to write) unless it says its own */
	if (out == MS_REFUSED)
		r->sqlstate = pstrdup(sqlstate ? sqlstate : "42501");
	f->named[i] = lappend(f->named[i], r);
}

/* The counts of one table, found by its name (an upload may name tens of thousands). */
typedef struct counts_entry
{
	char		table[MS_NAME_MAX + 1];
	ms_filed_counts counts;
} counts_entry;

/*
 * counts_of: the counts of table, made the first time it is named, in the
 * call's memory; NULL for a table the server does not mirror once
 * MS_ANSWER_NAMED_MAX of those are counted (the answer does not account for
 * its rows: the replica sends them again, docs/protocol.md 2.3)
 */
static ms_filed_counts *
counts_of(ms_filing *f, const char *table, bool mirrored)
{
	counts_entry *e;
	bool		found;

	if (f->table_counts == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = MS_NAME_MAX + 1;
		ctl.entrysize = sizeof(counts_entry);
		ctl.hcxt = CurrentMemoryContext;
		f->table_counts = hash_create("magic_sync filed tables", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	/* a name is at most MS_NAME_MAX bytes (upread.c, and every name the catalog gives) */
	if (strlen(table) > MS_NAME_MAX)
		elog(ERROR, "a table name of %zu bytes", strlen(table));
	if (!mirrored && f->unmirrored_counted >= MS_ANSWER_NAMED_MAX)
	{
		e = hash_search(f->table_counts, table, HASH_FIND, &found);
		return found ? &e->counts : NULL;
	}
	e = hash_search(f->table_counts, table, HASH_ENTER, &found);
	if (!found)
	{
		f->unmirrored_counted += mirrored ? 0 : 1;
		memset(&e->counts, 0, sizeof e->counts);
		e->counts.table = e->table;
		f->tables = lappend(f->tables, &e->counts);
	}
	return &e->counts;
}

/*
 * counted: one row more of table came out as out, and a few distinct reasons
 * for sync.file's answer; the table's name as its counts keep it, or NULL
 */
static const char *
counted(ms_filing *f, const char *table, bool mirrored, ms_outcome out, const char *why)
{
	ms_filed_counts *c = counts_of(f, table, mirrored);
	ListCell   *lc;

	f->counts[out]++;
	if (c != NULL)
		c->counts[out]++;
	if (why == NULL || out == MS_FILED || list_length(f->reasons[out]) >= 3)
		return c != NULL ? c->table : NULL;
	foreach(lc, f->reasons[out])
		if (strcmp(lfirst(lc), why) == 0)
			return c != NULL ? c->table : NULL;
	f->reasons[out] = lappend(f->reasons[out], clip(why));
	return c != NULL ? c->table : NULL;
}

/* afterwards: what the server keeps of the row besides it: the inbox, and an edit it dropped */
static void
afterwards(ms_filing *f, ms_filed_table *ft, const char *key, ms_outcome out, const char *why)
{
	Datum		values[4] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id),
	CStringGetTextDatum(key), (Datum) 0};

	/* what is in the inbox is older than this upload of the row: it goes */
	if (f->has_inbox && out != MS_WAITS && out != MS_SET_ASIDE)
		ms_filer_run(f->filer->unkeep, values, NULL, false, 0, SPI_OK_DELETE, "empty the inbox of a row");
	if (!f->filer->updated)
		return;
	if (out == MS_DROPPED && f->fix)
	{
		values[3] = CStringGetTextDatum(why);
		ms_filer_run(f->filer->drop_note, values, NULL, false, 0, SPI_OK_INSERT, "remember an edit dropped");
		f->has_dropped = true;
	}
	else if (out == MS_FILED && f->has_dropped)
		ms_filer_run(f->filer->drop_forget, values, NULL, false, 0, SPI_OK_DELETE, "forget an edit dropped");
}

/* whether the replica has rows in the inbox, and edits remembered as dropped (once per call) */
static void
kept_before(ms_filing *f)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;

	ms_spi_check(ms_spi_run(f->filer->updated ?
									   "SELECT EXISTS (SELECT FROM sync.inbox WHERE replica = $1),"
									   " EXISTS (SELECT FROM sync.dropped WHERE replica = $1)" :
									   "SELECT EXISTS (SELECT FROM sync.inbox WHERE replica = $1), false",
									   1, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read sync.inbox");
	f->has_inbox = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	f->has_dropped = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	f->kept_known = true;
	SPI_freetuptable(SPI_tuptable);
}

/* one_row: an upsert (bytes) or a delete (bytes NULL) of ft, keyed k as the upload spells it */
static void
one_row(ms_filing *f, const char *table, ms_filed_table *ft, Sync__Key *k, const uint8 *bytes, size_t len)
{
	bool		del = bytes == NULL;
	char	   *why = NULL;
	char	   *sqlstate = NULL;
	char	  **parts = NULL;
	char	   *key = NULL;
	ms_outcome	out;

	if (ft == NULL)
	{
		why = psprintf("table \"%s\" is not mirrored", table);
		sqlstate = "42P01";
		out = MS_REFUSED;
	}
	else if (k->n_parts != (size_t) ft->t->nkey)
	{
		why = psprintf("table \"%s\" has a key of %d parts, not %zu", ft->t->name, ft->t->nkey, k->n_parts);
		sqlstate = "22023";
		out = MS_REFUSED;
	}
	else if (!ms_key_canonical(ft->t, k, parts = palloc(sizeof(char *) * ft->t->nkey), &why))
	{
		sqlstate = "22P02";
		out = MS_REFUSED;
	}
	else
	{
		Sync__Key	canon = *k;

		canon.parts = parts;
		key = ms_canonical_key(&canon);
		if (ft->held != NULL)
		{
			/* the rest of the upload is filed: this table's rows wait until it is put right */
			why = psprintf("table \"%s\" is held back (%s): its rows wait until it is put right",
						   ft->t->name, ft->held);
			sqlstate = "55000";
			out = MS_WAITS;
		}
		else
			out = ms_file_row(f, ft, parts, key, bytes, len, del, &why, &sqlstate);
	}
	if (out == MS_WAITS || out == MS_SET_ASIDE)
		ms_inbox_keep(f, ft, key, bytes, len, del, why, sqlstate);
	if (key != NULL)
		afterwards(f, ft, key, out, why);
	/* what the answer says lives as long as the call; the rest goes with the row */
	{
		MemoryContext old = MemoryContextSwitchTo(f->filer->cxt);

		const char *counted_as = counted(f, table, ft != NULL, out, why);

		if (out != MS_FILED)
			named(f, out, table, counted_as, k->parts, (int) k->n_parts, why ? why : "", sqlstate);
		MemoryContextSwitchTo(old);
	}
}

void
ms_file_rows(ms_filing *f, const uint8 *rows, size_t len)
{
	ms_rows_reader r;
	ms_filed_table *ft;
	MemoryContext old;
	Sync__Key  *k;
	const uint8_t *bytes;
	size_t		n;

	if (!f->kept_known)
		kept_before(f);
	ms_rows_open(&r, rows, len);
	ft = ms_filed_table_named(f->filer, r.table);
	old = MemoryContextSwitchTo(f->row_cxt);
	while (ms_rows_next(&r, ms_pg_allocator(), &k, &bytes, &n))
	{
		one_row(f, r.table, ft, k, bytes, n);
		/* SPI leaves its procedure's context current, which lives as long as the call */
		MemoryContextSwitchTo(f->row_cxt);
		MemoryContextReset(f->row_cxt);
	}
	MemoryContextSwitchTo(old);
}
