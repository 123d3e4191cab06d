/*-------------------------------------------------------------------------
 * range.h
 *	  Range repair's buckets (docs/protocol.md 8.1), shared byte for byte by
 *	  server and replica.
 *
 * A row's bucket at depth d is the top d bits of FNV-1a 64 of its canonical
 * key (key.h): collation-free, so neither side's order matters.  A bucket's
 * digest is its rows and the sum, mod 2^64, of their hashes: a sum, so
 * neither side sorts.  A row's hash is ms_range_row, the one per-row
 * function: whatever a table digest comes to cover of a row, it covers too.
 *-------------------------------------------------------------------------
 */
#ifndef MS_RANGE_H
#define MS_RANGE_H

#include <stddef.h>
#include <stdint.h>

#define MS_RANGE_DEPTH_MAX 48	/* bits of a bucket */
#define MS_RANGE_SPLIT_MAX 16	/* bits an ask splits its buckets by */
#define MS_RANGE_ASK_MAX 65536	/* buckets one ask names */

/* ms_range_key_hash: FNV-1a 64 of a canonical key, whose top bits are its buckets */
extern uint64_t ms_range_key_hash(const char *key, size_t len);

/* ms_range_bucket: the bucket at depth (0..MS_RANGE_DEPTH_MAX) of a key hash */
extern uint64_t ms_range_bucket(uint64_t key_hash, unsigned depth);

/* ms_range_row: a row's hash, as a one-row table digest's fingerprint (digest.h) */
extern uint64_t ms_range_row(const char *key, size_t len);

/* one row's bucket and hash, or (aggregated) one bucket's rows and sum */
typedef struct ms_range_sum
{
	uint64_t	bucket;
	uint64_t	count;
	uint64_t	sum;
} ms_range_sum;

/*
 * ms_range_aggregate: n rows (count 1 each, sum its hash) into one entry per
 * bucket, ascending, in place; returns the buckets.
 */
extern size_t ms_range_aggregate(ms_range_sum *rows, size_t n);

/* ms_range_find: the entry of bucket b in n sorted entries, or NULL */
extern const ms_range_sum *ms_range_find(const ms_range_sum *s, size_t n, uint64_t b);

/* ms_range_member: whether b is among n ascending buckets */
extern int	ms_range_member(const uint64_t *buckets, size_t n, uint64_t b);

#endif
