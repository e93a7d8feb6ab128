/*-------------------------------------------------------------------------
 *
 * command_api.c
 *	  cscp.command_transition and the context release it shares with the
 *	  answers (confirm, approve): the calls a command makes most often once
 *	  it exists, in C with saved plans rather than in PL/pgSQL.
 *
 * The rules themselves are not here: the transition table and the ordering
 * invariants are command_fsm.c's, enforced by its trigger on every write;
 * this file asks the same checks first (cscp_command_refusal_of) so that a
 * refused transition is returned with accepted = false and recorded as an
 * invalid_transition_attempt, instead of raised.
 *
 * Every query runs with the caller's rights, so row-level security keeps a
 * caller to its own tenant.  Locks, in the order used everywhere: the
 * command's context row, then the command row (both FOR UPDATE); an
 * approval request then rejects the approval it supersedes, and an executed
 * compensation locks and compensates its target.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

/* The command_id of a pending slot (an object), if it is key in slots. */
static bool
slot_names_command(Jsonb *slots, const char *key, const char *command_id)
{
	JsonbValue *v = cscp_jsonb_get(slots, key);
	JsonbValue *id;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return false;
	id = getKeyJsonValueFromContainer(v->val.binary.data, "command_id", strlen("command_id"), NULL);
	return id != NULL && id->type == jbvString &&
		id->val.string.len == (int) strlen(command_id) &&
		memcmp(id->val.string.val, command_id, id->val.string.len) == 0;
}

/* Whether slots still holds a pending question under key (an object). */
static bool
slot_pending(Jsonb *slots, const char *key)
{
	JsonbValue *v = cscp_jsonb_get(slots, key);

	return v != NULL && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

/*
 * Clear the pending_confirmation and pending_approval slots of the context
 * row ctx (a whole cscp.context row) that name command_id, and bring the
 * context back to active, with reason why when given, once nothing is
 * pending any more.  A use of the context: its TTL slides, and the command
 * becomes its last one.  Expired or closed contexts stay as they are.
 * The caller is connected to SPI and holds the context's row lock.
 */
void
cscp_context_release(HeapTuple ctx, TupleDesc desc, Datum command_id, const char *why)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[6] = {TEXTOID, UUIDOID, JSONBOID, BOOLOID, TEXTOID, UUIDOID};
	bool		isnull;
	char	   *status = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "status"));
	Datum		expires = heap_getattr(ctx, cscp_column(desc, "cscp.context", "expires_at"),
									   desc, &isnull);
	Jsonb	   *slots;
	char	   *id;
	bool		changed = false;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	if (status == NULL ||
		(strcmp(status, "active") != 0 && strcmp(status, "pending") != 0 &&
		 strcmp(status, "blocked") != 0) ||
		DatumGetTimestampTz(expires) <= cscp_now())
		return;

	slots = DatumGetJsonbP(heap_getattr(ctx, cscp_column(desc, "cscp.context", "slots"),
										desc, &isnull));
	id = DatumGetCString(DirectFunctionCall1(uuid_out, command_id));
	if (slot_names_command(slots, "pending_confirmation", id))
	{
		slots = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(slots),
												   CStringGetTextDatum("pending_confirmation")));
		changed = true;
	}
	if (slot_names_command(slots, "pending_approval", id))
	{
		slots = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(slots),
												   CStringGetTextDatum("pending_approval")));
		changed = true;
	}
	if (!changed)
		return;

	args[0] = heap_getattr(ctx, cscp_column(desc, "cscp.context", "tenant_id"), desc, &isnull);
	args[1] = heap_getattr(ctx, cscp_column(desc, "cscp.context", "context_id"), desc, &isnull);
	args[2] = JsonbPGetDatum(slots);
	args[3] = BoolGetDatum(slot_pending(slots, "pending_confirmation") ||
						   slot_pending(slots, "pending_approval"));
	if (why != NULL)
		args[4] = CStringGetTextDatum(why);
	else
		nulls[4] = 'n';
	args[5] = command_id;
	cscp_spi_plan(&plan,
				  "UPDATE cscp.context x"
				  "   SET slots = $3,"
				  "       status = CASE WHEN x.status = 'pending' AND NOT $4"
				  "                     THEN 'active'::cscp.context_status ELSE x.status END,"
				  "       reason = coalesce($5, x.reason),"
				  "       last_command_id = $6,"
				  "       expires_at = cscp._context_touch(x)"
				  " WHERE x.tenant_id = $1 AND x.context_id = $2",
				  6, argtypes);
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not release context slots of command %s", id);
}

PG_FUNCTION_INFO_V1(cscp_context_release_sql);

/*
 * cscp._context_release(c cscp.context, command_id uuid, why text) RETURNS
 * void: cscp_context_release for PL/pgSQL callers holding the row lock.
 */
Datum
cscp_context_release_sql(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec;
	HeapTupleData tuple;
	TupleDesc	desc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	rec = PG_GETARG_HEAPTUPLEHEADER(0);
	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(rec), HeapTupleHeaderGetTypMod(rec));
	tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = rec;

	/* A null context (no row) has a null context_id: nothing to release. */
	if (heap_attisnull(&tuple, cscp_column(desc, "cscp.context", "context_id"), desc))
	{
		ReleaseTupleDesc(desc);
		PG_RETURN_VOID();
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_context_release(&tuple, desc, PG_GETARG_DATUM(1),
						 PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2)));
	SPI_finish();
	ReleaseTupleDesc(desc);
	PG_RETURN_VOID();
}

/* Raise 22023 unless detail is null or a JSON object. */
static void
check_detail(Jsonb *detail)
{
	if (detail != NULL && !JB_ROOT_IS_OBJECT(detail))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("detail must be a JSON object"),
				 errdetail("The value given is a JSON %s.",
						   TextDatumGetCString(DirectFunctionCall1(jsonb_typeof,
																   JsonbPGetDatum(detail)))),
				 errhint("Pass an object such as '{}'.")));
}

/* The approver_id of an approval request's detail, checked; NULL when absent. */
static char *
detail_approver(Jsonb *detail)
{
	JsonbValue *v = cscp_jsonb_get(detail, "approver_id");
	char	   *approver;

	if (v == NULL)
		return NULL;
	if (v->type == jbvNull)
		approver = NULL;
	else if (v->type == jbvString)
		approver = pnstrdup(v->val.string.val, v->val.string.len);
	else
		approver = cscp_jsonb_value_to_cstring(v);
	cscp_check_id("approver_id", approver ? cstring_to_text(approver) : NULL);
	return approver;
}

/* The evidence detail of a refused transition: what was asked for. */
static Jsonb *
refusal_detail(const char *reason_code, Jsonb *detail)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"detail\":");
	if (detail != NULL)
		cscp_canonical_append(&buf, detail);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ",\"requested_reason_code\":");
	if (reason_code != NULL)
		cscp_canonical_string(&buf, reason_code, strlen(reason_code));
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* Column attnum of a SPI row as a C string (NULL when null). */
static char *
spi_text(HeapTuple tuple, TupleDesc desc, const char *table, const char *name)
{
	return SPI_getvalue(tuple, desc, cscp_column(desc, table, name));
}

/* The end of an approval window opened now: cscp.now() + the tenant's approval_ttl. */
static Datum
approval_window(Datum tenant)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {TEXTOID};
	bool		isnull;

	cscp_spi_plan(&plan,
				  "SELECT cscp.now() + cscp._ttl(cscp.policy_effective($1), NULL,"
				  "                              'approval_ttl', 'approval_ttl')",
				  1, argtypes);
	if (SPI_execute_plan(plan, &tenant, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not compute an approval window");
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
}

/*
 * What an approval request does beside the command's own transition: an
 * earlier pending approval of the context is superseded (that command is
 * rejected, approval_superseded), and the context becomes pending with its
 * pending_approval slot.
 */
static void
request_approval(HeapTuple ctx, TupleDesc ctxdesc, Datum command_id, const char *approver,
				 Datum window)
{
	static SPIPlanPtr supersede_plan = NULL;
	static SPIPlanPtr context_plan = NULL;
	static const Oid supersede_types[3] = {TEXTOID, UUIDOID, UUIDOID};
	static const Oid context_types[5] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TIMESTAMPTZOID};
	bool		isnull;
	Datum		tenant = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
									  ctxdesc, &isnull);
	Jsonb	   *slots = DatumGetJsonbP(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "slots"),
													ctxdesc, &isnull));
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	if (slot_pending(slots, "pending_approval"))
	{
		JsonbValue *pa = cscp_jsonb_get(slots, "pending_approval");
		JsonbValue *old = getKeyJsonValueFromContainer(pa->val.binary.data, "command_id",
													   strlen("command_id"), NULL);
		char	   *oldid = (old != NULL && old->type == jbvString) ?
			pnstrdup(old->val.string.val, old->val.string.len) : NULL;

		if (oldid != NULL && cscp_is_uuid_text(oldid))
		{
			args[0] = tenant;
			args[1] = DirectFunctionCall1(uuid_in, CStringGetDatum(oldid));
			args[2] = command_id;
			cscp_spi_plan(&supersede_plan,
						  "UPDATE cscp.command x"
						  "   SET state = 'rejected', reason_code = 'approval_superseded',"
						  "       detail = jsonb_build_object('superseded_by', $3)"
						  " WHERE x.tenant_id = $1 AND x.command_id = $2"
						  "   AND x.state = 'authz_pending'",
						  3, supersede_types);
			if (SPI_execute_plan(supersede_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not supersede an approval request");
		}
	}

	args[0] = tenant;
	args[1] = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"), ctxdesc, &isnull);
	args[2] = command_id;
	if (approver != NULL)
		args[3] = CStringGetTextDatum(approver);
	else
		nulls[3] = 'n';
	args[4] = window;
	cscp_spi_plan(&context_plan,
				  "UPDATE cscp.context x"
				  "   SET status = 'pending',"
				  "       slots = x.slots || jsonb_build_object('pending_approval', jsonb_build_object("
				  "                   'command_id', $3, 'approver_id', $4, 'expires_at', cscp._utc($5))),"
				  "       expires_at = cscp._context_touch(x)"
				  " WHERE x.tenant_id = $1 AND x.context_id = $2",
				  5, context_types);
	if (SPI_execute_plan(context_plan, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record an approval request on its context");
}

/*
 * An executed compensation compensates its target (when the target is still
 * executed or failed).
 */
static void
compensate_target(Datum tenant, Datum command_id, Datum target)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, UUIDOID, UUIDOID};
	Datum		args[3] = {tenant, target, command_id};

	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = 'compensated', reason_code = 'compensated',"
				  "       detail = jsonb_build_object('compensated_by', $3)"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2"
				  "   AND x.state IN ('executed', 'failed')",
				  3, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not compensate command");
}

PG_FUNCTION_INFO_V1(cscp_command_transition);

/*
 * cscp.command_transition(command_id uuid, to_state cscp.command_state,
 *                         reason_code text, detail jsonb)
 * RETURNS TABLE(accepted boolean, state cscp.command_state, reason_code text)
 *
 * Moves a command along its lifecycle.  A transition the table or an
 * invariant refuses is returned (accepted = false, the state unchanged, the
 * refusing reason code) and recorded as an invalid_transition_attempt.
 * authz_pending with reason approval_required asks for an approval (detail
 * may name its approver_id); confirmed, authorized, rejected and canceled
 * release the context's pending slot naming the command.
 */
Datum
cscp_command_transition(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr find_plan = NULL;
	static SPIPlanPtr context_plan = NULL;
	static SPIPlanPtr command_plan = NULL;
	static SPIPlanPtr update_plan = NULL;
	static const Oid find_types[1] = {UUIDOID};
	static const Oid key_types[2] = {TEXTOID, UUIDOID};
	static const Oid update_types[6] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID};
	MemoryContext callerctx = CurrentMemoryContext;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			state_type;
	CommandState to,
				from,
				result_state;
	char	   *reason_code = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	Jsonb	   *detail = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	char	   *approver = NULL;
	bool		approval;
	const char *why;
	char	   *result_reason;
	bool		accepted;
	bool		isnull;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	Datum		tenant,
				context_id,
				window = (Datum) 0;
	HeapTuple	ctx = NULL,
				cmd;
	TupleDesc	ctxdesc = NULL,
				cmddesc;
	Datum		values[3];
	bool		result_nulls[3] = {false, false, false};

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	state_type = TupleDescAttr(rsinfo->setDesc, 1)->atttypid;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("to_state must not be null"),
				 errhint("Pass a cscp.command_state such as 'authorized'.")));
	to = cscp_command_state_of(state_type, PG_GETARG_DATUM(1));
	if (reason_code != NULL)
		cscp_check_id("reason_code", PG_GETARG_TEXT_PP(2));
	check_detail(detail);
	approver = detail_approver(detail);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command_id must not be null"),
				 errhint("Pass the command_id returned by cscp.command_submit.")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* The command's tenant and context, then both rows locked, context first. */
	args[0] = PG_GETARG_DATUM(0);
	cscp_spi_plan(&find_plan,
				  "SELECT x.tenant_id, x.context_id FROM cscp.command x WHERE x.command_id = $1",
				  1, find_types);
	if (SPI_execute_plan(find_plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a command");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command %s does not exist",
						DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)))),
				 errhint("Check the id, and that cscp.tenant_id names the command's tenant.")));
	tenant = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	context_id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
	{
		args[0] = tenant;
		args[1] = context_id;
		cscp_spi_plan(&context_plan,
					  "SELECT * FROM cscp.context x"
					  " WHERE x.tenant_id = $1 AND x.context_id = $2 FOR UPDATE",
					  2, key_types);
		if (SPI_execute_plan(context_plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not lock a context");
		if (SPI_processed == 1)
		{
			ctx = SPI_tuptable->vals[0];
			ctxdesc = SPI_tuptable->tupdesc;
		}
	}
	args[0] = tenant;
	args[1] = PG_GETARG_DATUM(0);
	cscp_spi_plan(&command_plan,
				  "SELECT * FROM cscp.command x"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2 FOR UPDATE",
				  2, key_types);
	if (SPI_execute_plan(command_plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not lock a command");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command %s does not exist",
						DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)))),
				 errhint("Check the id, and that cscp.tenant_id names the command's tenant.")));
	cmd = SPI_tuptable->vals[0];
	cmddesc = SPI_tuptable->tupdesc;

	why = cscp_command_refusal_of(cmd, cmddesc, to, &from);
	approval = to == CMD_AUTHZ_PENDING && reason_code != NULL &&
		strcmp(reason_code, "approval_required") == 0;
	if (why == NULL && approval)
	{
		char	   *status = ctx ? spi_text(ctx, ctxdesc, "cscp.context", "status") : NULL;
		bool		live = ctx != NULL &&
			DatumGetTimestampTz(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "expires_at"),
											 ctxdesc, &isnull)) > cscp_now();

		if (status == NULL || !live ||
			(strcmp(status, "active") != 0 && strcmp(status, "pending") != 0))
			why = (live && status != NULL && strcmp(status, "blocked") == 0) ?
				"context_blocked" : "context_expired";
	}

	if (why != NULL)
	{
		CscpEvidence e = {0};
		Datum		d;

		e.tenant_id = spi_text(cmd, cmddesc, "cscp.command", "tenant_id");
		e.conversation_id = spi_text(cmd, cmddesc, "cscp.command", "conversation_id");
		e.command_id = spi_text(cmd, cmddesc, "cscp.command", "command_id");
		e.stage = e.to_state = cscp_command_state_names[to];
		e.from_state = cscp_command_state_names[from];
		e.event_type = "invalid_transition_attempt";
		e.decision = "refused";
		e.reason_code = why;
		d = heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "message_ids"), cmddesc, &isnull);
		e.message_ids = isnull ? NULL : DatumGetArrayTypeP(d);
		d = heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "context_ref"), cmddesc, &isnull);
		e.context_ref = isnull ? NULL : DatumGetJsonbP(d);
		e.detail = refusal_detail(reason_code, detail);
		e.created_at = cscp_now();
		cscp_evidence_append(&e);
		accepted = false;
		result_state = from;
		result_reason = MemoryContextStrdup(callerctx, why);
	}
	else
	{
		HeapTuple	row;
		TupleDesc	rowdesc;
		char	   *kind;

		if (approval)
			window = approval_window(tenant);
		args[0] = tenant;
		args[1] = PG_GETARG_DATUM(0);
		args[2] = CStringGetTextDatum(cscp_command_state_names[to]);
		if (reason_code != NULL)
			args[3] = PG_GETARG_DATUM(2);
		else
			nulls[3] = 'n';
		if (detail != NULL)
			args[4] = JsonbPGetDatum(detail);
		else
			nulls[4] = 'n';
		if (approval)
			args[5] = window;
		else
			nulls[5] = 'n';
		cscp_spi_plan(&update_plan,
					  "UPDATE cscp.command x"
					  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
					  "       window_expires_at = $6"
					  " WHERE x.tenant_id = $1 AND x.command_id = $2"
					  " RETURNING x.reason_code, x.recovery_kind, x.target_command_id",
					  6, update_types);
		if (SPI_execute_plan(update_plan, args, nulls, false, 0) != SPI_OK_UPDATE_RETURNING ||
			SPI_processed != 1)
			elog(ERROR, "could not move a command");
		row = SPI_tuptable->vals[0];
		rowdesc = SPI_tuptable->tupdesc;
		result_reason = SPI_getvalue(row, rowdesc, 1);
		if (result_reason != NULL)
			result_reason = MemoryContextStrdup(callerctx, result_reason);
		kind = SPI_getvalue(row, rowdesc, 2);

		if (approval)
			request_approval(ctx, ctxdesc, PG_GETARG_DATUM(0), approver, window);
		else if (ctx != NULL && (to == CMD_CONFIRMED || to == CMD_AUTHORIZED ||
								 to == CMD_REJECTED || to == CMD_CANCELED))
			cscp_context_release(ctx, ctxdesc, PG_GETARG_DATUM(0), NULL);

		if (to == CMD_EXECUTED && kind != NULL && strcmp(kind, "compensate") == 0)
		{
			Datum		target = SPI_getbinval(row, rowdesc, 3, &isnull);

			if (!isnull)
				compensate_target(tenant, PG_GETARG_DATUM(0), target);
		}
		accepted = true;
		result_state = to;
	}
	SPI_finish();

	values[0] = BoolGetDatum(accepted);
	values[1] = cscp_command_state_datum(state_type, result_state);
	if (result_reason != NULL)
		values[2] = CStringGetTextDatum(result_reason);
	else
		result_nulls[2] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, result_nulls);
	return (Datum) 0;
}

/* Push key and a C string (JSON null when NULL) onto a jsonb being built. */
static void
push_text(JsonbParseState **st, const char *key, const char *value)
{
	JsonbValue	k,
				v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(st, WJB_KEY, &k);
	if (value == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) value;
		v.val.string.len = strlen(value);
	}
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* A whole jsonb as a value that pushJsonbValue copies in. */
static JsonbValue *
binary_value(Jsonb *j, JsonbValue *v)
{
	v->type = jbvBinary;
	v->val.binary.data = &j->root;
	v->val.binary.len = VARSIZE(j) - VARHDRSZ;
	return v;
}

/* Field name of composite rec as a C string, or NULL. */
static char *
field_text(HeapTupleHeader rec, const char *name)
{
	bool		isnull;
	Datum		d = GetAttributeByName(rec, name, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

PG_FUNCTION_INFO_V1(cscp_frame_state);

/*
 * cscp._frame_state(c cscp.context, message_ids text[]) RETURNS jsonb: the
 * canonical context state a command frame records.  The ids of pending
 * commands are left out of the pending slots (they are random, and the same
 * calls must give the same hash on every database); times are in UTC.
 */
Datum
cscp_frame_state(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec;
	JsonbParseState *st = NULL;
	JsonbValue	k,
				v;
	bool		isnull;
	Datum		d;
	JsonbValue *result;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	rec = PG_GETARG_HEAPTUPLEHEADER(0);

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	push_text(&st, "tenant_id", field_text(rec, "tenant_id"));
	push_text(&st, "conversation_id", field_text(rec, "conversation_id"));
	push_text(&st, "actor_id", field_text(rec, "actor_id"));
	d = GetAttributeByName(rec, "status", &isnull);
	push_text(&st, "status", isnull ? NULL : DatumGetCString(DirectFunctionCall1(enum_out, d)));
	d = GetAttributeByName(rec, "expires_at", &isnull);
	push_text(&st, "expires_at", isnull ? NULL : cscp_utc_iso(DatumGetTimestampTz(d)));
	push_text(&st, "last_message_id", field_text(rec, "last_message_id"));

	k.type = jbvString;
	k.val.string.val = "slots";
	k.val.string.len = strlen("slots");
	pushJsonbValue(&st, WJB_KEY, &k);
	d = GetAttributeByName(rec, "slots", &isnull);
	if (isnull || !JB_ROOT_IS_OBJECT(DatumGetJsonbP(d)))
	{
		if (isnull)
			v.type = jbvNull;
		pushJsonbValue(&st, WJB_VALUE, isnull ? &v : binary_value(DatumGetJsonbP(d), &v));
	}
	else
	{
		Jsonb	   *slots = DatumGetJsonbP(d);
		JsonbIterator *it = JsonbIteratorInit(&slots->root);
		JsonbIteratorToken tok;
		bool		pending = false;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
			{
				pending = (v.val.string.len == (int) strlen("pending_confirmation") &&
						   memcmp(v.val.string.val, "pending_confirmation", v.val.string.len) == 0) ||
					(v.val.string.len == (int) strlen("pending_approval") &&
					 memcmp(v.val.string.val, "pending_approval", v.val.string.len) == 0);
				pushJsonbValue(&st, WJB_KEY, &v);
			}
			else if (tok == WJB_VALUE && pending && v.type == jbvBinary &&
					 JsonContainerIsObject(v.val.binary.data))
			{
				Jsonb	   *obj = JsonbValueToJsonb(&v);
				JsonbValue	w;

				obj = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(obj),
														 CStringGetTextDatum("command_id")));
				pushJsonbValue(&st, WJB_VALUE, binary_value(obj, &w));
			}
			else
				pushJsonbValue(&st, tok, tok == WJB_BEGIN_OBJECT || tok == WJB_END_OBJECT ?
							   NULL : &v);
		}
	}

	k.val.string.val = "message_ids";
	k.val.string.len = strlen("message_ids");
	pushJsonbValue(&st, WJB_KEY, &k);
	if (PG_ARGISNULL(1))
	{
		v.type = jbvNull;
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	else
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &n);
		pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
		for (int i = 0; i < n; i++)
		{
			if (nulls[i])
				v.type = jbvNull;
			else
			{
				text	   *t = DatumGetTextPP(elems[i]);

				v.type = jbvString;
				v.val.string.val = VARDATA_ANY(t);
				v.val.string.len = VARSIZE_ANY_EXHDR(t);
			}
			pushJsonbValue(&st, WJB_ELEM, &v);
		}
		pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	}
	result = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	PG_RETURN_JSONB_P(JsonbValueToJsonb(result));
}
