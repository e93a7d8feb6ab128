/*-------------------------------------------------------------------------
 *
 * inspect.c
 *	  Operators' reads: the redacted live contexts and command lifecycles,
 *	  filtered to the tenants the asking role may see and audited, and
 *	  cscp.check_invariants filtered likewise.
 *
 * Every operator read of context data goes through cscp_inspect: the views
 * cscp.active_context and cscp.command_lifecycle are SELECTs from the
 * functions below, and the redacting views they read (cscp._active_context,
 * cscp._command_lifecycle) are granted to nobody.  These functions are not
 * SECURITY DEFINER: the role that asked is GetUserId() on entry (the
 * current_user of the query, not the session's login role).  They decide
 * with tenancy.c which tenants it may see (42501 for a tenant named by
 * argument or by cscp.tenant_id that it may not), then read and record, as
 * the owner of cscp's tables, in one statement: every row shown, and one row
 * of cscp.inspection_log per (tenant, conversation) shown, naming the role
 * and the view.  A read through a view is recorded for every row the
 * function produced, before any WHERE of the query around it.
 *
 * The audit row is transactional: a read in a transaction that rolls back
 * leaves none, as any row would.  So each read also writes one LOG line to
 * the server log, which no rollback takes back (as pgaudit does).  A read
 * in a read-only transaction fails, since its audit row cannot be written.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/* The text argument argno, or NULL. */
static text *
arg_text(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : PG_GETARG_TEXT_PP(argno);
}

/*
 * The tenants the current role may see as an operator (NULL: any); 42501
 * when the tenant asked for (NULL: none) is not one of them.
 */
static ArrayType *
operator_tenants(text *tenant)
{
	if (tenant != NULL &&
		!cscp_tenancy_allows(VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant), CSCP_ROLE_OPERATOR))
		cscp_tenancy_refuse(text_to_cstring(tenant), CSCP_ROLE_OPERATOR);
	return cscp_tenancy_tenants(CSCP_ROLE_OPERATOR);
}

/*
 * The saved plan in *plan that reads the redacting view source and records
 * the read: parameters allowed tenants, tenant, conversation, session
 * tenant (each NULL: any), asker and what; with log_empty, a read of one
 * conversation that shows nothing is recorded too.
 */
static void
inspect_plan(SPIPlanPtr *plan, const char *source, bool log_empty)
{
	static const Oid argtypes[6] = {TEXTARRAYOID, TEXTOID, TEXTOID, TEXTOID, NAMEOID, TEXTOID};

	if (*plan != NULL)
		return;
	cscp_spi_plan(plan, psprintf("WITH shown AS MATERIALIZED ("
								 "  SELECT v.* FROM %s v"
								 "   WHERE ($1::pg_catalog.text[] IS NULL OR v.tenant_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]))"
								 "     AND ($2::pg_catalog.text IS NULL OR v.tenant_id OPERATOR(pg_catalog.=) $2::pg_catalog.text)"
								 "     AND ($3::pg_catalog.text IS NULL OR v.conversation_id OPERATOR(pg_catalog.=) $3::pg_catalog.text)"
								 "     AND ($4::pg_catalog.text IS NULL OR v.tenant_id OPERATOR(pg_catalog.=) $4::pg_catalog.text)),"
								 " logged AS ("
								 "  INSERT INTO cscp.inspection_log"
								 "         (tenant_id, inspector, conversation_id, rows_shown, source)"
								 "  SELECT s.tenant_id, $5::pg_catalog.name, s.conversation_id, pg_catalog.count(*)::int, $6::pg_catalog.text"
								 "    FROM shown s GROUP BY s.tenant_id, s.conversation_id"
								 "  UNION ALL"
								 "  SELECT $2::pg_catalog.text, $5::pg_catalog.name, $3::pg_catalog.text, 0, $6::pg_catalog.text"
								 "   WHERE %s AND $2::pg_catalog.text IS NOT NULL AND $3::pg_catalog.text IS NOT NULL"
								 "     AND NOT EXISTS (SELECT FROM shown))"
								 " SELECT s.* FROM shown s",
								 source, log_empty ? "true" : "false"),
				  6, argtypes);
}

/*
 * Return, as a materialized set, the rows of the redacting view source
 * that the asking role may see, narrowed to the tenant and conversation
 * arguments (NULL: any) and to cscp.tenant_id when it is set, and record
 * the read as what.  With log_empty, a read of one conversation that shows
 * nothing is recorded too.
 */
static void
cscp_inspect(FunctionCallInfo fcinfo, SPIPlanPtr *plan, const char *source,
			 const char *what, bool log_empty)
{
	text	   *tenant = arg_text(fcinfo, 0);
	text	   *conversation = arg_text(fcinfo, 1);
	char	   *asker = GetUserNameFromId(GetUserId(), false);
	const char *session;
	ArrayType  *allowed;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CscpOwnerScope scope;
	Datum		args[6];
	char		nulls[] = "      ";
	StringInfoData tenants;
	uint64		n;

	if (tenant != NULL)
		cscp_check_id("tenant_id", tenant);
	if (conversation != NULL)
		cscp_check_id("conversation_id", conversation);
	allowed = operator_tenants(tenant);
	session = cscp_session_tenant(CSCP_ROLE_OPERATOR);

	InitMaterializedSRF(fcinfo, 0);

	args[0] = allowed ? PointerGetDatum(allowed) : (Datum) 0;
	nulls[0] = allowed ? ' ' : 'n';
	args[1] = tenant ? PointerGetDatum(tenant) : (Datum) 0;
	nulls[1] = tenant ? ' ' : 'n';
	args[2] = conversation ? PointerGetDatum(conversation) : (Datum) 0;
	nulls[2] = conversation ? ' ' : 'n';
	args[3] = session ? CStringGetTextDatum(session) : (Datum) 0;
	nulls[3] = session ? ' ' : 'n';
	args[4] = DirectFunctionCall1(namein, CStringGetDatum(asker));
	args[5] = CStringGetTextDatum(what);

	initStringInfo(&tenants);
	cscp_owner_enter("context", &scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	inspect_plan(plan, source, log_empty);
	if (SPI_execute_plan(*plan, args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading %s failed", source);
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		char	   *t = SPI_getvalue(row, SPI_tuptable->tupdesc, 1);

		tuplestore_puttuple(rsinfo->setResult, row);
		/* the tenants shown, for the log line (rows come grouped often enough) */
		if (t != NULL && (i == 0 || strcmp(t, SPI_getvalue(SPI_tuptable->vals[i - 1],
															 SPI_tuptable->tupdesc, 1)) != 0))
			appendStringInfo(&tenants, "%s\"%s\"", tenants.len > 0 ? ", " : "", t);
	}
	SPI_finish();
	cscp_owner_leave(&scope);

	ereport(LOG,
			(errmsg_plural("cscp: role \"%s\" read %lu row of cscp.%s",
						   "cscp: role \"%s\" read %lu rows of cscp.%s",
						   (unsigned long) n, asker, (unsigned long) n, what),
			 errdetail_log("Tenants shown: %s. Tenant asked: %s. Conversation asked: %s.",
						   n > 0 ? tenants.data : "none",
						   tenant ? text_to_cstring(tenant) : session ? session : "any",
						   conversation ? text_to_cstring(conversation) : "any")));
}

PG_FUNCTION_INFO_V1(cscp_inspect_active_context);

/*
 * cscp.inspect_active_context(tenant_id text DEFAULT NULL, conversation_id
 * text DEFAULT NULL) RETURNS SETOF cscp._active_context: the view
 * cscp.active_context reads it.
 */
Datum
cscp_inspect_active_context(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;

	cscp_inspect(fcinfo, &plan, "cscp._active_context", "active_context", false);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(cscp_show_active_context);

/*
 * cscp.show_active_context(tenant_id text, conversation_id text) RETURNS
 * SETOF cscp.active_context: one conversation's live contexts, recorded
 * even when there are none.
 */
Datum
cscp_show_active_context(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;

	cscp_check_id("tenant_id", arg_text(fcinfo, 0));
	cscp_check_id("conversation_id", arg_text(fcinfo, 1));
	cscp_inspect(fcinfo, &plan, "cscp._active_context", "show_active_context", true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(cscp_inspect_command_lifecycle);

/*
 * cscp.inspect_command_lifecycle(tenant_id text DEFAULT NULL,
 * conversation_id text DEFAULT NULL) RETURNS SETOF cscp._command_lifecycle:
 * the view cscp.command_lifecycle reads it.
 */
Datum
cscp_inspect_command_lifecycle(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;

	cscp_inspect(fcinfo, &plan, "cscp._command_lifecycle", "command_lifecycle", false);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(cscp_check_invariants);

/*
 * cscp.check_invariants(tenant_id text DEFAULT NULL) RETURNS TABLE(kind,
 * tenant_id, object_id, detail): cscp._check_invariants, as the owner, for
 * the tenants the asking role may see as an operator.
 */
Datum
cscp_check_invariants(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, TEXTARRAYOID};
	text	   *tenant = arg_text(fcinfo, 0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *allowed;
	CscpOwnerScope scope;
	Datum		args[2];
	char		nulls[] = "  ";

	if (tenant != NULL)
		cscp_check_id("tenant_id", tenant);
	allowed = operator_tenants(tenant);

	InitMaterializedSRF(fcinfo, 0);
	args[0] = tenant ? PointerGetDatum(tenant) : (Datum) 0;
	nulls[0] = tenant ? ' ' : 'n';
	args[1] = allowed ? PointerGetDatum(allowed) : (Datum) 0;
	nulls[1] = allowed ? ' ' : 'n';

	cscp_owner_enter("context", &scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT i.* FROM cscp._check_invariants($1::pg_catalog.text) i"
				  " WHERE $2::pg_catalog.text[] IS NULL OR i.tenant_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])",
				  2, argtypes);
	if (SPI_execute_plan(plan, args, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cscp._check_invariants failed");
	for (uint64 i = 0; i < SPI_processed; i++)
		tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	SPI_finish();
	cscp_owner_leave(&scope);
	return (Datum) 0;
}
