/*
 * vectors.c - the values tests/unit/make_vectors.py printed; docs/protocol.md
 * shows the same.  Never edit one without the other two.  And the allocator
 * the tests lend src/shared.
 */
#include "vectors.h"

#include <stdlib.h>
#include <string.h>

static void *
test_alloc(void *d, size_t n)
{
	(void) d;
	return malloc(n ? n : 1);
}

static void
test_free(void *d, void *p)
{
	(void) d;
	free(p);
}

ms_allocator ms_test_allocator = {test_alloc, test_free, NULL};

const ms_vector_digest ms_vector_digests[] = {
	{"empty", 0, 1, {{NULL}}, 0, "cbf29ce484222325"},
	{"ints", 3, 1, {{"10"}, {"2"}, {"1"}}, 3, "20ea5df0c6c56817"},
	{"composite", 3, 2, {{"a", "bc"}, {"ab", "c"}, {"", "x"}}, 3, "c68dde8d6a76a47e"},
	{"uuid", 2, 1,
		{{"7c9e6679-7425-40de-944b-e07fc1f90ae7"}, {"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1"}},
	2, "77eeeb7c8686dc0a"},
	{"utf8", 4, 2, {{"\xc3\xa9"}, {"e"}, {"\xce\xb5"}, {"\xc3\xa9", "1"}}, 4, "b3507209eecde3e6"},
	{"typed", 3, 2,
		{{"2024-01-02T03:04:05.5+00:00", "1.5"}, {"2023-12-31T23:30:00+00:00", "0.0012"}, {"infinity", "-Infinity"}},
	3, "cdda48bdabf52277"},
};
const int	ms_vector_ndigests = sizeof ms_vector_digests / sizeof ms_vector_digests[0];

/* [7] (7, 'tea', 2.5, x'0102', NULL) and [-3] (-3, 'é', -0.0, x'', 'n') */
const char *ms_vector_row_hashes[2] = {"19bd75c0c295f2b5", "50c39cfc2d685602"};
const char *ms_vector_values = "6a8112bceffe48b7";

const ms_vector_spelling ms_vector_spellings[] = {
	{"numeric", "1.50", "1.5"},
	{"numeric", " +00012.3400 ", "12.34"},
	{"numeric", "-0.0", "0"},
	{"numeric", ".5", "0.5"},
	{"numeric", "1.5e3", "1500"},
	{"numeric", "1.5E-2", "0.015"},
	{"numeric", "0.00120", "0.0012"},
	{"numeric", "nan", "NaN"},
	{"numeric", "-inf", "-Infinity"},
	{"numeric", "1e1001", NULL},
	{"numeric", "12a", NULL},
	{"date", "2024-01-02", "2024-01-02"},
	{"date", "2024-1-2", "2024-01-02"},
	{"date", "0044-03-15 BC", "0044-03-15 BC"},
	{"date", "Infinity", "infinity"},
	{"date", "2023-02-29", NULL},
	{"date", "01/02/2024", NULL},
	{"time", "3:04", "03:04:00"},
	{"time", "03:04:05.120", "03:04:05.12"},
	{"time", "24:00", "24:00:00"},
	{"timestamp", "2024-01-02 03:04:05.5", "2024-01-02T03:04:05.5"},
	{"timestamp", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05"},
	{"timestamp", "0044-03-15 03:00 BC", "0044-03-15T03:00:00 BC"},
	{"timestamp", "2024-01-02 03:04:05.1234567", "2024-01-02T03:04:05.123457"},
	{"timestamp", "2024-01-02 03:04:05.0000005", NULL},
	{"timestamptz", "2024-01-02 04:04:05.5+01", "2024-01-02T03:04:05.5+00:00"},
	{"timestamptz", "2024-01-01 00:30:00+01:00", "2023-12-31T23:30:00+00:00"},
	{"timestamptz", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05+00:00"},
	{"timestamptz", "2024-01-02 03:04:05", "2024-01-02T03:04:05+00:00"},
	{"timestamptz", "2024-01-02 03:04:05-0330", "2024-01-02T06:34:05+00:00"},
	{"timestamptz", "-infinity", "-infinity"},
	{"timestamptz", "2024-01-02 03:04:05+16", NULL},
};
const int	ms_vector_nspellings = sizeof ms_vector_spellings / sizeof ms_vector_spellings[0];

const uint8_t ms_vector_secret[32] = {
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
	16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
};
const uint8_t ms_vector_replica[16] = {
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f
};
const uint8_t ms_vector_epoch[16] = {
	0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f
};
const uint8_t ms_vector_nonce[16] = {
	0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f
};
const uint8_t ms_vector_previous_nonce[16] = {
	0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f
};
const uint64_t ms_vector_number = 42;

const char *ms_vector_seal_input_hex =
"101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
"000000000000002a303132333435363738393a3b3c3d3e3f";
const char *ms_vector_seal_hex =
"c74edd81b68d723813e9fd639bdab297887d6ea6c4c5eebae1187bf039b126c8";
const char *ms_vector_head_hex =
"08011210202122232425262728292a2b2c2d2e2f182a2210303132333435363738393a3b3c3d3e3f"
"28293210404142434445464748494a4b4c4d4e4f3a20c74edd81b68d723813e9fd639bdab297887d"
"6ea6c4c5eebae1187bf039b126c84210101112131415161718191a1b1c1d1e1f";
const char *ms_vector_body_hex =
"4a2d122b0a0870726f647563747312157b226964223a372c226e616d65223a22746561227d1a030a"
"013722030a0138";
const uint64_t ms_vector_generation = UINT64_C(757382400000000);
const char *ms_vector_generation_head_hex =
"08011210202122232425262728292a2b2c2d2e2f182a2210303132333435363738393a3b3c3d3e3f"
"28293210404142434445464748494a4b4c4d4e4f3a20c74edd81b68d723813e9fd639bdab297887d"
"6ea6c4c5eebae1187bf039b126c84210101112131415161718191a1b1c1d1e1f608080a5a7dd9aac01";
const char *ms_vector_applied_hex =
"0a10202122232425262728292a2b2c2d2e2f102a1a10303132333435363738393a3b3c3d3e3f2220"
"c74edd81b68d723813e9fd639bdab297887d6ea6c4c5eebae1187bf039b126c8288080a5a7dd9aac01";
/* an Up of one row, numbered, its length first and its check last (docs/protocol.md 7.1) */
const uint8_t ms_vector_send_id[16] = {
	0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f
};
const uint64_t ms_vector_seq = UINT64_C(1700000000000000);
const char *ms_vector_up_hex =
"61730000000000000008011210101112131415161718191a1b1c1d1e1f1a10505152535455565758595a5b5c5d5e5f"
"2a170a066f726465727312087b226964223a377d1a030a0137588080f9c0c1c482036a20a040f097db978d3d2f086b"
"65bae4a436a0ed61d4451a14ae81d64704ae0eeeeb";
/* an Up of lane "till" (docs/protocol.md 7.2): one row of "sales", numbered by the lane, its lane before the check */
const char *ms_vector_up_lane_hex =
"61790000000000000008011210101112131415161718191a1b1c1d1e1f1a10505152535455565758595a5b5c5d5e5f"
"2a160a0573616c657312087b226964223a387d1a030a0138588180f9c0c1c4820382010474696c6c6a20ac8e302be0"
"eec5ac904362ecc38942631371a4029a0215e0ecd68edf940d8448";
/* bundles (docs/protocol.md 11), written at 1700000000000000 us: the sample message to the replica, the Up from it */
const uint64_t ms_vector_bundle_written = UINT64_C(1700000000000000);
const char *ms_vector_bundle_to_hex =
"4d5342554e444c4500010100101112131415161718191a1b1c1d1e1f0000000100060a24181e40000000009f08011210"
"202122232425262728292a2b2c2d2e2f182a2210303132333435363738393a3b3c3d3e3f282932104041424344454647"
"48494a4b4c4d4e4f3a20c74edd81b68d723813e9fd639bdab297887d6ea6c4c5eebae1187bf039b126c8421010111213"
"1415161718191a1b1c1d1e1f4a2d122b0a0870726f647563747312157b226964223a372c226e616d65223a2274656122"
"7d1a030a013722030a0138cef2388af97f032a9352acd6e5587e768fe1cf6d3901b898627e35d73e0b8a3d";
const char *ms_vector_bundle_from_hex =
"4d5342554e444c4500010200101112131415161718191a1b1c1d1e1f0000000100060a24181e40000000007361730000"
"000000000008011210101112131415161718191a1b1c1d1e1f1a10505152535455565758595a5b5c5d5e5f2a170a066f"
"726465727312087b226964223a377d1a030a0137588080f9c0c1c482036a20a040f097db978d3d2f086b65bae4a436a0"
"ed61d4451a14ae81d64704ae0eeeeb920a72a672bc3e400648a7ea345530ace4d2c351120ce24da37c11f1a910f0ff";

/* signatures (docs/protocol.md 2.4): the server's key from a fixed seed; the sample signed; a signed Filed */
const uint8_t ms_vector_sign_seed[32] = {
	0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f,
	0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7c, 0x7d, 0x7e, 0x7f};
const char *ms_vector_sign_public_hex = "174553b456dddfc6908ecab1c101fe6ab21e2baa0617795b7d43a63482993fd5";
const char *ms_vector_sign_digest_hex = "b7f7e1917805623e0ce38992ca3939d101cfe6c4aaaee95b931626fe3f17f6c5";
const char *ms_vector_signature_hex =
"56c24648c94660a0fb5eadc22c2d6afa4e3aef34cac97d8a7a7e53a80cf4e37b0c462030b9aee0bfd1d810613786ac43"
"e2adf9b2e93d65efad25e5d41a08c80f";
const char *ms_vector_signed_hex =
"08011210202122232425262728292a2b2c2d2e2f182a2210303132333435363738393a3b3c3d3e3f2829321040414243"
"4445464748494a4b4c4d4e4f3a20c74edd81b68d723813e9fd639bdab297887d6ea6c4c5eebae1187bf039b126c84210"
"101112131415161718191a1b1c1d1e1f724056c24648c94660a0fb5eadc22c2d6afa4e3aef34cac97d8a7a7e53a80cf4"
"e37b0c462030b9aee0bfd1d810613786ac43e2adf9b2e93d65efad25e5d41a08c80f4a2d122b0a0870726f6475637473"
"12157b226964223a372c226e616d65223a22746561227d1a030a013722030a0138";
const char *ms_vector_filed_head_hex = "08011210202122232425262728292a2b2c2d2e2f4210101112131415161718191a1b1c1d1e1f";
const char *ms_vector_filed_body_hex = "5a200a10505152535455565758595a5b5c5d5e5f1001220a0a066f72646572731001";
const char *ms_vector_filed_digest_hex = "e705aae77bad70c6b1a13837840b7cea6b98937cb6983e0e2200126e4c7ddde2";
const char *ms_vector_filed_signature_hex =
"c76d5e7bc08554a4bfac14c9cb62ae27f3a6514b53e73b0b5b05dce3366b37c397c1498f356a27a5d4a178f6569f4fff"
"e07d910783b25c30307a293e3eeed503";
const char *ms_vector_signed_filed_hex =
"08011210202122232425262728292a2b2c2d2e2f4210101112131415161718191a1b1c1d1e1f7240c76d5e7bc08554a4"
"bfac14c9cb62ae27f3a6514b53e73b0b5b05dce3366b37c397c1498f356a27a5d4a178f6569f4fffe07d910783b25c30"
"307a293e3eeed5035a200a10505152535455565758595a5b5c5d5e5f1001220a0a066f72646572731001";

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long
ms_hex_decode(const char *hex, uint8_t *out, size_t cap)
{
	size_t		n = strlen(hex);

	if (n % 2 != 0 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++)
	{
		int			hi = hexval(hex[2 * i]);
		int			lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t) (hi << 4 | lo);
	}
	return (long) (n / 2);
}

void
ms_hex_encode(const uint8_t *bytes, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++)
	{
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * len] = '\0';
}

/* the sample schema change (docs/protocol.md 10): message 43 after 42 */
const uint8_t ms_vector_evolve_nonce[16] = {
	0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f
};
const char *ms_vector_evolve_seal_hex =
"8fd93c627da566ddc4c5e267e374c8d45531271b6d140957aec515e9bf7978e6";
const char *ms_vector_evolve_head_hex =
"08011210202122232425262728292a2b2c2d2e2f182b2210505152535455565758595a5b5c5d5e5f"
"282a3210303132333435363738393a3b3c3d3e3f3a208fd93c627da566ddc4c5e267e374c8d45531"
"271b6d140957aec515e9bf7978e64210101112131415161718191a1b1c1d1e1f";
const char *ms_vector_evolve_body_hex =
"4ab10112310a0870726f647563747312207b226964223a392c227469746c65223a22727965222c22"
"7072696365223a347d1a030a01391a7c0a0870726f64756374731207636174616c6f671a046a736f"
"6e221a0a0269641207494e544547455218013207696e7465676572380122150a057469746c651204"
"544558543204746578743802221b0a0570726963651207494e54454745523207696e746567657238"
"032a0269645001620b7b227072696365223a307d";

/* the sample wish (docs/protocol.md 5.4, 10): message 43 after 42, and the Up saying its fate */
const uint8_t ms_vector_wish_nonce[16] = {
	0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f
};
const char *ms_vector_wish_seal_hex =
"7451a604bbea6af15fa4fa7ecdf2d3efd71a196e6d381ddfa74d47c38b21c688";
const char *ms_vector_wish_head_hex =
"08011210202122232425262728292a2b2c2d2e2f182b2210606162636465666768696a6b6c6d6e6f"
"282a3210303132333435363738393a3b3c3d3e3f3a207451a604bbea6af15fa4fa7ecdf2d3efd71a"
"196e6d381ddfa74d47c38b21c6884210101112131415161718191a1b1c1d1e1f";
const char *ms_vector_wish_body_hex =
"4a6c2a6a0805120873657474696e67731a260a2431303131313231332d313431352d313631372d31"
"3831392d31613162316331643165316622127b227072696e746572223a2268616c6c227d2a0c6966"
"5f756e6368616e67656432127b227072696e746572223a226465736b227d";
const char *ms_vector_wish_up_hex =
"61670000000000000008011210101112131415161718191a1b1c1d1e1f1a10505152535455565758"
"595a5b5c5d5e5f588180f9c0c1c482037a0b080512076170706c6965646a20d3c815eb58b148bffb"
"9a8f206a97837f1e77529f91f625db0abf69c9f789a90c";
