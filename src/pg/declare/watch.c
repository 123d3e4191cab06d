/*
 * watch.c: a kept catalog's relations, and whether one changed (watch.h).
 */
#include "magic_sync.h"

#include "catalog/pg_inherits.h"
#include "utils/inval.h"

#include "table.h"
#include "watch.h"

static void
invalidated(Datum arg, Oid relid)
{
	ms_watch   *w = (ms_watch *) DatumGetPointer(arg);

	if (w->reading)
	{
		if (!OidIsValid(relid) || w->nseen >= MS_WATCH_SEEN)
			w->nseen = MS_WATCH_SEEN + 1;
		else
			w->seen[w->nseen++] = relid;
		return;
	}
	if (!w->valid)
		return;
	if (!OidIsValid(relid))
		w->valid = false;
	for (int i = 0; i < w->nwatched && w->valid; i++)
		if (w->watched[i] == relid)
			w->valid = false;
}

void
ms_watch_reading(ms_watch *w)
{
	if (!w->registered)
	{
		CacheRegisterRelcacheCallback(invalidated, PointerGetDatum(w));
		w->registered = true;
	}
	w->valid = false;
	w->reading = true;
	w->nseen = 0;
	w->watched = NULL;
	w->nwatched = 0;
}

/* whether a relation invalidated while the catalog was read is one it watches */
static bool
seen_watched(ms_watch *w)
{
	if (w->nseen > MS_WATCH_SEEN)
		return true;
	for (int i = 0; i < w->nseen; i++)
		for (int j = 0; j < w->nwatched; j++)
			if (w->seen[i] == w->watched[j])
				return true;
	return false;
}

void
ms_watch_read(ms_watch *w, List *tables, bool keep)
{
	ListCell   *lc;
	List	   *oids = NIL;
	int			i = 0;

	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		/* a partition's triggers are checked too */
		oids = list_concat(oids, find_all_inheritors(t->relid, NoLock, NULL));
		if (OidIsValid(t->members))
			oids = lappend_oid(oids, t->members);
		if (OidIsValid(t->assignments))
			oids = lappend_oid(oids, t->assignments);
		if (OidIsValid(t->active))
			oids = lappend_oid(oids, t->active);
	}
	w->watched = palloc(sizeof(Oid) * Max(list_length(oids), 1));
	foreach(lc, oids)
		w->watched[i++] = lfirst_oid(lc);
	w->nwatched = i;
	w->reading = false;
	w->valid = keep && !seen_watched(w);
}
