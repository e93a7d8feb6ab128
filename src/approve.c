/*-------------------------------------------------------------------------
 *
 * approve.c
 *	  cscp.approve: the answer to the pending approval of a conversation.
 *
 * The decisions are cscp._approve's (PL/pgSQL, confirm.sql): which
 * approval the answer is for, its outcome, and the writes the answer makes
 * as its caller (the command's transition, an expired context recorded).
 * This file calls it directly, through the function manager rather than
 * through SQL, so that the application role need not (and cannot) execute
 * cscp._approve; then it does the things the PL/pgSQL body may not do as
 * the caller: it releases the context's slot naming the command
 * (cscp_context_release, as confirm does), keeps the answer for replay in
 * cscp.answer, and writes the evidence of an outcome that moved nothing
 * (cscp_evidence_refuse); the last two as the owner, since application
 * roles only read those tables.
 *
 * Locks, in order: the advisory lock of (tenant, 'approve', conversation,
 * message), the context row, then the command row (all taken by the body).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"

/* The number of arguments of cscp.approve and of its body cscp._approve. */
#define APPROVE_NARGS 6

/* Field name of the record rec, and whether it is null. */
static Datum
field(HeapTupleHeader rec, const char *name, bool *isnull)
{
	return GetAttributeByName(rec, name, isnull);
}

/* The context row (tenant, context_id) as the caller sees it, into *ctx and *desc; false if none. */
static bool
read_context(Datum tenant, Datum context_id, HeapTuple *ctx, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {tenant, context_id};

	cscp_spi_plan(&plan, "SELECT * FROM cscp.context x WHERE x.tenant_id = $1 AND x.context_id = $2",
				  2, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the context of an approval");
	if (SPI_processed != 1)
		return false;
	*ctx = SPI_copytuple(SPI_tuptable->vals[0]);
	*desc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	return true;
}

PG_FUNCTION_INFO_V1(cscp_approve);

/*
 * cscp.approve(tenant_id text, conversation_id text, approver_id text,
 *              message_id text, decision boolean, command_id uuid)
 * RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
 */
Datum
cscp_approve(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[APPROVE_NARGS] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, UUIDOID};
	ReturnSetInfo *rsinfo;
	MemoryContext callerctx = CurrentMemoryContext;
	FmgrInfo	flinfo;
	Oid			body;
	Datum		result;
	HeapTupleHeader rec;
	Datum		values[3];
	bool		nulls[3];
	Datum		context_id;
	bool		no_context;
	Datum		release;
	bool		no_release;
	bool		isnull;
	CscpAnswer	a = {0};

	LOCAL_FCINFO(call, APPROVE_NARGS);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	/* The decisions, called as a function, not as SQL: no EXECUTE privilege is asked for. */
	body = LookupFuncName(list_make2(makeString("cscp"), makeString("_approve")), APPROVE_NARGS,
						  argtypes, false);
	fmgr_info(body, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, APPROVE_NARGS, PG_GET_COLLATION(), NULL, NULL);
	for (int i = 0; i < APPROVE_NARGS; i++)
		call->args[i] = fcinfo->args[i];
	result = FunctionCallInvoke(call);
	if (call->isnull)
		elog(ERROR, "cscp._approve returned null");
	rec = DatumGetHeapTupleHeader(result);

	values[0] = field(rec, "o_outcome", &nulls[0]);
	values[1] = field(rec, "o_command_id", &nulls[1]);
	values[2] = field(rec, "o_context_id", &nulls[2]);
	context_id = values[2];
	no_context = nulls[2];
	release = field(rec, "o_release_command", &no_release);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* The answer kept for replay, unless it is a replay. */
	a.tenant_id = PG_GETARG_TEXT_PP(0);
	a.conversation_id = PG_GETARG_TEXT_PP(1);
	a.answered_by = PG_GETARG_TEXT_PP(2);
	a.message_id = PG_GETARG_TEXT_PP(3);
	a.kind = "approve";
	a.outcome = TextDatumGetCString(values[0]);
	a.command_id = values[1];
	a.has_command = !nulls[1];
	a.context_id = values[2];
	a.has_context = !nulls[2];
	if (!DatumGetBool(field(rec, "o_replayed", &isnull)) || isnull)
		cscp_answer_record(&a);

	/* The context's slot naming the command released, as every answer does. */
	if (!no_release && !no_context)
	{
		HeapTuple	ctx;
		TupleDesc	desc;
		Datum		why = field(rec, "o_release_why", &isnull);

		if (read_context(fcinfo->args[0].value, context_id, &ctx, &desc))
			cscp_context_release(ctx, desc, release, isnull ? NULL : TextDatumGetCString(why));
	}

	/* An outcome that moved nothing: its invalid_transition_attempt, written as the owner. */
	if (DatumGetBool(field(rec, "o_refusal", &isnull)) && !isnull)
	{
		Datum		detail = field(rec, "o_detail", &isnull);
		Jsonb	   *d = isnull ? NULL : DatumGetJsonbP(detail);
		Datum		expires = field(rec, "o_context_expires_at", &isnull);

		cscp_answer_refusal(&a, "authorized", isnull ? 0 : DatumGetTimestampTz(expires), d);
	}
	SPI_finish();

	{
		MemoryContext old = MemoryContextSwitchTo(callerctx);

		for (int i = 0; i < 3; i++)
			if (!nulls[i])
				values[i] = datumCopy(values[i], false, i == 0 ? -1 : UUID_LEN);
		MemoryContextSwitchTo(old);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
