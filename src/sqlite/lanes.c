/*
** lanes.c - a replica's uploads split into lanes (docs/protocol.md 7.2,
** src/shared/lane.h).
**
** Each table's Table says its lane ("" the first).  sync_upload(lane)
** carries only the rows of that lane's tables; the first lane carries what
** the engine says too (the applied message, gap, refusals, digests, the
** backlog of every table).  Each lane numbers its sends on its own, so the
** server's duplicate and in-order rules for one never see another's:
**
**   _sync_seq       the first lane's last send number (as before lanes:
**                   a file of an older build numbers on from it)
**   _sync_lane_seq  every other lane's, by name
**
** A Filed answer lets go of notes by send id, whatever the lane; one that
** says a send is a duplicate numbers that lane's next send beyond
** last_seq (sends.c).
**
**   sync_lanes() -> TEXT (JSON)
**       [{"lane":"","last_seq":N,"tables":["products",...]},
**        {"lane":"sales","last_seq":N,"tables":["sales"]}]
**       The first lane always, then each lane a table the replica writes is
**       in, by name: what a host uploads in each round.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "lane.h"

static const char *const lanes_ddl =
"CREATE TABLE IF NOT EXISTS _sync_lane_seq(lane TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID;";

const char *
ms_tbl_lane(const ms_tbl *t)
{
	return t->msg != NULL && t->msg->lane != NULL ? t->msg->lane : "";
}

static int
lanes_ensure(ms_ctx *c)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = '_sync_lane_seq'");

	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return SQLITE_OK;
	return rc == SQLITE_DONE ? ms_exec(c, "%s", lanes_ddl) : rc;
}

int
ms_lane_last(ms_ctx *c, const char *lane, uint64_t *last)
{
	sqlite3_stmt *st;
	int			rc = lane[0] == '\0' ? SQLITE_OK : lanes_ensure(c);

	*last = 0;
	if (rc == SQLITE_OK)
		rc = lane[0] == '\0' ? ms_prepare(c, &st, "SELECT last FROM _sync_seq WHERE id = 1")
			: ms_prepare(c, &st, "SELECT last FROM _sync_lane_seq WHERE lane = ?1");
	if (rc != SQLITE_OK)
		return rc;
	if (lane[0] != '\0')
		sqlite3_bind_text(st, 1, lane, -1, SQLITE_STATIC);
	if ((rc = ms_step(c, st)) == SQLITE_ROW)
		*last = (uint64_t) sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int
ms_lane_set_last(ms_ctx *c, const char *lane, uint64_t last, bool at_least)
{
	sqlite3_stmt *st;
	int			rc = lane[0] == '\0' ? SQLITE_OK : lanes_ensure(c);
	const char *set = at_least ? "max(last, excluded.last)" : "excluded.last";

	if (rc == SQLITE_OK)
		rc = lane[0] == '\0' ?
			ms_prepare(c, &st, "INSERT INTO _sync_seq(id, last) VALUES (1, ?1)"
					   " ON CONFLICT (id) DO UPDATE SET last = %s", set) :
			ms_prepare(c, &st, "INSERT INTO _sync_lane_seq(lane, last) VALUES (?2, ?1)"
					   " ON CONFLICT (lane) DO UPDATE SET last = %s", set);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64) last);
	if (lane[0] != '\0')
		sqlite3_bind_text(st, 2, lane, -1, SQLITE_STATIC);
	rc = ms_done(c, st);
	sqlite3_finalize(st);
	return rc;
}

int
ms_lane_arg(ms_ctx *c, sqlite3_value *v, const char **lane)
{
	char		reason[MS_REASON_MAX];
	const char *s;
	int			n;

	*lane = "";
	if (sqlite3_value_type(v) == SQLITE_NULL)
		return SQLITE_OK;		/* the first lane */
	if (sqlite3_value_type(v) != SQLITE_TEXT)
		return ms_fail(c, SQLITE_ERROR, "a lane is TEXT: its name, or '' for the first lane");
	s = (const char *) sqlite3_value_text(v);
	n = sqlite3_value_bytes(v);
	if (s == NULL)
		return SQLITE_NOMEM;
	/* a NUL inside it is no lane: its name is what strlen says, or it is refused */
	if ((size_t) n != strlen(s))
		return ms_fail(c, SQLITE_ERROR, "the lane has a NUL byte in it");
	if (!ms_lane_check(s, (size_t) n, reason))
		return ms_fail(c, SQLITE_ERROR, "%s", reason);
	*lane = ms_strdup(&c->arena, s);
	return *lane == NULL ? SQLITE_NOMEM : SQLITE_OK;
}

/* one lane's entry of sync_lanes(): its name, last number, and tables written */
static int
lane_entry(ms_ctx *c, const char *lane, ms_buf *out)
{
	uint64_t	last = 0;
	int			rc = ms_lane_last(c, lane, &last);
	int			n = 0;

	if (rc != SQLITE_OK)
		return rc;
	if (out->len > 1)
		ms_buf_byte(out, ',');
	ms_buf_str(out, "{\"lane\":");
	ms_buf_json_string(out, lane, strlen(lane));
	ms_buf_printf(out, ",\"last_seq\":%llu,\"tables\":[", (unsigned long long) last);
	for (int i = 0; i < c->schema->n; i++)
		if (c->schema->t[i].noted && strcmp(ms_tbl_lane(&c->schema->t[i]), lane) == 0)
		{
			if (n++)
				ms_buf_byte(out, ',');
			ms_buf_json_string(out, c->schema->t[i].name, strlen(c->schema->t[i].name));
		}
	ms_buf_str(out, "]}");
	return SQLITE_OK;
}

static void
lanes_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ms_buf		out = {0};
	int			rc;

	(void) argc;
	(void) argv;
	ms_ctx_init(&c, ctx, "sync_lanes");
	rc = ms_begin(&c, "_sync_lanes");
	if (rc == SQLITE_OK)
	{
		rc = ms_state_exists(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_schema_load(&c);
		if (rc == SQLITE_OK && c.have_state)
			rc = ms_sends_ensure(&c);
		ms_buf_byte(&out, '[');
		if (rc == SQLITE_OK && c.have_state)
			rc = lane_entry(&c, "", &out);
		/* the other lanes by name, each once: lane_entry for the first table of each */
		for (int i = 0; rc == SQLITE_OK && c.have_state && i < c.schema->n; i++)
		{
			const char *lane = ms_tbl_lane(&c.schema->t[i]);
			bool		before = lane[0] == '\0' || !c.schema->t[i].noted;

			for (int j = 0; j < i && !before; j++)
				before = c.schema->t[j].noted && strcmp(ms_tbl_lane(&c.schema->t[j]), lane) == 0;
			if (!before)
				rc = lane_entry(&c, lane, &out);
		}
		ms_buf_byte(&out, ']');
		rc = ms_end(&c, "_sync_lanes", rc);
	}
	/* a file the extension never provisioned: the one lane there is, empty */
	if (rc == SQLITE_OK && !c.have_state)
	{
		out.len = 0;
		ms_buf_str(&out, "[{\"lane\":\"\",\"last_seq\":0,\"tables\":[]}]");
	}
	ms_ctx_finish(&c, ctx, rc, &out);
}

int
ms_lanes_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "sync_lanes", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, NULL, lanes_func, NULL, NULL);
}
