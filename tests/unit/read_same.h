/*
 * read_same.h - ms_to_replica_read (a replica's single-pass read of a
 * Down's Rows) held against ms_to_replica_decode (protobuf-c) on the same
 * bytes: the same status, the same reason, the same message.  Shared by the
 * unit tests' mutations (test_mutations.c) and the wire fuzz target
 * (tests/fuzz/targets/wire.c).
 */
#ifndef MS_READ_SAME_H
#define MS_READ_SAME_H

#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* an arena as the replica's (frees nothing one by one), failing from its fail_at-th allocation when > 0 */
typedef struct rs_arena
{
	void	   *blocks;			/* each block's first word: the one before */
	long		count;
	long		fail_at;
} rs_arena;

static void *
rs_alloc(void *data, size_t size)
{
	rs_arena   *a = data;
	void	  **b;

	a->count++;
	if (a->fail_at > 0 && a->count >= a->fail_at)
		return NULL;
	b = malloc(sizeof(void *) + size);
	if (b == NULL)
		return NULL;
	b[0] = a->blocks;
	a->blocks = b;
	return b + 1;
}

static void
rs_free(void *data, void *p)
{
	(void) data;
	(void) p;
}

static void
rs_arena_free(rs_arena *a)
{
	while (a->blocks != NULL)
	{
		void	  **b = a->blocks;

		a->blocks = b[0];
		free(b);
	}
}

static bool
rs_keys_same(Sync__Key *const *x, Sync__Key *const *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		if (x[i]->n_parts != y[i]->n_parts)
			return false;
		for (size_t j = 0; j < x[i]->n_parts; j++)
			if (strcmp(x[i]->parts[j], y[i]->parts[j]) != 0)
				return false;
	}
	return true;
}

static bool
rs_rows_same(const Sync__Rows *x, const Sync__Rows *y)
{
	if (strcmp(x->table, y->table) != 0 || x->n_upserts != y->n_upserts || x->n_keys != y->n_keys ||
		x->n_deletes != y->n_deletes || x->n_replaces != y->n_replaces)
		return false;
	for (size_t i = 0; i < x->n_upserts; i++)
		if (x->upserts[i].len != y->upserts[i].len ||
			(x->upserts[i].len > 0 && memcmp(x->upserts[i].data, y->upserts[i].data, x->upserts[i].len) != 0))
			return false;
	return rs_keys_same(x->keys, y->keys, x->n_keys) && rs_keys_same(x->deletes, y->deletes, x->n_deletes) &&
		rs_keys_same(x->replaces, y->replaces, x->n_replaces);
}

/* the message but its Down's Rows, packed: the same bytes for both */
static bool
rs_rest_same(Sync__ToReplica *x, Sync__ToReplica *y)
{
	size_t		nx = 0,
				ny = 0;
	size_t		sx,
				sy;
	uint8_t    *bx,
			   *by;
	bool		same;

	if (x->body_case == SYNC__TO_REPLICA__BODY_DOWN)
	{
		nx = x->down->n_tables;
		x->down->n_tables = 0;
	}
	if (y->body_case == SYNC__TO_REPLICA__BODY_DOWN)
	{
		ny = y->down->n_tables;
		y->down->n_tables = 0;
	}
	sx = sync__to_replica__get_packed_size(x);
	sy = sync__to_replica__get_packed_size(y);
	bx = malloc(sx + 1);
	by = malloc(sy + 1);
	same = bx != NULL && by != NULL && sx == sy && sync__to_replica__pack(x, bx) == sx &&
		sync__to_replica__pack(y, by) == sy && memcmp(bx, by, sx) == 0;
	free(bx);
	free(by);
	if (x->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		x->down->n_tables = nx;
	if (y->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		y->down->n_tables = ny;
	return same;
}

/*
 * rs_same: NULL when both read buf alike, else what differs.  With fail_at
 * > 0 the read runs out of memory at that allocation and after: it must say
 * so (MS_WIRE_NO_MEMORY) or not have needed it.
 */
static const char *
rs_same(const uint8_t *buf, size_t len, size_t bound, long fail_at)
{
	rs_arena	a = {NULL, 0, 0};
	rs_arena	oom = {NULL, 0, fail_at};
	ms_allocator pa = {rs_alloc, rs_free, &a};
	ms_allocator po = {rs_alloc, rs_free, &oom};
	ms_wire_status s1,
				s2;
	char		r1[MS_REASON_MAX],
				r2[MS_REASON_MAX];
	Sync__ToReplica *m1 = ms_to_replica_decode(buf, len, bound, NULL, &s1, r1);
	Sync__ToReplica *m2 = ms_to_replica_read(buf, len, bound, &pa, &s2, r2);
	const char *why = NULL;

	if (s1 != s2)
		why = "another status";
	else if (strcmp(r1, r2) != 0)
		why = "another reason";
	else if ((m1 == NULL) != (m2 == NULL))
		why = "one decodes, the other not";
	else if (m1 != NULL && m1->body_case != m2->body_case)
		why = "another body";
	else if (m1 != NULL && m1->body_case == SYNC__TO_REPLICA__BODY_DOWN &&
			 m1->down->n_tables != m2->down->n_tables)
		why = "another count of Rows";
	else if (m1 != NULL && m1->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		for (size_t i = 0; i < m1->down->n_tables && why == NULL; i++)
			if (!rs_rows_same(m1->down->tables[i], m2->down->tables[i]))
				why = "other Rows";
	if (why == NULL && m1 != NULL && !rs_rest_same(m1, m2))
		why = "another head or Down";
	if (m1 != NULL)
		sync__to_replica__free_unpacked(m1, NULL);
	rs_arena_free(&a);
	if (why == NULL && fail_at > 0 && fail_at <= a.count)
	{
		Sync__ToReplica *m3 = ms_to_replica_read(buf, len, bound, &po, &s2, r2);

		if (m3 != NULL || s2 != MS_WIRE_NO_MEMORY)
			why = "out of memory, not said so";
		rs_arena_free(&oom);
	}
	return why;
}

#endif
