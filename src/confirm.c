/*-------------------------------------------------------------------------
 *
 * confirm.c
 *	  cscp.confirm: the answer ("yes" or "no") to the pending confirmation
 *	  of a conversation's actor.
 *
 * The safety rules of RFC-WF-0034 live here:
 *	- a yes confirms only the command the context's pending_confirmation
 *	  slot names, and only when that command is bound to the slot (same
 *	  tenant, conversation, actor and context), confirmation_required, and
 *	  its own window (window_expires_at, not the slot's copy) is open; a slot
 *	  that names anything else answers nothing_pending; a yes after the window answers
 *	  confirmation_expired whether or not a sweep has run (and lapses the
 *	  question: the command is rejected, the slot cleared);
 *	- an expired context interprets nothing (expired), and the question it
 *	  held dies with it;
 *	- a target fingerprint given with the answer must be the one asked
 *	  about (target_mismatch);
 *	- every outcome is returned, never raised, and leaves evidence: the
 *	  transition it caused, or an invalid_transition_attempt saying why it
 *	  caused none; the first outcome of each message is kept in cscp.answer
 *	  (written here as the owner, before the command moves: the command
 *	  trigger confirms a command only with its answer recorded) and replayed
 *	  when the message comes again.
 *
 * Locks, in order: the advisory lock of (tenant, 'confirm', conversation,
 * message), the context row, then the pending command's row.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

/* Column name of a SPI row of table. */
static Datum
col(HeapTuple tuple, TupleDesc desc, const char *table, const char *name, bool *isnull)
{
	return heap_getattr(tuple, cscp_column(desc, table, name), desc, isnull);
}

/* Run a saved plan that must give result code expected. */
static void
run(SPIPlanPtr plan, Datum *args, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(plan, args, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "cscp internal query failed: %s", SPI_result_code_string(rc));
}

/*
 * A question that lapsed (why: context_expired, confirmation_expired,
 * approval_expired; the sweep's too, sweep.c): the command, if still
 * waiting, is rejected; the context's expiry is recorded when it has
 * expired, else its slot naming the command is cleared.  ctx may be NULL.
 */
void
cscp_lapse(HeapTuple ctx, TupleDesc ctxdesc, HeapTuple cmd, TupleDesc cmddesc, const char *why)
{
	static SPIPlanPtr reject_plan = NULL;
	static SPIPlanPtr expire_plan = NULL;
	static const Oid reject_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const Oid expire_types[2] = {TEXTOID, UUIDOID};
	bool		isnull;
	Datum		args[3];

	if (cmd != NULL)
	{
		char	   *state = SPI_getvalue(cmd, cmddesc, cscp_column(cmddesc, "cscp.command", "state"));

		if (strcmp(state, "confirmation_required") == 0 || strcmp(state, "authz_pending") == 0)
		{
			args[0] = col(cmd, cmddesc, "cscp.command", "tenant_id", &isnull);
			args[1] = col(cmd, cmddesc, "cscp.command", "command_id", &isnull);
			args[2] = CStringGetTextDatum(why);
			cscp_spi_plan(&reject_plan,
						  "UPDATE cscp.command x SET state = 'rejected', reason_code = $3"
						  " WHERE x.tenant_id = $1 AND x.command_id = $2",
						  3, reject_types);
			run(reject_plan, args, NULL, SPI_OK_UPDATE);
		}
	}
	if (ctx == NULL)
		return;
	if (DatumGetTimestampTz(col(ctx, ctxdesc, "cscp.context", "expires_at", &isnull)) <= cscp_now())
	{
		/* The expiry invariant made durable: recorded expired, by TTL. */
		if (cscp_status_live(SPI_getvalue(ctx, ctxdesc, cscp_column(ctxdesc, "cscp.context", "status"))))
		{
			args[0] = col(ctx, ctxdesc, "cscp.context", "tenant_id", &isnull);
			args[1] = col(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
			cscp_spi_plan(&expire_plan,
						  "UPDATE cscp.context x SET status = 'expired', reason = 'ttl'"
						  " WHERE x.tenant_id = $1 AND x.context_id = $2",
						  2, expire_types);
			run(expire_plan, args, NULL, SPI_OK_UPDATE);
		}
	}
	else if (cmd != NULL)
		cscp_context_release(ctx, ctxdesc, col(cmd, cmddesc, "cscp.command", "command_id", &isnull),
							 why);
}

/*
 * An answer that moves the pending command: to_state with reason why, the
 * answer's message id appended to the command's, the context's slot
 * released.  cmd is the command's row as locked (its latest version).
 *
 * The command is updated by its UPDATE statement, with the caller's
 * rights, so that row-level security, privileges, rules and every trigger
 * apply as to any UPDATE.
 */
static void
apply(HeapTuple ctx, TupleDesc ctxdesc, HeapTuple cmd, TupleDesc cmddesc, text *message_id,
	  CommandState to_state, const char *why)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[5] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID};
	bool		isnull;
	Datum		args[5];

	args[0] = col(cmd, cmddesc, "cscp.command", "tenant_id", &isnull);
	args[1] = col(cmd, cmddesc, "cscp.command", "command_id", &isnull);
	args[2] = CStringGetTextDatum(cscp_command_state_names[to_state]);
	args[3] = CStringGetTextDatum(why);
	args[4] = PointerGetDatum(message_id);
	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = $3::cscp.command_state, reason_code = $4, detail = NULL,"
				  "       message_ids = x.message_ids || $5"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2",
				  5, argtypes);
	run(plan, args, NULL, SPI_OK_UPDATE);
	cscp_context_release(ctx, ctxdesc, args[1], why);
}

/* Whether cmd (NULL: none) waits for a yes: confirmation_required, with a window. */
static bool
waiting(HeapTuple cmd, TupleDesc cmddesc)
{
	bool		isnull;

	if (cmd == NULL ||
		strcmp(SPI_getvalue(cmd, cmddesc, cscp_column(cmddesc, "cscp.command", "state")),
			   "confirmation_required") != 0)
		return false;
	(void) col(cmd, cmddesc, "cscp.command", "window_expires_at", &isnull);
	return !isnull;
}

/* The string under key of a jsonb object value, or NULL. */
static char *
object_string(JsonbValue *obj, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(obj->val.binary.data, key, strlen(key), NULL);

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	return cscp_jsonb_value_to_cstring(v);
}

PG_FUNCTION_INFO_V1(cscp_confirm);

/*
 * cscp.confirm(tenant_id text, conversation_id text, actor_id text,
 *              message_id text, answer boolean, target_fingerprint text)
 * RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
 *
 * Outcomes: confirmed, declined, no_context, expired, nothing_pending,
 * confirmation_expired, target_mismatch.
 */
Datum
cscp_confirm(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr answer_plan = NULL;
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr last_plan = NULL;
	static SPIPlanPtr record_plan = NULL;
	static const Oid answer_types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	static const Oid command_types[5] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, UUIDOID};
	static const Oid record_types[9] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	UUIDOID, UUIDOID, TIMESTAMPTZOID};
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callerctx = CurrentMemoryContext;
	text	   *tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *conversation = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	text	   *actor = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	text	   *message_id = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	bool		answer;
	text	   *fingerprint = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	TimestampTz now = cscp_now();
	HeapTuple	ctx = NULL,
				cmd = NULL;
	TupleDesc	ctxdesc = NULL,
				cmddesc = NULL;
	JsonbValue *pc = NULL;
	const char *outcome;
	const char *lapse_why = NULL;	/* the question lapses, for this reason */
	const char *why = NULL;		/* the answer moves the command to to_state */
	CommandState to_state = CMD_CONFIRMED;
	CscpOwnerScope owner;
	bool		moved = false;
	bool		isnull;
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Datum		values[3];
	bool		result_nulls[3] = {false, true, true};
	Datum		command_id = (Datum) 0,
				context_id = (Datum) 0;
	StringInfoData key;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", conversation);
	cscp_check_id("actor_id", actor);
	cscp_check_id("message_id", message_id);
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("answer must not be null"),
				 errhint("Pass true for yes, false for no.")));
	answer = PG_GETARG_BOOL(4);
	if (fingerprint != NULL)
		cscp_check_id("target_fingerprint", fingerprint);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* One answer per message: concurrent deliveries of it wait here, then replay. */
	initStringInfo(&key);
	appendStringInfoString(&key, "confirm\001");
	appendBinaryStringInfo(&key, VARDATA_ANY(conversation), VARSIZE_ANY_EXHDR(conversation));
	appendStringInfoChar(&key, '\001');
	appendBinaryStringInfo(&key, VARDATA_ANY(message_id), VARSIZE_ANY_EXHDR(message_id));
	cscp_key_lock(tenant, key.data, key.len);
	cscp_context_for(tenant, conversation, actor, &ctx, &ctxdesc);

	/* The answer already recorded for the message (committed while we waited, too) replays. */
	args[0] = PointerGetDatum(tenant);
	args[1] = PointerGetDatum(conversation);
	args[2] = CStringGetTextDatum("confirm");
	args[3] = PointerGetDatum(message_id);
	cscp_spi_plan(&answer_plan,
				  "SELECT a.outcome, a.command_id, a.context_id FROM cscp.answer a"
				  " WHERE a.tenant_id = $1 AND a.conversation_id = $2 AND a.kind = $3"
				  "   AND a.message_id = $4",
				  4, answer_types);
	run(answer_plan, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		HeapTuple	a = SPI_tuptable->vals[0];
		TupleDesc	adesc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(callerctx);

		values[0] = datumCopy(SPI_getbinval(a, adesc, 1, &isnull), false, -1);
		values[1] = SPI_getbinval(a, adesc, 2, &result_nulls[1]);
		if (!result_nulls[1])
			values[1] = datumCopy(values[1], false, UUID_LEN);
		values[2] = SPI_getbinval(a, adesc, 3, &result_nulls[2]);
		if (!result_nulls[2])
			values[2] = datumCopy(values[2], false, UUID_LEN);
		MemoryContextSwitchTo(old);
		SPI_finish();
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, result_nulls);
		return (Datum) 0;
	}

	if (ctx != NULL)
	{
		Jsonb	   *slots = DatumGetJsonbP(col(ctx, ctxdesc, "cscp.context", "slots", &isnull));

		pc = cscp_jsonb_get(slots, "pending_confirmation");
		if (pc != NULL && (pc->type != jbvBinary || !JsonContainerIsObject(pc->val.binary.data)))
			pc = NULL;
	}
	if (pc != NULL)
	{
		char	   *id = object_string(pc, "command_id");

		/*
		 * The command the slot names, if it is bound to the slot's context:
		 * of the same tenant, conversation, actor and context.  A slot that
		 * names anything else (written around the triggers) names nothing,
		 * so that no answer here moves another conversation's command.
		 */
		if (id != NULL && cscp_is_uuid_text(id))
		{
			args[0] = col(ctx, ctxdesc, "cscp.context", "tenant_id", &isnull);
			args[1] = DirectFunctionCall1(uuid_in, CStringGetDatum(id));
			args[2] = PointerGetDatum(conversation);
			args[3] = PointerGetDatum(actor);
			args[4] = col(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
			cscp_spi_plan(&lock_plan,
						  "SELECT x.tenant_id, x.command_id, x.state, x.window_expires_at,"
						  "       x.target_fingerprint"
						  "  FROM cscp.command x"
						  " WHERE x.tenant_id = $1 AND x.command_id = $2"
						  "   AND x.conversation_id = $3 AND x.actor_id = $4 AND x.context_id = $5"
						  "   FOR UPDATE",
						  5, command_types);
			run(lock_plan, args, NULL, SPI_OK_SELECT);
			if (SPI_processed == 1)
			{
				cmd = SPI_tuptable->vals[0];
				cmddesc = SPI_tuptable->tupdesc;
			}
		}
	}

	if (ctx == NULL)
		outcome = "no_context";
	else if (!cscp_status_live(SPI_getvalue(ctx, ctxdesc, cscp_column(ctxdesc, "cscp.context", "status"))) ||
			 DatumGetTimestampTz(col(ctx, ctxdesc, "cscp.context", "expires_at", &isnull)) <= now)
	{
		/*
		 * Expiry invariant: an expired context never interprets a yes or a
		 * no.  The question it held dies with it, swept or not.
		 */
		outcome = "expired";
		lapse_why = "context_expired";
	}
	else if (!waiting(cmd, cmddesc))
	{
		/* Nothing pending; but when the last question lapsed, say so, and name it. */
		char	   *reason = SPI_getvalue(ctx, ctxdesc, cscp_column(ctxdesc, "cscp.context", "reason"));

		cmd = NULL;
		if (reason != NULL && strcmp(reason, "confirmation_expired") == 0)
		{
			outcome = "confirmation_expired";
			args[0] = col(ctx, ctxdesc, "cscp.context", "tenant_id", &isnull);
			args[1] = col(ctx, ctxdesc, "cscp.context", "last_command_id", &isnull);
			if (!isnull)
			{
				cscp_spi_plan(&last_plan,
							  "SELECT x.tenant_id, x.command_id, x.state FROM cscp.command x"
							  " WHERE x.tenant_id = $1 AND x.command_id = $2",
							  2, command_types);
				run(last_plan, args, NULL, SPI_OK_SELECT);
				if (SPI_processed == 1)
				{
					cmd = SPI_tuptable->vals[0];
					cmddesc = SPI_tuptable->tupdesc;
				}
			}
		}
		else
			outcome = "nothing_pending";
	}
	else
	{
		/* The command's own window and fingerprint decide, not the slot's copies. */
		TimestampTz window = DatumGetTimestampTz(col(cmd, cmddesc, "cscp.command",
													 "window_expires_at", &isnull));
		char	   *asked = SPI_getvalue(cmd, cmddesc,
										 cscp_column(cmddesc, "cscp.command", "target_fingerprint"));

		if (window <= now)
		{
			outcome = "confirmation_expired";
			lapse_why = "confirmation_expired";
		}
		else if (fingerprint != NULL &&
				 (asked == NULL || strcmp(asked, text_to_cstring(fingerprint)) != 0))
			outcome = "target_mismatch";
		else if (answer)
		{
			outcome = "confirmed";
			to_state = CMD_CONFIRMED;
			why = "confirmed_by_user";
		}
		else
		{
			outcome = "declined";
			to_state = CMD_REJECTED;
			why = "declined";
		}
	}

	if (cmd != NULL)
	{
		command_id = col(cmd, cmddesc, "cscp.command", "command_id", &isnull);
		result_nulls[1] = isnull;
	}
	if (ctx != NULL)
	{
		context_id = col(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
		result_nulls[2] = false;
	}

	/*
	 * The outcome replayed for the message from now on, written first (a yes
	 * is confirmed only with its answer recorded, command_fsm.c) and as the
	 * owner: application roles only read cscp.answer.
	 */
	args[0] = PointerGetDatum(tenant);
	args[1] = PointerGetDatum(conversation);
	args[2] = CStringGetTextDatum("confirm");
	args[3] = PointerGetDatum(message_id);
	args[4] = PointerGetDatum(actor);
	args[5] = CStringGetTextDatum(outcome);
	args[6] = command_id;
	nulls[6] = result_nulls[1] ? 'n' : ' ';
	args[7] = context_id;
	nulls[7] = result_nulls[2] ? 'n' : ' ';
	args[8] = TimestampTzGetDatum(now);
	cscp_owner_enter("answer", &owner);
	cscp_spi_plan(&record_plan,
				  "INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id,"
				  "                         answered_by, outcome, command_id, context_id, created_at)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
				  9, record_types);
	run(record_plan, args, nulls, SPI_OK_INSERT);
	cscp_owner_leave(&owner);

	/* What the answer does: the question lapses, or the command moves. */
	if (lapse_why != NULL)
		cscp_lapse(ctx, ctxdesc, cmd, cmddesc, lapse_why);
	else if (why != NULL)
	{
		apply(ctx, ctxdesc, cmd, cmddesc, message_id, to_state, why);
		moved = true;
	}

	/* The evidence of an outcome that moved nothing (the trigger records the others'). */
	if (!moved)
	{
		CscpEvidence e = {0};
		ArrayType  *ids;
		Datum		m = PointerGetDatum(message_id);
		StringInfoData buf;

		ids = construct_array(&m, 1, TEXTOID, -1, false, TYPALIGN_INT);
		e.tenant_id = text_to_cstring(tenant);
		e.conversation_id = text_to_cstring(conversation);
		e.to_state = "confirmed";
		e.reason_code = outcome;
		e.message_ids = ids;
		if (ctx != NULL)
		{
			initStringInfo(&buf);
			appendStringInfo(&buf, "{\"context_id\": \"%s\", \"expires_at\": ",
							 DatumGetCString(DirectFunctionCall1(uuid_out, context_id)));
			cscp_canonical_string(&buf,
								  cscp_utc_iso(DatumGetTimestampTz(col(ctx, ctxdesc, "cscp.context",
																	   "expires_at", &isnull))),
								  strlen(cscp_utc_iso(DatumGetTimestampTz(col(ctx, ctxdesc,
																			  "cscp.context",
																			  "expires_at",
																			  &isnull)))));
			appendStringInfoChar(&buf, '}');
			e.context_ref = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
		}
		initStringInfo(&buf);
		appendStringInfo(&buf, "{\"answer\": %s, \"actor_id\": ", answer ? "true" : "false");
		cscp_canonical_string(&buf, VARDATA_ANY(actor), VARSIZE_ANY_EXHDR(actor));
		appendStringInfo(&buf, ", \"target_fingerprint_given\": %s}",
						 fingerprint != NULL ? "true" : "false");
		e.detail = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
		cscp_evidence_refuse(&e, command_id, !result_nulls[1]);
	}

	{
		MemoryContext old = MemoryContextSwitchTo(callerctx);

		values[0] = CStringGetTextDatum(outcome);
		values[1] = result_nulls[1] ? (Datum) 0 : datumCopy(command_id, false, UUID_LEN);
		values[2] = result_nulls[2] ? (Datum) 0 : datumCopy(context_id, false, UUID_LEN);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, result_nulls);
	return (Datum) 0;
}
