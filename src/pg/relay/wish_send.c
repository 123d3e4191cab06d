/*-------------------------------------------------------------------------
 * wish_send.c
 *	  The relay sends each wish down once (docs/protocol.md 5.4).
 *
 * A wish not yet sent (sync.wish_list.number NULL) goes in a message of
 * its own at the end of the replica's messages of the pass, after its
 * rows and any snapshot's end: a Down of wishes only, in the chain as any
 * message is, so a lost one is sent again as any is, and the replica applies
 * each wish once by its id.  A superseded wish is never sent.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "fields.h"
#include "pbwrite.h"
#include "wish.h"

/* the catalog has wishes (a library newer than the catalog it runs over has none) */
static bool
has_wishes(void)
{
	Oid			nsp = get_namespace_oid("sync", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("wish_list", nsp));
}

ArrayType *
ms_wish_replicas(ms_pass *p, ArrayType *provisioning)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1];

	if (!has_wishes())
		return provisioning;
	values[0] = PointerGetDatum(provisioning != NULL ? provisioning : construct_empty_array(UUIDOID));
	ms_exec(&p->exec, "SELECT array_agg(id) FROM (SELECT w.replica AS id FROM sync.wish_list w"
			" JOIN sync.replicas r ON r.id = w.replica"
			" WHERE w.fate = 'pending' AND w.number IS NULL AND r.live AND NOT r.dropped"
			" UNION SELECT unnest($1)) u",
			1, types, values, NULL, 0);
	return ms_array();
}

struct ms_wish_due_set
{
	int			n;
	pg_uuid_t  *ids;			/* sorted */
};

static int
due_cmp(const void *a, const void *b)
{
	return memcmp(a, b, UUID_LEN);
}

/* a probe's look for a wish not sent yet (wish_list_pending: fate 'pending', and number NULL) */
static bool
unsent(HeapTuple row, TupleDesc desc, void *arg)
{
	bool	   *found = arg;
	bool		isnull;
	Datum		d;

	(void) ms_probe_column(row, desc, "number", &isnull);
	if (!isnull)
		return true;
	d = ms_probe_column(row, desc, "fate", &isnull);
	*found = !isnull && strcmp(TextDatumGetCString(d), "pending") == 0;
	return !*found;
}

ms_wish_due_set *
ms_wish_due(ms_pass *p)
{
	ms_wish_due_set *due;
	bool		found = false;

	if (!has_wishes())
		return NULL;
	/* most passes: none, seen in C by the index of those pending (ms_probe) */
	if (ms_probe(&p->exec, "wish_list", "wish_list_pending", unsent, &found) && !found)
		return NULL;
	ms_exec(&p->exec, "SELECT DISTINCT replica FROM sync.wish_list WHERE fate = 'pending' AND number IS NULL",
			0, NULL, NULL, NULL, 0);
	if (SPI_processed == 0)
		return NULL;
	due = palloc(sizeof *due);
	due->n = (int) SPI_processed;
	due->ids = palloc(sizeof(pg_uuid_t) * due->n);
	for (int i = 0; i < due->n; i++)
	{
		bool		isnull;

		memcpy(&due->ids[i], DatumGetUUIDP(ms_value(i, 1, &isnull)), sizeof(pg_uuid_t));
	}
	qsort(due->ids, due->n, sizeof(pg_uuid_t), due_cmp);
	return due;
}

bool
ms_wish_due_for(const ms_wish_due_set *due, const pg_uuid_t *replica)
{
	return due != NULL && bsearch(replica, due->ids, due->n, sizeof(pg_uuid_t), due_cmp) != NULL;
}

bool
ms_wish_pack(ms_pass *p, const pg_uuid_t *replica, StringInfo down)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(replica)};
	char	   *part = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));
	uint64		n;

	if (!has_wishes())
		return false;
	ms_exec(&p->exec, "SELECT w.id, t.name, w.\"values\"::text, w.apply, coalesce(w.expected::text, '')"
			" FROM sync.wish_list w JOIN sync.tables t ON t.id = w.tab"
			" WHERE w.replica = $1 AND w.fate = 'pending' AND w.number IS NULL ORDER BY w.id",
			1, types, values, NULL, 0);
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Sync__Wish	w = SYNC__WISH__INIT;
		Sync__Key	k = SYNC__KEY__INIT;
		bool		isnull;
		size_t		len;
		uint8	   *buf;

		w.id = (uint64) DatumGetInt64(ms_value(i, 1, &isnull));
		w.table = TextDatumGetCString(ms_value(i, 2, &isnull));
		w.values = TextDatumGetCString(ms_value(i, 3, &isnull));
		w.apply = TextDatumGetCString(ms_value(i, 4, &isnull));
		w.expected = TextDatumGetCString(ms_value(i, 5, &isnull));
		k.n_parts = 1;
		k.parts = &part;
		w.key = &k;
		len = sync__wish__get_packed_size(&w);
		buf = palloc(len);
		sync__wish__pack(&w, buf);
		enlargeStringInfo(down, (int) ms_pb_len_field_size(MS_FIELD_DOWN_WISHES, len));
		down->len += (int) ms_pb_len_field((uint8_t *) down->data + down->len, MS_FIELD_DOWN_WISHES, buf, len);
		pfree(buf);
	}
	return n > 0;
}

void
ms_wish_sent(ms_pass *p, const pg_uuid_t *replica, uint64 number)
{
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2] = {UUIDPGetDatum(replica), Int64GetDatum((int64) number)};

	ms_exec(&p->exec, "UPDATE sync.wish_list SET number = $2 WHERE replica = $1 AND fate = 'pending' AND number IS NULL",
			2, types, values, NULL, 0);
}
