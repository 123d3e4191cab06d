/*-------------------------------------------------------------------------
 * reason.h
 *	  Saying why bytes are refused, in a sentence of at most MS_REASON_MAX
 *	  bytes, and whether bytes are UTF-8: what every checker of untrusted
 *	  bytes shares (wire.c, lane.c, row.c, sign_digest.c), below all of them.
 *-------------------------------------------------------------------------
 */
#ifndef MS_REASON_H
#define MS_REASON_H

#include <stdbool.h>
#include <stddef.h>

#define MS_REASON_MAX 160

/*
 * ms_refuse: say why in reason (printf formats, cut at MS_REASON_MAX); returns
 * false.  On Windows the C99 formats (%zu) are mingw's own stdio's
 * (__USE_MINGW_ANSI_STDIO), checked as GNU's rather than msvcrt's.
 */
#ifdef __MINGW32__
#define MS_PRINTF gnu_printf
#else
#define MS_PRINTF printf
#endif
extern bool ms_refuse(char reason[MS_REASON_MAX], const char *fmt,...)
	__attribute__((format(MS_PRINTF, 2, 3)));

/* ms_utf8_valid: len bytes of well-formed UTF-8 (no overlong form, surrogate nor NUL). */
extern bool ms_utf8_valid(const char *s, size_t len);

#endif
