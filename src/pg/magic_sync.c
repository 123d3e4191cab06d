/*-------------------------------------------------------------------------
 * magic_sync.c
 *	  What the server extension's modules share: the allocator it lends to
 *	  src/shared, two lists of strings compared.  The module's entry is
 *	  module.c.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "utils/json.h"
#include "utils/memutils.h"

static void *
pg_alloc(void *data, size_t size)
{
	(void) data;
	/* protobuf-c may ask for large arrays: decoding is bounded by our callers */
	return MemoryContextAllocHuge(CurrentMemoryContext, size == 0 ? 1 : size);
}

static void
pg_free(void *data, void *pointer)
{
	(void) data;
	if (pointer != NULL)
		pfree(pointer);
}

static ms_allocator pg_allocator = {pg_alloc, pg_free, NULL};

ms_allocator *
ms_pg_allocator(void)
{
	return &pg_allocator;
}

bool
ms_same_strings(char **a, int na, char **b, int nb)
{
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

void
ms_json_strings(StringInfo out, char *const *s, size_t n)
{
	appendStringInfoChar(out, '[');
	for (size_t i = 0; i < n; i++)
	{
		if (i)
			appendStringInfoChar(out, ',');
		escape_json(out, s[i] ? s[i] : "");
	}
	appendStringInfoChar(out, ']');
}

char *
ms_vformat(const char *fmt, va_list args)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		copy;
		int			needed;

		va_copy(copy, args);
		needed = appendStringInfoVA(&buf, fmt, copy);
		va_end(copy);
		if (needed == 0)
			return buf.data;
		enlargeStringInfo(&buf, needed);
	}
}
