/*-------------------------------------------------------------------------
 * aside.c
 *	  What a replica wrote and can never send, as the server records it:
 *	  the backlog of each upload of the first lane (sync.replicas.backlog),
 *	  every table's rows set aside told with why (Up.backlog's aside: a few
 *	  reasons, each with its SQLSTATE, its rows, one key, since when), and
 *	  the rows this very filing refused added to them at once.
 *
 * The replica sets a refused row aside when it applies the Filed answer,
 * and says so in its next upload, whose backlog replaces what is recorded
 * here; adding the refusals at filing only spares the reads the wait (and
 * tells them of a replica that never comes back).  An upload of another
 * lane says no backlog (lanes.c): its refusals are told by the next upload
 * of the first.  The reads (60_read.sql: the state writes_refused,
 * sync.health's "writes refused") read this JSON.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "lib/stringinfo.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "file.h"
#include "wire.h"

/* One reason rows of a table are set aside for, as recorded. */
typedef struct aside_reason
{
	const char *reason;
	const char *sqlstate;		/* "" when none is said */
	uint64		rows;
	Sync__Key  *key;			/* one of them, or NULL */
	int64		since;			/* Unix seconds, 0 when not said */
} aside_reason;

/*
 * What a replica says is recorded for everyone's reads (the views sum it as
 * bigint and make timestamps of it): a count beyond any file's rows is
 * recorded as this many, so that no sum overflows, and a time that is no
 * time (beyond a day ahead of the server's clock, or before 1970) as none.
 */
#define ASIDE_COUNT_MAX (UINT64CONST(1) << 40)
#define said_count(n) Min((uint64) (n), ASIDE_COUNT_MAX)

static int64
said_since(int64 since, int64 now)
{
	return since > 0 && since <= now + 86400 ? since : 0;
}

/* refused_in: how many rows of table this filing refused */
static uint64
refused_in(const ms_filing *f, const char *table)
{
	ListCell   *lc;

	foreach(lc, f->tables)
	{
		const ms_filed_counts *c = lfirst(lc);

		if (strcmp(c->table, table) == 0)
			return (uint64) c->counts[MS_REFUSED];
	}
	return 0;
}

/*
 * reasons_of: the reasons the replica gave for the table's rows set aside,
 * then those of this filing's refusals, said as the replica says them
 * ("refused by the server: ..."): one more row of a reason it gave, or a
 * reason of its own while there is room
 */
static int
reasons_of(const ms_filing *f, const Sync__Backlog *l, const char *table, aside_reason *out)
{
	int			n = 0;
	ListCell   *lc;
	int64		now = (int64) timestamptz_to_time_t(GetCurrentTimestamp());

	for (size_t i = 0; l != NULL && i < l->n_aside && n < MS_ASIDE_MAX; i++)
	{
		out[n].reason = l->aside[i]->reason;
		out[n].sqlstate = l->aside[i]->sqlstate;
		out[n].rows = said_count(l->aside[i]->rows);
		out[n].key = l->aside[i]->key;
		out[n].since = said_since(l->aside[i]->since, now);
		n++;
	}
	foreach(lc, f->named[MS_REFUSED])
	{
		Sync__Refusal *r = lfirst(lc);
		char	   *said;
		int			k;

		if (strcmp(r->table, table) != 0)
			continue;
		said = psprintf("refused by the server: %s", r->reason);
		for (k = 0; k < n; k++)
			if (strcmp(out[k].reason, said) == 0 && strcmp(out[k].sqlstate, r->sqlstate) == 0)
				break;
		if (k == n && n == MS_ASIDE_MAX)
			continue;			/* counted in set_aside all the same */
		if (k == n)
		{
			out[n].reason = said;
			out[n].sqlstate = r->sqlstate;
			out[n].rows = 0;
			out[n].since = now;
			n++;
		}
		out[k].rows++;
		out[k].key = r->key;
	}
	return n;
}

/* entry: one table's backlog as JSON, this filing's refusals moved to its rows set aside */
static void
entry(StringInfo b, const ms_filing *f, const char *table, const Sync__Backlog *l)
{
	uint64		refused = refused_in(f, table);
	uint64		unsent = l ? said_count(l->unsent) : 0;
	uint64		unfiled = l ? said_count(l->unfiled) : 0;
	uint64		moved = Min(refused, unfiled);
	aside_reason reasons[MS_ASIDE_MAX];
	int			n = reasons_of(f, l, table, reasons);

	/* the refused rows went up in this upload: it counted them unfiled (or unsent) */
	unfiled -= moved;
	unsent -= Min(refused - moved, unsent);
	escape_json(b, table);
	appendStringInfo(b, ":{\"unsent\":" UINT64_FORMAT ",\"unfiled\":" UINT64_FORMAT
					 ",\"set_aside\":" UINT64_FORMAT ",\"refused\":" UINT64_FORMAT,
					 unsent, unfiled, (l ? said_count(l->set_aside) : 0) + refused, l ? said_count(l->refused) : 0);
	if (n > 0)
	{
		appendStringInfoString(b, ",\"aside\":[");
		for (int i = 0; i < n; i++)
		{
			appendStringInfoString(b, i ? ",{\"reason\":" : "{\"reason\":");
			escape_json(b, reasons[i].reason);
			appendStringInfoString(b, ",\"sqlstate\":");
			escape_json(b, reasons[i].sqlstate);
			appendStringInfo(b, ",\"rows\":" UINT64_FORMAT ",\"key\":", reasons[i].rows);
			if (reasons[i].key != NULL)
				ms_json_strings(b, reasons[i].key->parts, reasons[i].key->n_parts);
			else
				appendStringInfoString(b, "null");
			if (reasons[i].since > 0)
				appendStringInfo(b, ",\"since\":" INT64_FORMAT "}", reasons[i].since);
			else
				appendStringInfoString(b, ",\"since\":null}");
		}
		appendStringInfoChar(b, ']');
	}
	appendStringInfoChar(b, '}');
}

char *
ms_backlog_json(const ms_filing *f, Sync__Backlog *const *kept, int nkept)
{
	StringInfoData b;
	ListCell   *lc;
	int			n = 0;
	int			unmirrored = 0;

	initStringInfo(&b);
	appendStringInfoChar(&b, '{');
	for (int i = 0; i < nkept; i++)
	{
		if (kept[i] == NULL)
			continue;
		if (n++)
			appendStringInfoChar(&b, ',');
		entry(&b, f, kept[i]->table, kept[i]);
	}
	/*
	 * a table refused that the backlog does not name (a replica says every
	 * table it wrote); of those the server does not mirror, the first
	 * MS_BACKLOG_UNMIRRORED_MAX: an upload naming a thousand such tables made
	 * a backlog of a thousand entries, parsed as jsonb and stored, several
	 * times the upload's size in memory (issue 38.7)
	 */
	foreach(lc, f->tables)
	{
		const ms_filed_counts *c = lfirst(lc);
		bool		said = false;

		if (c->counts[MS_REFUSED] == 0)
			continue;
		if (ms_filed_table_named(f->filer, c->table) == NULL && unmirrored++ >= MS_BACKLOG_UNMIRRORED_MAX)
			continue;
		for (int i = 0; i < nkept && !said; i++)
			said = kept[i] != NULL && strcmp(kept[i]->table, c->table) == 0;
		if (said)
			continue;
		if (n++)
			appendStringInfoChar(&b, ',');
		entry(&b, f, c->table, NULL);
	}
	appendStringInfoChar(&b, '}');
	return b.data;
}
