/*-------------------------------------------------------------------------
 * writer.h
 *	  A table of the extension's written in C as an INSERT writes it.
 *
 * ms_writer_open: the relation (sync.<name>, or pg_temp.<name> when temp)
 * opened for rows, its indexes with it; NULL when the catalog has no such
 * table, or one not as the caller writes it: other columns than `columns`
 * (in that order), a check, or a trigger of its own (a foreign key's, the
 * system's, is the caller's business: it keeps the reference itself).  The
 * rights are checked as `self` (ACL_INSERT and `more`); NULL when it lacks
 * them, so the statement the caller falls back on says so.
 * ms_writer_put: a row, the heap then each index (a unique one checked);
 * its address in *at when at is not NULL.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WRITER_H
#define MS_WRITER_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tableam.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

typedef struct ms_writer
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} ms_writer;

extern ms_writer *ms_writer_open(const char *name, bool temp, const char *const *columns, int ncolumns,
								 Oid self, AclMode more);
extern void ms_writer_put(ms_writer *w, const Datum *values, const bool *nulls, ItemPointer at);
extern void ms_writer_close(ms_writer *w);

/* ms_rel_plain: whether rel is a plain table of these columns in this order: no check, rule, row security or trigger of its own */
extern bool ms_rel_plain(Relation rel, const char *const *columns, int n);

/*
 * ms_tm_check: a row's update, lock or deletion under REPEATABLE READ, as a
 * statement's: changed or deleted by another transaction since the snapshot
 * is a serialization failure; another result than those, or TM_Ok and
 * TM_SelfModified, an internal error about `what`.
 */
extern void ms_tm_check(TM_Result res, const char *what);

/*
 * ms_unique_as_conflict: fn(arg), a unique violation in it raised as a
 * serialization failure (transient: the pass runs again) saying `message`,
 * the violation's detail, and `hint`.
 */
extern void ms_unique_as_conflict(void (*fn) (void *), void *arg, const char *message, const char *hint);

/* ms_on_relation_change: *flag cleared at each change of pg_class this backend takes in */
extern void ms_on_relation_change(bool *flag);

#endif
