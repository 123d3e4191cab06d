/*-------------------------------------------------------------------------
 * sneak_down.c
 *	  Sneakernet, the server's side: export (what waits for a replica, into
 *	  a bundle) and import of an upload bundle (sync.file).
 *
 * export pulls as a replica's first pull does, claiming nothing: after 0,
 * without sync_applied()'s claim, so that the server neither provisions
 * the replica again nor believes anything of it; then after the last
 * message it pulled, a page at a time.  What the replica applied reaches
 * the server only in its uploads' acknowledgements (Up.applied), which
 * import --server files: the outbox is trimmed through them, and the next
 * export carries only what the replica still lacks.
 *-------------------------------------------------------------------------
 */
#include "sneakernet.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "upread.h"

/* a chained message's number is 8 bytes big-endian in sync.pull's binary result */
static int64_t
get_be64(const uint8_t *b)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return (int64_t) v;
}

/* the exit code of a failed query: the server's refusal, out of reach, or a failure */
static int
query_code(PGconn *c, PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (PQstatus(c) == CONNECTION_BAD || state == NULL || strncmp(state, "08", 2) == 0 ||
		strncmp(state, "57", 2) == 0 || strncmp(state, "53", 2) == 0)
		return EXIT_UNAVAILABLE;
	if (strcmp(state, "42501") == 0 || strcmp(state, "42704") == 0 || strcmp(state, "42P01") == 0 ||
		strncmp(state, "28", 2) == 0)
		return EXIT_NOPERM;
	return EXIT_SOFTWARE;
}

static void
one_line(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	for (size_t n = strlen(s); n > 0 && s[n - 1] == ' '; n--)
		s[n - 1] = '\0';
}

static int
failed(const sneak_options *o, sneak_result *r, int code, const char *result, const char *what, const char *why)
{
	r->result = result;
	snprintf(r->reason, sizeof r->reason, "%s: %s", what, why);
	one_line(r->reason);
	sneak_say(o, r, code);
	return code;
}

static PGconn *
connect(const sneak_options *o, sneak_result *r, int *code)
{
	const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
	const char *const values[] = {"10", "magic_sync_agent", o->server, NULL};
	PGconn	   *c = PQconnectdbParams(keys, values, 1);

	if (c != NULL && PQstatus(c) == CONNECTION_OK)
		return c;
	{
		const char *m = c ? PQerrorMessage(c) : "out of memory";

		*code = strstr(m, "authentication failed") || strstr(m, "no pg_hba.conf entry") ||
			strstr(m, "does not exist") || strstr(m, "permission denied") ? EXIT_NOPERM : EXIT_UNAVAILABLE;
		failed(o, r, *code, *code == EXIT_NOPERM ? "refused" : "unavailable", "cannot connect to the server", m);
	}
	PQfinish(c);
	return NULL;
}

/* pull: one page of sync.pull(replica, after, max_bytes), claiming nothing */
static PGresult *
pull(PGconn *c, const uint8_t uuid[16], int64_t after, int max_bytes)
{
	const Oid	types[3] = {2950, 20, 23};	/* uuid, int8, int4 */
	uint8_t		after_be[8],
				bytes_be[4];
	const char *values[3] = {(const char *) uuid, (const char *) after_be, (const char *) bytes_be};
	const int	lengths[3] = {16, 8, 4};
	const int	formats[3] = {1, 1, 1};

	for (int i = 0; i < 8; i++)
		after_be[i] = (uint8_t) ((uint64_t) after >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		bytes_be[i] = (uint8_t) ((uint32_t) max_bytes >> (24 - 8 * i));
	return PQexecParams(c, "SELECT number, message FROM sync.pull($1, $2, $3)", 3, types, values, lengths,
						formats, 1);
}

/*
 * sneak_export: every answer and message waiting for the replica, in
 * sync.pull's order, into one bundle to the replica
 */
int
sneak_export(const sneak_options *o, const uint8_t uuid[16], sneak_result *r)
{
	int			code = 0;
	PGconn	   *c = connect(o, r, &code);
	ms_bundle_writer w;
	int64_t		after = 0;
	uint8_t    *bundle;
	size_t		len = 0;
	char		err[AGENT_ERROR_MAX];

	if (c == NULL)
		return code;
	ms_bundle_begin(&w, &sneak_malloc, MS_BUNDLE_TO_REPLICA, uuid, sneak_now_us());
	for (;;)
	{
		PGresult   *res = pull(c, uuid, after, o->pull_bytes);
		int			chained = 0;

		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			code = query_code(c, res);
			failed(o, r, code, code == EXIT_NOPERM ? "refused" : "failed", "sync.pull", PQresultErrorMessage(res));
			PQclear(res);
			ms_bundle_discard(&w);
			PQfinish(c);
			return code;
		}
		for (int i = 0; i < PQntuples(res); i++)
		{
			int64_t		number = PQgetisnull(res, i, 0) || PQgetlength(res, i, 0) != 8 ? 0 :
				get_be64((const uint8_t *) PQgetvalue(res, i, 0));

			ms_bundle_add(&w, (const uint8_t *) PQgetvalue(res, i, 1), (size_t) PQgetlength(res, i, 1));
			if (number == 0)
			{
				r->answers++;
				continue;
			}
			chained++;
			r->messages++;
			if (r->first == 0)
				r->first = number;
			r->last = after = number;
		}
		PQclear(res);
		/* every page after the first: nothing more is waiting once one carries no message */
		if (chained == 0 || w.failed)
			break;
	}
	/* the key its messages are signed with: what the replica's file must trust (import --server-key) */
	{
		PGresult   *res = PQexecParams(c, "SELECT sync.signing_key()", 0, NULL, NULL, NULL, NULL, 1);

		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) &&
			PQgetlength(res, 0, 0) == 32)
			agent_key_hex((const uint8_t *) PQgetvalue(res, 0, 0), r->server_key);
		PQclear(res);
	}
	PQfinish(c);
	bundle = ms_bundle_finish(&w, &len);
	if (bundle == NULL)
		return failed(o, r, EXIT_SOFTWARE, "failed", "cannot make the bundle", "out of memory");
	if (!sneak_write(o->to, bundle, len, err))
	{
		free(bundle);
		return failed(o, r, EXIT_CANTCREAT, "unwritable", "cannot write the bundle", err);
	}
	free(bundle);
	r->result = "written";
	sneak_say(o, r, 0);
	return 0;
}

/* answer: json_extract of sync.file's answer, through a SQLite of no file */
static int64_t
answer_int(sqlite3_stmt *q, const char *json, const char *path)
{
	int64_t		v = 0;

	sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return v;
}

/*
 * others: whether an upload of the bundle names another replica than the
 * bundle's head (a head changed on the way, its check made again): the
 * server would refuse each; the bundle is refused whole, before connecting
 */
static bool
others(const ms_bundle *bundle)
{
	ms_bundle	b = *bundle;
	const uint8_t *up;
	size_t		len;

	while (ms_bundle_next(&b, &up, &len))
	{
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		Sync__Up   *u = ms_up_read(up, len, len, &sneak_malloc, &st, reason);
		bool		other;

		/* what does not read, the server refuses and says why */
		if (u == NULL)
			continue;
		other = u->replica.len != 16 || memcmp(u->replica.data, bundle->replica, 16) != 0;
		sync__up__free_unpacked(u, &sneak_malloc);
		if (other)
			return true;
	}
	return false;
}

/*
 * sneak_file: each upload of the bundle filed on the server, in order, each
 * in its own sync.file (whole or not at all, once: a send filed before is
 * a duplicate and changes nothing).  A bundle all of whose uploads were
 * filed before was imported before: refused, having changed nothing.
 */
int
sneak_file(const sneak_options *o, const ms_bundle *bundle, sneak_result *r)
{
	ms_bundle	b = *bundle;
	int			code = 0;
	server	   *s = NULL;
	sqlite3    *mem = NULL;
	sqlite3_stmt *q = NULL;
	const uint8_t *up;
	size_t		len;
	char		answer[4096];
	char		sqlstate[6];
	char		err[AGENT_ERROR_MAX];
	char		first_refusal[AGENT_ERROR_MAX + 32] = "";
	int			refused_uploads = 0;
	agent_status st;

	if (others(bundle))
	{
		r->result = "wrong_replica";
		snprintf(r->reason, sizeof r->reason, "%.300s says it is replica %s's, but an upload in it is another"
				 " replica's; nothing was filed", o->from, r->replica);
		sneak_say(o, r, EXIT_DATAERR);
		return EXIT_DATAERR;
	}
	if (sqlite3_open(":memory:", &mem) != SQLITE_OK ||
		sqlite3_prepare_v2(mem, "SELECT json_extract(?1, ?2)", -1, &q, NULL) != SQLITE_OK)
	{
		sqlite3_close(mem);
		return failed(o, r, EXIT_SOFTWARE, "failed", "cannot read answers", "SQLite has no json_extract");
	}
	st = server_connect(&s, o->server, err);
	if (st != STEP_OK)
	{
		code = st == STEP_REFUSED ? EXIT_NOPERM : EXIT_UNAVAILABLE;
		failed(o, r, code, st == STEP_REFUSED ? "refused" : "unavailable", "cannot connect to the server", err);
	}
	else if (o->replica == NULL)
	{
		/*
		 * A bundle is filed only as the replica whose role files it, or whom
		 * --replica names: a role that may file for any replica (sync_admin,
		 * a superuser) would file a forged bundle's rows as whichever replica
		 * its head names.
		 */
		bool		any = true;

		st = server_acts_for_any(s, &any, err);
		if (st != STEP_OK)
		{
			code = st == STEP_REFUSED ? EXIT_NOPERM : st == STEP_TRANSIENT ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
			failed(o, r, code, "failed", "cannot tell whose role this is", err);
		}
		else if (any)
		{
			r->result = "no_replica";
			snprintf(r->reason, sizeof r->reason, "this role may file for any replica: name the replica whose"
					 " bundle %.300s is with --replica (it says %s); nothing was filed", o->from, r->replica);
			code = EXIT_USAGE;
			sneak_say(o, r, code);
		}
	}
	while (code == 0 && ms_bundle_next(&b, &up, &len))
	{
		int64_t		acked;

		st = server_file(s, bundle->replica, up, len, answer, sizeof answer, sqlstate, err);
		if (st == STEP_FAILED)
		{
			/* refused for good (not whole, too large): the others are filed all the same */
			if (refused_uploads++ == 0)
				snprintf(first_refusal, sizeof first_refusal, "%s (SQLSTATE %s)", err, sqlstate);
			continue;
		}
		if (st != STEP_OK)
		{
			code = st == STEP_REFUSED ? EXIT_NOPERM : EXIT_UNAVAILABLE;
			failed(o, r, code, st == STEP_REFUSED ? "refused" : "unavailable", "sync.file", err);
			break;
		}
		r->uploads++;
		if (answer_int(q, answer, "$.duplicate"))
		{
			r->duplicates++;
			continue;
		}
		r->filed += answer_int(q, answer, "$.filed");
		r->refused += answer_int(q, answer, "$.refused");
		r->dropped += answer_int(q, answer, "$.dropped");
		r->waiting += answer_int(q, answer, "$.waiting");
		acked = answer_int(q, answer, "$.acknowledged");
		if (acked > r->acknowledged)
			r->acknowledged = acked;
	}
	if (code == 0 && refused_uploads > 0)
	{
		/* its rows go again in a later upload, once the replica's resend_after passes */
		code = EXIT_SOFTWARE;
		snprintf(r->reason, sizeof r->reason, "the server refused %d of the bundle's uploads for good, the first: %s",
				 refused_uploads, first_refusal);
		r->result = "refused";
		one_line(r->reason);
		sneak_say(o, r, code);
	}
	else if (code == 0 && r->uploads > 0 && r->duplicates == r->uploads)
	{
		r->result = "applied_already";
		snprintf(r->reason, sizeof r->reason,
				 "every upload of %s was filed before (or a later one was): it was imported already,"
				 " or came after a later bundle; nothing changed, and what it carried that the server"
				 " lacks the replica sends again", o->from);
		code = EXIT_DATAERR;
		sneak_say(o, r, code);
	}
	else if (code == 0)
	{
		r->result = "filed";
		if (r->duplicates > 0)
			snprintf(r->reason, sizeof r->reason, "%lld uploads were filed before: they changed nothing",
					 (long long) r->duplicates);
		sneak_say(o, r, 0);
	}
	server_close(s);
	sqlite3_finalize(q);
	sqlite3_close(mem);
	return code;
}
