/*
 * chain_values.c - apply_chain's values read from the input (chain_values.h):
 * integers, doubles and bytes the fuzzer chooses, written as a json row's
 * text or a protobuf row's fields, of the kind a column declares or not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_values.h"



void
chain_put(text *t, const void *p, size_t n)
{
	if (t->len + n > sizeof t->data)
		n = sizeof t->data - t->len;
	memcpy(t->data + t->len, p, n);
	t->len += n;
}

void
chain_puts(text *t, const char *s)
{
	chain_put(t, s, strlen(s));
}

int64_t
chain_int64(fz *in)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | fz_byte(in);
	return (int64_t) v;
}

double
chain_double(fz *in)
{
	uint64_t	v = (uint64_t) chain_int64(in);
	double		d;

	memcpy(&d, &v, sizeof d);
	return d;
}

/* a JSON string of bytes from the input: controls and quotes escaped, the rest as they come */
void
chain_json_bytes(text *t, fz *in)
{
	const uint8_t *p;
	size_t		n = fz_bytes(in, 40, &p);

	chain_puts(t, "\"");
	for (size_t i = 0; i < n; i++)
	{
		char		esc[8];

		if (p[i] < 0x20 || p[i] == '"' || p[i] == '\\')
		{
			snprintf(esc, sizeof esc, "\\u%04x", p[i]);
			chain_puts(t, esc);
		}
		else
			chain_put(t, &p[i], 1);
	}
	chain_puts(t, "\"");
}

void
chain_json_value(text *out, fz *in, const Sync__Column *c, uint8_t kind)
{
	char		num[64];

	switch (kind % 8)
	{
		case 0:
			chain_puts(out, "null");
			break;
		case 1:
			snprintf(num, sizeof num, "%d", (int8_t) fz_byte(in));
			chain_puts(out, num);
			break;
		case 2:
			snprintf(num, sizeof num, "%lld", (long long) chain_int64(in));
			chain_puts(out, num);
			break;
		case 3:
			{
				double		d = chain_double(in);

				if (isfinite(d))
					snprintf(num, sizeof num, "%.17g", d);
				else
					snprintf(num, sizeof num, "%s1e999", d < 0 ? "-" : "");
				chain_puts(out, num);
			}
			break;
		case 4:
			chain_json_bytes(out, in);
			break;
		case 5:
			chain_puts(out, fz_byte(in) % 2 ? "true" : "false");
			break;
		case 6:
			{
				const uint8_t *p;
				size_t		n = fz_bytes(in, 16, &p);

				chain_put(out, p, n);
			}
			break;
		default:
			snprintf(num, sizeof num, "\"\\u%02x%02x%s\"", fz_byte(in), fz_byte(in),
					 strcmp(c->type, "BLOB") == 0 ? "" : "x");
			chain_puts(out, num);
	}
}

void
chain_pb_varint(text *t, uint64_t v)
{
	do
	{
		uint8_t		b = (uint8_t) (v & 0x7f);

		v >>= 7;
		if (v)
			b |= 0x80;
		chain_put(t, &b, 1);
	} while (v);
}

void
chain_proto_value(text *out, fz *in, const Sync__Column *c, uint8_t kind)
{
	uint32_t	field = c->field;
	const uint8_t *p;
	size_t		n;

	switch (kind % 4)
	{
		case 0:					/* as its type says */
		case 1:
			if (strcmp(c->type, "INTEGER") == 0)
			{
				int64_t		v = kind % 4 ? chain_int64(in) : (int8_t) fz_byte(in);

				chain_pb_varint(out, (uint64_t) field << 3);
				chain_pb_varint(out, ((uint64_t) v << 1) ^ (uint64_t) (v >> 63));
			}
			else if (strcmp(c->type, "REAL") == 0)
			{
				uint64_t	v = (uint64_t) chain_int64(in);

				chain_pb_varint(out, (uint64_t) field << 3 | 1);
				for (int i = 0; i < 8; i++)
				{
					uint8_t		b = (uint8_t) (v >> (8 * i));

					chain_put(out, &b, 1);
				}
			}
			else
			{
				n = fz_bytes(in, 40, &p);
				chain_pb_varint(out, (uint64_t) field << 3 | 2);
				chain_pb_varint(out, n);
				chain_put(out, p, n);
			}
			break;
		case 2:					/* another wire type */
			chain_pb_varint(out, (uint64_t) field << 3 | (fz_byte(in) % 6));
			chain_pb_varint(out, fz_byte(in));
			break;
		default:				/* a field of no column */
			chain_pb_varint(out, (uint64_t) (fz_byte(in) + 1) << 3);
			chain_pb_varint(out, fz_byte(in));
	}
}
