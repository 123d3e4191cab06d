/*-------------------------------------------------------------------------
 * evolve.c
 *	  Schema changes in the chain (docs/design.md 4.11, docs/protocol.md
 *	  5.3): a migration changes the fleet by the table it touches.
 *
 * Every pass packs each mirrored table's Table and hashes it.  What each
 * replica was last sent of each table is in sync.replica_tables: by its
 * snapshot, or by a schema change since.  A replica whose whole schema
 * (sync.replicas.schema_hash) is not the pass's is compared table by
 * table: a table whose Table now hashes otherwise, or that it was never
 * sent, goes in Down.schema of the first message the pass writes for it;
 * a table no longer declared, in Down.let_go, its held rows marked taken
 * by that message.  The rows a change needs were noted when the DDL ran
 * (declare/follow.c): they are planned as any others, so they go in that
 * message or after it, never before.  Nothing else of the replica moves.
 *
 * A replica provisioned before schema changes existed (a 0.1 server's
 * snapshot) has no rows here: when its schema hash is what that server
 * would have packed of the tables now, it is sent every table as a change
 * (no rows: it has them); otherwise it is provisioned again, as 0.1 did.
 *
 * An upload made before the replica applied a table's change is in the
 * old schema: its rows of that table are not filed (ms_evolve_stale); the
 * replica sends them again in the new one.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "bytes.h"
#include "decl.h"
#include "evolve.h"
#include "fields.h"
#include "pbwrite.h"
#include "schema.h"
#include "spi_check.h"
#include "temp.h"

/* why a replica is provisioned again for a change of the mirrored tables (its last_error) */
#define SCHEMA_WHY "last_error = 'the mirrored tables changed since its snapshot, which predates schema changes" \
	" in the chain: provisioned again with the new schema', last_error_at = now()"

/*
 * The hash sync.replica_tables records of a table held back when the
 * replica was provisioned, left out of its snapshot: no Table hashes so.
 */
#define MS_LEFT_OUT "pg_catalog.decode('00', 'hex')"

/* One table's Table this pass, packed, and its hash. */
typedef struct table_schema
{
	int			tab;
	StringInfoData packed;
	bytea	   *hash;
} table_schema;

/* What one replica is sent this pass: Down's schema and let_go fields. */
typedef struct replica_down
{
	pg_uuid_t	id;				/* hash key */
	StringInfoData fields;
} replica_down;

struct ms_evolve
{
	bool		before;			/* the catalog is not updated for schema changes yet */
	List	   *schemas;		/* table_schema *, parents first */
	bool		listed;			/* pg_temp.ms_schemas_now holds them */
	HTAB	   *downs;			/* replica_down, by replica */
	bool		any;			/* a replica is sent a change this pass */
};

void
ms_evolve_schema(ms_pass *p, ms_pass_catalog *cat)
{
	ms_evolve  *e = palloc0(sizeof(ms_evolve));
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;

	cat->evolve = e;
	/* a library newer than its catalog packs what the catalog's version did */
	e->before = !ms_decl_evolving();
	initStringInfo(&cat->begin);
	foreach(lc, cat->tables)
	{
		ms_table   *t = lfirst(lc);
		table_schema *ts = palloc0(sizeof(table_schema));

		ts->tab = t->id;
		initStringInfo(&ts->packed);
		ms_schema_table(p, cat->tables, t, e->before, &ts->packed);
		/* what is packed here is kept with the catalog (relay.c), whatever SPI made current */
		MemoryContextSwitchTo(cxt);
		ts->hash = ms_pg_sha256_bytea(ts->packed.data, ts->packed.len, "a table's schema");
		ms_schema_field(&cat->begin, MS_FIELD_BEGIN_SCHEMA, &ts->packed);
		e->schemas = lappend(e->schemas, ts);
	}
	cat->schema_hash = ms_pg_sha256_bytea(cat->begin.data, cat->begin.len, "the schema");
}

ms_evolve *
ms_evolve_kept(const ms_evolve *kept)
{
	ms_evolve  *e = palloc0(sizeof(ms_evolve));

	e->before = kept->before;
	e->schemas = kept->schemas;
	return e;
}

/* legacy_hash: the hash of the Begin a server before schema changes packed of these tables */
static bytea *
legacy_hash(ms_pass *p, ms_pass_catalog *cat)
{
	StringInfoData begin;
	ListCell   *lc;

	initStringInfo(&begin);
	foreach(lc, cat->tables)
	{
		StringInfoData t;

		initStringInfo(&t);
		ms_schema_table(p, cat->tables, lfirst(lc), true, &t);
		ms_schema_field(&begin, MS_FIELD_BEGIN_SCHEMA, &t);
	}
	return ms_pg_sha256_bytea(begin.data, begin.len, "the schema");
}

void
ms_evolve_check_race(ms_pass *p)
{
	const char *sql = "SELECT coalesce(string_agg(id || ':' || xmin, ',' ORDER BY id), '') FROM sync.tables";
	SPIPlanPtr	plan = ms_prepare(sql, 0, NULL);
	Snapshot	latest = RegisterSnapshot(GetLatestSnapshot());
	char	   *now;
	char	   *seen;
	bool		isnull;

	ms_spi_check(SPI_execute_snapshot(plan, NULL, NULL, latest, InvalidSnapshot, true, false, 1), SPI_OK_SELECT, "could not read sync.tables");
	now = TextDatumGetCString(ms_value(0, 1, &isnull));
	UnregisterSnapshot(latest);
	ms_run(&p->exec, plan, NULL, NULL, 1);
	seen = TextDatumGetCString(ms_value(0, 1, &isnull));
	SPI_freeplan(plan);
	/*
	 * A declaration written after the pass's snapshot (DDL the event trigger
	 * followed, a sync.mirror) while the catalog reads the tables as they
	 * are now: planning over both would mix two schemas.  Transient: the
	 * pass runs again, in a snapshot that sees it.
	 */
	if (strcmp(now, seen) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the declarations of mirrored tables changed as the pass began"),
				 errdetail("A table's DDL or sync.mirror committed after the pass's snapshot was taken."),
				 errhint("The pass runs again.")));
}

/* schemas_now: pg_temp.ms_schemas_now, the tables as they are now, once a pass */
static void
schemas_now(ms_pass *p, ms_pass_catalog *cat)
{
	Oid			types[4] = {INT4OID, TEXTOID, BYTEAOID, INT4OID};
	SPIPlanPtr	plan;
	int			ord = 0;
	ListCell   *lc;

	if (cat->evolve->listed)
		return;
	ms_temp_table(&p->exec, "ms_schemas_now");
	plan = ms_prepare("INSERT INTO pg_temp.ms_schemas_now VALUES ($1, $2, $3, $4)", 4, types);
	foreach(lc, cat->tables)
	{
		ms_table   *t = lfirst(lc);
		Datum		v[4];

		v[0] = Int32GetDatum(t->id);
		v[1] = CStringGetTextDatum(t->name);
		v[2] = PointerGetDatum(((table_schema *) list_nth(cat->evolve->schemas, ord))->hash);
		v[3] = Int32GetDatum(ord++);
		ms_run(&p->exec, plan, v, NULL, 0);
	}
	SPI_freeplan(plan);
	cat->evolve->listed = true;
}

/* legacy: replicas a server before schema changes provisioned, who have no row of their own here */
static void
legacy(ms_pass *p, ms_pass_catalog *cat)
{
	Oid			types[2] = {BYTEAOID, BYTEAOID};
	Datum		values[2] = {PointerGetDatum(cat->schema_hash), (Datum) 0};
	const char *which =
		" live AND NOT provision AND schema_hash IS DISTINCT FROM $1"
		" AND NOT EXISTS (SELECT FROM sync.replica_tables t WHERE t.replica = r.id)";

	ms_exec(&p->exec, psprintf("SELECT EXISTS (SELECT FROM sync.replicas r WHERE %s)", which),
			1, types, values, NULL, 0);
	if (!DatumGetBool(ms_value(0, 1, &(bool) {false})))
		return;
	values[1] = PointerGetDatum(legacy_hash(p, cat));
	ms_exec(&p->exec, psprintf("UPDATE sync.replicas r SET provision = true, " SCHEMA_WHY " WHERE %s AND schema_hash IS DISTINCT FROM $2", which),
			2, types, values, NULL, 0);
	if (SPI_processed > 0)
		ereport(LOG,
				(errmsg("magic_sync: the mirrored tables changed: %llu replicas are provisioned again with the new schema",
						(unsigned long long) SPI_processed)));
	/* they hold the tables as the schema is now: every table goes as a change, no row */
	ms_exec(&p->exec, psprintf("INSERT INTO sync.replica_tables (replica, tab, name, hash, number)"
						" SELECT r.id, s.tab, s.name, NULL, coalesce(r.snapshot_number, 0)"
						" FROM sync.replicas r CROSS JOIN pg_temp.ms_schemas_now s WHERE %s", which),
			1, types, values, NULL, 0);
}

/* downs: each replica's Down fields, from pg_temp.ms_evolve */
static void
downs(ms_pass *p, ms_pass_catalog *cat)
{
	ms_evolve  *e = cat->evolve;
	HASHCTL		ctl;
	ListCell   *lc;

	memset(&ctl, 0, sizeof ctl);
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(replica_down);
	ctl.hcxt = CurrentMemoryContext;
	e->downs = hash_create("magic_sync schema changes", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ms_exec(&p->exec, "SELECT replica, kind, tab, name FROM pg_temp.ms_evolve ORDER BY replica, kind, ord",
			0, NULL, NULL, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		bool		found;
		replica_down *rd = hash_search(e->downs, DatumGetUUIDP(ms_value(i, 1, &isnull)), HASH_ENTER, &found);
		char		kind = DatumGetChar(ms_value(i, 2, &isnull));
		int			tab = DatumGetInt32(ms_value(i, 3, &isnull));

		if (!found)
			initStringInfo(&rd->fields);
		if (kind == 'l')
		{
			char	   *name = TextDatumGetCString(ms_value(i, 4, &isnull));
			StringInfoData s = {name, (int) strlen(name), (int) strlen(name) + 1, 0};

			ms_schema_field(&rd->fields, MS_FIELD_DOWN_LET_GO, &s);
			continue;
		}
		foreach(lc, e->schemas)
		{
			table_schema *ts = lfirst(lc);

			if (ts->tab == tab)
				ms_schema_field(&rd->fields, MS_FIELD_DOWN_SCHEMA, &ts->packed);
		}
	}
	e->any = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
}

void
ms_evolve_observe(ms_pass *p, ms_pass_catalog *cat, int64 forgotten)
{
	Oid			types[1] = {BYTEAOID};
	Datum		values[1] = {PointerGetDatum(cat->schema_hash)};

	/*
	 * A table held back is left out of the pass's schema: no replica is sent
	 * a change of it, nor told to let it go (it is still declared), nor
	 * provisioned (observe.c); the other tables' changes go.
	 */
	const char *kept = cat->held == NIL ? "" :
		/* a replica provisioned before schema changes (legacy) waits: its tables are compared whole */
		MS_EVOLVE_KEPT;

	if (cat->evolve->before)
	{
		if (cat->held != NIL)
			return;
		/* as before schema changes: the mirrored tables changed since its snapshot, it is provisioned */
		ms_exec(&p->exec,
				"UPDATE sync.replicas SET provision = true, " SCHEMA_WHY
				" WHERE live AND NOT provision AND schema_hash IS DISTINCT FROM $1",
				1, types, values, NULL, 0);
		if (SPI_processed > 0)
			ereport(LOG,
					(errmsg("magic_sync: the mirrored tables changed: %llu replicas are provisioned again with the new schema",
							(unsigned long long) SPI_processed)));
		return;
	}
	/* forgotten replicas: what they were sent goes with them */
	if (forgotten > 0)
		ms_exec(&p->exec, "DELETE FROM sync.replica_tables WHERE replica IN (SELECT id FROM pg_temp.ms_forget)",
				0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec, psprintf("SELECT EXISTS (SELECT FROM sync.replicas r WHERE live AND NOT provision"
						" AND schema_hash IS DISTINCT FROM $1%s)", kept), 1, types, values, NULL, 0);
	if (!DatumGetBool(ms_value(0, 1, &(bool) {false})))
		return;

	schemas_now(p, cat);
	if (cat->held == NIL)
		legacy(p, cat);
	/* a table left out of a replica's snapshot, held back then, flows: it is provisioned again with it */
	ms_exec(&p->exec, "UPDATE sync.replicas r SET provision = true, last_error_at = now(),"
			" last_error = 'a table held back at its snapshot flows again: provisioned again with it'"
			" WHERE live AND NOT provision"
			" AND EXISTS (SELECT FROM sync.replica_tables t JOIN pg_temp.ms_schemas_now s ON s.tab = t.tab"
			"              WHERE t.replica = r.id AND t.hash = " MS_LEFT_OUT ")",
			0, NULL, NULL, NULL, 0);
	if (SPI_processed > 0)
		ereport(LOG,
				(errmsg("magic_sync: %llu replicas are provisioned again: a table held back at their snapshot flows",
						(unsigned long long) SPI_processed)));

	/*
	 * Per replica whose schema is not the pass's: the tables it was sent
	 * otherwise, or never ('c', parents first), and those no longer declared
	 * ('l'), with the last message written for it before this pass.
	 */
	ms_temp_table(&p->exec, "ms_evolve");
	ms_exec(&p->exec, psprintf(
						"INSERT INTO pg_temp.ms_evolve"
						" SELECT r.id, 'c', s.tab, s.name, s.ord, r.last_number"
						"   FROM sync.replicas r CROSS JOIN pg_temp.ms_schemas_now s"
						"   LEFT JOIN sync.replica_tables t ON t.replica = r.id AND t.tab = s.tab"
						"  WHERE r.live AND NOT r.provision AND r.schema_hash IS DISTINCT FROM $1"
						"    AND t.hash IS DISTINCT FROM s.hash%s"
						" UNION ALL"
						" SELECT r.id, 'l', t.tab, t.name, 0, r.last_number"
						"   FROM sync.replicas r JOIN sync.replica_tables t ON t.replica = r.id"
						"  WHERE r.live AND NOT r.provision AND r.schema_hash IS DISTINCT FROM $1"
						"    AND NOT EXISTS (SELECT FROM pg_temp.ms_schemas_now s WHERE s.tab = t.tab)"
						"    AND NOT EXISTS (SELECT FROM sync.tables d WHERE d.id = t.tab)",
						kept),
			1, types, values, NULL, 0);
	/* a replica with nothing to be sent has the schema already */
	ms_exec(&p->exec, psprintf(
						"UPDATE sync.replicas r SET schema_hash = $1"
						" WHERE live AND NOT provision AND schema_hash IS DISTINCT FROM $1"
						"   AND NOT EXISTS (SELECT FROM pg_temp.ms_evolve e WHERE e.replica = r.id)%s",
						kept),
			1, types, values, NULL, 0);
	downs(p, cat);
}

bool
ms_evolve_any(const ms_pass_catalog *cat)
{
	return cat->evolve != NULL && cat->evolve->any;
}

void
ms_evolve_down(const ms_pass_catalog *cat, const pg_uuid_t *replica, StringInfo down)
{
	replica_down *rd;

	if (!ms_evolve_any(cat))
		return;
	rd = hash_search(cat->evolve->downs, replica, HASH_FIND, NULL);
	if (rd != NULL)
		appendBinaryStringInfo(down, rd->fields.data, rd->fields.len);
}

void
ms_evolve_recorded(ms_pass *p, ms_pass_catalog *cat, ArrayType *provisioning)
{
	Oid			types[2] = {BYTEAOID, UUIDARRAYOID};
	Datum		values[2] = {PointerGetDatum(cat->schema_hash), PointerGetDatum(provisioning)};
	SPIPlanPtr	plan;
	ListCell   *lc;
	int			ord = 0;
	bool		provisioned = false;

	if (cat->evolve->before)
		return;
	/* a replica provisioned: its snapshot carried every table as it is now */
	ms_temp_table(&p->exec, "ms_provisioned");
	/* none provisioned: a pass of notes is not planned for a statement it has no use for */
	if (ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) > 0)
	{
		ms_exec(&p->exec, "INSERT INTO pg_temp.ms_provisioned SELECT r.id, r.snapshot_number FROM sync.replicas r"
				" JOIN pg_temp.ms_written w ON w.id = r.id WHERE r.id = ANY ($2) AND NOT r.provision",
				2, types, values, NULL, 0);
		provisioned = SPI_processed > 0;
	}
	if (provisioned)
	{
		Oid			ttypes[3] = {INT4OID, TEXTOID, BYTEAOID};

		schemas_now(p, cat);
		/*
		 * An upload it made before its snapshot is in this schema for every
		 * table that is as it was sent before: the snapshot makes it stale
		 * only for a table that changed (whose notes the replica sends again,
		 * schema.c), and only until it applied it.
		 */
		ms_exec(&p->exec, "DELETE FROM sync.replica_tables t USING pg_temp.ms_provisioned v"
				" WHERE t.replica = v.id AND NOT t.tab IN (SELECT tab FROM pg_temp.ms_schemas_now)",
				0, NULL, NULL, NULL, 0);
		plan = ms_prepare("INSERT INTO sync.replica_tables (replica, tab, name, hash, number)"
						  " SELECT v.id, $1, $2, $3, v.number FROM pg_temp.ms_provisioned v"
						  " ON CONFLICT (replica, tab) DO UPDATE SET name = EXCLUDED.name, was = NULL,"
						  "   number = CASE WHEN sync.replica_tables.hash = EXCLUDED.hash"
						  "            THEN sync.replica_tables.number ELSE EXCLUDED.number END,"
						  "   hash = EXCLUDED.hash", 3, ttypes);
		foreach(lc, cat->tables)
		{
			ms_table   *t = lfirst(lc);
			Datum		tv[3];

			tv[0] = Int32GetDatum(t->id);
			tv[1] = CStringGetTextDatum(t->name);
			tv[2] = PointerGetDatum(((table_schema *) list_nth(cat->evolve->schemas, ord++))->hash);
			ms_run(&p->exec, plan, tv, NULL, 0);
		}
		/* a table held back was left out of its snapshot: marked, to provision it again once it flows */
		foreach(lc, cat->held)
		{
			ms_held    *h = lfirst(lc);

			if (h->t == NULL)
				continue;
			ms_exec(&p->exec, "INSERT INTO sync.replica_tables (replica, tab, name, hash, number)"
					" SELECT v.id, $1, $2, " MS_LEFT_OUT ", v.number FROM pg_temp.ms_provisioned v"
					" ON CONFLICT (replica, tab) DO UPDATE SET hash = EXCLUDED.hash, number = EXCLUDED.number",
					2, (Oid[]) {INT4OID, TEXTOID}, (Datum[]) {Int32GetDatum(h->t->id), CStringGetTextDatum(h->name)},
					NULL, 0);
		}
	}
	if (!ms_evolve_any(cat))
		return;

	/* a replica sent changes: by the first message written for it this pass */
	ms_exec(&p->exec,
			"UPDATE pg_temp.ms_evolve e SET before = (SELECT min(o.number) FROM sync.outbox o"
			"  WHERE o.replica = e.replica AND o.number > e.before)"
			" WHERE e.replica IN (SELECT id FROM pg_temp.ms_written)"
			"   AND e.replica NOT IN (SELECT id FROM pg_temp.ms_provisioned)",
			0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec, "DELETE FROM pg_temp.ms_evolve e WHERE e.replica NOT IN (SELECT id FROM pg_temp.ms_written)"
			" OR e.replica IN (SELECT id FROM pg_temp.ms_provisioned)", 0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec,
			"INSERT INTO sync.replica_tables (replica, tab, name, hash, number)"
			" SELECT e.replica, e.tab, e.name, s.hash, e.before FROM pg_temp.ms_evolve e"
			"   JOIN pg_temp.ms_schemas_now s ON s.tab = e.tab WHERE e.kind = 'c'"
			" ON CONFLICT (replica, tab) DO UPDATE SET hash = EXCLUDED.hash, number = EXCLUDED.number,"
			"   was = CASE WHEN sync.replica_tables.name <> EXCLUDED.name THEN sync.replica_tables.name"
			"         ELSE sync.replica_tables.was END,"
			"   name = EXCLUDED.name",
			0, NULL, NULL, NULL, 0);
	/* a table let go of: its rows are taken back by that message */
	ms_exec(&p->exec,
			"UPDATE sync.held h SET taken = e.before FROM pg_temp.ms_evolve e"
			" WHERE e.kind = 'l' AND h.replica = e.replica AND h.tab = e.tab AND h.taken IS NULL",
			0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec,
			"DELETE FROM sync.replica_tables t USING pg_temp.ms_evolve e"
			" WHERE e.kind = 'l' AND t.replica = e.replica AND t.tab = e.tab",
			0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec, "UPDATE sync.replicas SET schema_hash = $1 WHERE id IN (SELECT replica FROM pg_temp.ms_evolve)",
			1, types, values, NULL, 0);
}

bool
ms_evolve_stale(const pg_uuid_t *replica, const char *table, uint64 applied)
{
	Oid			types[3] = {UUIDOID, TEXTOID, INT8OID};
	Datum		values[3] = {UUIDPGetDatum(replica), CStringGetTextDatum(table), Int64GetDatum((int64) applied)};

	if (!ms_decl_evolving())
		return false;
	return ms_spi_bool("SELECT EXISTS (SELECT FROM sync.replica_tables WHERE replica = $1"
					   " AND (name = $2 OR was = $2) AND number > $3)",
					   3, types, values, true, "could not read sync.replica_tables");
}
