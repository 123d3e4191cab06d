/*-------------------------------------------------------------------------
 * uuid.h
 *	  A uuid read from text and written as text, the one way both sides
 *	  and the agent do it.  Written lowercase and hyphenated (8-4-4-4-12),
 *	  as PostgreSQL's uuid_out prints it.  Read strictly, as the replica's
 *	  and the agent's arguments are (36 characters, hyphens where uuid_out
 *	  puts them, hexadecimal digits of either case), or loosely, as
 *	  PostgreSQL's uuid_in reads a key part (braces around it, a hyphen
 *	  after any group of four digits, or none).
 *-------------------------------------------------------------------------
 */
#ifndef MS_UUID_H
#define MS_UUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the 36 characters of a uuid and its NUL */
#define MS_UUID_TEXT 37

/* ms_uuid_parse: the n bytes at s as a uuid in its 36-character form, any case */
extern bool ms_uuid_parse(const char *s, size_t n, uint8_t out[16]);
/* ms_uuid_parse_loose: any spelling uuid_in takes ('{...}', hyphens after groups of four, or none) */
extern bool ms_uuid_parse_loose(const char *s, size_t n, uint8_t out[16]);
/* ms_uuid_text: lowercase, hyphenated, NUL-terminated */
extern void ms_uuid_text(const uint8_t u[16], char out[MS_UUID_TEXT]);

#endif							/* MS_UUID_H */
