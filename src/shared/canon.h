/*-------------------------------------------------------------------------
 * canon.h
 *	  One key per row: a key part spelled one way for each value
 *	  (docs/protocol.md 3).
 *
 * A uuid has many spellings ('A0EE...', '{a0ee...}', hyphens or none) and
 * an integer some ('0950', '+950', ' 950'), but a key is compared as bytes:
 * two spellings of one value would be two rows.  So both sides spell every
 * part of a key one way before a key is stored or compared -- a uuid
 * lowercase and hyphenated, an integer in decimal without leading zeros, a
 * numeric without trailing zeros, a date or time in ISO 8601 as
 * PostgreSQL's JSON writes it (a timestamptz in UTC) -- whatever the
 * settings of the session that wrote it.  Text is its own spelling.  What
 * each kind accepts is what PostgreSQL's input function accepts, or less:
 * a part this code refuses is refused on both sides.
 *-------------------------------------------------------------------------
 */
#ifndef MS_CANON_H
#define MS_CANON_H

#include <stdbool.h>
#include <stddef.h>

#include "wire.h"

typedef enum ms_key_kind
{
	MS_KEY_TEXT,				/* text, varchar, an enum's label: as it is */
	MS_KEY_INT2,
	MS_KEY_INT4,
	MS_KEY_INT8,
	MS_KEY_UUID,
	MS_KEY_NUMERIC,				/* without trailing zeros: 1.50 is 1.5 */
	MS_KEY_DATE,				/* 2024-01-02, 0044-03-15 BC, infinity */
	MS_KEY_TIME,				/* 03:04:05.5 */
	MS_KEY_TIMESTAMP,			/* 2024-01-02T03:04:05.5 */
	MS_KEY_TIMESTAMPTZ,			/* 2024-01-02T03:04:05.5+00:00: in UTC */
	MS_KEY_FOLDED				/* citext: lowercase, as the database's locale folds
								 * it; the server's alone (a replica takes the
								 * parts it is sent as text, and writes none) */
} ms_key_kind;

/*
 * The longest spelling of a part beyond its own bytes: a numeric's exponent
 * (at most 1000 either way) written out as zeros, a sign, a point.  A uuid,
 * an integer, a date or time is never longer than this alone.
 */
#define MS_KEY_CANON_MAX 1040

/* the room ms_key_canon needs for a part of n bytes: its spelling and a NUL */
#define MS_KEY_CANON_ROOM(n) ((n) + MS_KEY_CANON_MAX)

/*
 * ms_key_kind_named: the kind of a key column by a type's name: a Column's
 * key_type ("numeric", "date", "time", "timestamp", "timestamptz"), or its
 * server_type as format_type prints it ("uuid", "bigint", "integer",
 * "smallint", "timestamp with time zone" ...); any other name is text.
 * sqlite_integer: the column travels as INTEGER (a domain over an integer
 * type, whose name says nothing).
 */
extern ms_key_kind ms_key_kind_named(const char *type, bool sqlite_integer);

/*
 * ms_key_canon: the spelling of part (n bytes, not NUL-terminated) of a key
 * column of kind (not MS_KEY_TEXT) into out, which has room for
 * MS_KEY_CANON_ROOM(n) bytes, NUL-terminated; its length in *out_len.
 * False, with the reason, when the part is no value of the kind.
 */
extern bool ms_key_canon(ms_key_kind kind, const char *part, size_t n,
						 char *out, size_t *out_len, char reason[MS_REASON_MAX]);

/*
 * ms_key_canon_digits: the digits of a spelled numeric before and after its
 * point (0 and 0 for NaN and the infinities), or of a spelled time's
 * fraction of a second (*before 0): what a column's typmod (numeric(p,s),
 * timestamp(p)) bounds.
 */
extern void ms_key_canon_digits(ms_key_kind kind, const char *spelled, size_t n,
								int *before, int *after);

#endif
