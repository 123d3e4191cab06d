/*
 * chain_values.h - apply_chain's values read from the input: bytes put into a
 * row's text, and each column's value written as json or protobuf bytes.
 */
#ifndef MS_CHAIN_VALUES_H
#define MS_CHAIN_VALUES_H

#include <stdint.h>

#include "fuzz.h"
#include "sync.pb-c.h"

#define ROW_MAX 8192

typedef struct text
{
	char		data[ROW_MAX];
	size_t		len;
} text;

extern void chain_put(text *t, const void *p, size_t n);
extern void chain_puts(text *t, const char *s);
extern int64_t chain_int64(fz *in);
extern double chain_double(fz *in);
extern void chain_json_bytes(text *t, fz *in);
extern void chain_json_value(text *out, fz *in, const Sync__Column *c, uint8_t kind);
extern void chain_pb_varint(text *t, uint64_t v);
extern void chain_proto_value(text *out, fz *in, const Sync__Column *c, uint8_t kind);

#endif
