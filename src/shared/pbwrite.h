/*-------------------------------------------------------------------------
 * pbwrite.h
 *	  Writing protobuf fields one at a time, for messages too large to build
 *	  as protobuf-c structs first (a snapshot of a million rows); and reading
 *	  the varints untrusted bytes are made of.
 *
 * A protobuf message is its fields one after the other, so a message can be
 * streamed field by field; a nested message is written into its own buffer
 * and appended with its tag and length.  Each function writes into out (which
 * must hold the size the matching _size function returns) and returns the
 * number of bytes written.  docs/protocol.md says which fields are which.
 *-------------------------------------------------------------------------
 */
#ifndef MS_PBWRITE_H
#define MS_PBWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MS_PB_VARINT 0
#define MS_PB_FIXED64 1
#define MS_PB_LEN 2
#define MS_PB_FIXED32 5

static inline size_t
ms_pb_varint_size(uint64_t v)
{
	size_t		n = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		n++;
	}
	return n;
}

static inline size_t
ms_pb_varint(uint8_t *out, uint64_t v)
{
	size_t		n = 0;

	while (v >= 0x80)
	{
		out[n++] = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t) v;
	return n;
}

/* the tag of a field */
static inline size_t
ms_pb_tag(uint8_t *out, uint32_t field, int wire_type)
{
	return ms_pb_varint(out, ((uint64_t) field << 3) | (uint64_t) wire_type);
}

/* size of a length-delimited field of len bytes, tag included */
static inline size_t
ms_pb_len_field_size(uint32_t field, size_t len)
{
	return ms_pb_varint_size((uint64_t) field << 3) + ms_pb_varint_size(len) + len;
}

/* a length-delimited field: tag, length, bytes */
static inline size_t
ms_pb_len_field(uint8_t *out, uint32_t field, const void *bytes, size_t len)
{
	size_t		n = ms_pb_tag(out, field, MS_PB_LEN);

	n += ms_pb_varint(out + n, len);
	if (len > 0)
		memcpy(out + n, bytes, len);
	return n + len;
}

/* the head of a length-delimited field whose len bytes the caller appends */
static inline size_t
ms_pb_len_head(uint8_t *out, uint32_t field, size_t len)
{
	size_t		n = ms_pb_tag(out, field, MS_PB_LEN);

	return n + ms_pb_varint(out + n, len);
}

/* a varint field */
static inline size_t
ms_pb_varint_field(uint8_t *out, uint32_t field, uint64_t v)
{
	size_t		n = ms_pb_tag(out, field, MS_PB_VARINT);

	return n + ms_pb_varint(out + n, v);
}

static inline size_t
ms_pb_varint_field_size(uint32_t field, uint64_t v)
{
	return ms_pb_varint_size((uint64_t) field << 3) + ms_pb_varint_size(v);
}

/* a double (fixed64) field */
static inline size_t
ms_pb_double_field(uint8_t *out, uint32_t field, double d)
{
	uint64_t	bits;
	size_t		n = ms_pb_tag(out, field, MS_PB_FIXED64);

	memcpy(&bits, &d, sizeof bits);
	for (int i = 0; i < 8; i++)
		out[n++] = (uint8_t) (bits >> (8 * i));
	return n;
}

static inline uint64_t
ms_pb_zigzag(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static inline int64_t
ms_pb_unzigzag(uint64_t u)
{
	return (int64_t) ((u >> 1) ^ (~(u & 1) + 1));
}

/*
 * ms_pb_read_varint: the varint at *pos of buf (len bytes), advancing *pos;
 * false when it is truncated or longer than 64 bits.  Every reader of
 * untrusted bytes (wire.c, the row walker of row.c) reads varints here.
 */
static inline bool
ms_pb_read_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
	uint64_t	v = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8_t		b;

		if (*pos >= len)
			return false;
		b = buf[(*pos)++];
		if (shift == 63 && b > 1)
			return false;
		v |= (uint64_t) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*out = v;
			return true;
		}
	}
	return false;
}

/*
 * ms_pb_read_fixed64: the little-endian 64 bits at *pos, advancing *pos;
 * false when fewer than 8 bytes are left.
 */
static inline bool
ms_pb_read_fixed64(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
	uint64_t	v = 0;

	if (*pos > len || len - *pos < 8)
		return false;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | buf[*pos + (size_t) i];
	*pos += 8;
	*out = v;
	return true;
}

/* One field of a message, as ms_pb_next read it. */
typedef struct ms_pb_field
{
	uint64_t	number;			/* the tag's field number, as read: 0 or past 2^29 - 1 included */
	int			wire;			/* the tag's wire type, as read: any of 0 to 7 */
	uint64_t	value;			/* MS_PB_VARINT, MS_PB_FIXED64, MS_PB_FIXED32: its value */
	const uint8_t *bytes;		/* MS_PB_LEN: its bytes, within the buffer ... */
	size_t		len;			/* ... and how many */
} ms_pb_field;

typedef enum ms_pb_next_result
{
	MS_PB_FIELD,				/* a field, whole: *pos is past it */
	MS_PB_END,					/* *pos was at the end: nothing read */
	MS_PB_BROKEN_TAG,			/* its tag is truncated, or longer than 64 bits */
	MS_PB_BROKEN_VALUE			/* number and wire are read; the value runs past the end, or the wire type is none of the four */
} ms_pb_next_result;

/*
 * ms_pb_next: the field at *pos of buf (len bytes), advancing *pos past
 * it; the one walk over a message's fields that every reader of untrusted
 * bytes in src/shared makes (wire.c's scan, upcheck.c, upread.c,
 * sign_digest.c), each saying what broke in its own words.  On a broken
 * tag or value *pos is wherever the read stopped.
 */
static inline ms_pb_next_result
ms_pb_next(const uint8_t *buf, size_t len, size_t *pos, ms_pb_field *f)
{
	uint64_t	tag;
	uint64_t	v;

	f->value = 0;
	f->bytes = NULL;
	f->len = 0;
	if (*pos >= len)
		return MS_PB_END;
	if (!ms_pb_read_varint(buf, len, pos, &tag))
		return MS_PB_BROKEN_TAG;
	f->number = tag >> 3;
	f->wire = (int) (tag & 7);
	switch (f->wire)
	{
		case MS_PB_VARINT:
			return ms_pb_read_varint(buf, len, pos, &f->value) ? MS_PB_FIELD : MS_PB_BROKEN_VALUE;
		case MS_PB_FIXED64:
			return ms_pb_read_fixed64(buf, len, pos, &f->value) ? MS_PB_FIELD : MS_PB_BROKEN_VALUE;
		case MS_PB_FIXED32:
			if (len - *pos < 4)
				return MS_PB_BROKEN_VALUE;
			f->value = (uint64_t) buf[*pos] | (uint64_t) buf[*pos + 1] << 8 |
				(uint64_t) buf[*pos + 2] << 16 | (uint64_t) buf[*pos + 3] << 24;
			*pos += 4;
			return MS_PB_FIELD;
		case MS_PB_LEN:
			if (!ms_pb_read_varint(buf, len, pos, &v) || v > len - *pos)
				return MS_PB_BROKEN_VALUE;
			f->bytes = buf + *pos;
			f->len = (size_t) v;
			*pos += (size_t) v;
			return MS_PB_FIELD;
		default:
			return MS_PB_BROKEN_VALUE;
	}
}

#endif
