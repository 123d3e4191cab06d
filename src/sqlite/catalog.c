/*
** catalog.c - the file's objects, as a schema application sees them.
**
** SQLite's own DDL reads the whole schema each time (a CREATE scans
** sqlite_master, a change of the schema's version walks every table), so
** making N tables costs SQLite more than N times one.  What the replica
** adds must not: sqlite_master is read once into the catalog (tables,
** views, indexes, triggers, by name as SQLite compares names, and each
** table's indexes and triggers), which ddl.c keeps in step with what it
** does (ms_ddl, ms_cat_add, an object marked gone); it is read again
** whenever the schema's version is not the one it is in step with (DDL of
** anyone else's, evolve.c's included), and after a savepoint is rolled
** back (ms_end forgets it).
**
** _sync_made: every table the replica created, followed through renames,
** marked gone once the replica found it dropped.  A table is the
** replica's to alter only when the catalog says it made it (made): every
** other table, view or index of the file is the host's.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

struct ms_catalog
{
	ms_map		objects;		/* tables, views, indexes: one namespace in SQLite */
	ms_map		triggers;		/* a namespace of their own */
	ms_map		of_table;		/* a table's first index or trigger */
	int64_t		version;		/* PRAGMA schema_version it is in step with */
};

const char *const ms_object_types[4] = {"table", "view", "index", "trigger"};

void
ms_catalog_forget(ms_ctx *c)
{
	c->catalog = NULL;
}

static int
schema_version(ms_ctx *c, int64_t *v)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "PRAGMA main.schema_version");

	*v = -1;
	return ms_int_read(c, st, rc, v);
}

int
ms_cat_add(ms_ctx *c, ms_catalog *cat, const char *type, const char *name, const char *tbl, const char *sql,
		bool made)
{
	ms_object  *o = ms_alloc(&c->arena, sizeof(ms_object));
	int			rc;

	if (o == NULL)
		return SQLITE_NOMEM;
	o->type = NULL;
	for (size_t i = 0; i < sizeof ms_object_types / sizeof ms_object_types[0]; i++)
		if (strcmp(type, ms_object_types[i]) == 0)
			o->type = ms_object_types[i];
	if (o->type == NULL)
		return SQLITE_OK;		/* nothing a table's name can meet */
	o->name = ms_strdup(&c->arena, name);
	o->tbl = ms_strdup(&c->arena, tbl ? tbl : name);
	o->sql = sql ? ms_strdup(&c->arena, sql) : NULL;
	o->made = made;
	if (o->name == NULL || o->tbl == NULL || (sql != NULL && o->sql == NULL))
		return SQLITE_NOMEM;
	rc = ms_map_put(&c->arena, o->type == ms_object_types[3] ? &cat->triggers : &cat->objects, o->name,
					strlen(o->name), o);
	if (rc == SQLITE_OK && (o->type == ms_object_types[2] || o->type == ms_object_types[3]))
	{
		o->next = ms_map_get(&cat->of_table, o->tbl, strlen(o->tbl));
		rc = ms_map_put(&c->arena, &cat->of_table, o->tbl, strlen(o->tbl), o);
	}
	return rc;
}

static int
catalog_load(ms_ctx *c)
{
	ms_catalog *cat = ms_alloc(&c->arena, sizeof(ms_catalog));
	ms_map		made;
	sqlite3_stmt *st = NULL;
	bool		has_made = false;
	int			rc;

	c->catalog = NULL;
	if (cat == NULL)
		return SQLITE_NOMEM;
	ms_map_init(&cat->objects, true);
	ms_map_init(&cat->triggers, true);
	ms_map_init(&cat->of_table, true);
	ms_map_init(&made, true);
	rc = schema_version(c, &cat->version);
	/* the tables the replica made, and has not seen gone */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT count(*) FROM pragma_table_info('_sync_made')");
	if (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		has_made = sqlite3_column_int(st, 0) > 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK && has_made)
		rc = ms_prepare(c, &st, "SELECT name FROM _sync_made WHERE gone = 0");
	while (rc == SQLITE_OK && st != NULL && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		char	   *name = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0));

		rc = name ? ms_map_put(&c->arena, &made, name, strlen(name), name) : SQLITE_NOMEM;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT type, name, tbl_name, sql FROM main.sqlite_master"
						" WHERE type IN ('table', 'view', 'index', 'trigger') ORDER BY rowid");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *type = (const char *) sqlite3_column_text(st, 0);
		const char *name = (const char *) sqlite3_column_text(st, 1);
		const char *tbl = (const char *) sqlite3_column_text(st, 2);
		const char *sql = (const char *) sqlite3_column_text(st, 3);

		if (type == NULL || name == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		rc = ms_cat_add(c, cat, type, name, tbl, sql,
					 strcmp(type, "table") == 0 && ms_map_get(&made, name, strlen(name)) != NULL);
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		c->catalog = cat;
	return rc;
}

int
ms_catalog_get(ms_ctx *c, ms_catalog **out)
{
	int			rc = SQLITE_OK;

	if (c->catalog != NULL)
	{
		int64_t		v;

		rc = schema_version(c, &v);
		if (rc == SQLITE_OK && v != c->catalog->version)
			c->catalog = NULL;
	}
	if (rc == SQLITE_OK && c->catalog == NULL)
		rc = catalog_load(c);
	*out = c->catalog;
	return rc;
}

ms_object *
ms_cat_object(ms_catalog *cat, const char *name)
{
	ms_object  *o = ms_map_get(&cat->objects, name, strlen(name));

	return o != NULL && !o->gone ? o : NULL;
}

ms_object *
ms_cat_trigger(ms_catalog *cat, const char *name)
{
	ms_object  *o = ms_map_get(&cat->triggers, name, strlen(name));

	return o != NULL && !o->gone ? o : NULL;
}

int
ms_ddl(ms_ctx *c, const char *sql)
{
	int			rc = ms_exec(c, "%s", sql);

	if (rc == SQLITE_OK && c->catalog != NULL)
		rc = schema_version(c, &c->catalog->version);
	if (rc != SQLITE_OK)
		c->catalog = NULL;
	return rc;
}

ms_object *
ms_cat_of_table(ms_catalog *cat, const char *table)
{
	return ms_map_get(&cat->of_table, table, strlen(table));
}

/* ---- _sync_made ---------------------------------------------------------------- */

int
ms_table_made(ms_ctx *c, const char *name, const char *from)
{
	sqlite3_stmt *st = NULL;
	int			rc = SQLITE_OK;

	/* a name the replica had made, and saw gone, is this table's now (as SQLite compares names) */
	if (from != NULL)
		rc = ms_exec(c, "DELETE FROM _sync_made WHERE name = %Q AND name <> %Q", name, from);
	if (from != NULL && rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "UPDATE _sync_made SET name = ?1 WHERE name = ?2");
	else if (from == NULL)
		rc = ms_prepare(c, &st, "INSERT OR REPLACE INTO _sync_made(name, gone) VALUES (?1, 0)");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		if (from != NULL)
			sqlite3_bind_text(st, 2, from, -1, SQLITE_STATIC);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	return rc;
}

int
ms_table_unmade(ms_ctx *c, const char *name)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "DELETE FROM _sync_made WHERE name = ?1");

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	return rc;
}
