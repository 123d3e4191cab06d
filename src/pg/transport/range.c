/*-------------------------------------------------------------------------
 * range.c
 *	  Range repair (docs/protocol.md 8.1): a table digest that differs is
 *	  narrowed down by digests of buckets of keys, not answered with a
 *	  snapshot.
 *
 * A digest of a replica that answers range questions (Up.range_repair)
 * differs: the server asks, in the upload's Filed answer, for the digests of
 * the table's buckets (sync.ranges keeps the question, one per replica and
 * table).  Each answer is compared with the same buckets of what the server
 * records the replica holds (sync.held, the rows its table digest counts);
 * the buckets that differ are split again, until they are small enough to
 * ask for their rows, keys and hashes.  Then each row that differs is
 * marked replace (relay/retry.c): a row the replica lacks or holds unlike
 * the server's record goes to it again, alone, as the server has it; a row
 * it holds that the server never recorded is held at number 0 and note 0,
 * and its deletion goes.  The chain goes on: no snapshot.  When the
 * buckets that differ hold most of the table, or its digest differs again
 * after the whole table's buckets matched (what differs is what a row hash
 * does not cover), the replica is provisioned again, as before; but a few
 * rows (RANGE_ROWS_ASKED: a small table's) are asked for one by one.
 *
 * A values digest that differs while the keys agree is narrowed down the
 * same way (sync.ranges.of_values, RangeAsk.values): each row's hash is then
 * its values hash, the server's made by values.c's walk over its current
 * rows -- of the buckets asked about only, each looked up by its key, but
 * for the first question's whole table -- and a row whose values differ
 * goes again by the values repair's path (an upsert to this replica
 * alone); when most of the table differs,
 * or the replica answers by keys (a build before it), every row of the table
 * goes so (values.c), never a snapshot: the keys agree.
 *
 * An answer is compared only once the replica applied every message
 * recorded for it, as a digest is; before, the question is asked again.
 * Everything an answer says is untrusted: its buckets, counts and keys
 * steer only its own replica's repair, a key is checked as the table's key
 * before it is held, and the rows a repair sends are only rows the replica
 * is recorded to hold (or their deletion).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "file.h"
#include "key.h"
#include "range.h"
#include "spi_check.h"
#include "updated.h"
#include "wake.h"

/* the first question splits the whole table by this; later ones aim at RANGE_LEAF rows a bucket */
#define RANGE_FIRST_SPLIT MS_RANGE_FIRST_SPLIT
#define RANGE_LEAF 16
/* the differing buckets' rows asked for at once, however they fall in buckets (short keys share a few) */
#define RANGE_AT_ONCE (RANGE_LEAF * 4)
/* of keys, the most rows asked for one by one when they are most of the table: beyond, a snapshot */
#define RANGE_ROWS_ASKED 1024

/* one held row of the buckets asked about: its key, hash and bucket at the answer's depth */
typedef struct held_row
{
	char	   *key;
	size_t		len;
	uint64		hash;
	uint64		bucket;
} held_row;

static int
held_cmp(const void *a, const void *b)
{
	const held_row *x = a;
	const held_row *y = b;

	return ms_key_cmp(x->key, x->len, y->key, y->len);
}

/* ask: a question for the Filed answer, and kept in sync.ranges */
static void
ask(ms_filing *f, ms_table *t, int64 round, uint32 depth, uint64 *buckets, size_t n, uint32 split,
	bool of_values)
{
	Oid			types[7] = {UUIDOID, INT4OID, INT8OID, INT4OID, INT4OID, INT8ARRAYOID, BOOLOID};
	Datum		values[7];
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Sync__RangeAsk *a = palloc(sizeof(Sync__RangeAsk));

	for (size_t i = 0; i < n; i++)
		elems[i] = Int64GetDatum((int64) buckets[i]);
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(t->id);
	values[2] = Int64GetDatum(round);
	values[3] = Int32GetDatum((int32) depth);
	values[4] = Int32GetDatum((int32) split);
	values[5] = PointerGetDatum(construct_array(elems, (int) n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[6] = BoolGetDatum(of_values);
	ms_spi_check(SPI_execute_with_args("INSERT INTO sync.ranges (replica, tab, round, depth, split, buckets, of_values)"
									   " VALUES ($1, $2, $3, $4, $5, $6, $7)"
									   " ON CONFLICT (replica, tab) DO UPDATE SET round = EXCLUDED.round, depth = EXCLUDED.depth,"
									   "   split = EXCLUDED.split, buckets = EXCLUDED.buckets, of_values = EXCLUDED.of_values,"
									   "   asked_at = now(), held_buckets = NULL, held_counts = NULL, held_sums = NULL",
									   7, types, values, NULL, false, 0), SPI_OK_INSERT, "could not record a range question");
	sync__range_ask__init(a);
	a->table = pstrdup(t->name);
	a->round = (uint64) round;
	a->depth = depth;
	a->split = split;
	a->values = of_values;
	a->n_buckets = n;
	a->buckets = palloc(sizeof(uint64_t) * Max(n, 1));
	if (n > 0)
		memcpy(a->buckets, buckets, sizeof(uint64_t) * n);
	f->range_asks = lappend(f->range_asks, a);
}

static void
forget(ms_filing *f, ms_table *t)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id)};

	ms_spi_check(SPI_execute_with_args("DELETE FROM sync.ranges WHERE replica = $1 AND tab = $2",
									   2, types, values, NULL, false, 0), SPI_OK_DELETE, "could not forget a range question");
}

/*
 * start: a question about t's keys, or (of_values) its values; false when
 * there is none to ask (the replica cannot be asked, or the whole table
 * matched last time)
 */
static bool
start(ms_filing *f, ms_table *t, bool of_values, bool *asked)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id)};
	uint64		whole = 0;

	*asked = false;
	if (!f->range_repair || !ms_catalog_has("ranges"))
		return false;
	ms_spi_check(SPI_execute_with_args("SELECT round, asked_at > now() - interval '10 minutes', split < 0 FROM sync.ranges"
									   " WHERE replica = $1 AND tab = $2",
									   2, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.ranges");
	if (SPI_processed > 0)
	{
		bool		isnull;
		int64		round = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		/* the last narrowing found nothing, and it differs again: beyond what ranges see */
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)))
		{
			/* values: repaired whole, the mark left for the keys' next difference */
			if (!of_values)
				forget(f, t);
			return false;
		}

		/* a question open: its answer is on its way */
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
			return true;
		/* asked long ago and not answered (lost): asked again from the top */
		ask(f, t, round + 1, 0, &whole, 1, RANGE_FIRST_SPLIT, of_values);
		*asked = true;
		return true;
	}
	ask(f, t, 1, 0, &whole, 1, RANGE_FIRST_SPLIT, of_values);
	*asked = true;
	return true;
}

bool
ms_range_start(ms_filing *f, ms_table *t)
{
	bool		asked;

	return start(f, t, false, &asked);
}

/* sums_array: one member of n bucket sums (0 bucket, 1 count, 2 sum) as a bigint[] */
static Datum
sums_array(const ms_range_sum *s, size_t n, int member)
{
	Datum	   *e = palloc(sizeof(Datum) * Max(n, 1));

	for (size_t i = 0; i < n; i++)
		e[i] = Int64GetDatum((int64) (member == 0 ? s[i].bucket : member == 1 ? s[i].count : s[i].sum));
	return PointerGetDatum(construct_array(e, (int) n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

bool
ms_range_start_values(ms_filing *f, ms_filed_table *ft, const ms_range_sum *first, size_t n)
{
	bool		asked;

	if (!start(f, ft->t, true, &asked))
		return false;
	/*
	 * The first question's answer is compared with the buckets of the very
	 * walk that found the difference: the table is not read again for it.
	 * Its rows may change meanwhile: a bucket that differs so is asked
	 * about again, and read then.
	 */
	if (asked)
	{
		Oid			types[5] = {UUIDOID, INT4OID, INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
		Datum		values[5] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id),
			sums_array(first, n, 0), sums_array(first, n, 1), sums_array(first, n, 2)};

		ms_spi_check(SPI_execute_with_args("UPDATE sync.ranges SET held_buckets = $3, held_counts = $4, held_sums = $5"
										   " WHERE replica = $1 AND tab = $2",
										   5, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a range question's buckets");
	}
	/* a replica saying false values digests costs a question and reads of the table: not again for a while */
	ms_values_rest(f, ft);
	return true;
}

/* the held rows of the buckets asked about, gathered by values.c's walk */
typedef struct gathering
{
	uint32		depth;
	uint32		split;
	const uint64 *buckets;
	size_t		nb;
	held_row   *rows;
	size_t		n;
	size_t		cap;
} gathering;

static void
gather(void *arg, const char *key, size_t len, uint64 hash)
{
	gathering  *g = arg;
	uint64		h = ms_range_key_hash(key, len);

	if (!ms_range_member(g->buckets, g->nb, ms_range_bucket(h, g->depth)))
		return;
	if (g->n == g->cap)
	{
		g->cap = g->cap ? g->cap * 2 : 1024;
		g->rows = g->rows ? repalloc_huge(g->rows, sizeof(held_row) * g->cap) :
			palloc_extended(sizeof(held_row) * g->cap, MCXT_ALLOC_HUGE);
	}
	g->rows[g->n].key = pnstrdup(key, len);
	g->rows[g->n].len = len;
	g->rows[g->n].hash = hash;
	g->rows[g->n].bucket = ms_range_bucket(h, g->depth + g->split);
	g->n++;
}

/*
 * held: what the server records the replica holds of t in the buckets asked
 * about; of_values, each row's hash its values hash (values.c), NULL when
 * they cannot be known now (a change of the table on its way)
 */
static held_row *
held(ms_filing *f, ms_filed_table *ft, uint32 depth, const uint64 *buckets, size_t nb, uint32 split, size_t *n,
	 uint64 *total, bool of_values)
{
	ms_table   *t = ft->t;
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id)};
	held_row   *rows;

	if (of_values)
	{
		gathering	g = {depth, split, buckets, nb, NULL, 0, 0};
		uint64		count;
		uint64		asked = 0;
		uint64		read;
		Datum	   *keys;
		SPITupleTable *heldkeys;
		bool		walked;

		if (ms_values_on_its_way(ft->t))
			return NULL;
		/*
		 * The held keys first, no row read: only the rows of the buckets
		 * asked about are read and encoded, each by its key (values.c).
		 * Canonical key order is not the table's, and a bucket is a prefix
		 * of a key's hash: no SQL range selects them.  The whole table's
		 * bucket (the first question), or buckets holding more than a
		 * quarter of it, are read in one pass.
		 */
		ms_spi_check(SPI_execute_with_args("SELECT key FROM sync.held WHERE replica = $1 AND tab = $2"
										   " AND refused IS NULL AND taken IS NULL",
										   2, types, values, NULL, true, 0), SPI_OK_SELECT, "could not read the held rows of a range");
		count = SPI_processed;
		heldkeys = SPI_tuptable;
		keys = palloc(sizeof(Datum) * Max(count, 1));
		for (uint64 i = 0; i < count && depth > 0; i++)
		{
			bool		isnull;
			text	   *k = DatumGetTextPP(SPI_getbinval(heldkeys->vals[i], heldkeys->tupdesc, 1, &isnull));

			if (ms_range_member(buckets, nb, ms_range_bucket(ms_range_key_hash(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k)), depth)))
				keys[asked++] = PointerGetDatum(k);
		}
		/* most of the table asked about: one pass costs less than a probe a row */
		if (depth == 0 || asked * 4 > count)
			walked = ms_values_walk(f, ft, gather, &g, &read) && read == count;
		else
			walked = ms_values_walk_keys(ft, PointerGetDatum(construct_array(keys, (int) asked, TEXTOID, -1, false, TYPALIGN_INT)),
										 gather, &g, &read) && read == asked;
		SPI_freetuptable(heldkeys);
		/* what a round cost (bench/repair.py and tests/e2e/range.py count the table's reads) */
		ereport(DEBUG1, (errmsg("magic_sync: values range round of table \"%s\" for replica %s: %llu rows read of %llu held",
								t->name, f->replica_text, (unsigned long long) read, (unsigned long long) count)));
		/* a held row the table no longer has, or one not walked: a change on its way, asked again */
		if (!walked)
			return NULL;
		*total = count;
		*n = g.n;
		return g.rows ? g.rows : palloc(sizeof(held_row));
	}
	ms_spi_check(SPI_execute_with_args("SELECT key FROM sync.held WHERE replica = $1 AND tab = $2"
									   " AND refused IS NULL AND taken IS NULL",
									   2, types, values, NULL, true, 0), SPI_OK_SELECT, "could not read the held rows of a range");
	rows = palloc(sizeof(held_row) * Max(SPI_processed, 1));
	*n = 0;
	*total = SPI_processed;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		text	   *k = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		const char *key = VARDATA_ANY(k);
		size_t		len = VARSIZE_ANY_EXHDR(k);
		uint64		h = ms_range_key_hash(key, len);

		if (!ms_range_member(buckets, nb, ms_range_bucket(h, depth)))
			continue;
		rows[*n].key = pnstrdup(key, len);
		rows[*n].len = len;
		rows[*n].hash = ms_range_row(key, len);
		rows[*n].bucket = ms_range_bucket(h, depth + split);
		(*n)++;
	}
	SPI_freetuptable(SPI_tuptable);
	return rows;
}

/* text_array: a list of C strings as a text[] Datum */
static Datum
text_array(List *strings)
{
	Datum	   *e = palloc(sizeof(Datum) * list_length(strings));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, strings)
		e[n++] = CStringGetTextDatum(lfirst(lc));
	return PointerGetDatum(construct_array(e, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* mark: the rows that differ go again (or their deletion), to this replica alone */
static void
mark(ms_filing *f, ms_table *t, List *resend, List *extra)
{
	Oid			types[3] = {UUIDOID, INT4OID, TEXTARRAYOID};
	Datum		values[3];

	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(t->id);
	if (resend != NIL)
	{
		values[2] = text_array(resend);
		ms_spi_check(SPI_execute_with_args("UPDATE sync.held SET replace = true WHERE replica = $1 AND tab = $2"
										   " AND key = ANY ($3) AND NOT replace",
										   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not mark the rows a range repair sends");
	}
	if (extra != NIL)
	{
		values[2] = text_array(extra);
		/* never sent it: held at number 0 and note 0, its deletion goes (relay/retry.c) */
		ms_spi_check(SPI_execute_with_args("INSERT INTO sync.held (replica, tab, key, note, number, replace)"
										   " SELECT $1, $2, k, 0, 0, true FROM unnest($3::text[]) k"
										   " ON CONFLICT (replica, tab, key) DO NOTHING",
										   3, types, values, NULL, false, 0), SPI_OK_INSERT, "could not mark the rows a range repair lets go of");
	}
	if (resend != NIL || extra != NIL)
		ms_wake_at_commit();
	f->range_resent += list_length(resend);
	f->range_let_go += list_length(extra);
}

/* rows: the answer's keys against the server's; every row that differs marked */
static void
compare_rows(ms_filing *f, ms_filed_table *ft, Sync__RangeAnswer *a, held_row *h, size_t nh,
			 uint32 depth, const uint64 *buckets, size_t nb, bool of_values)
{
	ms_table   *t = ft->t;
	List	   *differ = NIL;
	held_row   *r = palloc(sizeof(held_row) * Max(a->n_keys, 1));
	size_t		nr = 0;
	List	   *resend = NIL;
	List	   *extra = NIL;
	char	  **parts = palloc(sizeof(char *) * Max(t->nkey, 1));
	size_t	   *lens = palloc(sizeof(size_t) * Max(t->nkey, 1));
	size_t		i = 0,
				j = 0;

	if (a->n_hashes != a->n_keys)
		return;
	for (size_t k = 0; k < a->n_keys; k++)
	{
		Sync__Key  *key = a->keys[k];
		char	   *why;

		/* a key that is no key of the table names no row it may hold */
		if (key == NULL || key->n_parts != (size_t) t->nkey || !ms_key_canonical(t, key, parts, &why))
			continue;
		for (int p = 0; p < t->nkey; p++)
			lens[p] = strlen(parts[p]);
		r[nr].len = ms_key_size((size_t) t->nkey, (const char *const *) parts, lens);
		r[nr].key = palloc(r[nr].len + 1);
		ms_key_write(r[nr].key, (size_t) t->nkey, (const char *const *) parts, lens);
		r[nr].key[r[nr].len] = '\0';
		r[nr].hash = a->hashes[k];
		/* a row of a bucket not asked about says nothing of those asked */
		if (ms_range_member(buckets, nb, ms_range_bucket(ms_range_key_hash(r[nr].key, r[nr].len), depth)))
			nr++;
	}
	qsort(h, nh, sizeof(held_row), held_cmp);
	qsort(r, nr, sizeof(held_row), held_cmp);
	while (i < nh || j < nr)
	{
		int			cmp = i == nh ? 1 : j == nr ? -1 : ms_key_cmp(h[i].key, h[i].len, r[j].key, r[j].len);

		if (cmp < 0)
			resend = lappend(resend, h[i++].key);	/* the replica lacks it */
		else if (cmp > 0)
		{
			/* a row the server never recorded sending (a duplicate key said once) */
			if (extra == NIL || strcmp(llast(extra), r[j].key) != 0)
				extra = lappend(extra, r[j].key);
			j++;
		}
		else
		{
			/* values: an upsert of the row alone, the columns the replica owns kept (values.c) */
			if (h[i].hash != r[j].hash)
			{
				if (of_values)
					differ = lappend(differ, h[i].key);
				else
					resend = lappend(resend, h[i].key);
			}
			i++;
			while (j < nr && ms_key_cmp(h[i - 1].key, h[i - 1].len, r[j].key, r[j].len) == 0)
				j++;
		}
	}
	mark(f, t, resend, extra);
	if (differ != NIL)
	{
		ms_values_repair_keys(f, ft, text_array(differ));
		f->range_resent += list_length(differ);
	}
}

/*
 * compare_buckets: the answer's bucket digests against the server's; the
 * buckets that differ asked about again, split or row by row, or the replica
 * provisioned again when they hold most of the table
 */
static void
compare_sums(ms_filing *f, ms_filed_table *ft, int64 round, Sync__RangeAnswer *a, const ms_range_sum *s, size_t ns,
			 uint64 total, bool of_values)
{
	ms_table   *t = ft->t;
	uint64	   *differ = palloc(sizeof(uint64) * Max(ns + a->n_buckets, 1));
	size_t		nd = 0;
	uint64		most = 0,
				rows_differ = 0,
				rows_replica = 0;
	size_t		i = 0,
				j = 0;
	uint32		split;

	if (a->n_counts != a->n_buckets || a->n_sums != a->n_buckets)
		return;
	for (size_t k = 0; k < a->n_buckets; k++)
	{
		/* ascending, as the protocol says: anything else is not an answer */
		if (k > 0 && a->buckets[k] <= a->buckets[k - 1])
			return;
		rows_replica += a->counts[k];
	}
	while (i < ns || j < a->n_buckets)
	{
		uint64		b,
					cs = 0,
					cr = 0;
		bool		same;

		if (j == a->n_buckets || (i < ns && s[i].bucket < a->buckets[j]))
		{
			b = s[i].bucket;
			cs = s[i++].count;
			same = false;
		}
		else if (i == ns || a->buckets[j] < s[i].bucket)
		{
			b = a->buckets[j];
			cr = a->counts[j++];
			same = false;
		}
		else
		{
			b = s[i].bucket;
			cs = s[i].count;
			cr = a->counts[j];
			same = cs == cr && s[i].sum == a->sums[j];
			i++;
			j++;
		}
		if (same)
			continue;
		differ[nd++] = b;
		most = Max(most, Max(cs, cr));
		rows_differ += Max(cs, cr);
	}
	if (nd == 0)
	{
		/*
		 * Nothing differs (the rows moved on since: a change of the server's
		 * sent the row again): done.  Of the whole table, marked so: should
		 * its digest differ again, what differs is what a row hash does not
		 * cover (ms_range_row), and ms_range_start has it provisioned again
		 * rather than narrowed down for good.
		 */
		if (a->depth == RANGE_FIRST_SPLIT && !of_values)
		{
			Oid			types[2] = {UUIDOID, INT4OID};
			Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id)};

			ms_spi_check(SPI_execute_with_args("UPDATE sync.ranges SET split = -1, buckets = '{}', asked_at = now()"
											   " WHERE replica = $1 AND tab = $2",
											   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a range repair that found nothing");
		}
		else
			forget(f, t);
		return;
	}
	/*
	 * The buckets that differ hold most of the table: a snapshot costs less,
	 * or of values the table's rows sent again.  Not when they are few: their
	 * keys and hashes cost less than a snapshot of the whole replica (a small
	 * table's short keys share a bucket or two, so one key that differs
	 * makes most of it differ here); those rows are asked for one by one,
	 * and only the rows that differ go.
	 */
	if (rows_differ * 2 > total && most <= RANGE_LEAF * 4 &&
		rows_differ > (of_values ? RANGE_LEAF : RANGE_ROWS_ASKED))
	{
		forget(f, t);
		if (of_values)
		{
			/* its values: every row held goes again, as an upsert, no snapshot needed */
			ereport(LOG, (errmsg("magic_sync: range repair of the values of table \"%s\" for replica %s: most of it differs (%llu of the %llu rows held): its rows go again",
								 t->name, f->replica_text, (unsigned long long) rows_differ, (unsigned long long) total)));
			ms_values_repair(f, ft);
			return;
		}
		ms_provision_again(f, psprintf("range repair of table \"%s\": most of it differs (%llu of the %llu rows held): provisioned again",
									   t->name, (unsigned long long) rows_differ, (unsigned long long) total));
		return;
	}
	if (most <= RANGE_LEAF || rows_differ <= RANGE_AT_ONCE || a->depth >= MS_RANGE_DEPTH_MAX ||
		(!of_values && rows_differ * 2 > total && rows_differ <= RANGE_ROWS_ASKED))
	{
		ask(f, t, round + 1, a->depth, differ, Min(nd, MS_RANGE_ASK_MAX), 0, of_values);
		return;
	}
	/* split so that a bucket holds about RANGE_LEAF rows */
	for (split = 1; split < MS_RANGE_SPLIT_MAX && (most >> split) > RANGE_LEAF; split++)
		;
	split = Min(split, MS_RANGE_DEPTH_MAX - a->depth);
	ask(f, t, round + 1, a->depth, differ, Min(nd, MS_RANGE_ASK_MAX), split, of_values);
}

/* compare_buckets: compare_sums of the held rows of the buckets asked about, by bucket */
static void
compare_buckets(ms_filing *f, ms_filed_table *ft, int64 round, Sync__RangeAnswer *a, held_row *h, size_t nh,
				uint64 total, bool of_values)
{
	ms_range_sum *s = palloc(sizeof(ms_range_sum) * Max(nh, 1));

	for (size_t k = 0; k < nh; k++)
	{
		s[k].bucket = h[k].bucket;
		s[k].count = 1;
		s[k].sum = h[k].hash;
	}
	compare_sums(f, ft, round, a, s, ms_range_aggregate(s, nh), total, of_values);
}

/*
 * kept_sums: the buckets kept when a values question was asked (its first:
 * the digest's walk made them), of the rows held now; NULL when none were
 * kept, or the rows held are not what went (asked again then)
 */
static ms_range_sum *
kept_sums(ms_filing *f, ms_filed_table *ft, HeapTuple tup, TupleDesc desc, size_t *ns, uint64 *total)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id)};
	Datum	   *e[3];
	int			n[3];
	bool		isnull;
	ms_range_sum *s;

	for (int m = 0; m < 3; m++)
	{
		Datum		d = SPI_getbinval(tup, desc, 6 + m, &isnull);

		if (isnull)
			return NULL;
		deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &e[m], NULL, &n[m]);
	}
	if (n[1] != n[0] || n[2] != n[0])
		return NULL;
	s = palloc(sizeof(ms_range_sum) * Max(n[0], 1));
	for (int i = 0; i < n[0]; i++)
	{
		s[i].bucket = (uint64) DatumGetInt64(e[0][i]);
		s[i].count = (uint64) DatumGetInt64(e[1][i]);
		s[i].sum = (uint64) DatumGetInt64(e[2][i]);
	}
	*ns = (size_t) n[0];
	ms_spi_check_one(SPI_execute_with_args("SELECT pg_catalog.count(*) FROM sync.held WHERE replica = $1 AND tab = $2"
										   " AND refused IS NULL AND taken IS NULL",
										   2, types, values, NULL, true, 1), SPI_OK_SELECT, "could not count the held rows of a range");
	*total = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return s;
}

/* the rows an answer counts */
static uint64
rows_replica_of(const Sync__RangeAnswer *a)
{
	uint64		n = 0;

	for (size_t i = 0; i < a->n_counts; i++)
		n += a->counts[i];
	return n;
}

void
ms_range_answers(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	bool		caught_up;
	bool		isnull;

	if (up->n_ranges == 0 || !ms_catalog_has("ranges"))
		return;
	{
		Oid			rtypes[1] = {UUIDOID};
		Datum		rvalues[1] = {UUIDPGetDatum(&f->replica)};

		ms_spi_check_one(SPI_execute_with_args("SELECT NOT (provision OR acked_number < " MS_HEAD("r") ") FROM sync.replicas r WHERE id = $1",
											   1, rtypes, rvalues, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
		caught_up = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) &&
			!f->provisioning;
	}
	for (size_t k = 0; k < up->n_ranges; k++)
	{
		Sync__RangeAnswer *a = up->ranges[k];
		ms_filed_table *ft = ms_filed_table_named(f->filer, a->table);
		Datum		values[2];
		int64		round;
		uint32		depth,
					split;
		uint64	   *buckets;
		size_t		nb;
		ArrayType  *arr;
		Datum	   *elems;
		int			nelems;
		held_row   *h;
		size_t		nh;
		uint64		total;
		bool		of_values;
		SPITupleTable *row;
		ms_range_sum *kept;
		size_t		nkept;

		if (ft == NULL)
			continue;
		values[0] = UUIDPGetDatum(&f->replica);
		values[1] = Int32GetDatum(ft->t->id);
		ms_spi_check(SPI_execute_with_args("SELECT round, depth, split, buckets, of_values, held_buckets, held_counts, held_sums"
										   " FROM sync.ranges WHERE replica = $1 AND tab = $2",
										   2, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.ranges");
		if (SPI_processed == 0 ||
			DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)) < 0)
			continue;			/* no question of ours */
		round = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		depth = (uint32) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		split = (uint32) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
		of_values = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
		arr = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
		deconstruct_array(arr, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, NULL, &nelems);
		nb = (size_t) nelems;
		buckets = palloc(sizeof(uint64) * Max(nb, 1));
		for (size_t i = 0; i < nb; i++)
			buckets[i] = (uint64) DatumGetInt64(elems[i]);
		row = SPI_tuptable;
		/* an answer to another question, of another depth, or of values to one of keys: not ours */
		if ((int64) a->round != round || a->depth != depth + split || (a->values && !of_values))
		{
			SPI_freetuptable(row);
			continue;
		}
		if (!caught_up)
		{
			/* messages on their way are not drift: asked again */
			SPI_freetuptable(row);
			ask(f, ft->t, round + 1, depth, buckets, nb, split, of_values);
			continue;
		}
		if (of_values && !a->values)
		{
			/* a replica before values range repair answered by keys: its table's rows go again whole */
			SPI_freetuptable(row);
			forget(f, ft->t);
			ereport(LOG, (errmsg("magic_sync: replica %s answers range questions by keys only: the rows of table \"%s\" go again",
								 f->replica_text, ft->t->name)));
			ms_values_repair(f, ft);
			continue;
		}
		/* the first question of values: the buckets the digest's walk kept, while its rows are what went */
		kept = NULL;
		if (of_values && split > 0 && !ms_values_on_its_way(ft->t))
			kept = kept_sums(f, ft, row->vals[0], row->tupdesc, &nkept, &total);
		SPI_freetuptable(row);
		if (kept != NULL)
		{
			ereport(DEBUG1, (errmsg("magic_sync: values range round of table \"%s\" for replica %s: its buckets kept when asked, no row read",
									ft->t->name, f->replica_text)));
			compare_sums(f, ft, round, a, kept, nkept, Max(total, rows_replica_of(a)), of_values);
			continue;
		}
		h = held(f, ft, depth, buckets, nb, split, &nh, &total, of_values);
		if (h == NULL)
		{
			/* its rows not what went yet: asked again */
			ask(f, ft->t, round + 1, depth, buckets, nb, split, of_values);
			continue;
		}
		if (split == 0)
		{
			compare_rows(f, ft, a, h, nh, depth, buckets, nb, of_values);
			forget(f, ft->t);
		}
		else
			compare_buckets(f, ft, round, a, h, nh, Max(total, rows_replica_of(a)), of_values);
	}
}
