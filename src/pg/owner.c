/*-------------------------------------------------------------------------
 * owner.c
 *	  Running a user's code as its owner (owner.h), and the extension's own
 *	  statements checked as the role that prepared them.
 *
 * The switch is matview.c's: GetUserIdAndSecContext, SetUserIdAndSecContext
 * (owner, saved | SECURITY_RESTRICTED_OPERATION), NewGUCNestLevel with
 * search_path pinned (what PostgreSQL 17 calls RestrictSearchPath), and the
 * reverse.  On an error nothing needs undoing here: aborting the
 * (sub)transaction restores the user and the GUCs, as it does for
 * fmgr_security_definer.
 *
 * The marking.  A statement prepared by ms_owner_prepare is analysed by
 * PostgreSQL again whenever a relation it names changes (an ANALYZE, DDL), and
 * that may happen as it runs as a table's owner.  So the mark is on the plan:
 * its CachedPlanSource parses with our parser setup, whose parameter hook
 * (ms_paramref, the fixed parameters as PostgreSQL's own) is found by the
 * post-parse-analysis hook on the ParseState -- an address no SQL can put
 * there.  The first analysis, inside SPI_prepare, runs no user code: while it
 * does, every analysis is ours.  The analysed tree is marked before the
 * rewriter expands views, rules and row security, so only the relations our
 * SQL names are checked as the preparing role; those of an owner's view keep
 * the view owner, and those of an owner's rule the rule's.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parse_node.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/syscache.h"

#include "owner.h"

#define PINNED_SEARCH_PATH "pg_catalog, pg_temp"

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;

/* While SPI_prepare analyses a statement of ours: the role it is checked as. */
static Oid	preparing_self = InvalidOid;

/* What a marked plan source parses with: its parameters, and as whom. */
typedef struct ms_parse_arg
{
	CachedPlanSource *source;
	Oid			self;
} ms_parse_arg;

static void
pin_search_path(ms_as_owner *s)
{
	s->nest = NewGUCNestLevel();
	(void) set_config_option("search_path", PINNED_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/* become: from here owner (or, InvalidOid, who runs now), sec_flags added, search_path pinned */
static void
become(ms_as_owner *s, Oid owner, int sec_flags)
{
	GetUserIdAndSecContext(&s->save_user, &s->save_sec);
	if (OidIsValid(owner))
		SetUserIdAndSecContext(owner, s->save_sec | sec_flags);
	pin_search_path(s);
	s->active = true;
}

void
ms_owner_begin(ms_as_owner *s, Oid relid)
{
	HeapTuple	tup;
	Oid			owner;

	s->active = false;
	if (!OidIsValid(relid))
		return;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	become(s, owner, SECURITY_RESTRICTED_OPERATION);
}

void
ms_owner_end(ms_as_owner *s)
{
	if (!s->active)
		return;
	/* whatever the owner's code set goes with it */
	AtEOXact_GUC(false, s->nest);
	SetUserIdAndSecContext(s->save_user, s->save_sec);
	s->active = false;
}

void
ms_definer_begin(FunctionCallInfo fcinfo, ms_as_owner *s)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	become(s, owner, SECURITY_LOCAL_USERID_CHANGE);
}

void
ms_pinned_begin(ms_as_owner *s)
{
	become(s, InvalidOid, 0);
}

/* ---- the extension's own statements ---------------------------------- */

/* ours: a relation of schema sync, or of this session's temporary schema */
static bool
ours(Oid relid)
{
	Oid			nsp = get_rel_namespace(relid);

	return OidIsValid(nsp) && (isTempNamespace(nsp) || nsp == get_namespace_oid("sync", true));
}

/* mark: every relation of ours the tree names is checked as *self */
static bool
mark(Node *node, void *self)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, mark, self, QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && ours(rte->relid))
			rte->checkAsUser = *(Oid *) self;
		return false;
	}
	return expression_tree_walker(node, mark, self);
}

/* ms_paramref: $n of a marked statement, of the type it was prepared with */
static Node *
ms_paramref(ParseState *pstate, ParamRef *pref)
{
	ms_parse_arg *a = pstate->p_ref_hook_state;
	int			n = pref->number;
	Param	   *param;

	if (n <= 0 || n > a->source->num_params || !OidIsValid(a->source->param_types[n - 1]))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_PARAMETER),
				 errmsg("there is no parameter $%d", n),
				 parser_errposition(pstate, pref->location)));
	param = makeNode(Param);
	param->paramkind = PARAM_EXTERN;
	param->paramid = n;
	param->paramtype = a->source->param_types[n - 1];
	param->paramtypmod = -1;
	param->paramcollid = get_typcollation(param->paramtype);
	param->location = pref->location;
	return (Node *) param;
}

/* the parser setup of a marked plan source, when it is analysed again */
static void
parser_setup(ParseState *pstate, void *arg)
{
	pstate->p_paramref_hook = ms_paramref;
	pstate->p_ref_hook_state = arg;
}

static void
post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	if (OidIsValid(preparing_self))
		(void) mark((Node *) query, &preparing_self);
	else if (pstate->p_paramref_hook == ms_paramref)
		(void) mark((Node *) query, &((ms_parse_arg *) pstate->p_ref_hook_state)->self);
}

SPIPlanPtr
ms_owner_prepare(const char *sql, int nargs, Oid *types, Oid self)
{
	return ms_owner_prepare_cursor(sql, nargs, types, self, 0);
}

SPIPlanPtr
ms_owner_prepare_cursor(const char *sql, int nargs, Oid *types, Oid self, int options)
{
	SPIPlanPtr	plan;
	ListCell   *lc;

	Assert(!OidIsValid(preparing_self));
	preparing_self = self;
	PG_TRY();
	{
		plan = SPI_prepare_cursor(sql, nargs, types, options);
	}
	PG_FINALLY();
	{
		preparing_self = InvalidOid;
	}
	PG_END_TRY();
	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *source = lfirst(lc);
		ms_parse_arg *a = MemoryContextAlloc(source->context, sizeof(ms_parse_arg));

		a->source = source;
		a->self = self;
		source->parserSetup = parser_setup;
		source->parserSetupArg = a;
	}
	return plan;
}

void
ms_owner_init(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = post_parse_analyze;
}
