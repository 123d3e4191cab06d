/*-------------------------------------------------------------------------
 * validate.h
 *	  The one validator: a declaration against pg_catalog, resolved into
 *	  the ms_table the relay works from.  sync.mirror runs it before it
 *	  stores a declaration, the relay (ms_catalog_tables) and sync.check
 *	  (ms_catalog_read) every time they read one.
 *-------------------------------------------------------------------------
 */
#ifndef MS_VALIDATE_H
#define MS_VALIDATE_H

#include "table.h"

/*
 * ms_validate: d checked against its table and described as an ms_table;
 * NULL when its table is gone or is no table.  decls is every declaration,
 * d among them (with id 0 while it is being declared): what a foreign key
 * may point at.  Declaring, the first problem is sync.mirror's ereport (its
 * own errcode); otherwise each is appended to *problems, and the table is
 * described as far as it can be.  SPI must be connected.
 */
extern ms_table *ms_validate(const ms_decl *d, List *decls, bool declaring, List **problems);

/*
 * ms_decl_fix: what a new declaration d fixes for good and validation
 * compares the table with later: its mirrored columns, their types and (in
 * the proto codec) field numbers, and its foreign keys whose columns travel
 * with the declared tables they point at (d itself, id 0, among decls).
 */
extern void ms_decl_fix(ms_decl *d, List *decls);

/*
 * ms_member_keys: for each foreign key of the member table members that
 * references exactly the key of relid (nkey columns key), its columns in
 * that key's order: a List of char **.
 */
extern List *ms_member_keys(Oid members, Oid relid, int nkey, char **key);

#endif
