/*-------------------------------------------------------------------------
 * row.h
 *	  The one walker of a row in the proto codec (docs/protocol.md 4),
 *	  used by the server filing an upload and by a replica applying a message.
 *
 * A row is one protobuf message whose field numbers are its table's columns'
 * fields: INTEGER a sint64 (wire type 0, zigzag), REAL a double (wire type
 * 1), TEXT a string and BLOB bytes (wire type 2).  A NULL is an absent field.
 * The walker refuses, with the reason, a row whose bytes break (a tag or a
 * value truncated, a length past the end), a field that is no column (field
 * 0 included), a field given twice, a field of the wrong wire type, and TEXT
 * that is not UTF-8 or holds a NUL byte; every value it hands over passed.
 * What a value then becomes (a JSON member on the server, a bound SQLite
 * value on a replica) is the caller's.
 *-------------------------------------------------------------------------
 */
#ifndef MS_ROW_H
#define MS_ROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "reason.h"

/* The four SQLite types a column travels as (Column.type). */
typedef enum ms_type
{
	MS_INTEGER,
	MS_REAL,
	MS_TEXT,
	MS_BLOB
} ms_type;

/* ms_type_parse: the type of a Column.type name; false for any other name. */
extern bool ms_type_parse(const char *name, ms_type *out);
/* ms_type_name: "INTEGER", "REAL", "TEXT" or "BLOB". */
extern const char *ms_type_name(ms_type type);

/* Most columns a row may have: PostgreSQL allows 1600, SQLite 2000. */
#define MS_ROW_COLUMNS_MAX 2048
/* Above this field number the walker looks columns up one by one. */
#define MS_ROW_FIELD_MAP_MAX 4096

/* One column of a table, as the walker sees it. */
typedef struct ms_row_column
{
	const char *name;
	ms_type		type;
	uint32_t	field;			/* 0: carried in no field (a replica's retired column) */
} ms_row_column;

/* A table's columns and the map from field number to column. */
typedef struct ms_row_shape
{
	const char *table;			/* for reasons */
	int			ncols;
	const ms_row_column *cols;
	uint32_t	max_field;
	int		   *by_field;		/* max_field + 1 entries (column or -1), or NULL */
} ms_row_shape;

/*
 * ms_row_shape_init: the shape of ncols columns (cols must outlive it); the
 * map comes from alloc.  false when out of memory.  When two columns share
 * a field number, the first has it.
 */
extern bool ms_row_shape_init(ms_row_shape *s, const char *table,
							  const ms_row_column *cols, int ncols, ms_allocator *alloc);
extern void ms_row_shape_free(ms_row_shape *s, ms_allocator *alloc);

/* One value of a row, of its column's type; p points into the row's bytes. */
typedef struct ms_row_value
{
	ms_type		type;
	int64_t		i;				/* INTEGER */
	double		d;				/* REAL, NaN and infinities included */
	const uint8_t *p;			/* TEXT (UTF-8, no NUL) and BLOB: n bytes */
	size_t		n;
} ms_row_value;

/*
 * ms_row_visit: called with each field's column (an index into the shape's
 * columns) and value, in the row's order; false, with the reason, refuses
 * the row.
 */
typedef bool (*ms_row_visit) (void *arg, int column, const ms_row_value *v,
							  char reason[MS_REASON_MAX]);

/*
 * ms_row_walk: walk the len bytes of a row, handing each value to visit;
 * false, with the reason, when the row is refused (see above).  Every field
 * is checked before the next is read; a caller that builds as it visits
 * throws away what it built when the walk fails.
 */
extern bool ms_row_walk(const ms_row_shape *s, const uint8_t *row, size_t len,
						ms_row_visit visit, void *arg, char reason[MS_REASON_MAX]);

#endif
