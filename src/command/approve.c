/*-------------------------------------------------------------------------
 *
 * approve.c
 *	  cscp.approve: the answer to the pending approval of a conversation.
 *
 * The twin of cscp.confirm (confirm.c), for approvers:
 *	- the answer is for the pending_approval slot of the conversation's live
 *	  context (or of the context of the command named), and moves only the
 *	  command that slot names when that command is bound to it (same tenant,
 *	  conversation and context), authz_pending with its own window open
 *	  (window_expires_at, not the slot's copy); an approver the slot names
 *	  must be the one answering (approver_mismatch); two live contexts
 *	  waiting for an approval and no command named: ambiguous;
 *	- an expired context decides nothing (expired), and the approval it
 *	  held dies with it; a late answer lapses the question
 *	  (approval_expired);
 *	- every outcome is returned, never raised, and leaves evidence; the
 *	  first outcome of each message is kept in cscp.answer and replayed
 *	  (answer.c).
 *
 * Locks, in order: the advisory lock of (tenant, 'approve', conversation,
 * message), the context row, then the command row.  Every statement runs
 * with the caller's rights but the answer and the evidence of a refusal,
 * written as the owner (answer.c, evidence.c).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/uuid.h"

/* An approval's arguments. */
typedef struct ApproveCall
{
	text	   *tenant;
	text	   *conversation;
	text	   *approver;
	text	   *message_id;
	bool		decision;
	Datum		command_id;		/* uuid, when has_command_id */
	bool		has_command_id;
} ApproveCall;

/* What the answer is about, and what it comes to. */
typedef struct Approval
{
	HeapTuple	ctx;			/* the context, locked, or NULL */
	TupleDesc	ctxdesc;
	int			live_waiting;	/* live contexts waiting for an approval (none named) */
	bool		pa;				/* the context has a pending_approval object */
	char	   *pa_command;		/* the command_id it names (its text), or NULL */
	Datum		pa_uuid;		/* that id as a uuid, when pa_is_uuid */
	bool		pa_is_uuid;
	char	   *pa_approver;	/* the approver it names, or NULL */
	HeapTuple	cmd;			/* the command it is about, or NULL */
	TupleDesc	cmddesc;
	const char *outcome;
	const char *lapse_why;		/* the question lapses, for this reason, or NULL */
	const char *apply_why;		/* the answer moves the command to apply_to, or NULL */
	CommandState apply_to;
	bool		lapse_cmd;		/* the lapse rejects cmd too */
} Approval;

/* Text of column name of row (of table), or NULL. */
static char *
col_text(HeapTuple row, TupleDesc desc, const char *table, const char *name)
{
	return SPI_getvalue(row, desc, cscp_column(desc, table, name));
}

/* Whether the context row is live: its status and its expiry. */
static bool
context_live(HeapTuple ctx, TupleDesc desc)
{
	return cscp_context_row_usable(ctx, desc, cscp_now());
}

/* Raise 22023 unless the arguments are well formed; fill in *call. */
static void
check_args(FunctionCallInfo fcinfo, ApproveCall *call)
{
	cscp_answer_check_args(fcinfo, "approver_id", "decision");
	call->tenant = PG_GETARG_TEXT_PP(0);
	call->conversation = PG_GETARG_TEXT_PP(1);
	call->approver = PG_GETARG_TEXT_PP(2);
	call->message_id = PG_GETARG_TEXT_PP(3);
	call->decision = PG_GETARG_BOOL(4);
	call->has_command_id = !PG_ARGISNULL(5);
	call->command_id = call->has_command_id ? PG_GETARG_DATUM(5) : (Datum) 0;
}

/*
 * The context the answer is for, by its id: the one of the command named
 * (22023 when the conversation has no such command), or the one live
 * context of the conversation waiting for an approval (none when there are
 * several: a->live_waiting says how many).  (Datum) 0 with *found false
 * when there is none.
 */
static Datum
answered_context(const ApproveCall *call, Approval *a, bool *found)
{
	static SPIPlanPtr named_plan = NULL;
	static SPIPlanPtr live_plan = NULL;
	static const Oid named_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const Oid live_types[2] = {TEXTOID, TEXTOID};
	Datum		args[3] = {PointerGetDatum(call->tenant), call->command_id,
	PointerGetDatum(call->conversation)};
	bool		isnull;
	Datum		id;

	*found = false;
	if (call->has_command_id)
	{
		cscp_spi_plan(&named_plan,
					  "SELECT x.context_id FROM cscp.command x"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2 AND x.conversation_id OPERATOR(pg_catalog.=) $3",
					  3, named_types);
		cscp_spi_run(named_plan, args, NULL, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command %s does not exist in conversation \"%s\"",
							DatumGetCString(DirectFunctionCall1(uuid_out, call->command_id)),
							text_to_cstring(call->conversation)),
					 errhint("Pass the id of a command of this conversation, or null for its pending approval.")));
		id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		*found = !isnull;
		return id;
	}
	args[1] = PointerGetDatum(call->conversation);
	cscp_spi_plan(&live_plan,
				  "SELECT pg_catalog.count(*)::pg_catalog.int4, pg_catalog.min(x.context_id::pg_catalog.text)::pg_catalog.uuid"
				  "  FROM cscp.context_live l JOIN cscp.context x"
				  "       ON x.tenant_id OPERATOR(pg_catalog.=) l.tenant_id AND x.context_id OPERATOR(pg_catalog.=) l.context_id"
				  " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2"
				  "   AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')"
				  "   AND pg_catalog.jsonb_typeof(x.slots OPERATOR(pg_catalog.->) 'pending_approval') OPERATOR(pg_catalog.=) 'object'",
				  2, live_types);
	cscp_spi_run(live_plan, args, NULL, SPI_OK_SELECT);
	a->live_waiting = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												  &isnull));
	id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	*found = !isnull && a->live_waiting == 1;
	return id;
}

/* Lock and read a context row: by its id (latest false), or the conversation's latest. */
static void
lock_context(const ApproveCall *call, Datum context_id, bool latest, Approval *a)
{
	static SPIPlanPtr id_plan = NULL;
	static SPIPlanPtr latest_plan = NULL;
	static const Oid id_types[2] = {TEXTOID, UUIDOID};
	static const Oid latest_types[2] = {TEXTOID, TEXTOID};
	Datum		args[2] = {PointerGetDatum(call->tenant),
	latest ? PointerGetDatum(call->conversation) : context_id};
	JsonbValue *pa;

	if (latest)
		cscp_spi_plan(&latest_plan,
					  "SELECT * FROM cscp.context y"
					  " WHERE y.tenant_id OPERATOR(pg_catalog.=) $1 AND y.conversation_id OPERATOR(pg_catalog.=) $2"
					  " ORDER BY y.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') DESC,"
					  "          y.updated_at DESC, y.version DESC"
					  " LIMIT 1 FOR UPDATE",
					  2, latest_types);
	else
		cscp_spi_plan(&id_plan,
					  "SELECT * FROM cscp.context x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2"
					  " FOR UPDATE",
					  2, id_types);
	a->ctx = cscp_spi_row(latest ? latest_plan : id_plan, args, NULL, SPI_OK_SELECT, &a->ctxdesc);
	a->pa = a->pa_is_uuid = false;
	a->pa_command = a->pa_approver = NULL;
	pa = a->ctx != NULL ? cscp_answer_slot(a->ctx, a->ctxdesc, "pending_approval") : NULL;
	if (pa != NULL)
	{
		a->pa = true;
		a->pa_command = cscp_slot_text(pa, "command_id");
		a->pa_approver = cscp_slot_text(pa, "approver_id");
		a->pa_is_uuid = a->pa_command != NULL && cscp_is_uuid_text(a->pa_command);
		if (a->pa_is_uuid)
			a->pa_uuid = DirectFunctionCall1(uuid_in, CStringGetDatum(a->pa_command));
	}
}

/*
 * Lock and read a command row: the one the slot names, bound to the
 * context (bound), or the one named by id in the tenant.  NULL when none.
 */
static HeapTuple
lock_command(Approval *a, const ApproveCall *call, Datum id, bool bound)
{
	static SPIPlanPtr bound_plan = NULL;
	static SPIPlanPtr id_plan = NULL;
	static const Oid bound_types[4] = {TEXTOID, UUIDOID, TEXTOID, UUIDOID};
	static const Oid id_types[2] = {TEXTOID, UUIDOID};
	bool		isnull;
	Datum		args[4];

	if (bound)
	{
		args[0] = cscp_column_value(a->ctx, a->ctxdesc, "cscp.context", "tenant_id", &isnull);
		args[1] = id;
		args[2] = cscp_column_value(a->ctx, a->ctxdesc, "cscp.context", "conversation_id", &isnull);
		args[3] = cscp_column_value(a->ctx, a->ctxdesc, "cscp.context", "context_id", &isnull);
		cscp_spi_plan(&bound_plan,
					  "SELECT * FROM cscp.command x"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
					  "   AND x.conversation_id OPERATOR(pg_catalog.=) $3 AND x.context_id OPERATOR(pg_catalog.=) $4 FOR UPDATE",
					  4, bound_types);
		return cscp_spi_row(bound_plan, args, NULL, SPI_OK_SELECT, &a->cmddesc);
	}
	args[0] = PointerGetDatum(call->tenant);
	args[1] = id;
	cscp_spi_plan(&id_plan,
				  "SELECT * FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
				  " FOR UPDATE",
				  2, id_types);
	return cscp_spi_row(id_plan, args, NULL, SPI_OK_SELECT, &a->cmddesc);
}

/* Whether text value (or NULL) equals the C string s (or NULL): IS NOT DISTINCT FROM. */
static bool
same_text(const char *value, const char *s)
{
	return (value == NULL || s == NULL) ? value == s : strcmp(value, s) == 0;
}

/*
 * With no live context waiting for an approval and no command named: the
 * answer is judged against the conversation's latest context.
 */
static void
judge_latest(const ApproveCall *call, Approval *a)
{
	char	   *reason;

	lock_context(call, (Datum) 0, true, a);
	if (a->ctx == NULL)
	{
		a->outcome = "no_context";
		return;
	}
	if (!context_live(a->ctx, a->ctxdesc))
	{
		/* An expired context: the approval it held dies with it, swept or not. */
		a->outcome = "expired";
		if (a->pa_is_uuid)
			a->cmd = lock_command(a, call, a->pa_uuid, true);
		a->lapse_why = "context_expired";
		a->lapse_cmd = true;
		return;
	}
	reason = col_text(a->ctx, a->ctxdesc, "cscp.context", "reason");
	if (same_text(reason, "approval_expired"))
	{
		a->outcome = "approval_expired";
		a->cmd = cscp_answer_last_command(a->ctx, a->ctxdesc, &a->cmddesc);
	}
	else
		a->outcome = "nothing_pending";
}

/*
 * The answer names no command the slot asks about (or the slot is gone):
 * approval_expired when the command named, or the context's last question,
 * lapsed; command_mismatch when another approval is pending; else
 * nothing_pending.
 */
static void
judge_unbound(const ApproveCall *call, Approval *a)
{
	char	   *cmd_reason = a->cmd ? col_text(a->cmd, a->cmddesc, "cscp.command", "reason_code") : NULL;
	char	   *ctx_reason = a->ctx ? col_text(a->ctx, a->ctxdesc, "cscp.context", "reason") : NULL;

	if (call->has_command_id && same_text(cmd_reason, "approval_expired"))
		a->outcome = "approval_expired";
	else if (call->has_command_id && a->pa)
		a->outcome = "command_mismatch";
	else if (!call->has_command_id && same_text(ctx_reason, "approval_expired"))
		a->outcome = "approval_expired";
	else
		a->outcome = "nothing_pending";
	if (strcmp(a->outcome, "approval_expired") == 0 && a->cmd == NULL)
		a->cmd = cscp_answer_last_command(a->ctx, a->ctxdesc, &a->cmddesc);
}

/*
 * The answer is about the command the slot names: it must wait in
 * authz_pending with its own window open, for the approver the slot names
 * (if any); then it approves or denies.
 */
static void
judge_bound(const ApproveCall *call, Approval *a)
{
	bool		window_null;
	Datum		window = cscp_column_value(a->cmd, a->cmddesc, "cscp.command", "window_expires_at",
										   &window_null);

	if (!same_text(col_text(a->cmd, a->cmddesc, "cscp.command", "state"), "authz_pending") ||
		window_null)
		a->outcome = "nothing_pending";
	else if (DatumGetTimestampTz(window) <= cscp_now())
	{
		a->outcome = "approval_expired";
		a->lapse_why = "approval_expired";
		a->lapse_cmd = true;
	}
	else if (a->pa_approver != NULL && strcmp(a->pa_approver, text_to_cstring(call->approver)) != 0)
		a->outcome = "approver_mismatch";
	else
	{
		a->outcome = call->decision ? "approved" : "denied";
		a->apply_to = call->decision ? CMD_AUTHORIZED : CMD_REJECTED;
		a->apply_why = a->outcome;
	}
}

/*
 * Judge the answer: its outcome, and whether the question lapses or the
 * command moves (the rules of this file's header, in order).
 */
static void
judge(const ApproveCall *call, Approval *a)
{
	char	   *cmd_id = a->cmd ? col_text(a->cmd, a->cmddesc, "cscp.command", "command_id") : NULL;

	if (!call->has_command_id && a->live_waiting > 1)
		a->outcome = "ambiguous";
	else if (a->ctx == NULL && !call->has_command_id)
		judge_latest(call, a);
	else if (a->ctx != NULL && !context_live(a->ctx, a->ctxdesc))
	{
		/* Only the pending approval dies with the context; a named command that was not it stays. */
		a->outcome = "expired";
		a->lapse_why = "context_expired";
		a->lapse_cmd = a->pa;
	}
	else if (!a->pa || !same_text(cmd_id, a->pa_command))
		judge_unbound(call, a);
	else if (a->cmd == NULL)
		a->outcome = "nothing_pending";
	else
		judge_bound(call, a);
}

/*
 * The detail of an approval: {approver_id} on the command it moves;
 * {decision, approver_id} on the evidence of a refusal (with_decision).
 */
static Jsonb *
approval_detail(const ApproveCall *call, bool with_decision)
{
	JsonbParseState *st = NULL;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	if (with_decision)
		cscp_jsonb_push_bool(&st, "decision", call->decision, false);
	cscp_jsonb_push_text(&st, "approver_id", text_to_cstring(call->approver));
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

PG_FUNCTION_INFO_V1(cscp_approve);

/*
 * cscp.approve(tenant_id text, conversation_id text, approver_id text,
 *              message_id text, decision boolean, command_id uuid)
 * RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
 *
 * Outcomes: approved, denied, no_context, expired, nothing_pending,
 * approval_expired, approver_mismatch, command_mismatch, ambiguous.  In
 * steps: the message's lock, the context, the command, the verdict, the
 * answer recorded (or the first one replayed, and nothing more), then what
 * it does.
 */
Datum
cscp_approve(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ApproveCall call;
	Approval	a = {0};
	CscpAnswer	ans = {0};
	Datum		context_id;
	bool		found;
	bool		isnull;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	check_args(fcinfo, &call);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_answer_lock(call.tenant, "approve", call.conversation, call.message_id);
	context_id = answered_context(&call, &a, &found);
	if (found)
		lock_context(&call, context_id, false, &a);

	if (a.pa && (!call.has_command_id ||
				 (a.pa_is_uuid && DatumGetBool(DirectFunctionCall2(uuid_eq, a.pa_uuid,
																   call.command_id)))))
	{
		/* Bound to the slot: a command of the slot's own context, or none. */
		if (a.pa_is_uuid)
			a.cmd = lock_command(&a, &call, a.pa_uuid, true);
	}
	else if (call.has_command_id)
		a.cmd = lock_command(&a, &call, call.command_id, false);
	judge(&call, &a);

	ans.tenant_id = call.tenant;
	ans.conversation_id = call.conversation;
	ans.kind = "approve";
	ans.message_id = call.message_id;
	ans.answered_by = call.approver;
	ans.outcome = a.outcome;
	if (a.cmd != NULL)
	{
		ans.command_id = cscp_column_value(a.cmd, a.cmddesc, "cscp.command", "command_id", &isnull);
		ans.has_command = true;
	}
	if (a.ctx != NULL)
	{
		ans.context_id = cscp_column_value(a.ctx, a.ctxdesc, "cscp.context", "context_id", &isnull);
		ans.has_context = true;
	}
	/* A message answered already is replayed instead, and nothing is written. */
	if (!cscp_answer_keep(&ans, rsinfo))
	{
		SPI_finish();
		return (Datum) 0;
	}

	if (a.lapse_why != NULL)
		cscp_lapse(a.ctx, a.ctxdesc, a.lapse_cmd ? a.cmd : NULL, a.cmddesc, a.lapse_why);
	if (a.apply_why != NULL)
		cscp_answer_move(&ans, a.ctx, a.ctxdesc, a.cmd, a.cmddesc, a.apply_to, a.apply_why,
						 approval_detail(&call, false));
	else
		cscp_answer_refusal(&ans, "authorized", a.ctx, a.ctxdesc, approval_detail(&call, true));

	cscp_answer_put(rsinfo, &ans);
	SPI_finish();
	return (Datum) 0;
}
