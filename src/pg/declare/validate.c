/*-------------------------------------------------------------------------
 * validate.c
 *	  The one validator (validate.h): a declaration against what its table
 *	  is in pg_catalog, in the order sync.mirror has always checked it.
 *
 * Each problem is said twice over, once for each reader: sync.mirror's
 * error (errcode, message, why, hint) for whoever declares, and a phrase
 * and a sentence (sync.check) for whoever changed the table since.  The
 * names a declaration lists are checked for existence only when declaring:
 * later, a mirrored column gone is "column dropped", and an unmirrored one
 * gone travels nowhere anyway.  Every other check runs both times, so the
 * relay refuses what sync.mirror would refuse.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/relation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "keys.h"
#include "validate_int.h"

/* sentence: a message as a sentence, for sync.check. */
static char *
sentence(const char *message)
{
	char	   *s = psprintf("%s.", message);

	s[0] = pg_toupper((unsigned char) s[0]);
	return s;
}

/* ms_v_report: see validate_int.h. */
void
ms_v_report(ms_vcx *v, ms_problem p)
{
	ms_problem *out;

	if (v->declaring)
		ereport(ERROR,
				(errcode(p.sqlerrcode),
				 errmsg("%s", p.message),
				 p.why ? errdetail("%s", p.why) : 0,
				 p.hint ? errhint("%s", p.hint) : 0));
	out = palloc(sizeof(ms_problem));
	*out = p;
	out->table = pstrdup(v->d->name);
	if (out->detail == NULL)
		out->detail = sentence(p.message);
	*v->problems = lappend(*v->problems, out);
}

bool
ms_v_in_list(const char *name, char **list, int n)
{
	for (int i = 0; name != NULL && i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

Form_pg_attribute
ms_v_att(ms_vcx *v, const char *name)
{
	TupleDesc	desc = RelationGetDescr(v->rel);

	for (int i = 0; name != NULL && i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

int
ms_v_column(const ms_table *t, const char *name)
{
	for (int i = 0; name != NULL && i < t->ncolumns; i++)
		if (strcmp(t->columns[i].name, name) == 0)
			return i;
	return -1;
}

char *
ms_v_relation_there(ms_vcx *v, Oid relid, const char *what, char *problem)
{
	if (get_rel_name(relid) == NULL)
	{
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_UNDEFINED_TABLE,
			.problem = problem,
			.message = psprintf("the %s of %s was dropped", what, v->d->name)
		});
		return NULL;
	}
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
}

void
ms_v_named(ms_vcx *v, const char *name, const char *role)
{
	if (v->declaring && name != NULL && ms_v_att(v, name) == NULL)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_UNDEFINED_COLUMN,
			.problem = "column missing",
			.message = psprintf("column \"%s\" of %s does not exist", name, v->tabname),
			.why = psprintf("It is named as the table's %s.", role),
			.hint = psprintf("Name an existing column of %s.", v->tabname)
		});
}

/* check_list: every column of a list exists, and none is listed twice. */
static void
check_list(ms_vcx *v, char **list, int n, const char *role)
{
	for (int i = 0; i < n; i++)
	{
		ms_v_named(v, list[i], role);
		for (int j = 0; j < i; j++)
			if (strcmp(list[i], list[j]) == 0)
				ms_v_report(v, (ms_problem) {
					.sqlerrcode = ERRCODE_DUPLICATE_COLUMN,
					.problem = "column listed twice",
					.message = psprintf("column \"%s\" is listed twice as the %s of %s",
										list[i], role, v->tabname),
					.why = "A column is named once in each list.",
					.hint = "Remove the repeated name."
				});
	}
}

/* refuse_role: col, listed in list, is also the table's role. */
static void
refuse_role(ms_vcx *v, const char *col, const char *list, const char *role)
{
	ms_v_report(v, (ms_problem) {
		.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
		.problem = psprintf("column cannot be %s", list),
		.message = psprintf("column \"%s\" of %s cannot be %s", col, v->tabname, list),
		.why = psprintf("It is the table's %s.", role),
		.hint = psprintf("Remove \"%s\" from %s.", col, list)
	});
}

void
ms_v_refuse_in(ms_vcx *v, const char *col, char **names, int n, const char *list, const char *role)
{
	if (ms_v_in_list(col, names, n))
		refuse_role(v, col, list, role);
}

/*
 * check_table: the relation is a table and no partition, still under its
 * wire name; its ms_table begun.  False when there is no table to describe.
 */
static bool
check_table(ms_vcx *v)
{
	const ms_decl *d = v->d;
	char		kind;
	char	   *wire;
	ms_table   *t;

	v->rel = try_relation_open(d->relid, AccessShareLock);
	if (v->rel == NULL)
	{
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_UNDEFINED_TABLE,
			.problem = "table dropped",
			.message = psprintf("table %s was dropped", d->name),
			.detail = psprintf("Table %s was dropped; its declaration remains.", d->name)
		});
		return false;
	}
	v->tabname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(v->rel)),
											RelationGetRelationName(v->rel));
	kind = v->rel->rd_rel->relkind;
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
	{
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_WRONG_OBJECT_TYPE,
			.problem = "not a table",
			.message = psprintf("%s is not a table", v->tabname),
			.why = "Only tables and partitioned tables are mirrored.",
			.hint = "Declare the table a view or other relation reads."
		});
		relation_close(v->rel, AccessShareLock);
		return false;
	}
	if (v->rel->rd_rel->relispartition)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_WRONG_OBJECT_TYPE,
			.problem = "a partition",
			.message = psprintf("%s is a partition", v->tabname),
			.why = "A partitioned table is mirrored whole, by its own name.",
			.hint = "Declare the partitioned table it belongs to."
		});
	wire = ms_wire_name(d->relid);
	if (strcmp(wire, d->name) != 0)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			.problem = "table renamed",
			.message = psprintf("table %s is now called %s", d->name, wire),
			.detail = psprintf("Table %s is now called %s: replicas know it by its old name.",
							   d->name, wire)
		});

	t = v->t = palloc0(sizeof(ms_table));
	t->decl = d;
	t->id = d->id;
	t->relid = d->relid;
	t->name = d->name;
	t->qualified = pstrdup(v->tabname);
	t->record = d->record;
	t->setting = d->setting;
	t->rule = d->rule;
	t->proto = d->proto;
	t->retired = d->retired;
	t->sender = d->sender;
	t->active = d->active;
	t->nunmirrored = d->nunmirrored;
	t->unmirrored = d->unmirrored;
	t->rule_column = t->follows_fkey = -1;
	return true;
}

/* stored_column: the column of this name as declared, or NULL. */
static const ms_decl_column *
stored_column(const ms_decl *d, const char *name)
{
	for (int s = 0; s < d->ncolumns; s++)
		if (strcmp(d->columns[s].name, name) == 0)
			return &d->columns[s];
	return NULL;
}

/* check_columns: the mirrored columns, in attnum order, against those declared. */
static void
check_columns(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;
	TupleDesc	desc = RelationGetDescr(v->rel);

	t->columns = palloc0(sizeof(ms_column) * (desc->natts + 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		char	   *name = NameStr(att->attname);
		const ms_decl_column *s;
		ms_column  *c;

		if (att->attisdropped || ms_v_in_list(name, d->unmirrored, d->nunmirrored))
			continue;
		c = &t->columns[t->ncolumns++];
		c->name = pstrdup(name);
		c->quoted = pstrdup(quote_identifier(name));
		c->attnum = att->attnum;
		c->type = att->atttypid;
		c->base_type = getBaseType(att->atttypid);
		c->collation = att->attcollation;
		c->type_name = format_type_be(att->atttypid);
		c->sqlite_type = ms_sqlite_type(att->atttypid);
		c->not_null = att->attnotnull;
		c->replica_owned = ms_v_in_list(name, d->owned, d->nowned);
		c->key = ms_v_in_list(name, d->key, d->nkey);
		c->spelled = c->key;
		c->typmod = att->atttypmod;
		if (c->typmod < 0)
			(void) getBaseTypeAndTypmod(att->atttypid, &c->typmod);
		s = stored_column(d, name);
		if (s != NULL)
		{
			char	   *now = format_type_with_typemod(att->atttypid, att->atttypmod);

			c->field = s->field;
			c->id = s->id;
			if (strcmp(now, s->type) != 0)
				ms_v_report(v, (ms_problem) {
					.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
					.problem = "type changed",
					.message = psprintf("column %s of %s was declared as %s and is now %s",
										name, d->name, s->type, now)
				});
		}
		else if (d->proto)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
				.problem = "column added",
				.message = psprintf("column %s was added to %s, which travels in the proto codec: it has no field number",
									name, d->name)
			});
	}
	for (int s = 0; s < d->ncolumns; s++)
		if (ms_v_column(t, d->columns[s].name) < 0)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_UNDEFINED_COLUMN,
				.problem = "column dropped",
				.message = psprintf("column %s of %s was dropped or renamed after it was declared",
									d->columns[s].name, d->name)
			});
}

/* check_key: its columns exist, are of a key's type, not null, and unique. */
static void
check_key(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;
	AttrNumber *atts = palloc(sizeof(AttrNumber) * (d->nkey + 1));
	bool		whole = true;

	check_list(v, d->key, d->nkey, "key");
	t->nkey = d->nkey;
	t->key = palloc(sizeof(int) * (d->nkey + 1));
	for (int k = 0; k < d->nkey; k++)
	{
		Form_pg_attribute att = ms_v_att(v, d->key[k]);

		t->key[k] = ms_v_column(t, d->key[k]);
		if (att == NULL)
		{
			whole = false;		/* "column dropped" */
			continue;
		}
		atts[k] = att->attnum;
		if (!ms_key_type_ok(att->atttypid))
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
				.problem = "key type",
				.message = psprintf("key column \"%s\" of %s has type %s", d->key[k],
									v->tabname, format_type_be(att->atttypid)),
				.why = "A key column is smallint, integer, bigint, numeric, text, varchar, citext, uuid, date, time, timestamp, timestamptz or an enum (or a domain over one): each of its values has one spelling on every replica.",
				.hint = "Declare another key, or change the column's type."
			});
		else if (v->declaring && OidIsValid(att->attcollation) && !get_collation_isdeterministic(att->attcollation))
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
				.problem = "key type",
				.message = psprintf("key column \"%s\" of %s has a nondeterministic collation", d->key[k], v->tabname),
				.why = "Values that differ in their bytes are one key under it, which no replica can compare alike: two spellings of one key would be two rows on a replica.",
				.hint = psprintf("Give the key column a deterministic collation: ALTER TABLE %s ALTER COLUMN %s TYPE %s COLLATE \"C\".",
								 v->tabname, quote_identifier(d->key[k]), format_type_be(att->atttypid))
			});
		if (!att->attnotnull)
		{
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_TABLE_DEFINITION,
				.problem = "key changed",
				.message = psprintf("key column \"%s\" of %s is nullable", d->key[k], v->tabname),
				.why = "Every row of a mirrored table has a whole key.",
				.hint = psprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL.",
								 v->tabname, quote_identifier(d->key[k])),
				.detail = psprintf("Key column %s of %s is no longer NOT NULL.", d->key[k], d->name)
			});
			whole = false;
		}
	}
	if (whole && !ms_unique_on(d->relid, d->nkey, atts))
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_TABLE_DEFINITION,
			.problem = "key changed",
			.message = psprintf("the key of %s is not unique", v->tabname),
			.why = psprintf("No unique index of %s is on exactly its key columns.", v->tabname),
			.hint = "Add a primary key or a unique constraint on the key columns.",
			.detail = psprintf("No unique index of %s is on its declared key any more.", d->name)
		});
}

/* check_lists: replica_owned, unmirrored, generated, and the roles they may not take. */
static void
check_lists(ms_vcx *v)
{
	const ms_decl *d = v->d;

	check_list(v, d->owned, d->nowned, "replica_owned");
	check_list(v, d->unmirrored, d->nunmirrored, "unmirrored");
	check_list(v, d->generated, d->ngenerated, "generated");
	for (int i = 0; i < d->nowned; i++)
	{
		ms_v_refuse_in(v, d->owned[i], d->key, d->nkey, "replica_owned", "key column");
		ms_v_refuse_in(v, d->owned[i], d->unmirrored, d->nunmirrored, "replica_owned", "unmirrored column");
	}
	if (d->nowned > 0 && d->record)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
			.problem = "replica_owned in a record",
			.message = "replica_owned is for catalog tables",
			.why = "A record is written by replicas whole; replica_owned names the columns of a catalog that replicas write.",
			.hint = psprintf("Remove replica_owned, or declare %s a catalog.", v->tabname)
		});
	for (int i = 0; i < d->nunmirrored; i++)
		ms_v_refuse_in(v, d->unmirrored[i], d->key, d->nkey, "unmirrored", "key column");
}

/* check_origin: a record's origin, a uuid column of its key; none for a catalog. */
static void
check_origin(ms_vcx *v)
{
	const ms_decl *d = v->d;
	Form_pg_attribute att;

	if (!d->record)
	{
		if (d->origin != NULL || d->version != NULL || d->created != NULL)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
				.problem = "record columns in a catalog",
				.message = psprintf("%s is for record tables", d->origin != NULL ? "origin" :
									d->version != NULL ? "version" : "created"),
				.why = "A catalog is written on the server.",
				.hint = psprintf("Declare %s a record, or leave it out.", v->tabname)
			});
		return;
	}
	if (d->origin == NULL)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
			.problem = "record without origin",
			.message = psprintf("%s %s has no origin", d->setting ? "setting" : "record", v->tabname),
			.why = "A record is keyed by the replica that wrote it: its key includes its origin, a uuid column.",
			.hint = "Name it with origin => col."
		});
	ms_v_named(v, d->origin, "origin");
	att = ms_v_att(v, d->origin);
	if (att != NULL && getBaseType(att->atttypid) != UUIDOID)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "origin not a uuid",
			.message = psprintf("origin column \"%s\" of %s is not a uuid", d->origin, v->tabname),
			.why = "The origin of a record is the uuid of the replica that wrote it."
		});
	if (d->origin != NULL && !ms_v_in_list(d->origin, d->key, d->nkey))
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
			.problem = "origin not in the key",
			.message = psprintf("origin column \"%s\" of %s is not in its key", d->origin, v->tabname),
			.why = "Replicas write records independently: only a key that includes the writer is unique across them.",
			.hint = psprintf("Make the key (origin, ...): key => ARRAY['%s', ...].", d->origin)
		});
	/* a setting is one row per replica: a wish names its row by the replica alone */
	if (d->setting && d->origin != NULL && d->nkey != 1)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
			.problem = "setting keyed by more than its origin",
			.message = psprintf("setting %s is keyed by more than its origin", v->tabname),
			.why = "A setting is one row per replica, keyed by its origin alone: a wish names its row by the replica.",
			.hint = psprintf("Make the key the origin: key => ARRAY['%s'], or declare %s a record.", d->origin, v->tabname)
		});
}

/* check_version: a record's version, not null and ordered. */
static void
check_version(ms_vcx *v)
{
	const ms_decl *d = v->d;
	Form_pg_attribute att;

	if (!d->hlc)
		ms_v_named(v, d->version, "version");
	att = ms_v_att(v, d->version);
	if (att != NULL && !att->attnotnull)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_TABLE_DEFINITION,
			.problem = "version nullable",
			.message = psprintf("version column \"%s\" of %s is nullable", d->version, v->tabname),
			.why = "The newest report of a record wins by its version: every row has one.",
			.hint = psprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL.", v->tabname,
							 quote_identifier(d->version)),
			.detail = psprintf("Version column %s of %s is no longer NOT NULL.", d->version, d->name)
		});
	if (att != NULL && !OidIsValid(lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR)->lt_opr))
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "version not ordered",
			.message = psprintf("version column \"%s\" of %s has no order", d->version, v->tabname),
			.why = psprintf("Type %s has no default btree ordering.", format_type_be(att->atttypid)),
			.hint = "Use a timestamp or a number."
		});
	ms_v_refuse_in(v, d->version, d->unmirrored, d->nunmirrored, "unmirrored", "version");
	ms_v_refuse_in(v, d->origin, d->unmirrored, d->nunmirrored, "unmirrored", "origin");
}

/* check_stamped: the columns the server stamps when it files a row: created, sender. */
static void
check_stamped(ms_vcx *v)
{
	const ms_decl *d = v->d;
	Form_pg_attribute att;

	ms_v_named(v, d->created, "created");
	att = ms_v_att(v, d->created);
	if (att != NULL && getBaseType(att->atttypid) != TIMESTAMPTZOID &&
		getBaseType(att->atttypid) != TIMESTAMPOID && getBaseType(att->atttypid) != DATEOID)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "created not a timestamp",
			.message = psprintf("created column \"%s\" of %s is not a timestamp", d->created, v->tabname),
			.why = "The server stamps it with the time it first files the row."
		});
	ms_v_refuse_in(v, d->created, d->key, d->nkey, "created", "key column");
	ms_v_refuse_in(v, d->created, d->unmirrored, d->nunmirrored, "unmirrored", "created column");
	for (int i = 0; i < d->ngenerated; i++)
	{
		ms_v_refuse_in(v, d->generated[i], d->key, d->nkey, "generated", "key column");
		ms_v_refuse_in(v, d->generated[i], d->owned, d->nowned, "generated", "replica-owned column");
		ms_v_refuse_in(v, d->generated[i], d->unmirrored, d->nunmirrored, "unmirrored", "generated column");
	}
	ms_v_named(v, d->sender, "sender");
	att = ms_v_att(v, d->sender);
	if (att != NULL && getBaseType(att->atttypid) != JSONBOID)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "sender not jsonb",
			.message = psprintf("sender column \"%s\" of %s is not jsonb", d->sender, v->tabname),
			.why = "It is stamped with the sender sync.file is given, a jsonb value."
		});
	ms_v_refuse_in(v, d->sender, d->key, d->nkey, "sender", "key column");
	ms_v_refuse_in(v, d->sender, d->owned, d->nowned, "sender", "replica-owned column");
	ms_v_refuse_in(v, d->sender, d->unmirrored, d->nunmirrored, "unmirrored", "sender column");
}

/* check_replica_side: retired names no column of the table; the partition column. */
static void
check_replica_side(ms_vcx *v)
{
	const ms_decl *d = v->d;

	if (d->retired != NULL && ms_v_att(v, d->retired) != NULL)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DUPLICATE_COLUMN,
			.problem = "retired is a column",
			.message = psprintf("retired column \"%s\" is a column of %s", d->retired, v->tabname),
			.why = "retired names a column of the replica's copy only, set when the replica retires a row.",
			.hint = psprintf("Choose a name %s does not use.", v->tabname)
		});
	ms_v_named(v, d->partition, "partition");
	ms_v_refuse_in(v, d->partition, d->owned, d->nowned, "replica_owned", "partition column");
	ms_v_refuse_in(v, d->partition, d->unmirrored, d->nunmirrored, "unmirrored", "partition column");
}

/* check_active: the active view returns the key columns as the table has them. */
static void
check_active(ms_vcx *v)
{
	const ms_decl *d = v->d;
	char		kind;
	char	   *vname;

	if (!OidIsValid(d->active))
		return;
	v->t->active_qualified = ms_v_relation_there(v, d->active, "active view", "view dropped");
	if (v->t->active_qualified == NULL)
		return;
	kind = get_rel_relkind(d->active);
	vname = ms_wire_name(d->active);
	if (kind != RELKIND_VIEW && kind != RELKIND_MATVIEW)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_WRONG_OBJECT_TYPE,
			.problem = "view changed",
			.message = psprintf("active relation %s is not a view", vname),
			.why = "The active rows of a table are those a view of it returns.",
			.hint = psprintf("CREATE VIEW ... AS SELECT * FROM %s WHERE ...", v->tabname)
		});
	for (int k = 0; k < d->nkey; k++)
	{
		AttrNumber	va = get_attnum(d->active, d->key[k]);
		Form_pg_attribute att = ms_v_att(v, d->key[k]);

		if (va <= 0)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_UNDEFINED_COLUMN,
				.problem = "view changed",
				.message = psprintf("active view %s has no column \"%s\"", vname, d->key[k]),
				.why = "A row is active when the view returns its key.",
				.hint = psprintf("Select the key columns of %s in the view.", v->tabname),
				.detail = psprintf("The active view of %s has no column %s, a key column.",
								   d->name, d->key[k])
			});
		else if (att != NULL && get_atttype(d->active, va) != att->atttypid)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
				.problem = "view changed",
				.message = psprintf("column \"%s\" of active view %s is not of its table's type",
									d->key[k], vname),
				.why = "A row is active when the view returns its key.",
				.hint = psprintf("Select the key columns of %s in the view as they are.", v->tabname)
			});
	}
}

void
ms_decl_fix(ms_decl *d, List *decls)
{
	Relation	rel = relation_open(d->relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *fks;
	ListCell   *lc;

	d->ncolumns = 0;
	d->columns = palloc0(sizeof(ms_decl_column) * (desc->natts + 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		ms_decl_column *c;

		if (att->attisdropped || ms_v_in_list(NameStr(att->attname), d->unmirrored, d->nunmirrored))
			continue;
		c = &d->columns[d->ncolumns++];
		c->name = pstrdup(NameStr(att->attname));
		c->type = format_type_with_typemod(att->atttypid, att->atttypmod);
		c->field = d->proto ? d->ncolumns : 0;
		c->id = d->ncolumns;
	}
	d->last_id = d->ncolumns;
	/* every column, mirrored or not, by its attnum: follow.c follows a rename by it */
	d->natts = 0;
	d->atts = palloc0(sizeof(ms_decl_att) * (desc->natts + 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		d->atts[d->natts].name = pstrdup(NameStr(att->attname));
		d->atts[d->natts++].attnum = att->attnum;
	}
	relation_close(rel, NoLock);

	fks = ms_v_read_fks(d->relid);
	d->nfkeys = 0;
	d->fkeys = palloc0(sizeof(ms_decl_fkey) * (list_length(fks) + 1));
	foreach(lc, fks)
	{
		ms_fk_row  *fk = lfirst(lc);
		ms_decl    *pd = ms_decl_of_relid(decls, fk->parent);
		bool		travels = false;

		for (int c = 0; c < fk->ncols; c++)
			travels = travels || !ms_v_in_list(fk->cols[c], d->unmirrored, d->nunmirrored);
		/* one to a table not declared is refused by validation */
		if (!travels || pd == NULL)
			continue;
		d->fkeys[d->nfkeys].name = fk->name;
		d->fkeys[d->nfkeys++].parent = pd->id;
	}
}

/* describe_roles: the indexes of the columns with a role. */
static void
describe_roles(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;

	t->origin = ms_v_column(t, d->origin);
	t->version = ms_v_column(t, d->version);
	t->hlc = d->hlc && t->version >= 0;
	t->partition = ms_v_column(t, d->partition);
	t->created = ms_v_column(t, d->created);
	t->generated = palloc(sizeof(int) * (d->ngenerated + 1));
	t->ngenerated = 0;
	for (int g = 0; g < d->ngenerated; g++)
		if (ms_v_column(t, d->generated[g]) >= 0)
			t->generated[t->ngenerated++] = ms_v_column(t, d->generated[g]);
}

ms_table *
ms_validate(const ms_decl *d, List *decls, bool declaring, List **problems)
{
	ms_vcx		v;
	List	   *none = NIL;

	memset(&v, 0, sizeof(v));
	v.d = d;
	v.decls = decls;
	v.declaring = declaring;
	v.problems = problems != NULL ? problems : &none;
	if (!check_table(&v))
		return NULL;
	check_columns(&v);
	check_key(&v);
	check_lists(&v);
	check_origin(&v);
	check_version(&v);
	ms_v_check_hlc(&v);
	check_stamped(&v);
	check_replica_side(&v);
	describe_roles(&v);
	check_active(&v);
	ms_v_check_fkeys(&v);
	if (d->rule == MS_RULE_ASSIGNED || d->rule == MS_RULE_FOLLOWS)
		ms_v_check_rule_column(&v);
	if (d->rule == MS_RULE_GROUPED)
		ms_v_check_grouped(&v);
	relation_close(v.rel, NoLock);
	return v.t;
}
