/*-------------------------------------------------------------------------
 * hlc_decl.c
 *	  version => 'hlc' (docs/protocol.md 12): a record whose version column
 *	  the replicas stamp themselves with their hybrid logical clock.
 *
 *	  sync.mirror's version is a column name; three spellings are read:
 *	    'hlc'       the bigint column named hlc, stamped by the clock
 *	    'hlc(col)'  the bigint column col, stamped by the clock
 *	    '"hlc"'     (or any double-quoted name) that column as the host
 *	                stamps it, no clock: how a column called hlc is kept a
 *	                plain version
 *	  anything else is a plain version column, as before.  sync.tables
 *	  keeps the column name in version and the clock in hlc.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "spi_check.h"
#include "updated.h"
#include "validate_int.h"

void
ms_hlc_version_arg(ms_decl *d)
{
	const char *v = d->version;
	size_t		n = v ? strlen(v) : 0;

	d->hlc = false;
	if (v == NULL)
		return;
	if (strcmp(v, "hlc") == 0)
		d->hlc = true;
	else if (n > 5 && strncmp(v, "hlc(", 4) == 0 && v[n - 1] == ')')
	{
		d->hlc = true;
		d->version = pnstrdup(v + 4, n - 5);
	}
	else if (n > 2 && v[0] == '"' && v[n - 1] == '"')
		d->version = pnstrdup(v + 1, n - 2);
}

/* whether sync.tables has its hlc column (a catalog not yet updated has not) */
static bool
catalog_has_hlc(void)
{
	return ms_catalog_has_column("tables", "hlc");
}

const char *
ms_hlc_decl_read_sql(void)
{
	return catalog_has_hlc() ? ", t.hlc" : ", false";
}

void
ms_hlc_decl_store(const ms_decl *d)
{
	Oid			types[2] = {INT4OID, BOOLOID};
	Datum		values[2] = {Int32GetDatum(d->id), BoolGetDatum(d->hlc)};

	if (!catalog_has_hlc())
	{
		if (d->hlc)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("version => 'hlc' needs the extension updated"),
					 errdetail("The catalog of magic_sync is older than its library: sync.tables has no hlc column."),
					 errhint("ALTER EXTENSION magic_sync UPDATE.")));
		return;
	}
	ms_spi_check_one(SPI_execute_with_args("UPDATE sync.tables SET hlc = $2 WHERE id OPERATOR(pg_catalog.=) $1",
										   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "storing the declaration's clock failed");
}

/*
 * ms_v_check_hlc: an hlc version is a bigint column (NOT NULL is checked as
 * for every version): the clock is (ms << 16) | counter, a signed 64-bit
 * integer that orders as the stamps do.
 */
void
ms_v_check_hlc(ms_vcx *v)
{
	const ms_decl *d = v->d;
	Form_pg_attribute att;

	if (!d->hlc || d->version == NULL)
		return;
	att = ms_v_att(v, d->version);
	if (att == NULL && v->declaring)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_UNDEFINED_COLUMN,
			.problem = "hlc version missing",
			.message = psprintf("version => 'hlc' stamps a bigint column \"%s\": %s has none", d->version, v->tabname),
			.why = "The replicas stamp the version column themselves with their hybrid logical clock, (ms << 16) | counter.",
			.hint = strcmp(d->version, "hlc") == 0 ?
			psprintf("ALTER TABLE %s ADD COLUMN hlc bigint NOT NULL DEFAULT 0, or name the column: version => 'hlc(col)'.",
					 v->tabname) :
			psprintf("ALTER TABLE %s ADD COLUMN %s bigint NOT NULL DEFAULT 0.", v->tabname, quote_identifier(d->version))
		});
	if (att != NULL && getBaseType(att->atttypid) != INT8OID)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "hlc version not bigint",
			.message = psprintf("version => 'hlc' needs a bigint column: \"%s\" of %s is %s", d->version,
								v->tabname, format_type_be(att->atttypid)),
			.why = "The replicas stamp the version column themselves with their hybrid logical clock, (ms << 16) | counter.",
			.hint = strcmp(d->version, "hlc") == 0 ?
			psprintf("ALTER TABLE %s ALTER COLUMN hlc TYPE bigint; or, to order by the column as the host stamps it,"
					 " version => '\"hlc\"'.", v->tabname) :
			psprintf("ALTER TABLE %s ALTER COLUMN %s TYPE bigint.", v->tabname, quote_identifier(d->version)),
			.detail = psprintf("Version column %s of %s is no longer bigint.", d->version, d->name)
		});
}
