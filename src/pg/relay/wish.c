/*-------------------------------------------------------------------------
 * wish.c
 *	  sync.wish(table, key, values, apply): the server's wish for one
 *	  replica's row of a setting table (docs/protocol.md 5.4).
 *
 * A setting is a record of one row per replica, keyed by its origin alone,
 * that the replica writes.  A wish names the row by the replica's uuid and
 * the columns it sets; it is kept in sync.wish_list, and the relay sends it
 * down at its next pass (wish_send.c).  apply => 'if_unchanged' carries
 * those columns as the server last filed them: the replica applies the wish
 * only while its row still holds them.  A newer wish for the row supersedes
 * the pending ones: those not yet sent never go, and a replica that holds
 * both applies the newer only (its fates come back in uploads, wish_fates.c).
 *
 * For the table's owner, as sync.mirror is: sync.wish reads its caller
 * first, then runs as its owner; the caller's own values are checked against
 * the table as the table's owner (a domain's check is the owner's code).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "access.h"
#include "catalog.h"
#include "decl.h"
#include "owner.h"
#include "spi_check.h"
#include "wake.h"
#include "wish.h"

PG_FUNCTION_INFO_V1(ms_wish);

/* the caller is the role of a replica: a replica never wishes for another's settings */
static void
refuse_replica_role(Oid caller)
{
	Oid			types[1] = {NAMEOID};
	Datum		values[1];

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(caller, false)));
	ms_spi_check(SPI_execute_with_args("SELECT 1 FROM sync.replicas WHERE role = $1", 1, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a replica's role may not call sync.wish"),
				 errdetail("Role \"%s\" is the role a replica authenticates as; wishes are the server's, made by a setting table's owner.",
						   GetUserNameFromId(caller, false)),
				 errhint("Call sync.wish as the table's owner.")));
}

/* the setting table's declaration, or a clear error */
static ms_decl *
setting_of(Oid relid)
{
	ms_decl    *d = ms_decl_of_relid(ms_decl_read_all(), relid);

	if (d == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s is not mirrored", ms_wire_name(relid)),
				 errdetail("A wish is for a row of a setting table."),
				 errhint("Declare it with sync.mirror('%s', 'setting', origin => ...).", ms_wire_name(relid))));
	if (!d->setting)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a setting table", d->name),
				 errdetail("It is mirrored as a %s; a wish is for a row a replica owns and writes, of a table mirrored as a setting.",
						   d->record ? "record" : "catalog"),
				 errhint("Declare it again with sync.mirror('%s', 'setting', origin => ...), or change the row on the server.", d->name)));
	return d;
}

/* the replica exists and is not dropped */
static void
require_replica(pg_uuid_t *replica, const char *text)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(replica)};
	bool		isnull;

	ms_spi_check(SPI_execute_with_args("SELECT dropped FROM sync.replicas WHERE id = $1", 1, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s does not exist", text),
				 errdetail("A setting row is keyed by the uuid of the replica that owns it."),
				 errhint("SELECT id FROM sync.replicas lists the replicas.")));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s is dropped", text),
				 errdetail("A dropped replica is forgotten: no message goes to it."),
				 errhint("Wish for a live replica's setting.")));
}

static bool
in_list(const char *name, char **list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* each column values names: mirrored, neither the origin nor one the server fills */
static void
check_columns(ms_decl *d, Jsonb *values, const char *text)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(values))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the values of a wish are not a JSON object"),
				 errdetail("A wish sets columns of the row: {\"column\": value, ...}."),
				 errhint("Pass e.g. '{\"printer\": \"hall\"}'::jsonb.")));
	it = JsonbIteratorInit(&values->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *col;
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		n++;
		col = pnstrdup(v.val.string.val, v.val.string.len);
		for (int c = 0; c < d->ncolumns; c++)
			known |= strcmp(d->columns[c].name, col) == 0;
		if (d->origin != NULL && strcmp(col, d->origin) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a wish may not set the origin \"%s\" of %s", col, d->name),
					 errdetail("The origin is the row's key: the row of replica %s is that replica's, and no other's.", text),
					 errhint("Name the replica by key, and leave \"%s\" out of the values.", col)));
		if (!known || (d->created && strcmp(col, d->created) == 0) || (d->sender && strcmp(col, d->sender) == 0) ||
			in_list(col, d->generated, d->ngenerated))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("%s has no column \"%s\" a replica writes", d->name, col),
					 errdetail("A wish sets mirrored columns of the row, not one the server fills (created, sender, generated) nor one that never travels."),
					 errhint("SELECT * FROM sync.mirrors shows the table's columns.")));
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a wish sets no column"),
				 errhint("Pass the columns to set: '{\"column\": value}'::jsonb.")));
}

/*
 * as_owner: the values fit the table's columns (their input functions and
 * domains, the owner's code, run as the owner), and for if_unchanged the
 * columns they name as the server last filed them (NULL: no row filed)
 */
static Datum
as_owner(ms_decl *d, pg_uuid_t *replica, Datum values, bool if_unchanged, bool *no_row)
{
	ms_as_owner o;
	char	   *qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(d->relid)),
													   get_rel_name(d->relid));
	Oid			types[2] = {JSONBOID, UUIDOID};
	Datum		args[2] = {values, UUIDPGetDatum(replica)};
	Datum		expected = (Datum) 0;
	bool		isnull = true;
	MemoryContext cxt = CurrentMemoryContext;

	ms_owner_begin(&o, d->relid);
	PG_TRY();
	{
		ms_spi_check(SPI_execute_with_args(psprintf("SELECT pg_catalog.jsonb_populate_record(NULL::%s, $1) IS NULL", qualified),
										   1, types, args, NULL, true, 1), SPI_OK_SELECT, "could not check a wish's values");
	}
	PG_CATCH();
	{
		/* the column's own error, said as the wish's: thrown again at once, the transaction aborts */
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(e->sqlerrcode),
				 errmsg("the values of a wish do not fit %s: %s", d->name, e->message),
				 errdetail("Each value is read as its column's type, as the replica's upload of the row would be filed."),
				 errhint("Give each column a value of its type: SELECT * FROM sync.mirrors shows the table's columns.")));
	}
	PG_END_TRY();
	if (if_unchanged)
	{
		char	   *sql = psprintf("SELECT (SELECT pg_catalog.jsonb_object_agg(k, pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->) k)"
								   " FROM pg_catalog.jsonb_object_keys($1) k) FROM %s t WHERE t.%s OPERATOR(pg_catalog.=) $2",
								   qualified, quote_identifier(d->origin));

		ms_spi_check(SPI_execute_with_args(sql, 2, types, args, NULL, true, 1), SPI_OK_SELECT, "could not read a setting row");
		if (SPI_processed > 0)
			expected = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			expected = PointerGetDatum(SPI_datumTransfer(expected, false, -1));
	}
	ms_owner_end(&o);
	*no_row = isnull;
	return expected;
}

/*
 * ms_wish: sync.wish(table regclass, key uuid, values jsonb, apply text)
 * returns the wish's id.
 */
Datum
ms_wish(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	Oid			relid;
	pg_uuid_t  *replica;
	char	   *who;
	char	   *apply;
	ms_decl    *d;
	ms_as_owner owner;
	Datum		expected;
	bool		no_row;
	int64		id;
	Oid			types[6] = {UUIDOID, INT4OID, JSONBOID, TEXTOID, JSONBOID, INT8OID};
	Datum		values[6];
	char		nulls[6] = "      ";

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.wish takes a table, a key, values and apply, none of them null"),
				 errhint("SELECT sync.wish('store_settings', 'replica uuid', '{\"printer\": \"hall\"}', 'always').")));
	relid = PG_GETARG_OID(0);
	replica = PG_GETARG_UUID_P(1);
	who = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));
	apply = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(apply, "always") != 0 && strcmp(apply, "if_unchanged") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown apply \"%s\"", apply),
				 errdetail("A wish is applied always, or only if the replica's row is unchanged since the server last filed it."),
				 errhint("Write 'always' or 'if_unchanged'.")));

	ms_require_owner(relid, caller);
	ms_definer_begin(fcinfo, &owner);
	SPI_connect();
	refuse_replica_role(caller);
	d = setting_of(relid);
	require_replica(replica, who);
	check_columns(d, PG_GETARG_JSONB_P(2), who);
	expected = as_owner(d, replica, PG_GETARG_DATUM(2), strcmp(apply, "if_unchanged") == 0, &no_row);

	values[0] = UUIDPGetDatum(replica);
	values[1] = Int32GetDatum(d->id);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = CStringGetTextDatum(apply);
	values[4] = expected;
	nulls[4] = no_row ? 'n' : ' ';
	ms_spi_check(SPI_execute_with_args("INSERT INTO sync.wish_list (replica, tab, \"values\", apply, expected)"
									   " VALUES ($1, $2, $3, $4, $5) RETURNING id",
									   5, types, values, nulls, false, 1), SPI_OK_INSERT_RETURNING, "could not record a wish");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &no_row));
	/* the pending ones for the row are superseded; one sent already may still be applied first (wish_fates.c) */
	values[5] = Int64GetDatum(id);
	ms_spi_check(SPI_execute_with_args("UPDATE sync.wish_list SET fate = 'superseded', decided = now(),"
									   " why = pg_catalog.format('wish %s was made for the row before this one was applied', $6)"
									   " WHERE replica = $1 AND tab = $2 AND fate = 'pending' AND id < $6",
									   6, types, values, nulls, false, 0), SPI_OK_UPDATE, "could not supersede wishes");
	SPI_finish();
	ms_definer_end(&owner);
	/* the relay sends it at its next pass: now, once this commits */
	ms_wake_at_commit();
	PG_RETURN_INT64(id);
}
