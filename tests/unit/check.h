/*
 * check.h - the unit tests' one assertion: CHECK(cond, printf-style message)
 * counts a pass or prints the failure; test_shared.c's main says how many.
 */
#ifndef MS_CHECK_H
#define MS_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int	ms_unit_passed;
extern int	ms_unit_failed;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			ms_unit_passed++; \
		else \
		{ \
			ms_unit_failed++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

/* the test groups of the other files, run by main */
extern void test_row(void);
extern void test_fields(void);
extern void test_up(void);
extern void test_sha256(void);
extern void test_bundle(void);
extern void test_hlc(void);
extern void test_sign(void);
extern void test_uuid(void);
extern void test_mutations(void);
extern void test_refusals(void);

/* the vector message (test_shared.c), which test_mutations.c breaks too */
extern size_t pack_vector(uint8_t *out);

#endif
