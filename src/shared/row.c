/*-------------------------------------------------------------------------
 * row.c
 *	  Walking a row of the proto codec field by field.  See row.h.
 *-------------------------------------------------------------------------
 */
#include "row.h"

#include <string.h>

#include "pbwrite.h"

static const char *const type_names[] = {"INTEGER", "REAL", "TEXT", "BLOB"};

bool
ms_type_parse(const char *name, ms_type *out)
{
	for (int t = MS_INTEGER; t <= MS_BLOB; t++)
		if (strcmp(name, type_names[t]) == 0)
		{
			*out = (ms_type) t;
			return true;
		}
	return false;
}

const char *
ms_type_name(ms_type type)
{
	return type >= MS_INTEGER && type <= MS_BLOB ? type_names[type] : "TEXT";
}

bool
ms_row_shape_init(ms_row_shape *s, const char *table,
				  const ms_row_column *cols, int ncols, ms_allocator *alloc)
{
	s->table = table;
	s->ncols = ncols;
	s->cols = cols;
	s->max_field = 0;
	s->by_field = NULL;
	for (int i = 0; i < ncols; i++)
		if (cols[i].field > s->max_field)
			s->max_field = cols[i].field;
	if (s->max_field > MS_ROW_FIELD_MAP_MAX)
		return true;			/* a sparse numbering: looked up one by one */
	s->by_field = alloc->alloc(alloc->allocator_data, sizeof(int) * (s->max_field + 1));
	if (s->by_field == NULL)
		return false;
	for (uint32_t f = 0; f <= s->max_field; f++)
		s->by_field[f] = -1;
	for (int i = 0; i < ncols; i++)
		if (cols[i].field > 0 && s->by_field[cols[i].field] < 0)
			s->by_field[cols[i].field] = i;
	return true;
}

void
ms_row_shape_free(ms_row_shape *s, ms_allocator *alloc)
{
	if (s->by_field != NULL)
		alloc->free(alloc->allocator_data, s->by_field);
	s->by_field = NULL;
}

/* the column of a field number, or -1 */
static int
column_of(const ms_row_shape *s, uint64_t field)
{
	if (field == 0 || field > s->max_field)
		return -1;
	if (s->by_field != NULL)
		return s->by_field[field];
	for (int i = 0; i < s->ncols; i++)
		if (s->cols[i].field == field)
			return i;
	return -1;
}

/* read_value: the value of col at *pos, of wire type wt; the field began at byte at */
static bool
read_value(const uint8_t *row, size_t len, size_t *pos, const ms_row_column *col,
		   unsigned wt, size_t at, ms_row_value *v, char reason[MS_REASON_MAX])
{
	uint64_t	u;

	v->type = col->type;
	switch (col->type)
	{
		case MS_INTEGER:
			if (wt != MS_PB_VARINT)
				return ms_refuse(reason, "column \"%s\" (INTEGER) is not a varint", col->name);
			if (!ms_pb_read_varint(row, len, pos, &u))
				return ms_refuse(reason, "the row is truncated or malformed at byte %zu", at);
			v->i = ms_pb_unzigzag(u);
			return true;
		case MS_REAL:
			if (wt != MS_PB_FIXED64)
				return ms_refuse(reason, "column \"%s\" (REAL) is not a 64-bit field", col->name);
			if (!ms_pb_read_fixed64(row, len, pos, &u))
				return ms_refuse(reason, "the row is truncated or malformed at byte %zu", at);
			memcpy(&v->d, &u, sizeof v->d);
			return true;
		case MS_TEXT:
		case MS_BLOB:
			break;
	}
	if (wt != MS_PB_LEN)
		return ms_refuse(reason, "column \"%s\" (%s) is not length-delimited", col->name,
					  ms_type_name(col->type));
	if (!ms_pb_read_varint(row, len, pos, &u) || u > len - *pos)
		return ms_refuse(reason, "the row is truncated or malformed at byte %zu", at);
	v->p = row + *pos;
	v->n = (size_t) u;
	*pos += (size_t) u;
	if (col->type == MS_TEXT && !ms_utf8_valid((const char *) v->p, v->n))
		return ms_refuse(reason, "column \"%s\" (TEXT) is not valid UTF-8 (or holds a NUL byte)", col->name);
	return true;
}

bool
ms_row_walk(const ms_row_shape *s, const uint8_t *row, size_t len,
			ms_row_visit visit, void *arg, char reason[MS_REASON_MAX])
{
	uint8_t		seen[MS_ROW_COLUMNS_MAX / 8];
	size_t		pos = 0;

	if (s->ncols > MS_ROW_COLUMNS_MAX)
		return ms_refuse(reason, "table \"%s\" has more than %d columns", s->table, MS_ROW_COLUMNS_MAX);
	if (row == NULL && len > 0)
		return ms_refuse(reason, "the row has no bytes");
	memset(seen, 0, ((size_t) s->ncols + 7) / 8);
	while (pos < len)
	{
		size_t		at = pos;
		uint64_t	tag;
		int			i;
		ms_row_value v;

		if (!ms_pb_read_varint(row, len, &pos, &tag))
			return ms_refuse(reason, "the row is truncated or malformed at byte %zu", at);
		if ((i = column_of(s, tag >> 3)) < 0)
			return ms_refuse(reason, "field %llu of the row is not a column of table \"%s\"",
						  (unsigned long long) (tag >> 3), s->table);
		if (seen[i / 8] & (1u << (i % 8)))
			return ms_refuse(reason, "field %llu (column \"%s\") is given twice",
						  (unsigned long long) (tag >> 3), s->cols[i].name);
		seen[i / 8] |= (uint8_t) (1u << (i % 8));
		memset(&v, 0, sizeof v);
		if (!read_value(row, len, &pos, &s->cols[i], (unsigned) (tag & 7), at, &v, reason) ||
			!visit(arg, i, &v, reason))
			return false;
	}
	return true;
}
