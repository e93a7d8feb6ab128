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

/*
 * Keep the outcome of an approval message for replay: its cscp.answer row,
 * written as the owner.  args: tenant, conversation, message id, approver,
 * outcome, command id, context id (the last two may be null).
 */
static void
keep_answer(Datum *args, const bool *isnull)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[8] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, UUIDOID,
	UUIDOID, TIMESTAMPTZOID};
	char		nulls[8];
	CscpOwnerScope owner;

	for (int i = 0; i < 8; i++)
		nulls[i] = isnull[i] ? 'n' : ' ';
	cscp_owner_enter("answer", &owner);
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id,"
				  "                         answered_by, outcome, command_id, context_id, created_at)"
				  " VALUES ($1, $2, 'approve', $3, $4, $5, $6, $7, $8)",
				  8, argtypes);
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not keep the answer of an approval");
	cscp_owner_leave(&owner);
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
	if (!DatumGetBool(field(rec, "o_replayed", &isnull)) || isnull)
	{
		Datum		a[8];
		bool		an[8] = {false, false, false, false, false, nulls[1], nulls[2], false};

		a[0] = PG_GETARG_DATUM(0);
		a[1] = PG_GETARG_DATUM(1);
		a[2] = PG_GETARG_DATUM(3);
		a[3] = PG_GETARG_DATUM(2);
		a[4] = values[0];
		a[5] = values[1];
		a[6] = values[2];
		a[7] = TimestampTzGetDatum(cscp_now());
		keep_answer(a, an);
	}

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
		CscpEvidence e = {0};
		Datum		message_id = PG_GETARG_DATUM(3);
		Datum		detail = field(rec, "o_detail", &isnull);

		e.tenant_id = TextDatumGetCString(PG_GETARG_DATUM(0));
		e.conversation_id = TextDatumGetCString(PG_GETARG_DATUM(1));
		e.to_state = "authorized";
		e.reason_code = TextDatumGetCString(values[0]);
		e.message_ids = construct_array(&message_id, 1, TEXTOID, -1, false, TYPALIGN_INT);
		e.detail = isnull ? NULL : DatumGetJsonbP(detail);
		if (!no_context)
		{
			JsonbParseState *st = NULL;
			Datum		expires = field(rec, "o_context_expires_at", &isnull);

			pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
			cscp_jsonb_push_text(&st, "context_id",
								 DatumGetCString(DirectFunctionCall1(uuid_out, context_id)));
			cscp_jsonb_push_text(&st, "expires_at",
								 isnull ? NULL : cscp_utc_iso(DatumGetTimestampTz(expires)));
			e.context_ref = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
		}
		cscp_evidence_refuse(&e, values[1], !nulls[1]);
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
