/*
** kept.c - statements kept prepared across calls, for a connection that
** asks for it: sync_keep_statements(1) ... sync_keep_statements(0).
**
** Every call of sync_apply, sync_status, sync_applied and sync_upload
** prepares the few statements it runs afresh: parsing them was half of what
** a one-row message cost the agent (bench/apply_fixed.c), and the agent
** applies one message at a time while a write waits to reach the device.
** A connection that opts in keeps each statement ms_prepare made, by its
** text, up to KEPT_STATEMENTS of them; ms_finalize (what sqlite3_finalize
** means in this extension) resets one of them and clears its bindings
** instead of finalizing it.  A statement lent out is not lent twice: a
** second holder of the same text (a call within a call) gets one of its
** own, finalized as before.  A kept statement whose schema changed is
** prepared again by sqlite3_step, as any (sqlite3_prepare_v3).  Such a
** connection keeps the schema it read last too (schema.c says while it
** holds), lent to one call at a time.
**
** Not by default: a kept statement is an unfinalized statement, and
** sqlite3_close refuses a connection that has one (sqlite3_close_v2 leaves
** it a zombie).  So the host that opts in finalizes them, with
** sync_keep_statements(0), before it closes: the agent does.
*/
#define MS_KEPT_C
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#define KEPT_CONNECTIONS 16		/* connections keeping statements at once */
/*
 * statements kept for one: a round of the agent's calls prepares some 80
 * (savepoints' included), a file of many tables a few more of each
 */
#define KEPT_STATEMENTS 256
#define KEPT_INDEX (2 * KEPT_STATEMENTS)
#define HASHED_ENDS 24			/* bytes of each end of a text hashed (hash_sql) */	/* slots of the index by hash: a power of two */

typedef struct kept_stmt
{
	uint32_t	hash;
	char	   *sql;			/* sqlite3_malloc'd */
	sqlite3_stmt *st;
	bool		lent;			/* handed out by ms_prepare, not yet given back */
} kept_stmt;

typedef struct kept_conn
{
	sqlite3    *db;
	int			n;
	kept_stmt	s[KEPT_STATEMENTS];
	/* each statement's place in s, plus one (0: empty), at its hash and on (open addressing) */
	uint16_t	index[KEPT_INDEX];
	uint16_t	by_stmt[KEPT_INDEX];	/* the same, at the hash of the statement's address */
	ms_schema_kept *schema;		/* the schema read last (schema.c) */
	bool		schema_lent;	/* a call has it */
	sqlite3_stmt *watch;		/* SELECT 1, prepared again after each expiry (ms_kept_expiries) */
} kept_conn;

/* the connections keeping statements: taken under the static mutex */
static kept_conn *kept[KEPT_CONNECTIONS];
/*
 * how many of kept[] are set, read without the mutex to skip it when none
 * is: a connection's own opting in reaches its calls through its own mutex
 */
static int	nkept;

static sqlite3_mutex *
kept_mutex(void)
{
	return sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_APP3);
}

/* the connection's, or NULL; under the mutex */
static kept_conn *
find(sqlite3 *db)
{
	for (int i = 0; i < KEPT_CONNECTIONS; i++)
		if (kept[i] != NULL && kept[i]->db == db)
			return kept[i];
	return NULL;
}

static uint32_t
hash_stmt(const sqlite3_stmt *st)
{
	return (uint32_t) (((uintptr_t) st >> 4) * 2654435761u);
}

/*
 * hash_sql: the text's length and its first and last bytes, not each byte
 * (hashing every byte was most of finding a kept statement); texts alike
 * there are told apart by strcmp as any two of one hash are
 */
static uint32_t
hash_sql(const char *sql)
{
	size_t		n = strlen(sql);
	uint32_t	h = 2166136261u ^ (uint32_t) n;
	const unsigned char *p = (const unsigned char *) sql;

	for (size_t i = 0; i < n && i < HASHED_ENDS; i++)
		h = (h ^ p[i]) * 16777619u;
	for (size_t i = n > 2 * HASHED_ENDS ? n - HASHED_ENDS : (n > HASHED_ENDS ? HASHED_ENDS : n); i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int
ms_kept_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
	sqlite3_mutex *m;
	kept_conn  *k;
	uint32_t	h;
	int			rc;

	*st = NULL;
	if (nkept == 0)
		return sqlite3_prepare_v2(db, sql, -1, st, NULL);
	m = kept_mutex();
	h = hash_sql(sql);
	sqlite3_mutex_enter(m);
	k = find(db);
	if (k != NULL)
		for (uint32_t p = h; k->index[p % KEPT_INDEX] != 0; p++)
		{
			kept_stmt  *e = &k->s[k->index[p % KEPT_INDEX] - 1];

			if (e->hash == h && !e->lent && strcmp(e->sql, sql) == 0)
			{
				e->lent = true;
				*st = e->st;
				sqlite3_mutex_leave(m);
				return SQLITE_OK;
			}
		}
	sqlite3_mutex_leave(m);
	if (k == NULL)
		return sqlite3_prepare_v2(db, sql, -1, st, NULL);
	rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
	if (rc != SQLITE_OK || *st == NULL)
		return rc;
	sqlite3_mutex_enter(m);
	/* kept while there is room (a copy of the text that fails: not kept, no error) */
	k = find(db);
	if (k != NULL && k->n < KEPT_STATEMENTS)
	{
		char	   *copy = sqlite3_mprintf("%s", sql);

		if (copy != NULL)
		{
			uint32_t	p = h;

			k->s[k->n].hash = h;
			k->s[k->n].sql = copy;
			k->s[k->n].st = *st;
			k->s[k->n].lent = true;
			while (k->index[p % KEPT_INDEX] != 0)
				p++;
			k->index[p % KEPT_INDEX] = (uint16_t) (k->n + 1);
			for (p = hash_stmt(*st); k->by_stmt[p % KEPT_INDEX] != 0; p++)
				;
			k->by_stmt[p % KEPT_INDEX] = (uint16_t) (k->n + 1);
			k->n++;
		}
	}
	sqlite3_mutex_leave(m);
	return SQLITE_OK;
}

int
ms_finalize(sqlite3_stmt *st)
{
	sqlite3_mutex *m;
	kept_conn  *k;

	if (st == NULL)
		return SQLITE_OK;
	if (nkept == 0)
		return sqlite3_finalize(st);
	m = kept_mutex();
	sqlite3_mutex_enter(m);
	k = find(sqlite3_db_handle(st));
	if (k != NULL)
		for (uint32_t p = hash_stmt(st); k->by_stmt[p % KEPT_INDEX] != 0; p++)
			if (k->s[k->by_stmt[p % KEPT_INDEX] - 1].st == st)
			{
				int			rc;

				k->s[k->by_stmt[p % KEPT_INDEX] - 1].lent = false;
				sqlite3_mutex_leave(m);
				/* what sqlite3_finalize would say: the last step's error */
				rc = sqlite3_reset(st);
				sqlite3_clear_bindings(st);
				return rc;
			}
	sqlite3_mutex_leave(m);
	return sqlite3_finalize(st);
}

/*
 * let_go: the connection's statements finalized, its slot freed; under the
 * mutex.  One lent out now (a call running sync_keep_statements(0) through a
 * statement of its own) is its holder's: forgotten here, finalized when
 * given back, as one never kept.
 */
static void
let_go(int slot)
{
	kept_conn  *k = kept[slot];

	for (int i = 0; i < k->n; i++)
	{
		if (!k->s[i].lent)
			sqlite3_finalize(k->s[i].st);
		sqlite3_free(k->s[i].sql);
	}
	sqlite3_finalize(k->watch);
	/* a schema lent out is its holder's, freed when given back */
	if (!k->schema_lent)
		ms_schema_kept_free(k->schema);
	sqlite3_free(k);
	kept[slot] = NULL;
	nkept--;
}

bool
ms_kept_schema_lend(sqlite3 *db, ms_schema_kept **out)
{
	sqlite3_mutex *m;
	kept_conn  *k;
	bool		lent = false;

	*out = NULL;
	if (nkept == 0)
		return false;
	m = kept_mutex();
	sqlite3_mutex_enter(m);
	k = find(db);
	if (k != NULL && !k->schema_lent)
	{
		*out = k->schema;
		k->schema = NULL;
		k->schema_lent = lent = true;
	}
	sqlite3_mutex_leave(m);
	return lent;
}

void
ms_kept_schema_give(sqlite3 *db, ms_schema_kept *s)
{
	sqlite3_mutex *m = kept_mutex();
	kept_conn  *k;

	sqlite3_mutex_enter(m);
	k = find(db);
	if (k != NULL && k->schema_lent)
	{
		k->schema = s;
		k->schema_lent = false;
		s = NULL;
	}
	sqlite3_mutex_leave(m);
	/* the connection let go of what it kept meanwhile */
	ms_schema_kept_free(s);
}

/*
 * ms_kept_expiries: how many times the connection's statements were
 * expired since it began keeping them (*n; -1 when it keeps none), as a
 * statement of its own tells: stepped here, it is prepared again once after
 * each expiry.  SQLite expires every statement of a connection when a
 * rollback (of a transaction or to a savepoint) undoes a change of the
 * schema, so a schema version seen before may name another schema then;
 * schema.c keeps what it found of the file's tables only while this holds.
 */
int
ms_kept_expiries(sqlite3 *db, int *n)
{
	sqlite3_mutex *m;
	kept_conn  *k;
	sqlite3_stmt *w = NULL;
	int			rc;

	*n = -1;
	if (nkept == 0)
		return SQLITE_OK;
	m = kept_mutex();
	sqlite3_mutex_enter(m);
	k = find(db);
	if (k != NULL)
		w = k->watch;
	sqlite3_mutex_leave(m);
	if (k == NULL)
		return SQLITE_OK;
	if (w == NULL)
	{
		rc = sqlite3_prepare_v3(db, "SELECT 1", -1, SQLITE_PREPARE_PERSISTENT, &w, NULL);
		if (rc != SQLITE_OK)
			return rc;
		sqlite3_mutex_enter(m);
		k = find(db);
		if (k != NULL && k->watch == NULL)
			k->watch = w;
		else
			k = NULL;
		sqlite3_mutex_leave(m);
		if (k == NULL)
		{
			sqlite3_finalize(w);
			return SQLITE_OK;
		}
	}
	rc = sqlite3_step(w);
	sqlite3_reset(w);
	if (rc != SQLITE_ROW)
		return rc == SQLITE_DONE ? SQLITE_INTERNAL : rc;
	*n = sqlite3_stmt_status(w, SQLITE_STMTSTATUS_REPREPARE, 0);
	return SQLITE_OK;
}

/*
 * sync_keep_statements(on): 1, this connection keeps the extension's
 * statements prepared between calls; 0, it finalizes them (before
 * sqlite3_close).  Returns how many it keeps: 0 after 0, and -1 when 16
 * connections keep theirs already (nothing is kept; every call works as
 * without).
 */
static void
keep_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	sqlite3    *db = sqlite3_context_db_handle(ctx);
	sqlite3_mutex *m = kept_mutex();
	bool		on = sqlite3_value_int64(argv[0]) != 0;
	int			slot = -1;
	int			free_slot = -1;
	sqlite3_int64 out = 0;

	(void) argc;
	sqlite3_mutex_enter(m);
	for (int i = 0; i < KEPT_CONNECTIONS; i++)
	{
		if (kept[i] != NULL && kept[i]->db == db)
			slot = i;
		else if (kept[i] == NULL && free_slot < 0)
			free_slot = i;
	}
	if (!on)
	{
		if (slot >= 0)
			let_go(slot);
	}
	else if (slot >= 0)
		out = kept[slot]->n;
	else if (free_slot < 0)
		out = -1;
	else
	{
		kept_conn  *k = sqlite3_malloc64(sizeof *k);

		if (k == NULL)
		{
			sqlite3_mutex_leave(m);
			sqlite3_result_error_nomem(ctx);
			return;
		}
		memset(k, 0, sizeof *k);
		k->db = db;
		kept[free_slot] = k;
		nkept++;
	}
	sqlite3_mutex_leave(m);
	sqlite3_result_int64(ctx, out);
}

int
ms_kept_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "sync_keep_statements", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								   NULL, keep_func, NULL, NULL);
}
