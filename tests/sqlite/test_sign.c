/*
 * test_sign.c - a replica that trusts the server's key believes nothing
 * else (docs/protocol.md 2.4, src/sqlite/trust.c): a forged Down, Filed or
 * EndSnapshot, a message signed by another key, one unsigned, one whose
 * signature is cut short, one whose body was changed under its signature
 * -- each is an error that says why and changes nothing (every table, the
 * _sync_ ones too), and a Filed answer forged from the replica's own upload
 * lets go of no note.  sync_trust_key pins, refuses another key unless
 * told to replace it; sync_verify says why without applying.
 */
#include "harness.h"
#include "vectors.h"

#include <stdlib.h>

void		test_sign(void);

/* find: the first n bytes of needle in m (memmem is no C11, nor mingw's) */
static uint8_t *
find(tm_msg m, const char *needle, size_t n)
{
	for (size_t i = 0; i + n <= m.len; i++)
		if (memcmp(m.data + i, needle, n) == 0)
			return m.data + i;
	return NULL;
}

static char *
apply_error(sqlite3 *db, tm_msg m)
{
	char	   *r = tm_apply(db, m);

	return r == NULL ? sqlite3_mprintf("%s", tm_error()) : NULL;
}

static const char *
key_hex(void)
{
	static char hex[65];
	uint8_t		key[32];

	tm_server_key(key);
	ms_hex_encode(key, 32, hex);
	return hex;
}

/* refused: m is an error saying `why`, and the database is as it was */
static void
refused(sqlite3 *db, tm_msg m, const char *why, const char *what)
{
	uint64_t	before = tm_checksum(db, 1);
	char	   *err = apply_error(db, m);

	CHECK(t_has(err, why), "%s: refused saying '%s': %s", what, why, S(err));
	CHECK(tm_checksum(db, 1) == before, "%s: nothing changed", what);
	sqlite3_free(err);
}

/* verify: sync_verify(m): NULL, or why not */
static char *
verify(sqlite3 *db, tm_msg m)
{
	sqlite3_stmt *st;
	char	   *out = NULL;

	if (sqlite3_prepare_v2(db, "SELECT sync_verify(?1)", -1, &st, NULL) != SQLITE_OK)
		return sqlite3_mprintf("prepare: %s", sqlite3_errmsg(db));
	sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		out = sqlite3_mprintf("%s", sqlite3_column_text(st, 0));
	else if (sqlite3_errcode(db) != SQLITE_ROW && sqlite3_errcode(db) != SQLITE_DONE)
		out = sqlite3_mprintf("error: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return out;
}

static void
pinning(void)
{
	sqlite3    *db = t_open(NULL);
	char	   *sql;
	char	   *err = NULL;
	char	   *r;

	r = t_text(db, "SELECT sync_trust_key()");
	CHECK(r == NULL, "a new file trusts no key: %s", S(r));
	sqlite3_free(r);
	CHECK(strcmp(key_hex(), ms_vector_sign_public_hex) == 0, "the pretend server signs with the vectors' key");
	sql = sqlite3_mprintf("SELECT sync_trust_key('%s')", key_hex());
	r = t_text(db, sql);
	CHECK(r && strcmp(r, key_hex()) == 0, "pinned: %s", S(r));
	sqlite3_free(r);
	/* the same again: the same answer, nothing else */
	r = t_text(db, sql);
	CHECK(r && strcmp(r, key_hex()) == 0, "pinned again: %s", S(r));
	sqlite3_free(r);
	sqlite3_free(sql);
	r = t_text(db, "SELECT sync_trust_key()");
	CHECK(r && strcmp(r, key_hex()) == 0, "read back: %s", S(r));
	sqlite3_free(r);
	/* upper-case hex and a BLOB are the same key */
	CHECK(t_exec(db, "SELECT sync_trust_key(X'174553B456DDDFC6908ECAB1C101FE6AB21E2BAA0617795B7D43A63482993FD5')",
				 &err) == SQLITE_OK, "a BLOB of the same key: %s", S(err));
	sqlite3_free(err);
	/* another key: refused unless replaced */
	CHECK(t_exec(db, "SELECT sync_trust_key(zeroblob(32))", &err) != SQLITE_OK &&
		  t_has(err, "trusts another server key") && t_has(err, "'replace'"),
		  "another key is refused: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "SELECT sync_trust_key(zeroblob(32), 'maybe')", &err) != SQLITE_OK &&
		  t_has(err, "'replace'"), "a second argument but 'replace': %s", S(err));
	sqlite3_free(err);
	r = t_text(db, "SELECT sync_trust_key()");
	CHECK(r && strcmp(r, key_hex()) == 0, "the key stays: %s", S(r));
	sqlite3_free(r);
	CHECK(t_exec(db, "SELECT sync_trust_key(zeroblob(32), 'replace')", &err) == SQLITE_OK,
		  "an operator replaces it: %s", S(err));
	sqlite3_free(err);
	r = t_text(db, "SELECT sync_trust_key()");
	CHECK(r && strcmp(r, "0000000000000000000000000000000000000000000000000000000000000000") == 0,
		  "replaced: %s", S(r));
	sqlite3_free(r);
	/* what is no key */
	CHECK(t_exec(db, "SELECT sync_trust_key(zeroblob(31))", &err) != SQLITE_OK && t_has(err, "32 bytes"),
		  "31 bytes: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "SELECT sync_trust_key('174553b456dddfc6908ecab1c101fe6ab21e2baa0617795b7d43a63482993fdz')",
				 &err) != SQLITE_OK, "not hex: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "SELECT sync_trust_key(NULL)", &err) != SQLITE_OK, "NULL: %s", S(err));
	sqlite3_free(err);
	/* a table edited by hand: said, not believed */
	t_exec(db, "DROP TABLE _sync_trust", NULL);
	t_exec(db, "CREATE TABLE _sync_trust(id INTEGER PRIMARY KEY, key BLOB, pinned_at INTEGER)", NULL);
	t_exec(db, "INSERT INTO _sync_trust VALUES (1, x'00', 0)", NULL);
	CHECK(t_exec(db, "SELECT sync_trust_key()", &err) != SQLITE_OK && t_has(err, "not 32 bytes"),
		  "a key of 1 byte is no key: %s", S(err));
	sqlite3_free(err);
	sqlite3_close(db);
}

/* pin: the pretend server's key pinned on db */
static void
pin(sqlite3 *db)
{
	char	   *sql = sqlite3_mprintf("SELECT sync_trust_key('%s')", key_hex());
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "pin: %s", S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

static void
forgeries(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_server	forger;
	Sync__Down *d;
	tm_msg		m,
				good;
	char	   *r;
	char	   *why;

	pin(db);
	/* the server's own message applies */
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":4,\"name\":\"rye\",\"price\":3}", -1, "4", NULL);
	good = tm_next(&s, d, NULL);
	why = verify(db, good);
	CHECK(why == NULL, "sync_verify takes the server's message: %s", S(why));
	sqlite3_free(why);
	r = tm_apply(db, good);
	CHECK(t_has(r, "\"applied\""), "a signed message applies: %s %s", S(r), tm_error());

	/* a Down signed by another key: the chain is right, the price is not the server's */
	forger = s;
	forger.key_xor = 1;
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":999}", -1, "1", NULL);
	m = tm_next(&forger, d, NULL);
	why = verify(db, m);
	CHECK(t_has(why, "does not verify"), "sync_verify says why: %s", S(why));
	sqlite3_free(why);
	refused(db, m, "does not verify under the server key", "a Down signed by another key");
	CHECK(t_int(db, "SELECT price FROM products WHERE id = 1") != 999, "the price is the server's");

	/* the forgery: a Down with a random seal and no signature */
	forger = s;
	forger.unsigned_messages = true;
	m = tm_next(&forger, d, NULL);
	refused(db, m, "is not signed", "an unsigned Down");

	/* a forged EndSnapshot: would let go of every row no snapshot named */
	forger = s;
	forger.key_xor = 0x80;
	m = tm_next(&forger, NULL, tm_end("products", "customers", NULL));
	refused(db, m, "does not verify", "a forged EndSnapshot");

	/* the server's message with its body changed under its signature */
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":5,\"name\":\"oat\",\"price\":2}", -1, "5", NULL);
	m = tm_next(&s, d, NULL);
	{
		uint8_t    *p = find(m, "oat", 3);

		CHECK(p != NULL, "the row is in the body");
		if (p)
			p[0] = 'c';
		refused(db, m, "does not verify", "a body changed under its signature");
		if (p)
			p[0] = 'o';
	}
	/* its signature cut short: its length says 63 and a byte is gone */
	{
		uint8_t    *sig = find(m, "\x72\x40", 2);
		tm_msg		cut = {tm_alloc(m.len - 1), m.len - 1};
		size_t		at = sig ? (size_t) (sig - m.data) : 0;

		memcpy(cut.data, m.data, at + 65);
		memcpy(cut.data + at + 65, m.data + at + 66, m.len - at - 66);
		cut.data[at + 1] = 63;
		refused(db, cut, "cannot be read", "a signature cut short");
	}
	/* as it was signed, it applies */
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"applied\""), "the message as it was signed applies: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

/* the other forgery: a Filed answer built from the replica's own upload lets go of nothing */
static void
forged_answer(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_server	forger;
	tm_msg		up;
	Sync__Up   *u;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	char	   *r;
	char	   *sql;

	pin(db);
	sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', 1, 1, 10, NULL), ('%s', 2, 1, 20, NULL),"
						  " ('%s', 3, 2, 30, NULL)", tm_replica_text(&s), tm_replica_text(&s), tm_replica_text(&s));
	t_exec(db, sql, NULL);
	sqlite3_free(sql);
	up = tm_upload(db);
	u = up.data ? ms_up_decode(up.data, up.len, 1 << 30, NULL, &st, reason) : NULL;
	CHECK(u != NULL, "the upload: %s", reason);
	if (u == NULL)
	{
		sqlite3_close(db);
		return;
	}
	/* everything the answer needs is in the upload on the stick: its send id, its rows */
	forger = s;
	forger.unsigned_messages = true;
	refused(db, tm_filed_msg(&forger, tm_filed_all(u)), "is not signed", "an unsigned Filed");
	forger.unsigned_messages = false;
	forger.key_xor = 7;
	refused(db, tm_filed_msg(&forger, tm_filed_all(u)), "does not verify", "a Filed signed by another key");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") == 3,
		  "the three unsent sales keep their notes");
	/* the server's answer lets go of them */
	r = tm_apply(db, tm_filed_msg(&s, tm_filed_all(u)));
	CHECK(t_has(r, "\"notes\":3") && t_int(db, "SELECT count(*) FROM _sync_notes") == 0,
		  "the server's answer lets go of them: %s %s", S(r), tm_error());
	sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

/* a file that trusts no key (an earlier build's) applies what it is sent, signed or not */
static void
unpinned(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_server	other;
	Sync__Down *d = tm_down();
	char	   *r;
	char	   *why;
	tm_msg		m;

	tm_upsert(tm_rows(d, "products"), "{\"id\":4,\"name\":\"rye\",\"price\":3}", -1, "4", NULL);
	other = s;
	other.unsigned_messages = true;
	m = tm_next(&other, d, NULL);
	s = other;
	s.unsigned_messages = false;
	why = verify(db, m);
	CHECK(t_has(why, "trusts no server key"), "sync_verify says no key is pinned: %s", S(why));
	sqlite3_free(why);
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"applied\""), "an unsigned message applies with no key pinned: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

void
test_sign(void)
{
	pinning();
	forgeries();
	forged_answer();
	unpinned();
}
