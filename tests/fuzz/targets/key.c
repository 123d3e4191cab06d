/*
 * key.c - libFuzzer target: the canonical key parser of src/shared/key.c.
 *
 * Properties, any failure a finding:
 *   - bytes that parse as a canonical key are the only spelling of their
 *     parts: written again (ms_key_size, ms_key_write) they are the same
 *     bytes; bytes that do not parse are refused by every reader the same
 *     way (ms_key_next_part and ms_key_count_parts);
 *   - any parts (the input cut at NUL bytes) write a key that parses back
 *     into them, and a wire Key of them writes the same bytes;
 *   - ms_key_cmp is an order: antisymmetric, zero only on equal bytes,
 *     and memcmp's with the shorter first.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "key.h"
#include "wire.h"

#define MAX_PARTS 16

static int
sign(int v)
{
	return (v > 0) - (v < 0);
}

/* the input as a canonical key */
static void
as_key(const char *key, size_t len)
{
	/* every part takes at least two bytes ("0:") */
	size_t		cap = len / 2 + 1;
	const char **parts = malloc(sizeof(char *) * cap);
	size_t	   *lens = malloc(sizeof(size_t) * cap);
	size_t		pos = 0;
	int			n = 0;
	int			rc;
	int			count = ms_key_count_parts(key, len);
	char	   *again;

	FZ_CHECK(parts != NULL && lens != NULL, "out of memory");
	while ((rc = ms_key_next_part(key, len, &pos, &parts[n], &lens[n])) == 1)
	{
		FZ_CHECK(pos <= len && parts[n] >= key && parts[n] + lens[n] == key + pos, "a part lies outside the key");
		n++;
		FZ_CHECK((size_t) n < cap, "more parts than a key of %zu bytes can hold", len);
	}
	FZ_CHECK(rc == 0 || rc == -1, "ms_key_next_part returned %d", rc);
	FZ_CHECK(count == (rc == 0 ? n : -1), "ms_key_count_parts says %d, the walk %d parts (%d)", count, n, rc);
	if (rc == 0)
	{
		FZ_CHECK(ms_key_size((size_t) n, parts, lens) == len, "a canonical key of %zu bytes writes again as %zu",
				 len, ms_key_size((size_t) n, parts, lens));
		again = malloc(len + 1);
		FZ_CHECK(again != NULL, "out of memory");
		FZ_CHECK(ms_key_write(again, (size_t) n, parts, lens) == len && (len == 0 || memcmp(again, key, len) == 0),
				 "a canonical key writes again as other bytes: not its only spelling");
		free(again);
	}
	free(parts);
	free(lens);
}

/* the input cut at NUL bytes, as the parts of a key */
static void
as_parts(const char *in, size_t len)
{
	const char *parts[MAX_PARTS];
	size_t		lens[MAX_PARTS];
	char	   *owned[MAX_PARTS];
	size_t		n = 0;
	size_t		start = 0;
	size_t		size;
	size_t		pos = 0;
	char	   *key;
	char	   *wire;
	Sync__Key	k = SYNC__KEY__INIT;

	for (size_t i = 0; i <= len && n < MAX_PARTS; i++)
		if (i == len || in[i] == '\0')
		{
			parts[n] = in + start;
			lens[n] = i - start;
			n++;
			start = i + 1;
		}
	size = ms_key_size(n, parts, lens);
	key = malloc(size + 1);
	FZ_CHECK(key != NULL, "out of memory");
	FZ_CHECK(ms_key_write(key, n, parts, lens) == size, "ms_key_write wrote other than ms_key_size said");
	FZ_CHECK(ms_key_count_parts(key, size) == (int) n, "a key of %zu parts counts %d", n, ms_key_count_parts(key, size));
	for (size_t i = 0; i < n; i++)
	{
		const char *p;
		size_t		plen;

		FZ_CHECK(ms_key_next_part(key, size, &pos, &p, &plen) == 1 && plen == lens[i] &&
				 (plen == 0 || memcmp(p, parts[i], plen) == 0), "part %zu does not parse back", i);
	}
	/* a wire Key of the same parts: the same bytes */
	for (size_t i = 0; i < n; i++)
	{
		owned[i] = malloc(lens[i] + 1);
		FZ_CHECK(owned[i] != NULL, "out of memory");
		memcpy(owned[i], parts[i], lens[i]);
		owned[i][lens[i]] = '\0';
	}
	k.n_parts = n;
	k.parts = owned;
	FZ_CHECK(ms_wire_key_size(&k) == size, "a wire key's size differs from its parts' key");
	wire = malloc(size + 1);
	FZ_CHECK(wire != NULL, "out of memory");
	FZ_CHECK(ms_wire_key_write(&k, wire) == size && memcmp(wire, key, size) == 0,
			 "a wire key writes other bytes than its parts' key");
	for (size_t i = 0; i < n; i++)
		free(owned[i]);
	free(wire);
	free(key);
}

/* the input cut in two, compared */
static void
as_pair(const char *in, size_t len)
{
	size_t		cut = len ? (unsigned char) in[0] % (len + 1) : 0;
	const char *a = in;
	const char *b = in + cut;
	size_t		alen = cut;
	size_t		blen = len - cut;
	int			ab = ms_key_cmp(a, alen, b, blen);
	int			ba = ms_key_cmp(b, blen, a, alen);
	size_t		m = alen < blen ? alen : blen;
	int			want = m ? sign(memcmp(a, b, m)) : 0;

	if (want == 0)
		want = alen < blen ? -1 : alen > blen;
	FZ_CHECK(sign(ab) == -sign(ba), "ms_key_cmp is not antisymmetric");
	FZ_CHECK(sign(ab) == want, "ms_key_cmp says %d, memcmp with the shorter first %d", sign(ab), want);
	FZ_CHECK(ms_key_cmp(a, alen, a, alen) == 0, "ms_key_cmp of a key and itself is not 0");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *) data;

	as_key(in, size);
	as_parts(in, size);
	as_pair(in, size);
	return 0;
}
