/*
 * test_wish.c - the server's wishes for the replica's setting rows
 * (src/sqlite/wish.c, docs/protocol.md 5.4): kept once by id, decided at
 * the next upload (applied always; if_unchanged only while the row holds
 * what the server last filed; superseded by a newer one for the row), the
 * applied write carried up as any write, the fates in the upload until a
 * Filed answer, sync_progress saying them; and untrusted wishes (bad
 * lengths, an unknown table, another replica's row, columns it may not
 * set) changing none of the replica's rows.
 */
#include <stdarg.h>

#include "harness.h"

void		test_wish(void);

/* a replica holding a setting table, its own row not made yet, and a catalog */
static sqlite3 *
settings_replica(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[2];
	char	   *r;

	tm_server_init(s, 0x31, 0x41);
	schema[0] = tm_table("store_settings", "setting", "json", "store",
						 "store TEXT server=uuid, printer TEXT, seats INTEGER notnull, opens TEXT");
	tm_origin(schema[0], "store");
	schema[1] = tm_table("products", "catalog", "json", "id", "id INTEGER, name TEXT");
	r = tm_apply(db, tm_next(s, tm_begin(schema, 2), NULL));
	CHECK(t_has(r, "\"applied\""), "the snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(s, NULL, tm_end("store_settings", "products", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	return db;
}

static Sync__Wish *
wish(uint64_t id, const char *table, const char *key, const char *values, const char *apply, const char *expected)
{
	Sync__Wish *w = tm_alloc(sizeof *w);

	sync__wish__init(w);
	w->id = id;
	w->table = tm_strdup(table);
	w->key = tm_key(key, NULL);
	w->values = tm_strdup(values);
	w->apply = tm_strdup(apply);
	w->expected = tm_strdup(expected);
	return w;
}

/* a Down of these wishes (NULL-terminated) */
static Sync__Down *
wishes(Sync__Wish *first, ...)
{
	Sync__Down *d = tm_down();
	va_list		ap;
	size_t		n = 0;

	d->wishes = tm_alloc(sizeof(Sync__Wish *) * 16);
	va_start(ap, first);
	for (Sync__Wish *w = first; w != NULL && n < 16; w = va_arg(ap, Sync__Wish *))
		d->wishes[n++] = w;
	va_end(ap);
	d->n_wishes = n;
	return d;
}

static Sync__Up *
upload(sqlite3 *db, const char *what)
{
	tm_msg		m = tm_upload(db);
	ms_wire_status status;
	char		reason[MS_REASON_MAX] = "";
	Sync__Up   *u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;

	CHECK(u != NULL, "%s: an upload that passes the server's checks: %s %s", what, reason, tm_error());
	return u;
}

static const Sync__WishFate *
fate_of(const Sync__Up *u, uint64_t id)
{
	for (size_t i = 0; u && i < u->n_wish_fates; i++)
		if (u->wish_fates[i]->id == id)
			return u->wish_fates[i];
	return NULL;
}

static bool
carries_row(const Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_rows; i++)
		if (strcmp(u->rows[i]->table, table) == 0 && u->rows[i]->n_upserts > 0)
			return true;
	return false;
}

static char *
row(sqlite3 *db)
{
	return t_text(db, "SELECT coalesce(printer, 'null') || '/' || seats || '/' || coalesce(opens, 'null')"
				  " FROM store_settings");
}

static void
mine(sqlite3 *db, const tm_server *s, const char *fmt)
{
	char	   *sql = sqlite3_mprintf(fmt, tm_replica_text(s));
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "%s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

/* answer an upload: every row filed */
static void
answer(sqlite3 *db, tm_server *s, Sync__Up *u)
{
	char	   *r = tm_apply(db, tm_filed_msg(s, tm_filed_all(u)));

	CHECK(t_has(r, "\"filed\""), "the answer applies: %s %s", S(r), tm_error());
}

static void
always(void)
{
	tm_server	s;
	sqlite3    *db = settings_replica(&s);
	const char *me = tm_replica_text(&s);
	Sync__Up   *u;
	const Sync__WishFate *f;
	char	   *r;
	tm_msg		again;

	u = upload(db, "after the snapshot");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* a wish for a row the replica has not made: always makes it */
	again = tm_next(&s, wishes(wish(7, "store_settings", me, "{\"printer\":\"hall\",\"seats\":4}", "always", ""), NULL), NULL);
	r = tm_apply(db, again);
	CHECK(t_has(r, "\"applied\""), "a Down of wishes applies: %s %s", S(r), tm_error());
	r = row(db);
	CHECK(r == NULL, "kept, not yet decided: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(r, "\"wishes\":[{\"id\":7,\"fate\":\"pending\""), "progress: pending: %s", S(r));
	sqlite3_free(r);
	u = upload(db, "a wish decided");
	r = row(db);
	CHECK(r && strcmp(r, "hall/4/null") == 0, "applied: the row made with its values: %s", S(r));
	sqlite3_free(r);
	f = fate_of(u, 7);
	CHECK(f && strcmp(f->fate, "applied") == 0 && f->why[0] == '\0', "its fate goes up: applied");
	CHECK(carries_row(u, "store_settings"), "the applied write goes up in the same upload, as the replica's own");
	r = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(r, "\"wishes\":[{\"id\":7,\"fate\":\"applied\",\"why\":null,\"apply\":\"always\"") &&
		  t_has(r, "\"answered\":false"), "progress: applied, not answered yet: %s", S(r));
	sqlite3_free(r);
	/*
	 * no answer yet: within resend_after the fate alone makes no upload (its
	 * answer may be on its way; an agent filed the same fate a thousand
	 * times a pass); the answer lost, it goes again once resend_after passed
	 */
	if (u)
		sync__up__free_unpacked(u, NULL);
	CHECK(tm_upload(db).data == NULL, "within resend_after, an unanswered fate alone makes no upload");
	/* resend_after (300 s) passes */
	t_exec(db, "UPDATE _sync_wishes SET carried_at = carried_at - 300", NULL);
	u = upload(db, "the answer lost");
	CHECK(fate_of(u, 7) != NULL, "the fate goes again until answered");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	r = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(r, "\"answered\":true"), "progress: answered: %s", S(r));
	sqlite3_free(r);
	CHECK(tm_upload(db).data == NULL, "then nothing to say: %s", tm_error());
	/* a file of an earlier build, whose _sync_wishes lacks carried_at, gains it at its next upload */
	CHECK(t_exec(db, "ALTER TABLE _sync_wishes DROP COLUMN carried_at", NULL) == SQLITE_OK, "carried_at dropped");
	CHECK(tm_upload(db).data == NULL && tm_error()[0] == '\0', "an earlier build's file: nothing to say: %s", tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('_sync_wishes') WHERE name = 'carried_at'") == 1,
		  "and the column is back");

	/* the replica changes its row; the same wish sent again (a lost message) is not applied again */
	mine(db, &s, "UPDATE store_settings SET printer = 'desk' WHERE store = '%s'");
	r = tm_apply(db, tm_next(&s, wishes(wish(7, "store_settings", me, "{\"printer\":\"hall\",\"seats\":4}", "always", ""), NULL), NULL));
	CHECK(t_has(r, "\"applied\""), "the wish again: %s %s", S(r), tm_error());
	u = upload(db, "the wish again");
	r = row(db);
	CHECK(r && strcmp(r, "desk/4/null") == 0, "applied once: the replica's change stands: %s", S(r));
	sqlite3_free(r);
	CHECK(u && u->n_wish_fates == 0 && carries_row(u, "store_settings"), "no fate again; the replica's own write goes up");
	if (u)
		sync__up__free_unpacked(u, NULL);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_wishes") == 1, "one wish kept");
	tm_free_all();
	sqlite3_close(db);
}

static void
if_unchanged(void)
{
	tm_server	s;
	sqlite3    *db = settings_replica(&s);
	const char *me = tm_replica_text(&s);
	Sync__Up   *u;
	const Sync__WishFate *f;
	char	   *r;

	mine(db, &s, "INSERT INTO store_settings VALUES ('%s', 'hall', 4, '09:00')");
	u = upload(db, "the replica's row");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* unchanged since the server filed it: applied */
	tm_apply(db, tm_next(&s, wishes(wish(1, "store_settings", me, "{\"printer\":\"back\"}", "if_unchanged",
										 "{\"printer\":\"hall\"}"), NULL), NULL));
	u = upload(db, "if_unchanged, unchanged");
	f = fate_of(u, 1);
	CHECK(f && strcmp(f->fate, "applied") == 0, "applied when the row is as the server filed it");
	r = row(db);
	CHECK(r && strcmp(r, "back/4/09:00") == 0, "only the columns it names: %s", S(r));
	sqlite3_free(r);
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* the replica changed its row first: declined, its own kept */
	mine(db, &s, "UPDATE store_settings SET printer = 'mine' WHERE store = '%s'");
	tm_apply(db, tm_next(&s, wishes(wish(2, "store_settings", me, "{\"printer\":\"office\",\"seats\":9}", "if_unchanged",
										 "{\"printer\":\"back\",\"seats\":4}"), NULL), NULL));
	u = upload(db, "if_unchanged, changed");
	f = fate_of(u, 2);
	CHECK(f && strcmp(f->fate, "declined") == 0 && t_has(f->why, "changed its row"), "declined: %s", f ? f->why : "none");
	r = row(db);
	CHECK(r && strcmp(r, "mine/4/09:00") == 0, "the replica's own row kept: %s", S(r));
	sqlite3_free(r);
	CHECK(carries_row(u, "store_settings"), "and its own value goes up");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* the server filed no row, the replica has one: declined */
	tm_apply(db, tm_next(&s, wishes(wish(3, "store_settings", me, "{\"seats\":1}", "if_unchanged", ""), NULL), NULL));
	u = upload(db, "if_unchanged, none filed");
	f = fate_of(u, 3);
	CHECK(f && strcmp(f->fate, "declined") == 0, "declined: the replica made its row since");
	if (u)
		sync__up__free_unpacked(u, NULL);
	r = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(r, "{\"id\":3,\"fate\":\"declined\"") && t_has(r, "{\"id\":2,\"fate\":\"declined\"") &&
		  t_has(r, "{\"id\":1,\"fate\":\"applied\""), "progress, newest first: %s", S(r));
	sqlite3_free(r);
	tm_free_all();
	sqlite3_close(db);
}

static void
superseded(void)
{
	tm_server	s;
	sqlite3    *db = settings_replica(&s);
	const char *me = tm_replica_text(&s);
	Sync__Up   *u;
	const Sync__WishFate *f1,
			   *f2;
	char	   *r;

	mine(db, &s, "INSERT INTO store_settings VALUES ('%s', 'hall', 4, NULL)");
	/* two messages before an upload: the older never applied */
	tm_apply(db, tm_next(&s, wishes(wish(10, "store_settings", me, "{\"printer\":\"a\"}", "always", ""), NULL), NULL));
	tm_apply(db, tm_next(&s, wishes(wish(11, "store_settings", me, "{\"seats\":6}", "always", ""), NULL), NULL));
	u = upload(db, "two wishes");
	f1 = fate_of(u, 10);
	f2 = fate_of(u, 11);
	CHECK(f1 && strcmp(f1->fate, "superseded") == 0 && t_has(f1->why, "wish 11"), "the older superseded: %s", f1 ? f1->why : "none");
	CHECK(f2 && strcmp(f2->fate, "applied") == 0, "the newer applied");
	r = row(db);
	CHECK(r && strcmp(r, "hall/6/null") == 0, "only the newer's values: %s", S(r));
	sqlite3_free(r);
	if (u)
		sync__up__free_unpacked(u, NULL);
	tm_free_all();
	sqlite3_close(db);
}

/* untrusted wishes: none of them changes a row of the replica's */
static void
untrusted(void)
{
	tm_server	s;
	sqlite3    *db = settings_replica(&s);
	const char *me = tm_replica_text(&s);
	const char *other = "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1";
	uint64_t	before;
	Sync__Up   *u;
	Sync__Wish *two_parts;
	tm_msg		m;
	tm_server	saved;
	char	   *r;
	static const struct
	{
		uint64_t	id;
		const char *table;
		const char *values;
		const char *why;
	}			declined[] = {
		{20, "nowhere", "{\"printer\":\"x\"}", "no setting table"},
		{21, "products", "{\"name\":\"x\"}", "no setting table"},
		{22, "store_settings", "{\"store\":\"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1\"}", "no column \"store\""},
		{23, "store_settings", "{\"colour\":\"red\"}", "no column \"colour\""},
		{24, "store_settings", "[1,2]", "names no column"},
		{25, "store_settings", "{not json", "names no column"},
		{26, "store_settings", "{\"seats\":-1}", "seats may not be negative"},
		{27, "store_settings", "{\"pr'inter\":1}", "no column"},
	};

	mine(db, &s, "INSERT INTO store_settings VALUES ('%s', 'hall', 4, NULL)");
	u = upload(db, "the replica's row");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* the host's own constraint on its row */
	CHECK(t_exec(db, "CREATE TRIGGER no_negative BEFORE UPDATE ON store_settings WHEN NEW.seats < 0"
				 " BEGIN SELECT RAISE(ABORT, 'seats may not be negative'); END", NULL) == SQLITE_OK, "a local trigger");
	before = tm_checksum(db, 0);

	/* another replica's row: declined as it comes */
	tm_apply(db, tm_next(&s, wishes(wish(19, "store_settings", other, "{\"printer\":\"x\"}", "always", ""), NULL), NULL));
	u = upload(db, "another's row");
	CHECK(fate_of(u, 19) && strcmp(fate_of(u, 19)->fate, "declined") == 0 && t_has(fate_of(u, 19)->why, "not this replica's own"),
		  "another's row: declined: %s", fate_of(u, 19) ? fate_of(u, 19)->why : "none");
	CHECK(u && !carries_row(u, "store_settings"), "no write goes up");
	if (u)
	{
		answer(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* each decided alone (one after the other, they would supersede each other) */
	for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++)
	{
		const Sync__WishFate *f;

		tm_apply(db, tm_next(&s, wishes(wish(declined[i].id, declined[i].table, me, declined[i].values, "always", ""), NULL), NULL));
		u = upload(db, declined[i].values);
		f = fate_of(u, declined[i].id);
		CHECK(f && strcmp(f->fate, "declined") == 0 && t_has(f->why, declined[i].why),
			  "wish %llu (%s): declined, %s: %s", (unsigned long long) declined[i].id, declined[i].values,
			  declined[i].why, f ? f->why : "none");
		CHECK(u && !carries_row(u, "store_settings"), "no write goes up");
		if (u)
		{
			answer(db, &s, u);
			sync__up__free_unpacked(u, NULL);
		}
	}
	CHECK(tm_checksum(db, 0) == before, "none of them changed a row of the replica's");

	/* malformed wishes refuse the whole message: nothing of it is kept */
	before = tm_checksum(db, 1);
	saved = s;
	two_parts = wish(30, "store_settings", me, "{\"printer\":\"x\"}", "always", "");
	two_parts->key = tm_key(me, "2", NULL);
	m = tm_next(&s, wishes(two_parts, NULL), NULL);
	r = tm_apply(db, m);
	CHECK(r == NULL && t_has(tm_error(), "not its origin alone"), "a key of two parts: refused: %s", tm_error());
	CHECK(tm_checksum(db, 1) == before, "nothing changed");
	s = saved;
	m = tm_next(&s, wishes(wish(31, "store_settings", me, "{}", "sometimes", ""), NULL), NULL);
	r = tm_apply(db, m);
	CHECK(r == NULL && t_has(tm_error(), "neither always nor if_unchanged"), "an unknown apply: refused: %s", tm_error());
	s = saved;
	m = tm_next(&s, wishes(wish(0, "store_settings", me, "{}", "always", ""), NULL), NULL);
	r = tm_apply(db, m);
	CHECK(r == NULL && t_has(tm_error(), "numbered 0"), "wish 0: refused: %s", tm_error());
	s = saved;
	/* a wish whose bytes are cut short: the message does not decode */
	m = tm_next(&s, wishes(wish(32, "store_settings", me, "{\"printer\":\"y\"}", "always", ""), NULL), NULL);
	for (size_t cut = 1; cut < 12; cut++)
	{
		tm_msg		shorter = {m.data, m.len - cut};

		r = tm_apply(db, shorter);
		CHECK(r == NULL, "cut by %zu bytes: refused", cut);
	}
	CHECK(tm_checksum(db, 1) == before, "nothing changed by any of them");
	tm_free_all();
	sqlite3_close(db);
}

/* a setting table not keyed by its origin alone: the snapshot is refused */
static void
setting_schema(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	Sync__Table *t;
	char	   *r;

	tm_server_init(&s, 0x32, 0x42);
	t = tm_table("two_keys", "setting", "json", "store,n", "store TEXT server=uuid, n INTEGER, printer TEXT");
	tm_origin(t, "store");
	r = tm_apply(db, tm_next(&s, tm_begin(&t, 1), NULL));
	CHECK(r == NULL && t_has(tm_error(), "not keyed by its origin alone"), "refused: %s", tm_error());
	tm_free_all();
	sqlite3_close(db);
}

void
test_wish(void)
{
	always();
	if_unchanged();
	superseded();
	untrusted();
	setting_schema();
}
