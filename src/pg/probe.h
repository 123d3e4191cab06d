/*-------------------------------------------------------------------------
 * probe.h
 *	  A look at a small table of the extension's in C: each row a snapshot
 *	  sees, read by an index or whole, with no statement started, planned or
 *	  counted.  For what most callers find empty, or one row, on a path that
 *	  runs often (a relay pass, a filing): a statement's start and end cost
 *	  more than the scan (issue 37).
 *-------------------------------------------------------------------------
 */
#ifndef MS_PROBE_H
#define MS_PROBE_H

#include "postgres.h"

#include "access/htup.h"
#include "access/skey.h"
#include "access/tupdesc.h"
#include "utils/snapshot.h"

/* called for each row; returns whether to go on */
typedef bool (*ms_probe_fn) (HeapTuple row, TupleDesc desc, void *arg);

/*
 * ms_probe_rows: fn(row, its descriptor, arg) for each row of sync.<table>
 * that snapshot sees, by sync.<index> (NULL: the table read whole, in its
 * order) and the nkeys keys (on the table's columns, as
 * systable_beginscan takes them), until fn returns false.  Returns false, calling fn for none, when
 * the catalog has no such table or index.  fn checks every condition itself
 * (an index's predicate too).  as_user: the current user must be allowed to
 * SELECT from it, as a statement's would (else the table's privileges are
 * its caller's business).  The table and the index stay locked in ACCESS
 * SHARE mode to the transaction's end, as a statement's scan leaves them.
 */
extern bool ms_probe_rows(Snapshot snapshot, const char *table, const char *index, bool as_user,
						  int nkeys, ScanKey keys, ms_probe_fn fn, void *arg);

/* ms_probe_column: a row's column by its name; null (*isnull) when it has none such */
extern Datum ms_probe_column(HeapTuple row, TupleDesc desc, const char *name, bool *isnull);

/*
 * ms_probe_now: the same, as a statement SPI runs (not read-only) would see
 * it: the transaction's snapshot (under READ COMMITTED a new one) at a new
 * command, checked as the current user.
 */
extern bool ms_probe_now(const char *table, const char *index, ms_probe_fn fn, void *arg);

/* ms_probe_now_keyed: the same, by the nkeys keys (as ms_probe_rows takes them) */
extern bool ms_probe_now_keyed(const char *table, const char *index, int nkeys, ScanKey keys,
							   ms_probe_fn fn, void *arg);

#endif
