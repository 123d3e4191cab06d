/*-------------------------------------------------------------------------
 * keys.h
 *	  A key part as the server spells it (docs/protocol.md 3): by the kind
 *	  of its column's type (src/shared/canon.h), whatever the settings of
 *	  the session that writes it -- the noting trigger runs in the
 *	  writer's, under its DateStyle and TimeZone.
 *-------------------------------------------------------------------------
 */
#ifndef MS_KEYS_H
#define MS_KEYS_H

#include "postgres.h"

#include "canon.h"

/* ms_key_kind_of: the kind of a key part of type (a domain's: its base type's) */
extern ms_key_kind ms_key_kind_of(Oid type);

/*
 * ms_key_spelled: whether a part of kind is spelled otherwise than its
 * type's output function prints it: a numeric without trailing zeros,
 * a date or timestamp in ISO 8601 whatever DateStyle says, a timestamptz
 * at UTC whatever TimeZone says, a citext lowercase as it compares (under
 * the database's locale).  (A time's output reads no setting.)
 */
extern bool ms_key_spelled(ms_key_kind kind);

/* ms_key_text: the spelling of value, of a type of kind ms_key_spelled */
extern char *ms_key_text(ms_key_kind kind, Datum value);

/*
 * ms_key_text_sql: an SQL expression spelling the value of expr, of type
 * type, as a key part (text): expr::text, or sync.key_text(expr).
 */
extern char *ms_key_text_sql(Oid type, const char *expr);

#endif
