/*
 * test_uuid.c - the one uuid module (src/shared/uuid.c): the strict form
 * the replica's and the agent's arguments take, the loose spellings a key
 * part may have (as PostgreSQL's uuid_in reads them), and the one way a
 * uuid is written.
 */
#include <string.h>

#include "check.h"
#include "uuid.h"

static const uint8_t U[16] = {0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11};

static bool
strict(const char *s, uint8_t out[16])
{
	return ms_uuid_parse(s, strlen(s), out);
}

static bool
loose(const char *s, uint8_t out[16])
{
	return ms_uuid_parse_loose(s, strlen(s), out);
}

void
test_uuid(void)
{
	uint8_t		b[16];
	char		text[MS_UUID_TEXT];
	const char *spellings[] = {
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
		"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc999c0b4ef8bb6d6bb9bd380a11",
		"a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", "{a0eebc999c0b4ef8bb6d6bb9bd380a11}"};
	const char *not_loose[] = {
		"", "{", "{}", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g", "-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-", "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
		"a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc99 9c0b 4ef8 bb6d 6bb9bd380a11"};
	const char *not_strict[] = {
		"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc999c0b4ef8bb6d6bb9bd380a11",
		"a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
		"a0eebc99x9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d6-bb9bd380a11", "",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 "};

	/* written lowercase, hyphenated, as uuid_out prints it */
	ms_uuid_text(U, text);
	CHECK(strcmp(text, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11") == 0, "written as uuid_out: %s", text);
	CHECK(strlen(text) == MS_UUID_TEXT - 1, "36 characters");

	/* strict: the 36-character form, any case */
	CHECK(strict(spellings[0], b) && memcmp(b, U, 16) == 0, "strict: lowercase");
	CHECK(strict(spellings[1], b) && memcmp(b, U, 16) == 0, "strict: uppercase");
	for (size_t i = 0; i < sizeof not_strict / sizeof *not_strict; i++)
		CHECK(!strict(not_strict[i], b), "strict refuses \"%s\"", not_strict[i]);
	/* only the n bytes given are read: a longer buffer's rest is not the uuid's */
	CHECK(!ms_uuid_parse(spellings[0], 35, b), "strict: 35 bytes of it refused");

	/* loose: every spelling uuid_in takes, the same 16 bytes, written back one way */
	for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++)
	{
		memset(b, 0, sizeof b);
		CHECK(loose(spellings[i], b) && memcmp(b, U, 16) == 0, "loose takes \"%s\"", spellings[i]);
		ms_uuid_text(b, text);
		CHECK(strcmp(text, spellings[0]) == 0, "\"%s\" written back as %s", spellings[i], text);
	}
	for (size_t i = 0; i < sizeof not_loose / sizeof *not_loose; i++)
		CHECK(!loose(not_loose[i], b), "loose refuses \"%s\"", not_loose[i]);
	/* a NUL inside is no hex digit, and n bounds the read */
	CHECK(!ms_uuid_parse_loose("a0eebc99-9c0b-4ef8\0bb6d-6bb9bd380a11", 36, b), "a NUL refused");
	CHECK(!ms_uuid_parse_loose(spellings[3], 31, b), "loose: 31 digits refused");
}
