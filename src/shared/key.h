/*-------------------------------------------------------------------------
 * key.h
 *	  Canonical key bytes, shared byte for byte by server and replica.
 *
 * A key is its parts as text in the order the table declares its key.  Its
 * canonical bytes are, for each part, the part's length in bytes in decimal,
 * a colon, and the part's bytes: ["42"] is "2:42", ["a", "bc"] is "1:a2:bc".
 * Every part says where it ends, so no two keys of a table share bytes.
 * Keys are ordered by their canonical bytes, compared as unsigned bytes (the
 * shorter first when one is a prefix of the other): PostgreSQL's COLLATE "C"
 * and SQLite's BLOB order.
 *-------------------------------------------------------------------------
 */
#ifndef MS_KEY_H
#define MS_KEY_H

#include <stddef.h>

/* Longest part: keeps every length within 10 decimal digits. */
#define MS_KEY_PART_MAX ((size_t) 1 << 30)

/* ms_key_size: bytes the canonical form of these parts takes (no NUL). */
extern size_t ms_key_size(size_t nparts, const char *const *parts, const size_t *lens);

/* ms_key_write: write the canonical form into out (ms_key_size bytes); returns the count. */
extern size_t ms_key_write(char *out, size_t nparts, const char *const *parts, const size_t *lens);

/*
 * ms_key_part_head: the "<len>:" that goes before a part of len bytes, into
 * out; returns its count.  For a key built part by part into a buffer of
 * the caller's (a replica's key of a row's columns); ms_key_write is made of it.
 */
#define MS_KEY_HEAD_MAX 21		/* 20 digits of a size_t and the colon */
extern size_t ms_key_part_head(char out[MS_KEY_HEAD_MAX], size_t len);

/*
 * ms_key_next_part: read the part at *pos of a canonical key of len bytes.
 * Returns 1 and sets *part / *plen / advances *pos; 0 at the end; -1 when the
 * bytes are not a canonical key.
 */
extern int	ms_key_next_part(const char *key, size_t len, size_t *pos,
							 const char **part, size_t *plen);

/* ms_key_count_parts: number of parts, or -1 when not canonical. */
extern int	ms_key_count_parts(const char *key, size_t len);

/* ms_key_cmp: the order of canonical keys (memcmp, shorter first). */
extern int	ms_key_cmp(const char *a, size_t alen, const char *b, size_t blen);

#endif
