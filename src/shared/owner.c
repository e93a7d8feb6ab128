/*-------------------------------------------------------------------------
 *
 * owner.c
 *	  Running a piece of C code with the rights of the owner of cscp's
 *	  tables, safely.
 *
 * Evidence, events and erasures are written by cscp's C code as the owner
 * of the tables (application roles may not write them).  Inside such a
 * section every query runs with search_path = pg_catalog, pg_temp, set at a
 * GUC nest level of its own: the caller's search_path could otherwise put a
 * schema of its own before pg_catalog and have an operator or function it
 * wrote run with the owner's rights (CVE-2018-1058).  Saved plans prepared
 * inside a section are re-analysed only when the search_path differs, so
 * they keep resolving names in pg_catalog.
 *
 * A section is marked as PostgreSQL marks its own foreign-key checks run as
 * a table's owner (ri_triggers.c): a local change of user id with
 * SECURITY_NOFORCE_RLS.  cscp's tables do not force row-level security on
 * their owner, so the mark changes no read; it lets a trigger tell cscp's
 * own write as the owner, which a command trigger has judged already, from
 * any other (cscp_owner_writing): a SECURITY DEFINER function changes the
 * user id without it.
 *
 * On an error the transaction's abort restores both the user and the
 * settings; cscp_owner_leave is for the normal path only.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* Become the owner of cscp.relname, with a search_path of pg_catalog only. */
void
cscp_owner_enter(const char *relname, CscpOwnerScope *scope)
{
	Oid			relid = cscp_relation_oid(relname, false);
	HeapTuple	tp;
	Oid			owner;

	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tp))->relowner;
	ReleaseSysCache(tp);

	GetUserIdAndSecContext(&scope->save_userid, &scope->save_sec_context);
	SetUserIdAndSecContext(owner, scope->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_NOFORCE_RLS);
	scope->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

/*
 * Whether the row being written to rel is cscp's own write as its owner,
 * from a section cscp_owner_enter opened: the owner's, with the section's
 * mark.  A superuser's typed SQL and a SECURITY DEFINER function's are not.
 */
bool
cscp_owner_writing(Relation rel)
{
	return InLocalUserIdChange() && InNoForceRLSOperation() &&
		GetUserId() == rel->rd_rel->relowner;
}

/* Back to the caller's user and search_path. */
void
cscp_owner_leave(CscpOwnerScope *scope)
{
	AtEOXact_GUC(true, scope->nestlevel);
	SetUserIdAndSecContext(scope->save_userid, scope->save_sec_context);
}

/*
 * Run one statement (plan, prepared from sql the first time) as the owner
 * of cscp.relname; returns the rows it processed.  what names the
 * statement in the error raised when SPI does not answer expect.  With
 * latest, a write that must reach every row committed so far, as
 * PostgreSQL's foreign keys run their cascades (ri_triggers.c): under
 * REPEATABLE READ or SERIALIZABLE with the latest snapshot and the
 * transaction's as the cross-check, so that writing a row this
 * transaction's snapshot does not see fails to serialize (40001) instead
 * of passing it by; under READ COMMITTED each statement's snapshot is new
 * anyway.
 */
static uint64
owner_exec(const char *relname, SPIPlanPtr *plan, const char *sql, int nargs,
		   const Oid *argtypes, Datum *args, const char *nulls, int expect,
		   const char *what, bool latest)
{
	CscpOwnerScope owner;
	uint64		processed;
	Snapshot	snapshot = InvalidSnapshot;
	Snapshot	crosscheck = InvalidSnapshot;

	cscp_owner_enter(relname, &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(plan, sql, nargs, argtypes);
	if (latest && IsolationUsesXactSnapshot())
	{
		CommandCounterIncrement();	/* this transaction's own writes seen */
		snapshot = GetLatestSnapshot();
		crosscheck = GetTransactionSnapshot();
	}
	if (SPI_execute_snapshot(*plan, args, nulls, snapshot, crosscheck,
							 false, true, 0) != expect)
		elog(ERROR, "could not %s", what);
	processed = SPI_processed;
	SPI_finish();
	cscp_owner_leave(&owner);
	return processed;
}

uint64
cscp_owner_exec(const char *relname, SPIPlanPtr *plan, const char *sql, int nargs,
				const Oid *argtypes, Datum *args, const char *nulls, int expect,
				const char *what)
{
	return owner_exec(relname, plan, sql, nargs, argtypes, args, nulls, expect, what, false);
}

/* cscp_owner_exec of a write that must reach every row committed so far. */
uint64
cscp_owner_exec_latest(const char *relname, SPIPlanPtr *plan, const char *sql, int nargs,
					   const Oid *argtypes, Datum *args, const char *nulls, int expect,
					   const char *what)
{
	return owner_exec(relname, plan, sql, nargs, argtypes, args, nulls, expect, what, true);
}
