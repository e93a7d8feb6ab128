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
 *	  when the message comes again (its INSERT finds it: answer.c).
 *
 * Locks, in order: the advisory lock of (tenant, 'confirm', conversation,
 * message; answer.c), the context row, then the pending command's row.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

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
	static const Oid reject_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	bool		isnull;
	Datum		args[3];

	if (cmd != NULL)
	{
		char	   *state = SPI_getvalue(cmd, cmddesc, cscp_column(cmddesc, "cscp.command", "state"));

		if (strcmp(state, "confirmation_required") == 0 || strcmp(state, "authz_pending") == 0)
		{
			args[0] = cscp_column_value(cmd, cmddesc, "cscp.command", "tenant_id", &isnull);
			args[1] = cscp_column_value(cmd, cmddesc, "cscp.command", "command_id", &isnull);
			args[2] = CStringGetTextDatum(why);
			cscp_spi_plan(&reject_plan,
						  "UPDATE cscp.command x SET state = 'rejected', reason_code = $3"
						  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2",
						  3, reject_types);
			cscp_spi_write_one(reject_plan, args, NULL, SPI_OK_UPDATE,
							   psprintf("reject command %s",
										DatumGetCString(DirectFunctionCall1(uuid_out, args[1]))));
		}
	}
	if (ctx == NULL)
		return;
	/* The expiry invariant made durable: a live context past its TTL recorded expired. */
	if (cscp_status_live(SPI_getvalue(ctx, ctxdesc, cscp_column(ctxdesc, "cscp.context", "status"))) &&
		!cscp_context_row_usable(ctx, ctxdesc, cscp_now()))
		cscp_context_record_expiry(ctx, ctxdesc);
	else if (cmd != NULL)
		cscp_context_release(ctx, ctxdesc,
							 cscp_column_value(cmd, cmddesc, "cscp.command", "command_id", &isnull),
							 NULL, why);
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
	(void) cscp_column_value(cmd, cmddesc, "cscp.command", "window_expires_at", &isnull);
	return !isnull;
}

/*
 * The command the context's pending_confirmation slot names, locked, if it
 * is bound to the slot's context: of the same tenant, conversation, actor
 * and context.  A slot that names anything else (written around the
 * triggers) names nothing, so that no answer here moves another
 * conversation's command.  NULL when there is none; *cmddesc its
 * descriptor.
 */
static HeapTuple
bound_command(HeapTuple ctx, TupleDesc ctxdesc, text *conversation, text *actor,
			  TupleDesc *cmddesc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[5] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, UUIDOID};
	bool		isnull;
	JsonbValue *pc;
	char	   *id;
	Datum		args[5];

	pc = cscp_answer_slot(ctx, ctxdesc, "pending_confirmation");
	if (pc == NULL)
		return NULL;
	id = cscp_slot_text(pc, "command_id");
	if (id == NULL || !cscp_is_uuid_text(id))
		return NULL;
	args[0] = cscp_column_value(ctx, ctxdesc, "cscp.context", "tenant_id", &isnull);
	args[1] = DirectFunctionCall1(uuid_in, CStringGetDatum(id));
	args[2] = PointerGetDatum(conversation);
	args[3] = PointerGetDatum(actor);
	args[4] = cscp_column_value(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
	cscp_spi_plan(&plan,
				  "SELECT x.tenant_id, x.command_id, x.state, x.window_expires_at,"
				  "       x.target_fingerprint"
				  "  FROM cscp.command x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
				  "   AND x.conversation_id OPERATOR(pg_catalog.=) $3 AND x.actor_id OPERATOR(pg_catalog.=) $4 AND x.context_id OPERATOR(pg_catalog.=) $5"
				  "   FOR UPDATE",
				  5, types);
	/* the command by its key, whatever the statistics say */
	if (cscp_spi_execute_keyed(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the command a yes or no answers");
	if (SPI_processed != 1)
		return NULL;
	*cmddesc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/* What an answer comes to, before anything is written. */
typedef struct Verdict
{
	const char *outcome;
	const char *lapse_why;		/* the question lapses, for this reason, or NULL */
	const char *why;			/* the answer moves the command to to_state, or NULL */
	CommandState to_state;
	HeapTuple	cmd;			/* the command it is about, or NULL */
	TupleDesc	cmddesc;
} Verdict;

/*
 * Judge an answer (answer; fingerprint, or NULL) against the context ctx
 * (or NULL) and the command bound to its slot (v->cmd, or NULL): the
 * RFC-WF-0034 rules of this file's header, in order.  The command's own
 * window and fingerprint decide, not the slot's copies.
 */
static void
judge(HeapTuple ctx, TupleDesc ctxdesc, bool answer, text *fingerprint, Verdict *v)
{
	bool		isnull;
	TimestampTz now = cscp_now();

	if (ctx == NULL)
		v->outcome = "no_context";
	else if (!cscp_context_row_usable(ctx, ctxdesc, now))
	{
		/* An expired context never interprets a yes or a no; its question dies with it. */
		v->outcome = "expired";
		v->lapse_why = "context_expired";
	}
	else if (!waiting(v->cmd, v->cmddesc))
	{
		/* Nothing pending; but when the last question lapsed, say so, and name it. */
		char	   *reason = SPI_getvalue(ctx, ctxdesc, cscp_column(ctxdesc, "cscp.context", "reason"));

		v->cmd = NULL;
		v->outcome = "nothing_pending";
		if (reason != NULL && strcmp(reason, "confirmation_expired") == 0)
		{
			v->outcome = "confirmation_expired";
			v->cmd = cscp_answer_last_command(ctx, ctxdesc, &v->cmddesc);
		}
	}
	else
	{
		TimestampTz window = DatumGetTimestampTz(cscp_column_value(v->cmd, v->cmddesc, "cscp.command",
																   "window_expires_at", &isnull));
		char	   *asked = SPI_getvalue(v->cmd, v->cmddesc,
										 cscp_column(v->cmddesc, "cscp.command", "target_fingerprint"));

		if (window <= now)
		{
			v->outcome = "confirmation_expired";
			v->lapse_why = "confirmation_expired";
		}
		else if (fingerprint != NULL &&
				 (asked == NULL || strcmp(asked, text_to_cstring(fingerprint)) != 0))
			v->outcome = "target_mismatch";
		else if (answer)
		{
			v->outcome = "confirmed";
			v->to_state = CMD_CONFIRMED;
			v->why = "confirmed_by_user";
		}
		else
		{
			v->outcome = "declined";
			v->to_state = CMD_REJECTED;
			v->why = "declined";
		}
	}
}

/* The detail of a confirm answer's refusal: {answer, actor_id, target_fingerprint_given}. */
static Jsonb *
refusal_detail(bool answer, text *actor, bool fingerprint_given)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"answer\": %s, \"actor_id\": ", answer ? "true" : "false");
	cscp_canonical_string(&buf, VARDATA_ANY(actor), VARSIZE_ANY_EXHDR(actor));
	appendStringInfo(&buf, ", \"target_fingerprint_given\": %s}",
					 fingerprint_given ? "true" : "false");
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* Raise 22023 unless the arguments of cscp.confirm are well formed. */
static void
check_args(FunctionCallInfo fcinfo)
{
	cscp_answer_check_args(fcinfo, "actor_id", "answer");
	if (!PG_ARGISNULL(5))
		cscp_check_id("target_fingerprint", PG_GETARG_TEXT_PP(5));
}

PG_FUNCTION_INFO_V1(cscp_confirm);

/*
 * cscp.confirm(tenant_id text, conversation_id text, actor_id text,
 *              message_id text, answer boolean, target_fingerprint text)
 * RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
 *
 * Outcomes: confirmed, declined, no_context, expired, nothing_pending,
 * confirmation_expired, target_mismatch.  In steps: the message's lock,
 * the context and the command bound to its slot, the verdict, the answer
 * recorded (or the first one replayed, and nothing more), then what it
 * does (the question lapses, the command moves, or the evidence says why
 * nothing moved).
 */
Datum
cscp_confirm(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CscpAnswer	a = {0};
	bool		answer;
	text	   *fingerprint;
	HeapTuple	ctx = NULL;
	TupleDesc	ctxdesc = NULL;
	Verdict		v = {0};
	bool		isnull;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	check_args(fcinfo);
	a.tenant_id = PG_GETARG_TEXT_PP(0);
	a.conversation_id = PG_GETARG_TEXT_PP(1);
	a.answered_by = PG_GETARG_TEXT_PP(2);
	a.message_id = PG_GETARG_TEXT_PP(3);
	a.kind = "confirm";
	answer = PG_GETARG_BOOL(4);
	fingerprint = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_answer_lock(a.tenant_id, a.kind, a.conversation_id, a.message_id);
	cscp_context_for(a.tenant_id, a.conversation_id, a.answered_by, &ctx, &ctxdesc);
	if (ctx != NULL)
		v.cmd = bound_command(ctx, ctxdesc, a.conversation_id, a.answered_by, &v.cmddesc);
	judge(ctx, ctxdesc, answer, fingerprint, &v);
	a.outcome = v.outcome;
	if (v.cmd != NULL)
	{
		a.command_id = cscp_column_value(v.cmd, v.cmddesc, "cscp.command", "command_id", &isnull);
		a.has_command = !isnull;
	}
	if (ctx != NULL)
	{
		a.context_id = cscp_column_value(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
		a.has_context = true;
	}

	/*
	 * Recorded first: a yes is confirmed only with its answer recorded.  A
	 * message answered already (committed while we waited for its lock,
	 * too) is replayed instead, and nothing is written.
	 */
	if (!cscp_answer_keep(&a, rsinfo))
	{
		SPI_finish();
		return (Datum) 0;
	}
	if (v.lapse_why != NULL)
		cscp_lapse(ctx, ctxdesc, v.cmd, v.cmddesc, v.lapse_why);
	if (v.why != NULL)
		cscp_answer_move(&a, ctx, ctxdesc, v.cmd, v.cmddesc, v.to_state, v.why, NULL);
	else
		cscp_answer_refusal(&a, "confirmed", ctx, ctxdesc,
							refusal_detail(answer, a.answered_by, fingerprint != NULL));

	cscp_answer_put(rsinfo, &a);
	SPI_finish();
	return (Datum) 0;
}
