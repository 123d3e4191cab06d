/*
 * fuzz.c - the targets' shared helpers.  See fuzz.h.
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void *
fz_pb_alloc(void *data, size_t n)
{
	fz_alloc   *a = data;
	void	   *p;

	a->count++;
	if (a->fail_at > 0 && a->count >= a->fail_at)
	{
		a->failed = true;
		return NULL;
	}
	p = malloc(n ? n : 1);
	if (p != NULL)
		a->live++;
	return p;
}

static void
fz_pb_free(void *data, void *p)
{
	fz_alloc   *a = data;

	if (p != NULL)
		a->live--;
	free(p);
}

void
fz_alloc_init(fz_alloc *a, long fail_at)
{
	a->pa.alloc = fz_pb_alloc;
	a->pa.free = fz_pb_free;
	a->pa.allocator_data = a;
	a->live = 0;
	a->count = 0;
	a->fail_at = fail_at;
	a->failed = false;
}

void
fz_finding(const char *fmt,...)
{
	va_list		ap;

	fputs("FINDING: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
