/*
** util.c - what every module of the replica extension leans on: an arena,
** a byte buffer, errors, statements, savepoints, hex and JSON text.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdarg.h>
#include <string.h>
#include <time.h>

/* ---- arena ------------------------------------------------------------ */

/* sqlite3_malloc aligns to 8 bytes: enough for everything we keep */
typedef union ms_align
{
	void	   *p;
	double		d;
	int64_t		i;
} ms_align;

/*
 * Blocks of ARENA_BLOCK bytes handed out a piece at a time: a message of
 * thousands of rows unpacks into a few allocations per row, and one
 * sqlite3_malloc (its mutex and accounting) and sqlite3_free each was a
 * sixth of a first sync's apply.  A piece over a quarter of a block has a
 * block of its own, after the one being filled.
 */
#define ARENA_BLOCK 16384

struct ms_arena
{
	struct ms_arena *next;
	size_t		used;			/* bytes of data handed out */
	size_t		size;			/* bytes of data */
	ms_align	data[];			/* the block follows */
};

/* piece_of: n bytes of the arena, as they are */
static void *
piece_of(ms_arena **a, size_t n)
{
	size_t		need = n ? n : 1;
	size_t		piece = (need + sizeof(ms_align) - 1) / sizeof(ms_align) * sizeof(ms_align);
	ms_arena   *blk = *a;
	char	   *p;

	if (blk == NULL || blk->size - blk->used < piece)
	{
		size_t		size = piece > ARENA_BLOCK / 4 ? piece : ARENA_BLOCK;

		blk = sqlite3_malloc64(sizeof(ms_arena) + size);
		if (blk == NULL)
			return NULL;
		blk->size = size;
		blk->used = 0;
		if (size == piece && *a != NULL)
		{
			/* its own: the block being filled stays first */
			blk->next = (*a)->next;
			(*a)->next = blk;
		}
		else
		{
			blk->next = *a;
			*a = blk;
		}
	}
	p = (char *) blk->data + blk->used;
	blk->used += piece;
	return p;
}

void *
ms_alloc(ms_arena **a, size_t n)
{
	void	   *p = piece_of(a, n);

	if (p != NULL)
		memset(p, 0, n ? n : 1);
	return p;
}

/*
 * protobuf-c fills all it allocates (its default allocator is malloc):
 * zeroing it first was the whole message's bytes again (a first sync's
 * rows and keys are copied out of the message into its pieces)
 */
static void *
arena_pb_alloc(void *data, size_t size)
{
	return piece_of((ms_arena **) data, size);
}

static void
arena_pb_free(void *data, void *pointer)
{
	(void) data;
	(void) pointer;
}

ProtobufCAllocator
ms_arena_allocator(ms_arena **a)
{
	ProtobufCAllocator pa = {arena_pb_alloc, arena_pb_free, a};

	return pa;
}

char *
ms_strdup(ms_arena **a, const char *s)
{
	size_t		n = strlen(s);
	char	   *p = ms_alloc(a, n + 1);

	if (p != NULL)
		memcpy(p, s, n);
	return p;
}

char *
ms_printf(ms_arena **a, const char *fmt,...)
{
	va_list		ap;
	char	   *s;
	char	   *p;

	va_start(ap, fmt);
	s = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (s == NULL)
		return NULL;
	p = ms_strdup(a, s);
	sqlite3_free(s);
	return p;
}

void
ms_arena_free(ms_arena **a)
{
	while (*a != NULL)
	{
		ms_arena   *next = (*a)->next;

		sqlite3_free(*a);
		*a = next;
	}
}

/* ---- map --------------------------------------------------------------- */

static inline unsigned char
fold_byte(unsigned char ch, bool fold)
{
	return fold && ch >= 'A' && ch <= 'Z' ? (unsigned char) (ch + 32) : ch;
}

static uint64_t
map_hash(const char *key, size_t len, bool fold)
{
	uint64_t	h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < len; i++)
		h = (h ^ fold_byte((unsigned char) key[i], fold)) * UINT64_C(1099511628211);
	return h;
}

static bool
map_same(const char *a, size_t alen, const char *b, size_t blen, bool fold)
{
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
		if (fold_byte((unsigned char) a[i], fold) != fold_byte((unsigned char) b[i], fold))
			return false;
	return true;
}

void
ms_map_init(ms_map *m, bool fold)
{
	memset(m, 0, sizeof *m);
	m->fold = fold;
}

/* the slot of key: where it is, or the empty one where it goes */
static size_t
map_slot(const ms_map *m, const char *key, size_t len)
{
	size_t		i = (size_t) map_hash(key, len, m->fold) & (m->cap - 1);

	while (m->keys[i] != NULL && !map_same(m->keys[i], m->lens[i], key, len, m->fold))
		i = (i + 1) & (m->cap - 1);
	return i;
}

int
ms_map_put(ms_arena **a, ms_map *m, const char *key, size_t len, void *val)
{
	size_t		i;

	if (m->n + 1 > m->cap / 2)
	{
		ms_map		bigger = *m;

		bigger.cap = m->cap ? m->cap * 2 : 16;
		bigger.n = 0;
		bigger.keys = ms_alloc(a, sizeof(char *) * bigger.cap);
		bigger.lens = ms_alloc(a, sizeof(size_t) * bigger.cap);
		bigger.vals = ms_alloc(a, sizeof(void *) * bigger.cap);
		if (bigger.keys == NULL || bigger.lens == NULL || bigger.vals == NULL)
			return SQLITE_NOMEM;
		for (size_t k = 0; k < m->cap; k++)
			if (m->keys[k] != NULL)
			{
				i = map_slot(&bigger, m->keys[k], m->lens[k]);
				bigger.keys[i] = m->keys[k];
				bigger.lens[i] = m->lens[k];
				bigger.vals[i] = m->vals[k];
				bigger.n++;
			}
		*m = bigger;
	}
	i = map_slot(m, key, len);
	if (m->keys[i] == NULL)
		m->n++;
	m->keys[i] = key;
	m->lens[i] = len;
	m->vals[i] = val;
	return SQLITE_OK;
}

void *
ms_map_get(const ms_map *m, const char *key, size_t len)
{
	size_t		i;

	if (m->cap == 0)
		return NULL;
	i = map_slot(m, key, len);
	return m->keys[i] != NULL ? m->vals[i] : NULL;
}

/* ---- byte buffer ------------------------------------------------------ */

void
ms_buf_add(ms_buf *b, const void *p, size_t n)
{
	if (b->oom || n == 0)
		return;
	if (b->len + n + 1 > b->cap)
	{
		size_t		cap = b->cap ? b->cap : 256;
		char	   *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = sqlite3_realloc64(b->data, cap);
		if (d == NULL)
		{
			b->oom = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
ms_buf_str(ms_buf *b, const char *s)
{
	ms_buf_add(b, s, strlen(s));
}

void
ms_buf_byte(ms_buf *b, uint8_t c)
{
	ms_buf_add(b, &c, 1);
}

void
ms_buf_printf(ms_buf *b, const char *fmt,...)
{
	va_list		ap;
	char	   *s;

	va_start(ap, fmt);
	s = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (s == NULL)
		b->oom = true;
	else
		ms_buf_str(b, s);
	sqlite3_free(s);
}

void
ms_buf_json_string(ms_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t		run = 0;

	ms_buf_byte(b, '"');
	for (size_t i = 0; i < n; i++)
	{
		unsigned char ch = (unsigned char) s[i];
		char		esc[7];

		if (ch >= 0x20 && ch != '"' && ch != '\\')
			continue;
		ms_buf_add(b, s + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (ch)
		{
			case '"':
			case '\\':
				esc[1] = (char) ch;
				ms_buf_add(b, esc, 2);
				break;
			case '\n':
				ms_buf_add(b, "\\n", 2);
				break;
			case '\r':
				ms_buf_add(b, "\\r", 2);
				break;
			case '\t':
				ms_buf_add(b, "\\t", 2);
				break;
			default:
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[ch >> 4];
				esc[5] = hex[ch & 15];
				ms_buf_add(b, esc, 6);
		}
	}
	ms_buf_add(b, s + run, n - run);
	ms_buf_byte(b, '"');
}

void
ms_buf_hex(ms_buf *b, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char		run[128];

	/* a run at a time: a call of ms_buf_add a byte was most of a seal's hex */
	for (size_t i = 0; i < n;)
	{
		size_t		k = 0;

		for (; i < n && k < sizeof run; i++, k += 2)
		{
			run[k] = hex[p[i] >> 4];
			run[k + 1] = hex[p[i] & 15];
		}
		ms_buf_add(b, run, k);
	}
}

void
ms_buf_free(ms_buf *b)
{
	sqlite3_free(b->data);
	memset(b, 0, sizeof *b);
}

bool
ms_sqlstate_ok(const char *s)
{
	for (int i = 0; i < 5; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return s[5] == '\0';
}

void
ms_hex(const uint8_t *p, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++)
	{
		out[2 * i] = hex[p[i] >> 4];
		out[2 * i + 1] = hex[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* ---- context and errors --------------------------------------------- */

void
ms_ctx_init(ms_ctx *c, sqlite3_context *ctx, const char *fn)
{
	memset(c, 0, sizeof *c);
	c->db = sqlite3_context_db_handle(ctx);
	c->fn = fn;
	c->now = (int64_t) time(NULL);
}

void
ms_ctx_done(ms_ctx *c)
{
	for (int i = 0; i < c->savepoints; i++)
	{
		sqlite3_finalize(c->undo[i]);
		sqlite3_finalize(c->release[i]);
	}
	c->savepoints = 0;
	sqlite3_finalize(c->sentinel);
	c->sentinel = NULL;
	sqlite3_free(c->err);
	c->err = NULL;
	if (c->kept_lent)
		ms_kept_schema_give(c->db, c->kept_schema);
	c->kept_lent = false;
	c->kept_schema = NULL;
	c->schema = NULL;
	ms_arena_free(&c->arena);
}

void
ms_ctx_finish(ms_ctx *c, sqlite3_context *ctx, int rc, ms_buf *out)
{
	if (rc == SQLITE_OK && out->oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
		sqlite3_result_text(ctx, out->data, (int) out->len, SQLITE_TRANSIENT);
	else
		ms_ctx_error(c, ctx, rc);
	ms_buf_free(out);
	ms_ctx_done(c);
}

void
ms_ctx_error(ms_ctx *c, sqlite3_context *ctx, int rc)
{
	if (rc == SQLITE_NOMEM)
		sqlite3_result_error_nomem(ctx);
	else
	{
		/* a full disk said as such, whatever statement met it: not a busy file, not a bug */
		char	   *msg = (rc & 0xff) == SQLITE_FULL ?
			sqlite3_mprintf("%s: the disk of the replica file is full (%s): nothing was changed; it can go on"
							" once there is room", c->fn, c->err ? c->err : sqlite3_errstr(rc)) :
			sqlite3_mprintf("%s: %s", c->fn, c->err ? c->err : sqlite3_errstr(rc));

		if (msg == NULL)
		{
			sqlite3_result_error_nomem(ctx);
			return;
		}
		sqlite3_result_error(ctx, msg, -1);
		if (rc != SQLITE_ERROR && rc != SQLITE_OK)
			sqlite3_result_error_code(ctx, rc);
		sqlite3_free(msg);
	}
}

int
ms_fail(ms_ctx *c, int rc, const char *fmt,...)
{
	va_list		ap;

	if (c->err == NULL)
	{
		va_start(ap, fmt);
		c->err = sqlite3_vmprintf(fmt, ap);
		va_end(ap);
	}
	return rc;
}

int
ms_dberr(ms_ctx *c, int rc)
{
	if (rc == SQLITE_NOMEM)
		return rc;
	return ms_fail(c, rc, "%s", sqlite3_errmsg(c->db));
}

int
ms_exec(ms_ctx *c, const char *fmt,...)
{
	va_list		ap;
	char	   *sql;
	char	   *msg = NULL;
	int			rc;
	bool		pause;

	va_start(ap, fmt);
	sql = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (sql == NULL)
		return SQLITE_NOMEM;
	/* a running read stops DROP TABLE and DROP INDEX ("database table is locked"): paused for them */
	pause = c->sentinel != NULL && (strstr(sql, "DROP TABLE") || strstr(sql, "DROP INDEX") || strstr(sql, "ALTER TABLE"));
	if (pause)
		sqlite3_reset(c->sentinel);
	rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK && rc != SQLITE_NOMEM)
		ms_fail(c, rc, "%s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	sqlite3_free(sql);
	if (pause && sqlite3_step(c->sentinel) != SQLITE_ROW)
	{
		sqlite3_finalize(c->sentinel);
		c->sentinel = NULL;
		if (rc == SQLITE_OK)
			rc = SQLITE_NOMEM;
	}
	return rc;
}

int
ms_exec_one(ms_ctx *c, const char *sql)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "%s", sql);

	if (rc == SQLITE_OK)
		rc = ms_done(c, st);
	sqlite3_finalize(st);
	return rc;
}

int
ms_prepare(ms_ctx *c, sqlite3_stmt **st, const char *fmt,...)
{
	va_list		ap;
	const char *sql;
	char	   *made = NULL;
	int			rc;

	*st = NULL;
	va_start(ap, fmt);
	/*
	 * text that needs no formatting (most of it, and "%s" of text made
	 * already) is looked up as it is: formatting a copy of it was a third of
	 * what finding a kept statement cost
	 */
	if (strcmp(fmt, "%s") == 0)
	{
		sql = va_arg(ap, const char *);
		if (sql == NULL)
			sql = "";			/* as sqlite3_mprintf writes it */
	}
	else if (strchr(fmt, '%') == NULL)
		sql = fmt;
	else
		sql = made = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (sql == NULL)
		return SQLITE_NOMEM;
	rc = ms_kept_prepare(c->db, sql, st);
	if (rc != SQLITE_OK)
		ms_dberr(c, rc);
	sqlite3_free(made);
	return rc;
}

int
ms_step(ms_ctx *c, sqlite3_stmt *st)
{
	int			rc = sqlite3_step(st);

	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return ms_dberr(c, rc);
	return rc;
}

int
ms_keys_read(ms_ctx *c, sqlite3_stmt *st, int rc, ms_buf *keys)
{
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		size_t		n = (size_t) sqlite3_column_bytes(st, 0);
		const char *k = (const char *) sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (k == NULL)
			continue;
		ms_buf_add(keys, &n, sizeof n);
		ms_buf_add(keys, k, n);
		if (keys->oom)
			rc = SQLITE_NOMEM;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

bool
ms_keys_next(const ms_buf *keys, size_t *pos, const char **key, size_t *n)
{
	if (*pos + sizeof *n > keys->len)
		return false;
	memcpy(n, keys->data + *pos, sizeof *n);
	*key = keys->data + *pos + sizeof *n;
	*pos += sizeof *n + *n;
	return true;
}

int
ms_names_read(ms_ctx *c, sqlite3_stmt *st, int rc, char ***names, int *n)
{
	int			cap = 0;

	*n = 0;
	*names = NULL;
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		rc = SQLITE_OK;
		if (*n == cap)
		{
			int			ncap = cap ? cap * 2 : 16;
			char	  **more = ms_alloc(&c->arena, sizeof(char *) * (size_t) ncap);

			if (more == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
			if (*n)
				memcpy(more, *names, sizeof(char *) * (size_t) *n);
			*names = more;
			cap = ncap;
		}
		if (((*names)[(*n)++] = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0))) == NULL)
			rc = SQLITE_NOMEM;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

int
ms_ints_read(ms_ctx *c, sqlite3_stmt *st, int rc, int64_t *out, int n)
{
	if (rc == SQLITE_OK)
	{
		rc = ms_step(c, st);
		for (int i = 0; rc == SQLITE_ROW && i < n; i++)
			out[i] = sqlite3_column_int64(st, i);
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

int
ms_has_column(ms_ctx *c, const char *table, const char *column, bool *yes)
{
	sqlite3_stmt *st;
	int			rc;

	/*
	 * From the schema SQLite holds, without preparing a statement (a pragma's
	 * prepare was a sixth of what the agent's calls cost): each call's first
	 * statement has checked that schema against the file's, in its
	 * transaction.  A library built without it says so by a NULL routine.
	 */
	if (sqlite3_api->table_column_metadata != NULL)
	{
		rc = sqlite3_table_column_metadata(c->db, NULL, table, column, NULL, NULL, NULL, NULL, NULL);
		*yes = rc == SQLITE_OK;
		if (rc == SQLITE_OK || rc == SQLITE_ERROR)
			return SQLITE_OK;
		return ms_dberr(c, rc);
	}
	rc = column != NULL
		? ms_prepare(c, &st, "SELECT 1 FROM pragma_table_info(%Q) WHERE name = %Q", table, column)
		: ms_prepare(c, &st, "SELECT 1 FROM pragma_table_info(%Q)", table);
	*yes = false;
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	*yes = rc == SQLITE_ROW;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int
ms_done(ms_ctx *c, sqlite3_stmt *st)
{
	int			rc = sqlite3_step(st);

	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		rc = SQLITE_OK;
	else
		ms_dberr(c, rc);
	sqlite3_reset(st);
	return rc;
}

/* ---- savepoints -------------------------------------------------------- */

#define MS_SAVEPOINTS ((int) (sizeof(((ms_ctx *) 0)->undo) / sizeof(sqlite3_stmt *)))

static int
prepare_named(ms_ctx *c, sqlite3_stmt **st, const char *fmt, const char *name)
{
	char	   *sql = sqlite3_mprintf(fmt, name, name);
	int			rc;

	*st = NULL;
	if (sql == NULL)
		return SQLITE_NOMEM;
	rc = ms_kept_prepare(c->db, sql, st);
	sqlite3_free(sql);
	return rc;
}

int
ms_begin(ms_ctx *c, const char *name)
{
	sqlite3_stmt *open = NULL;
	int			i = c->savepoints;
	bool		autocommit = sqlite3_get_autocommit(c->db) != 0;
	int			rc;

	if (i >= MS_SAVEPOINTS)
		return ms_fail(c, SQLITE_INTERNAL, "savepoint %s nests too deep", name);
	if (i == 0)
	{
		/* its first row comes before it reads anything: a read that holds no cursor */
		rc = ms_kept_prepare(c->db, "SELECT 1 UNION ALL SELECT count(*) FROM main.sqlite_master", &c->sentinel);
		if (rc == SQLITE_OK && sqlite3_step(c->sentinel) != SQLITE_ROW)
			rc = SQLITE_NOMEM;
		if (rc != SQLITE_OK)
		{
			sqlite3_finalize(c->sentinel);
			c->sentinel = NULL;
			return rc == SQLITE_NOMEM ? rc : ms_dberr(c, rc);
		}
	}
	rc = prepare_named(c, &c->undo[i], "ROLLBACK TO \"%w\"", name);
	if (rc == SQLITE_OK)
		rc = prepare_named(c, &c->release[i], "RELEASE \"%w\"", name);
	if (rc == SQLITE_OK)
		rc = prepare_named(c, &open, "SAVEPOINT \"%w\"", name);
	if (rc == SQLITE_OK)
	{
		rc = sqlite3_step(open);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		else
			rc = sqlite3_reset(open);
	}
	sqlite3_finalize(open);
	if (rc == SQLITE_OK)
	{
		if (c->savepoints++ == 0)
			c->own_transaction = autocommit;
		return SQLITE_OK;
	}
	sqlite3_finalize(c->undo[i]);
	sqlite3_finalize(c->release[i]);
	c->undo[i] = c->release[i] = NULL;
	if (i == 0)
	{
		sqlite3_finalize(c->sentinel);
		c->sentinel = NULL;
	}
	if (rc == SQLITE_NOMEM || (!autocommit && sqlite3_get_autocommit(c->db)))
		return SQLITE_NOMEM;
	return ms_fail(c, SQLITE_ERROR, "cannot open a savepoint (%s): call %s from a statement of its own "
				   "that writes nothing, such as SELECT %s(...)",
				   sqlite3_errmsg(c->db), c->fn, c->fn);
}

/* run a statement prepared beforehand: SQLITE_OK or its error */
static int
run(sqlite3_stmt *st)
{
	int			rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/*
 * undo: roll back to savepoint i and release it, with the statements
 * prepared as it opened.  What fails for want of memory is tried again.
 * Out of memory inside a function, SQLite itself rolls the whole
 * transaction back when a savepoint statement ends (whatever it was to do),
 * so a savepoint that is gone went with it.
 */
static int
undo(ms_ctx *c, int i)
{
	int			rc = SQLITE_NOMEM;

	for (int tries = 0; tries < 4; tries++)
	{
		rc = run(c->undo[i]);
		if (rc == SQLITE_OK)
			rc = run(c->release[i]);
		if (rc == SQLITE_OK || sqlite3_get_autocommit(c->db))
			return SQLITE_OK;
		if (rc == SQLITE_ERROR && strstr(sqlite3_errmsg(c->db), "no such savepoint") != NULL)
			return SQLITE_OK;
	}
	/*
	 * the statements expired (a CREATE INDEX) and SQLite prepares nothing
	 * more: the running read, ended out of memory, rolls it all back
	 */
	if (c->sentinel != NULL)
	{
		while (sqlite3_step(c->sentinel) == SQLITE_ROW)
			;
		sqlite3_finalize(c->sentinel);
		c->sentinel = NULL;
		if (sqlite3_get_autocommit(c->db))
			return SQLITE_OK;
	}
	return rc;
}

int
ms_end(ms_ctx *c, const char *name, int rc)
{
	int			i = c->savepoints - 1;
	int			rc2;

	if (i < 0)
		return ms_fail(c, SQLITE_INTERNAL, "savepoint %s is not open", name);
	c->savepoints = i;
	if (rc == SQLITE_OK)
	{
		rc = run(c->release[i]);
		if (rc != SQLITE_OK)
			ms_dberr(c, rc);
	}
	/* undo what we did, and only that: never the caller's transaction */
	rc2 = rc == SQLITE_OK ? SQLITE_OK : undo(c, i);
	/* the file's objects may be as they were: read again when next needed */
	if (rc != SQLITE_OK)
		c->catalog = NULL;
	sqlite3_finalize(c->undo[i]);
	sqlite3_finalize(c->release[i]);
	c->undo[i] = c->release[i] = NULL;
	if (i == 0)
	{
		sqlite3_finalize(c->sentinel);
		c->sentinel = NULL;
	}
	if (rc == SQLITE_OK)
		return SQLITE_OK;
	if (rc2 != SQLITE_OK)
	{
		if (rc2 != SQLITE_NOMEM)
			ms_fail(c, rc2, "cannot roll back to savepoint %s: %s", name, sqlite3_errmsg(c->db));
		return rc2;
	}
	/* the transaction gone, yet a savepoint of ours or the caller's work was in it */
	if (sqlite3_get_autocommit(c->db) && (i > 0 || !c->own_transaction))
	{
		/* out of memory, a full disk: said as they are (no caller absorbs them) */
		if (rc == SQLITE_NOMEM || (rc & 0xff) == SQLITE_FULL)
			return rc;
		return ms_fail(c, SQLITE_ABORT, "the transaction was rolled back: %s", sqlite3_errstr(rc));
	}
	return rc;
}

