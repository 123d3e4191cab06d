/*-------------------------------------------------------------------------
 * rule.c
 *	  Reading the sync rule of a declaration (rule.h).
 *
 * The rule's shape is split here: its word, the arguments in parentheses,
 * the name => value pairs of grouped, at the parentheses, commas and arrows
 * that are not inside a quoted name.  Every name in it is read by
 * PostgreSQL's own identifier syntax (SplitIdentifierString, as
 * stringToQualifiedNameList and regclass input read one: downcased unless
 * quoted, truncated to NAMEDATALEN), and a table is looked up as regclass
 * input would look it up (RangeVarGetRelid), through the search_path of
 * whoever declares: qualified or not, it is stored as the table itself.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/scansup.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "rule.h"

static void malformed(const char *text, const char *fmt,...) pg_attribute_printf(2, 3) pg_attribute_noreturn();

/* malformed: the error of a rule whose shape is wrong; fmt gives the detail. */
static void
malformed(const char *text, const char *fmt,...)
{
	va_list		args;
	char	   *detail;

	va_start(args, fmt);
	detail = ms_vformat(fmt, args);
	va_end(args);
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("malformed sync rule \"%s\"", text),
			 errdetail("%s.", detail),
			 errhint(MS_RULE_HINT)));
	pg_unreachable();
}

/* trimmed: a copy of n bytes of s without the white space around them. */
static char *
trimmed(const char *s, size_t n)
{
	while (n > 0 && scanner_isspace(*s))
		s++, n--;
	while (n > 0 && scanner_isspace(s[n - 1]))
		n--;
	return pnstrdup(s, n);
}

/* scan: the first of stops in s outside a quoted name, or s's end. */
static const char *
scan(const char *s, const char *stops)
{
	bool		quoted = false;

	for (; *s; s++)
	{
		/* a quote doubled inside a quoted name turns quoted off and on again */
		if (*s == '"')
			quoted = !quoted;
		else if (!quoted && strchr(stops, *s) != NULL)
			return s;
	}
	return s;
}

/* split: s cut at the commas outside quoted names, each piece trimmed. */
static List *
split(const char *s)
{
	List	   *out = NIL;

	for (;;)
	{
		const char *comma = scan(s, ",");

		out = lappend(out, trimmed(s, comma - s));
		if (*comma == '\0')
			return out;
		s = comma + 1;
	}
}

/* arrow: where "=>" is in s outside quoted names, or NULL. */
static const char *
arrow(const char *s)
{
	for (s = scan(s, "="); *s; s = scan(s + 1, "="))
		if (s[1] == '>')
			return s;
	return NULL;
}

/*
 * names_of: piece read as a dotted name, as a list of String nodes; NIL
 * when it is not one.
 */
static List *
names_of(const char *text, const char *piece)
{
	char	   *copy = pstrdup(piece);
	List	   *names;
	List	   *out = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(copy, '.', &names) || names == NIL)
		return NIL;
	foreach(lc, names)
	{
		if (((char *) lfirst(lc))[0] == '\0')
			malformed(text, "A quoted name is empty");
		out = lappend(out, makeString(pstrdup(lfirst(lc))));
	}
	return out;
}

/* column_of: piece read as one column name; what names the column in the detail. */
static char *
column_of(const char *text, const char *piece, const char *what)
{
	List	   *names = names_of(text, piece);

	if (piece[0] == '\0')
		malformed(text, "%s needs a column", what);
	if (names == NIL)
		malformed(text, "\"%s\" is not a column name", piece);
	if (list_length(names) > 1)
		malformed(text, "\"%s\" is not a column name: a column of %s is named alone",
				  piece, what);
	return strVal(linitial(names));
}

/* table_names: piece read as a table's name, schema-qualified or not. */
static List *
table_names(const char *text, const char *piece, const char *what)
{
	List	   *names = names_of(text, piece);

	if (piece[0] == '\0')
		malformed(text, "%s needs a table", what);
	if (names == NIL)
		malformed(text, "\"%s\" is not a table name", piece);
	if (list_length(names) > 3)
		malformed(text, "\"%s\" is not a table name: it has too many dotted names", piece);
	return names;
}

/* table_of: a grouped rule's table, looked up through the search_path. */
static Oid
table_of(List *names, const char *role)
{
	Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, true);
	char		kind;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s table %s does not exist", role, NameListToQuotedString(names)),
				 errhint("Name a table on the search_path, or qualify it with its schema.")));
	kind = get_rel_relkind(relid);
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s table %s is not a table", role, NameListToQuotedString(names))));
	return relid;
}

/*
 * parse_grouped: the name => value pairs of grouped; its tables are looked
 * up once every pair has been read.
 */
static void
parse_grouped(const char *text, const char *inner, ms_decl *d)
{
	List	   *members = NIL;
	List	   *assigned = NIL;
	ListCell   *lc;

	if (inner == NULL || inner[0] == '\0')
		malformed(text, "grouped needs members => and assigned => in parentheses");
	foreach(lc, split(inner))
	{
		const char *pair = lfirst(lc);
		const char *at = arrow(pair);
		List	   *pnames = at == NULL ? NIL : names_of(text, trimmed(pair, at - pair));
		char	   *param;
		char	   *value;

		if (pnames == NIL || list_length(pnames) != 1)
			malformed(text, "grouped takes name => value pairs");
		param = strVal(linitial(pnames));
		value = trimmed(at + 2, strlen(at + 2));
		if (strcmp(param, "members") == 0 && members == NIL)
			members = table_names(text, value, "members =>");
		else if (strcmp(param, "assigned") == 0 && assigned == NIL)
			assigned = table_names(text, value, "assigned =>");
		else if (strcmp(param, "group") == 0 && d->group_column == NULL)
			d->group_column = column_of(text, value, "group =>");
		else if (strcmp(param, "replica") == 0 && d->assignment_replica == NULL)
			d->assignment_replica = column_of(text, value, "replica =>");
		else
			malformed(text, "\"%s\" is not a parameter of grouped, or is given twice", param);
	}
	if (members == NIL || assigned == NIL)
		malformed(text, "grouped needs both members => and assigned =>");
	d->members = table_of(members, "member");
	d->assignments = table_of(assigned, "assignment");
}

void
ms_rule_parse(const char *text, ms_decl *d)
{
	const char *word;
	const char *word_end;
	const char *rest;
	char	   *inner = NULL;
	List	   *names;
	int			quotes = 0;

	for (const char *p = text; *p; p++)
		quotes += *p == '"';
	if (quotes % 2 != 0)
		malformed(text, "A quoted name is not closed");

	/* the word, then its arguments in parentheses, then nothing */
	for (word = text; *word && scanner_isspace(*word); word++)
		;
	word_end = scan(word, " \t\n\r\f\v(");
	rest = word_end;
	while (*rest && scanner_isspace(*rest))
		rest++;
	if (*rest == '(')
	{
		const char *close = scan(rest + 1, ")");

		if (*close == '\0')
			malformed(text, "A parenthesis is not closed");
		inner = trimmed(rest + 1, close - rest - 1);
		rest = close + 1;
		while (*rest && scanner_isspace(*rest))
			rest++;
	}
	if (*rest != '\0')
		malformed(text, "\"%s\" follows the rule", trimmed(rest, strlen(rest)));
	if (word_end == word)
		malformed(text, "It does not begin with a rule");
	names = names_of(text, trimmed(word, word_end - word));
	d->rule = MS_RULE_NONE;
	for (int r = MS_RULE_BROADCAST; r <= MS_RULE_GROUPED && list_length(names) == 1; r++)
		if (strcmp(ms_rule_name((ms_rule) r), strVal(linitial(names))) == 0)
			d->rule = (ms_rule) r;
	if (d->rule == MS_RULE_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sync rule \"%s\"",
						list_length(names) == 1 ? strVal(linitial(names)) : trimmed(word, word_end - word)),
				 errdetail("The rules are broadcast, assigned, follows and grouped; no rule (NULL) sends a row only as the parent of another."),
				 errhint(MS_RULE_HINT)));

	switch (d->rule)
	{
		case MS_RULE_BROADCAST:
			if (inner != NULL && inner[0] != '\0')
				malformed(text, "broadcast takes no column");
			break;
		case MS_RULE_ASSIGNED:
		case MS_RULE_FOLLOWS:
			if (inner == NULL || inner[0] == '\0')
				malformed(text, "%s needs a column in parentheses", ms_rule_name(d->rule));
			if (list_length(split(inner)) != 1)
				malformed(text, "%s takes one column", ms_rule_name(d->rule));
			d->rule_column = column_of(text, inner, ms_rule_name(d->rule));
			break;
		case MS_RULE_GROUPED:
			parse_grouped(text, inner, d);
			break;
		case MS_RULE_NONE:
			break;
	}
}
