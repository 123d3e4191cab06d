/*-------------------------------------------------------------------------
 * report.c
 *	  What the agent shows: to people, a bar while a snapshot is applied and
 *	  one line per round that did something; to machines (--json), one JSON
 *	  object per line, each with "time" and "event":
 *
 *	    start      replica, db, applied
 *	    connected
 *	    unreachable / lost   error, retry_ms
 *	    error      what, error, retry_ms (-1: not retried)
 *	    notice     message: what the server said besides results
 *	    snapshot   rows, of (0: unknown, the agent started mid-snapshot), done
 *	    schema     number, changed, let_go, failed [{table, statement, error,
 *	               rest_applied}]: a message that changed the schema
 *	    round      messages, rows, deletes, retired, refused, duplicates,
 *	               answers, uploads, filed, server_refused, refused_reason,
 *	               dropped, dropped_reason, waiting, set_aside, narrowed,
 *	               blamed, blamed_reason, applied, acknowledged, snapshots,
 *	               stopped, gap, provisioning, backlog {unsent, unfiled,
 *	               set_aside, refused}
 *	    refused    table, key [parts], reason, sqlstate: a row the replica
 *	               wrote that never goes up (refused by the server, or set
 *	               aside as it cannot be sent), told once per agent run
 *	    stop       reason, code
 *
 * People's lines go to stdout, errors to stderr; with --quiet only errors.
 * On a terminal the bar redraws itself in place; elsewhere (a log file) it
 * is a line every two seconds while the snapshot lasts.
 *-------------------------------------------------------------------------
 */
#include "agent.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static report_mode mode;
static const char *label = "";
static bool tty;
static bool bar_shown;			/* a bar is drawn on the terminal's current line */
static int64_t bar_at;			/* when the bar was last drawn, ms */

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
report_init(report_mode m, const char *name)
{
	mode = m;
	label = name ? name : "";
	tty = isatty(STDOUT_FILENO) == 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

bool
report_rounds(void)
{
	return mode != REPORT_QUIET;
}

/* the bar, if one is drawn, gives its line back before anything is printed */
static void
clear_bar(void)
{
	if (bar_shown)
	{
		fputs("\r\033[K", stdout);
		bar_shown = false;
	}
}

static void
human(FILE *f, const char *fmt,...)
{
	va_list		ap;
	time_t		now = time(NULL);
	struct tm	tm;
	char		stamp[16];

	clear_bar();
	localtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
	fprintf(f, "%s %s%s", stamp, label, *label ? ": " : "");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}

/* the start of a JSON line: {"time":"...","event":"..." */
static void
json_begin(const char *event)
{
	agent_json_event(event);
	if (*label)
	{
		fputs(",\"name\":", stdout);
		agent_json_string(label);
	}
}

static void
json_end(void)
{
	fputs("}\n", stdout);
	fflush(stdout);
}

void
report_start(const char *replica, const char *db, int64_t applied)
{
	if (mode == REPORT_JSON)
	{
		json_begin("start");
		fputs(",\"replica\":", stdout);
		agent_json_string(replica);
		fputs(",\"db\":", stdout);
		agent_json_string(db);
		printf(",\"applied\":%lld", (long long) applied);
		json_end();
	}
	else if (mode == REPORT_HUMAN)
		human(stdout, "replica %s in %s, applied through message %lld", replica, db,
			  (long long) applied);
}

void
report_connected(void)
{
	if (mode == REPORT_JSON)
	{
		json_begin("connected");
		json_end();
	}
	else if (mode == REPORT_HUMAN)
		human(stdout, "connected to the server");
}

static void
trouble(const char *event, const char *what, const char *why, int retry_ms)
{
	if (mode == REPORT_JSON)
	{
		json_begin(event);
		if (what)
		{
			fputs(",\"what\":", stdout);
			agent_json_string(what);
		}
		fputs(",\"error\":", stdout);
		agent_json_string(why);
		printf(",\"retry_ms\":%d", retry_ms);
		json_end();
		return;
	}
	if (retry_ms == 0)
		human(stderr, "%s%s%s; reconnecting", what ? what : "", what ? ": " : "", why);
	else if (retry_ms > 0)
		human(stderr, "%s%s%s; retrying in %d s", what ? what : "", what ? ": " : "", why,
			  (retry_ms + 999) / 1000);
	else
		human(stderr, "%s%s%s", what ? what : "", what ? ": " : "", why);
}

void
report_unreachable(const char *why, int retry_ms)
{
	trouble("unreachable", "server unreachable", why, retry_ms);
}

void
report_lost(const char *why, int retry_ms)
{
	trouble("lost", "connection lost", why, retry_ms);
}

void
report_error(const char *what, const char *why, int retry_ms)
{
	trouble("error", what, why, retry_ms);
}

void
report_notice(const char *message)
{
	if (mode == REPORT_JSON)
	{
		json_begin("notice");
		fputs(",\"message\":", stdout);
		agent_json_string(message);
		json_end();
	}
	else
		human(stderr, "the server says: %s", message);
}

void
report_schema(const apply_result *res)
{
	if (mode == REPORT_JSON)
	{
		json_begin("schema");
		printf(",\"number\":%lld,\"changed\":%lld,\"let_go\":%lld,\"failed\":[",
			   (long long) res->number, (long long) res->schema_changed, (long long) res->schema_let_go);
		for (int i = 0; i < res->schema_failed; i++)
		{
			fputs(i ? ",{\"table\":" : "{\"table\":", stdout);
			agent_json_string(res->failed[i].table);
			fputs(",\"statement\":", stdout);
			agent_json_string(res->failed[i].statement);
			fputs(",\"error\":", stdout);
			agent_json_string(res->failed[i].error);
			printf(",\"rest_applied\":%s}", res->failed[i].rest_applied ? "true" : "false");
		}
		putchar(']');
		json_end();
		return;
	}
	if (mode != REPORT_QUIET)
		human(stdout, "message %lld changed the schema: %lld tables made or altered, %lld let go of",
			  (long long) res->number, (long long) res->schema_changed, (long long) res->schema_let_go);
	/* what the replica could not apply is an error of its own: shown even when quiet */
	for (int i = 0; i < res->schema_failed; i++)
		human(stderr, "the schema change of table %s %s: %s failed: %s", res->failed[i].table,
			  res->failed[i].rest_applied ? "is applied but for one statement" :
			  "is not applied (its rows are refused until a snapshot makes it again)",
			  res->failed[i].statement, res->failed[i].error);
}

/*
 * report_snapshot: rows of the snapshot applied so far, of how many (0 when
 * unknown); begun on its first message, ended on its EndSnapshot.
 */
void
report_snapshot(int64_t rows, int64_t of, bool begun, bool ended)
{
	int64_t		now = mono_ms();
	bool		due = begun || ended || now - bar_at >= (tty ? 100 : 2000);

	if (mode == REPORT_QUIET || !due)
		return;
	bar_at = now;
	if (mode == REPORT_JSON)
	{
		json_begin("snapshot");
		printf(",\"rows\":%lld,\"of\":%lld,\"done\":%s", (long long) rows, (long long) of,
			   ended ? "true" : "false");
		json_end();
		return;
	}
	if (tty)
	{
		char		bar[31];
		int			fill = of > 0 ? (int) (30 * (rows < of ? rows : of) / of) : 0;

		memset(bar, '#', (size_t) fill);
		memset(bar + fill, '.', (size_t) (30 - fill));
		bar[30] = '\0';
		if (of > 0)
			printf("\r%s%ssnapshot [%s] %lld of %lld rows %3d%%\033[K", label, *label ? ": " : "",
				   bar, (long long) rows, (long long) of, (int) (100 * (rows < of ? rows : of) / of));
		else
			printf("\r%s%ssnapshot (resumed) %lld rows\033[K", label, *label ? ": " : "", (long long) rows);
		fflush(stdout);
		bar_shown = true;
		if (ended)
		{
			putchar('\n');
			bar_shown = false;
		}
		return;
	}
	if (begun && !ended)
		human(stdout, "snapshot begins: %lld rows to apply", (long long) of);
	else if (of > 0)
		human(stdout, "snapshot: %lld of %lld rows (%d%%)%s", (long long) rows, (long long) of,
			  (int) (100 * (rows < of ? rows : of) / of), ended ? ", done" : "");
	else
		human(stdout, "snapshot (resumed): %lld rows%s", (long long) rows, ended ? ", done" : "");
}

static void
plural(char *out, size_t size, int64_t n, const char *one, const char *many)
{
	snprintf(out, size, "%lld %s", (long long) n, n == 1 ? one : many);
}

void
report_round(const round_stats *st, const backlog *b)
{
	char		line[1024] = "";
	char		word[64];
	size_t		len;
	int64_t		up;

	if (mode == REPORT_QUIET)
		return;
	if (mode == REPORT_JSON)
	{
		json_begin("round");
		printf(",\"messages\":%lld,\"rows\":%lld,\"deletes\":%lld,\"retired\":%lld,\"refused\":%lld,"
			   "\"duplicates\":%lld,\"answers\":%lld,\"uploads\":%lld,\"filed\":%lld,"
			   "\"server_refused\":%lld,\"dropped\":%lld,\"waiting\":%lld,\"set_aside\":%lld,"
			   "\"applied\":%lld,\"acknowledged\":%lld,\"snapshots\":%lld,\"stopped\":",
			   (long long) st->messages, (long long) st->upserts, (long long) st->deletes,
			   (long long) st->retired, (long long) st->refused, (long long) st->duplicates,
			   (long long) st->answers, (long long) st->uploads, (long long) st->filed,
			   (long long) st->server_refused, (long long) st->dropped, (long long) st->waiting,
			   (long long) st->set_aside, (long long) st->applied, (long long) st->acknowledged,
			   (long long) st->snapshots);
		if (st->stopped)
			agent_json_string(st->stopped);
		else
			fputs("null", stdout);
		printf(",\"narrowed\":%lld,\"blamed\":%lld,\"dropped_reason\":",
			   (long long) st->narrowed, (long long) st->blamed);
		if (st->dropped_reason[0])
			agent_json_string(st->dropped_reason);
		else
			fputs("null", stdout);
		fputs(",\"blamed_reason\":", stdout);
		if (st->blamed_reason[0])
			agent_json_string(st->blamed_reason);
		else
			fputs("null", stdout);
		fputs(",\"refused_reason\":", stdout);
		if (st->refused_reason[0])
			agent_json_string(st->refused_reason);
		else
			fputs("null", stdout);
		printf(",\"gap\":%lld,\"provisioning\":%s,\"backlog\":{\"unsent\":%lld,\"unfiled\":%lld,"
			   "\"set_aside\":%lld,\"refused\":%lld}",
			   (long long) st->gap, st->provisioning ? "true" : "false",
			   (long long) b->unsent, (long long) b->unfiled, (long long) b->set_aside,
			   (long long) b->refused);
		json_end();
		return;
	}

#define ADD(...) do { len = strlen(line); snprintf(line + len, sizeof line - len, __VA_ARGS__); } while (0)
	if (st->messages > 0)
	{
		plural(word, sizeof word, st->messages, "message", "messages");
		ADD("applied %s (%lld %s", word, (long long) st->upserts, st->upserts == 1 ? "row" : "rows");
		if (st->deletes > 0)
			ADD(", %lld let go", (long long) st->deletes);
		if (st->refused > 0)
			ADD(", %lld refused", (long long) st->refused);
		if (st->snapshots > 0)
			ADD(", a snapshot complete");
		ADD(")");
	}
	up = st->filed + st->server_refused + st->waiting + st->dropped + st->set_aside;
	if (up > 0)
	{
		ADD("%suploaded %lld %s", *line ? "; " : "", (long long) up, up == 1 ? "row" : "rows");
		if (st->filed == up)
			ADD(", filed");
		else
		{
			const char *sep = ": ";

			if (st->filed > 0)
			{
				ADD("%s%lld filed", sep, (long long) st->filed);
				sep = ", ";
			}
			if (st->server_refused > 0)
			{
				if (st->refused_reason[0])
					ADD("%s%lld refused (%s)", sep, (long long) st->server_refused, st->refused_reason);
				else
					ADD("%s%lld refused", sep, (long long) st->server_refused);
				sep = ", ";
			}
			if (st->waiting > 0)
			{
				ADD("%s%lld waiting", sep, (long long) st->waiting);
				sep = ", ";
			}
			if (st->dropped > 0)
			{
				ADD("%s%lld dropped (%s)", sep, (long long) st->dropped,
					st->dropped_reason[0] ? st->dropped_reason : "the server's change wins");
				sep = ", ";
			}
			if (st->set_aside > 0)
				ADD("%s%lld set aside", sep, (long long) st->set_aside);
		}
	}
	if (st->blamed > 0)
		ADD("%s%lld %s set aside after narrowing down what the server refuses (%s)", *line ? "; " : "",
			(long long) st->blamed, st->blamed == 1 ? "row" : "rows", st->blamed_reason);
	if (st->stopped && strcmp(st->stopped, "gap") == 0)
		ADD("%sa gap at message %lld: waiting for a snapshot", *line ? "; " : "", (long long) st->gap);
	else if (st->stopped && strcmp(st->stopped, "later_protocol") == 0)
		ADD("%sa message of a later protocol: upgrade this agent", *line ? "; " : "");
	else if (st->stopped && strcmp(st->stopped, "older_generation") == 0)
		ADD("%sa message of an older generation (an old primary's, or replayed): refused", *line ? "; " : "");
	else if (st->stopped)
		ADD("%sa message for another replica: not applied", *line ? "; " : "");
	if (st->provisioning)
		ADD("%sthe server is provisioning this replica", *line ? "; " : "");
	ADD("%sbacklog: %lld unsent, %lld unfiled", *line ? "; " : "",
		(long long) b->unsent, (long long) b->unfiled);
	if (b->set_aside > 0)
		ADD(", %lld set aside", (long long) b->set_aside);
	if (b->refused > 0)
		ADD(", %lld refused", (long long) b->refused);
#undef ADD
	human(stdout, "%s", line);
}

void
report_refused(const aside_row *row)
{
	char		key[AGENT_ASIDE_PARTS * 132 + 8] = "";
	size_t		len;

	if (mode == REPORT_JSON)
	{
		json_begin("refused");
		fputs(",\"table\":", stdout);
		agent_json_string(row->table);
		fputs(",\"key\":", stdout);
		if (row->nparts == 0)
			fputs("null", stdout);
		else
		{
			putchar('[');
			for (int i = 0; i < row->nparts; i++)
			{
				if (i)
					putchar(',');
				agent_json_string(row->parts[i]);
			}
			putchar(']');
		}
		fputs(",\"reason\":", stdout);
		agent_json_string(row->reason);
		fputs(",\"sqlstate\":", stdout);
		if (row->sqlstate[0])
			agent_json_string(row->sqlstate);
		else
			fputs("null", stdout);
		json_end();
		return;
	}
	if (mode == REPORT_QUIET)
		return;
	for (int i = 0; i < row->nparts; i++)
	{
		len = strlen(key);
		snprintf(key + len, sizeof key - len, "%s%s", i ? ", " : "", row->parts[i]);
	}
	if (row->more_parts)
	{
		len = strlen(key);
		snprintf(key + len, sizeof key - len, ", ...");
	}
	human(stdout, "%s (%s) never goes up: %s%s%s%s; it stays in the file, set aside, until written again or sync_retry()",
		  row->table, row->nparts > 0 ? key : "key not said", row->reason,
		  row->sqlstate[0] ? " (SQLSTATE " : "", row->sqlstate, row->sqlstate[0] ? ")" : "");
}

void
report_stop(const char *why, int code)
{
	if (mode == REPORT_JSON)
	{
		json_begin("stop");
		fputs(",\"reason\":", stdout);
		agent_json_string(why);
		printf(",\"code\":%d", code);
		json_end();
	}
	else if (mode == REPORT_HUMAN || code != 0)
		human(code == 0 ? stdout : stderr, "stopped: %s (exit %d)", why, code);
}

void
report_trust(const char *key_hex, const char *how)
{
	if (mode == REPORT_JSON)
	{
		json_begin("trust");
		fputs(",\"key\":", stdout);
		agent_json_string(key_hex);
		fputs(",\"how\":", stdout);
		agent_json_string(how);
		json_end();
	}
	else if (mode == REPORT_HUMAN)
		human(stdout, "the replica trusts the server key %s (%s): it applies only what that key signed",
			  key_hex, how);
}

bool
agent_key_parse(const char *hex, uint8_t key[32])
{
	if (hex == NULL || strlen(hex) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!isxdigit((unsigned char) hex[i]))
			return false;
	for (int i = 0; i < 32; i++)
	{
		char		pair[3] = {hex[2 * i], hex[2 * i + 1], 0};

		key[i] = (uint8_t) strtoul(pair, NULL, 16);
	}
	return true;
}

void
agent_key_hex(const uint8_t key[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
}
