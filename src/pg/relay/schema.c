/*-------------------------------------------------------------------------
 * schema.c
 *	  The schema a snapshot carries (docs/protocol.md 2.1): every mirrored
 *	  table the replica may hold or write, record tables included even while
 *	  it holds none of their rows, so a new, empty SQLite file needs no
 *	  hand-written DDL.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog.h"
#include "schema.h"
#include "wire.h"

void
ms_schema_pack(List *tables, StringInfo out)
{
	int			ntables = list_length(tables);
	Sync__Begin begin = SYNC__BEGIN__INIT;
	Sync__Table **schema = palloc0(sizeof(Sync__Table *) * Max(ntables, 1));
	ListCell   *lc;
	int			t = 0;
	size_t		size;

	foreach(lc, tables)
	{
		ms_table   *mt = lfirst(lc);
		Sync__Table *st = palloc(sizeof(Sync__Table));
		int			ncols = mt->ncolumns + (mt->retired ? 1 : 0);

		sync__table__init(st);
		st->name = mt->name;
		st->mirror = mt->record ? "record" : "catalog";
		st->codec = mt->proto ? "proto" : "json";
		st->n_columns = ncols;
		st->columns = palloc(sizeof(Sync__Column *) * ncols);
		for (int c = 0; c < mt->ncolumns; c++)
		{
			Sync__Column *col = palloc(sizeof(Sync__Column));

			sync__column__init(col);
			col->name = mt->columns[c].name;
			col->type = (char *) ms_type_name(mt->columns[c].sqlite_type);
			col->not_null = mt->columns[c].not_null;
			col->replica_owned = mt->columns[c].replica_owned;
			col->field = mt->columns[c].field;
			col->server_type = mt->columns[c].type_name;
			st->columns[c] = col;
		}
		if (mt->retired)
		{
			/* replica-side only: the time the row was retired, NULL while live */
			Sync__Column *col = palloc(sizeof(Sync__Column));

			sync__column__init(col);
			col->name = mt->retired;
			col->type = (char *) ms_type_name(MS_INTEGER);
			col->server_type = "";
			st->columns[ncols - 1] = col;
			st->retired = mt->retired;
		}
		st->n_key = mt->nkey;
		st->key = palloc(sizeof(char *) * mt->nkey);
		for (int k = 0; k < mt->nkey; k++)
			st->key[k] = mt->columns[mt->key[k]].name;
		st->n_foreign_keys = mt->nfkeys;
		st->foreign_keys = palloc(sizeof(Sync__ForeignKey *) * Max(mt->nfkeys, 1));
		for (int f = 0; f < mt->nfkeys; f++)
		{
			ms_fkey    *fk = &mt->fkeys[f];
			Sync__ForeignKey *sf = palloc(sizeof(Sync__ForeignKey));

			sync__foreign_key__init(sf);
			sf->table = ms_catalog_find(tables, fk->parent)->name;
			sf->n_columns = fk->ncols;
			sf->columns = palloc(sizeof(char *) * fk->ncols);
			sf->n_references = fk->ncols;
			sf->references = fk->parent_cols;
			for (int i = 0; i < fk->ncols; i++)
				sf->columns[i] = mt->columns[fk->cols[i]].name;
			st->foreign_keys[f] = sf;
		}
		if (mt->origin >= 0)
			st->origin = mt->columns[mt->origin].name;
		if (mt->version >= 0)
			st->version = mt->columns[mt->version].name;
		schema[t++] = st;
	}
	begin.n_schema = ntables;
	begin.schema = schema;
	size = sync__begin__get_packed_size(&begin);
	enlargeStringInfo(out, (int) size);
	sync__begin__pack(&begin, (uint8_t *) out->data + out->len);
	out->len += (int) size;
	out->data[out->len] = '\0';
}
