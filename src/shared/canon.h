/*-------------------------------------------------------------------------
 * canon.h
 *	  One key per row: a key part as its column's type prints it
 *	  (docs/protocol.md 3).
 *
 * A uuid has many spellings ('A0EE...', '{a0ee...}', hyphens or none) and
 * an integer some ('0950', '+950', ' 950'), but a key is compared as bytes:
 * two spellings of one value would be two rows.  So both sides spell every
 * part of a key as the server's type prints it -- a uuid lowercase and
 * hyphenated, an integer in decimal without leading zeros -- before a key
 * is stored or compared.  Text is its own spelling.  What each type
 * accepts is what PostgreSQL's input function accepts.
 *-------------------------------------------------------------------------
 */
#ifndef MS_CANON_H
#define MS_CANON_H

#include <stdbool.h>
#include <stddef.h>

#include "wire.h"

typedef enum ms_key_kind
{
	MS_KEY_TEXT,				/* text, varchar: as it is */
	MS_KEY_INT2,
	MS_KEY_INT4,
	MS_KEY_INT8,
	MS_KEY_UUID
} ms_key_kind;

/* the longest canonical spelling of a part that is not text: a uuid's 36 */
#define MS_KEY_CANON_MAX 40

/*
 * ms_key_kind_named: the kind of a key column by its server type's name as
 * a snapshot's Column.server_type says it ("uuid", "bigint", "integer",
 * "smallint"); any other name is text.  sqlite_integer: the column travels
 * as INTEGER (a domain over an integer type, whose name says nothing).
 */
extern ms_key_kind ms_key_kind_named(const char *server_type, bool sqlite_integer);

/*
 * ms_key_canon: the canonical spelling of part (n bytes, not NUL-terminated)
 * of a key column of kind (not MS_KEY_TEXT) into out, NUL-terminated; its
 * length in *out_len.  False, with the reason, when the part is no value of
 * the kind.
 */
extern bool ms_key_canon(ms_key_kind kind, const char *part, size_t n,
						 char out[MS_KEY_CANON_MAX], size_t *out_len,
						 char reason[MS_REASON_MAX]);

#endif
