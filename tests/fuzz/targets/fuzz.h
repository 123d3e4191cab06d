/*
 * fuzz.h - what the libFuzzer targets of tests/fuzz/targets share: reading
 * a structured input byte by byte, an allocator that counts (and fails on
 * request), and the finding every target reports the same way.
 *
 * Each target is one file with LLVMFuzzerTestOneInput; tests/fuzz/fuzz.mk
 * builds them with clang -fsanitize=fuzzer,address,undefined and
 * tests/fuzz/run runs them.  A target aborts (a finding, like a crash) when
 * a property it checks does not hold; fz_finding says which.
 */
#ifndef MS_FUZZ_H
#define MS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

extern int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- reading an input ----------------------------------------------------- */

typedef struct fz
{
	const uint8_t *p;
	size_t		n;
} fz;

/* the next byte, 0 once the input is used up */
static inline uint8_t
fz_byte(fz *f)
{
	if (f->n == 0)
		return 0;
	f->n--;
	return *f->p++;
}

/* up to max bytes: a length byte (taken modulo max + 1), then that many */
static inline size_t
fz_bytes(fz *f, size_t max, const uint8_t **out)
{
	size_t		want = max ? (size_t) fz_byte(f) % (max + 1) : 0;

	if (want > f->n)
		want = f->n;
	*out = f->p;
	f->p += want;
	f->n -= want;
	return want;
}

/* ---- an allocator that counts --------------------------------------------- */

/*
 * fz_alloc: malloc under a protobuf-c allocator; live counts what is not
 * freed yet; fail_at > 0 makes the fail_at-th allocation (from 1) and every
 * later one fail, so a decoder's way out of memory is walked too.
 */
typedef struct fz_alloc
{
	ms_allocator pa;
	long		live;
	long		count;
	long		fail_at;
	bool		failed;
} fz_alloc;

extern void fz_alloc_init(fz_alloc *a, long fail_at);

/* fz_finding: a property failed: say which on stderr, then abort (libFuzzer keeps the input) */
extern void fz_finding(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));

#define FZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
			fz_finding(__VA_ARGS__); \
	} while (0)

#endif
