/*-------------------------------------------------------------------------
 * proto.c
 *	  sync.proto(tab): the .proto of a table that travels in the proto
 *	  codec (docs/protocol.md 4): one message whose field numbers are those
 *	  its declaration fixed for good, one per mirrored column, typed by the
 *	  SQLite type the column travels as.  A NULL is an absent field, so a
 *	  nullable column is optional.
 *
 * What it prints is what the relay encodes and sync.file decodes: the
 * table as validated now (a declaration that no longer matches its table
 * is refused, as the relay refuses it).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"

PG_FUNCTION_INFO_V1(ms_proto);
PG_FUNCTION_INFO_V1(ms_proto_named);

/* proto_type: the protobuf type of a column's SQLite type. */
static const char *
proto_type(ms_type type)
{
	switch (type)
	{
		case MS_INTEGER:
			return "sint64";
		case MS_REAL:
			return "double";
		case MS_BLOB:
			return "bytes";
		case MS_TEXT:
			break;
	}
	return "string";
}

/*
 * proto_ident: name as a protobuf identifier (letters, digits, '_', not
 * beginning with a digit); a name that is not one has the others replaced.
 */
static char *
proto_ident(const char *name)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (name[0] >= '0' && name[0] <= '9')
		appendStringInfoChar(&buf, '_');
	for (const char *p = name; *p; p++)
		appendStringInfoChar(&buf, ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
									(*p >= '0' && *p <= '9') || *p == '_') ? *p : '_');
	return buf.data;
}

/* by_field: t's column indexes in field number order. */
static int *
by_field(const ms_table *t)
{
	int		   *order = palloc(sizeof(int) * (t->ncolumns + 1));

	for (int i = 0; i < t->ncolumns; i++)
	{
		int			j = i;

		while (j > 0 && t->columns[order[j - 1]].field > t->columns[i].field)
		{
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	return order;
}

/* field_line: one field of the message, its column's server type as a comment. */
static void
field_line(StringInfo out, const ms_column *c, List **taken)
{
	char	   *ident = proto_ident(c->name);
	ListCell   *lc;

	/* two names that come out the same are told apart by their numbers */
	foreach(lc, *taken)
		if (strcmp(lfirst(lc), ident) == 0)
			ident = psprintf("%s_%d", ident, c->field);
	*taken = lappend(*taken, ident);
	appendStringInfo(out, "  %s%s %s = %d;  // %s", c->not_null ? "" : "optional ",
					 proto_type(c->sqlite_type), ident, c->field, c->type_name);
	if (strcmp(ident, c->name) != 0)
		appendStringInfo(out, ", column %s", quote_identifier(c->name));
	if (c->key)
		appendStringInfoString(out, ", key");
	if (c->replica_owned)
		appendStringInfoString(out, ", replica-owned");
	appendStringInfoChar(out, '\n');
}

/* proto_text: the .proto of t. */
static char *
proto_text(const ms_table *t)
{
	StringInfoData out;
	int		   *order = by_field(t);
	List	   *taken = NIL;

	initStringInfo(&out);
	appendStringInfo(&out, "// Table %s in the proto codec of magic_sync (docs/protocol.md 4):\n"
					 "// one message per row; a NULL is an absent field.\n"
					 "syntax = \"proto3\";\n\nmessage %s {\n", t->name, proto_ident(t->name));
	for (int i = 0; i < t->ncolumns; i++)
		field_line(&out, &t->columns[order[i]], &taken);
	appendStringInfoString(&out, "}\n");
	return out.data;
}

/* proto_of: sync.proto of the table of this relid, or else of this wire name. */
static text *
proto_of(Oid relid, const char *name)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *problems = NIL;
	List	   *tables;
	ms_table   *t = NULL;
	ListCell   *lc;
	char	   *out;
	text	   *result;

	SPI_connect();
	tables = ms_catalog_read(&problems);
	foreach(lc, tables)
	{
		ms_table   *c = lfirst(lc);

		if (name != NULL ? strcmp(c->name, name) == 0 : c->relid == relid)
			t = c;
	}
	if (t == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 name != NULL ? errmsg("no mirrored table travels as \"%s\"", name) :
				 errmsg("%s is not mirrored", get_rel_name(relid) ? ms_wire_name(relid) : "the table"),
				 name != NULL ? errhint("Name it as replicas know it (sync.mirrors.name), or pass the table itself: sync.proto(%s::regclass).", quote_literal_cstr(name)) :
				 errhint("sync.mirrors lists the mirrored tables.")));
	foreach(lc, problems)
		if (strcmp(((ms_problem *) lfirst(lc))->table, t->name) == 0)
			ms_catalog_refuse(lfirst(lc), "SELECT * FROM sync.check() lists every problem.");
	if (!t->proto)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s travels in the json codec", t->name),
				 errdetail("Its rows travel as JSON objects of their columns; a table declared with codec => 'proto' travels as a message of its own."),
				 errhint("sync.mirrors says each table's codec.")));
	out = proto_text(t);
	MemoryContextSwitchTo(caller);
	result = cstring_to_text(out);
	SPI_finish();
	return result;
}

/* ms_proto: sync.proto(tab regclass). */
Datum
ms_proto(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(proto_of(PG_GETARG_OID(0), NULL));
}

/* ms_proto_named: sync.proto(name text), by the name replicas know it by. */
Datum
ms_proto_named(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(proto_of(InvalidOid, text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
