/*
 * test_fields.c - the field numbers C writes by hand (src/shared/fields.h)
 * are sync.proto's: each is looked up by name in the descriptors protoc-c
 * generates, and its number, wire type and repetition compared.
 */
#include <string.h>

#include "check.h"
#include "fields.h"
#include "pbwrite.h"
#include "sync.pb-c.h"

typedef struct hand_field
{
	const ProtobufCMessageDescriptor *message;
	const char *name;
	unsigned	number;			/* the number fields.h gives it */
	int			wire;			/* the wire type C writes it with */
	bool		repeated;
} hand_field;

static const hand_field hand[] = {
	{&sync__key__descriptor, "parts", MS_FIELD_KEY_PARTS, MS_PB_LEN, true},
	{&sync__rows__descriptor, "table", MS_FIELD_ROWS_TABLE, MS_PB_LEN, false},
	{&sync__rows__descriptor, "upserts", MS_FIELD_ROWS_UPSERTS, MS_PB_LEN, true},
	{&sync__rows__descriptor, "keys", MS_FIELD_ROWS_KEYS, MS_PB_LEN, true},
	{&sync__rows__descriptor, "deletes", MS_FIELD_ROWS_DELETES, MS_PB_LEN, true},
	{&sync__rows__descriptor, "replaces", MS_FIELD_ROWS_REPLACES, MS_PB_LEN, true},
	{&sync__begin__descriptor, "schema", MS_FIELD_BEGIN_SCHEMA, MS_PB_LEN, true},
	{&sync__begin__descriptor, "rows", MS_FIELD_BEGIN_ROWS, MS_PB_VARINT, false},
	{&sync__down__descriptor, "begin", MS_FIELD_DOWN_BEGIN, MS_PB_LEN, false},
	{&sync__down__descriptor, "tables", MS_FIELD_DOWN_TABLES, MS_PB_LEN, true},
	{&sync__down__descriptor, "schema", MS_FIELD_DOWN_SCHEMA, MS_PB_LEN, true},
	{&sync__down__descriptor, "let_go", MS_FIELD_DOWN_LET_GO, MS_PB_LEN, true},
	{&sync__down__descriptor, "wishes", MS_FIELD_DOWN_WISHES, MS_PB_LEN, true},
	{&sync__wish__descriptor, "id", MS_FIELD_WISH_ID, MS_PB_VARINT, false},
	{&sync__wish__descriptor, "table", MS_FIELD_WISH_TABLE, MS_PB_LEN, false},
	{&sync__wish__descriptor, "key", MS_FIELD_WISH_KEY, MS_PB_LEN, false},
	{&sync__wish__descriptor, "values", MS_FIELD_WISH_VALUES, MS_PB_LEN, false},
	{&sync__wish__descriptor, "apply", MS_FIELD_WISH_APPLY, MS_PB_LEN, false},
	{&sync__wish__descriptor, "expected", MS_FIELD_WISH_EXPECTED, MS_PB_LEN, false},
	{&sync__end_snapshot__descriptor, "tables", MS_FIELD_END_SNAPSHOT_TABLES, MS_PB_LEN, true},
	{&sync__up__descriptor, "rows", MS_FIELD_UP_ROWS, MS_PB_LEN, true},
	{&sync__up__descriptor, "refusals", MS_FIELD_UP_REFUSALS, MS_PB_LEN, true},
	{&sync__up__descriptor, "digests", MS_FIELD_UP_DIGESTS, MS_PB_LEN, true},
	{&sync__up__descriptor, "backlog", MS_FIELD_UP_BACKLOG, MS_PB_LEN, true},
	{&sync__up__descriptor, "length", MS_FIELD_UP_LENGTH, MS_PB_FIXED64, false},
	{&sync__up__descriptor, "check", MS_FIELD_UP_CHECK, MS_PB_LEN, false},
	{&sync__to_replica__descriptor, "down", MS_FIELD_TO_REPLICA_DOWN, MS_PB_LEN, false},
	{&sync__to_replica__descriptor, "end_snapshot", MS_FIELD_TO_REPLICA_END_SNAPSHOT, MS_PB_LEN, false},
	{&sync__to_replica__descriptor, "filed", MS_FIELD_TO_REPLICA_FILED, MS_PB_LEN, false},
	{&sync__to_replica__descriptor, "signature", MS_FIELD_TO_REPLICA_SIGNATURE, MS_PB_LEN, false},
};

/* the wire type protobuf gives a field of this type (unpacked) */
static int
wire_type(ProtobufCType type)
{
	switch (type)
	{
		case PROTOBUF_C_TYPE_STRING:
		case PROTOBUF_C_TYPE_BYTES:
		case PROTOBUF_C_TYPE_MESSAGE:
			return MS_PB_LEN;
		case PROTOBUF_C_TYPE_DOUBLE:
		case PROTOBUF_C_TYPE_FIXED64:
		case PROTOBUF_C_TYPE_SFIXED64:
			return MS_PB_FIXED64;
		case PROTOBUF_C_TYPE_FLOAT:
		case PROTOBUF_C_TYPE_FIXED32:
		case PROTOBUF_C_TYPE_SFIXED32:
			return MS_PB_FIXED32;
		default:
			return MS_PB_VARINT;
	}
}

void
test_fields(void)
{
	for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++)
	{
		const hand_field *h = &hand[i];
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(h->message, h->name);

		CHECK(f != NULL, "%s.%s is in sync.proto", h->message->name, h->name);
		if (f == NULL)
			continue;
		CHECK(f->id == h->number, "%s.%s is field %u in sync.proto, fields.h says %u",
			  h->message->name, h->name, f->id, h->number);
		CHECK(wire_type(f->type) == h->wire, "%s.%s has wire type %d in sync.proto, C writes %d",
			  h->message->name, h->name, wire_type(f->type), h->wire);
		CHECK((f->label == PROTOBUF_C_LABEL_REPEATED) == h->repeated,
			  "%s.%s is %srepeated in sync.proto", h->message->name, h->name,
			  f->label == PROTOBUF_C_LABEL_REPEATED ? "" : "not ");
		/* and the number names no other field of the message */
		CHECK(protobuf_c_message_descriptor_get_field(h->message, h->number) == f,
			  "field %u of %s is %s", h->number, h->message->name, h->name);
	}
	/* the bodies are the oneof of ToReplica, after the head's eight fields */
	for (unsigned n = 1; n <= 8; n++)
	{
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(&sync__to_replica__descriptor, n);

		CHECK(f != NULL && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) == 0,
			  "ToReplica field %u is part of the head", n);
	}
	CHECK((protobuf_c_message_descriptor_get_field(&sync__to_replica__descriptor,
												   MS_FIELD_TO_REPLICA_DOWN)->flags &
		   PROTOBUF_C_FIELD_FLAG_ONEOF) != 0, "a body is one of the oneof");
}
