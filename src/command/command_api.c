/*-------------------------------------------------------------------------
 *
 * command_api.c
 *	  cscp.command_submit, cscp.command_recover and cscp.command_transition:
 *	  forming a command (or replaying it) and moving it along its lifecycle,
 *	  in C with saved plans rather than in PL/pgSQL.  The context they work
 *	  against is found, locked and released by context_api.c, or, for a
 *	  command formed against a usable context, found and locked by the
 *	  INSERT of its frame (frame.c).
 *
 * The rules themselves are not here: the transition table and the ordering
 * invariants are command_fsm.c's, enforced by its trigger on every write,
 * and decided once per write, there.  A new command is inserted as it was
 * asked for, and the trigger decides its birth (auto_confirm, the state,
 * the window, the question it supersedes); command_submit reads the row it
 * returns and asks the context's question when it was born asking.  command_transition locks the
 * command's row and tries the step's UPDATE in a subtransaction; a step
 * the trigger refuses (its error names the rule's reason code as a
 * constraint of cscp.command) is rolled back, recorded as an
 * invalid_transition_attempt and returned with accepted = false.
 *
 * Every query runs with the caller's rights, so row-level security keeps a
 * caller to its own tenant.  Locks, in the order used everywhere: the
 * command's context row (when the step may change it), then the command
 * row; an
 * approval request then rejects the approval it supersedes, and an executed
 * compensation locks and compensates its target.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

static void check_object(const char *argname, Jsonb *value);

/* The columns of a command row that a replay and an answer read. */
#define COMMAND_RESULT_COLUMNS \
	"x.command_id, x.state, x.outcome, x.last_transition_at"


/*
 * Supersede the question the context ctx (its row, locked by the caller)
 * asks now, before command_id starts to wait on a new one
 * (cscp_command_supersede).
 */
static void
supersede_question(HeapTuple ctx, TupleDesc ctxdesc, bool approval, Datum command_id)
{
	bool		isnull;

	cscp_command_supersede(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
										ctxdesc, &isnull),
						   heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"),
										ctxdesc, &isnull),
						   approval, command_id);
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

/*
 * The end of a window opened now: cscp.now() + the tenant's interval under
 * policy key, held to the policy's rules (cscp_lifetime).
 */
static Datum
policy_window(Datum tenant, const char *key)
{
	return TimestampTzGetDatum(cscp_window_end(TextDatumGetCString(tenant), key));
}

/*
 * The context row ctx asks the confirmation a step to confirmation_required
 * asks (cscp_context_ask, with the caller's rights, judged by the context's
 * trigger).
 */
static void
ask_confirmation(HeapTuple ctx, TupleDesc ctxdesc, Datum command_id, text *key, text *fingerprint,
				 Datum window)
{
	bool		isnull;

	cscp_context_ask(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
								  ctxdesc, &isnull),
					 heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"),
								  ctxdesc, &isnull),
					 command_id, key, fingerprint, DatumGetTimestampTz(window), NULL, false);
}

/*
 * What an approval request does beside the command's own transition, once
 * supersede_question has made way for it: the context becomes pending with
 * its pending_approval slot.
 */
static void
request_approval(HeapTuple ctx, TupleDesc ctxdesc, Datum command_id, const char *approver,
				 Datum window)
{
	static SPIPlanPtr context_plan = NULL;
	static const Oid context_types[5] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID};
	bool		isnull;
	Datum		tenant = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
									  ctxdesc, &isnull);
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	args[0] = tenant;
	args[1] = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"), ctxdesc, &isnull);
	args[2] = command_id;
	if (approver != NULL)
		args[3] = CStringGetTextDatum(approver);
	else
		nulls[3] = 'n';
	args[4] = CStringGetTextDatum(cscp_utc_iso(DatumGetTimestampTz(window)));
	cscp_spi_plan(&context_plan,
				  "UPDATE cscp.context x"
				  "   SET status = 'pending',"
				  "       slots = x.slots OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('pending_approval', pg_catalog.jsonb_build_object("
				  "                   'command_id', $3, 'approver_id', $4, 'expires_at', $5)),"
				  "       expires_at = cscp.context_touch(x)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
				  5, context_types);
	cscp_spi_write_one(context_plan, args, nulls, SPI_OK_UPDATE,
					   "record an approval request on its context");
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
				  "       detail = pg_catalog.jsonb_build_object('compensated_by', $3)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
				  "   AND x.state OPERATOR(pg_catalog.=) ANY ('{executed,failed}')",
				  3, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not compensate command");
}

/* The target_fingerprint of a command row (lock_command's), or NULL. */
static text *
command_fingerprint(HeapTuple cmd, TupleDesc cmddesc)
{
	bool		isnull;
	Datum		d = heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "target_fingerprint"),
								 cmddesc, &isnull);

	return isnull ? NULL : DatumGetTextPP(d);
}

/* Raise 22023: no command with this id (for this tenant). */
static void
no_command(Datum command_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("command %s does not exist",
					DatumGetCString(DirectFunctionCall1(uuid_out, command_id))),
			 errhint("Check the id, and that cscp.tenant_id names the command's tenant.")));
}

/*
 * Raise 21000: more than one tenant's command carries this id, and the
 * caller sees them all (row-level security does not bind it) with no
 * cscp.tenant_id to tell them apart.
 */
static void
many_commands(Datum command_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_CARDINALITY_VIOLATION),
			 errmsg("command id %s is held by more than one tenant's command",
					DatumGetCString(DirectFunctionCall1(uuid_out, command_id))),
			 errdetail("A role that row-level security does not bind sees the commands of every tenant."),
			 errhint("Set cscp.tenant_id to the command's tenant.")));
}

/* What the step wrote: the RETURNING list of its UPDATE. */
typedef struct MovedCommand
{
	char	   *reason_code;
	char	   *recovery_kind;
	Datum		target;			/* target_command_id */
	bool		target_null;
	Datum		tenant;			/* tenant_id */
} MovedCommand;

/*
 * The row of command command_id of the session's tenant (tenant, from
 * cscp_lookup_tenant: any tenant when tenant_null), locked FOR UPDATE (as
 * the caller: the row-level security of SELECT and UPDATE applies, and the
 * UPDATE privilege is needed), with its descriptor in *desc; NULL when
 * there is none.  An id held by more than one tenant's command (seen
 * together by a role row-level security does not bind, with no
 * cscp.tenant_id set) is an error.
 */
/* The columns of a command row that a step reads (c_: cscp.command), LOCKED_COMMAND_NCOLS of them. */
#define LOCKED_COMMAND_COLUMNS \
	"c_.tenant_id, c_.command_id, c_.conversation_id, c_.state, c_.mutating," \
	" c_.auto_confirm, c_.confirmed_at, c_.authorized_at, c_.window_expires_at," \
	" c_.message_ids, c_.context_ref, c_.actor_id, c_.context_id, c_.frame_id," \
	" c_.recovery_kind, c_.target_command_id, c_.idempotency_key, c_.target_fingerprint"
#define LOCKED_COMMAND_NCOLS 18

static HeapTuple
lock_command(Datum command_id, Datum tenant, bool tenant_null, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {UUIDOID, TEXTOID};
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	cscp_spi_plan(&plan,
				  "SELECT " LOCKED_COMMAND_COLUMNS
				  "  FROM cscp.command c_"
				  " WHERE c_.command_id OPERATOR(pg_catalog.=) $1 AND c_.tenant_id OPERATOR(pg_catalog.=) coalesce($2, c_.tenant_id)"
				  "   FOR UPDATE",
				  2, argtypes);
	args[0] = command_id;
	args[1] = tenant;
	nulls[1] = tenant_null ? 'n' : ' ';
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock command %s",
			 DatumGetCString(DirectFunctionCall1(uuid_out, command_id)));
	if (SPI_processed == 0)
		return NULL;
	if (SPI_processed > 1)
		many_commands(command_id);
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * Move command command_id of tenant to state to by
 *
 *	 UPDATE cscp.command x
 *		SET state = to, reason_code = reason, detail = detail,
 *			window_expires_at = window
 *	  WHERE x.tenant_id = tenant AND x.command_id = command_id
 *	 RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id
 *
 * and fill in *m from the row written.  reason and detail: (Datum) 0 or
 * NULL for null.  Returns false when no row was written: there is none
 * the caller may update, or a BEFORE trigger skipped it.  The statement
 * runs with the caller's rights: row-level security, privileges, rules and
 * every trigger apply as to any UPDATE.  It takes the row's lock itself;
 * its trigger, the one judge of the step, reads the row's latest version.
 *
 * With lock_context (a step that the caller has not locked anything
 * for: step_fast) and a step that may write the command's context (to
 * authorized, rejected or canceled, which release a question naming the
 * command, or a cancel recovery's start, which cancels its target), the
 * statement also locks the command's context, FOR UPDATE, before the
 * command's row: the lock is taken by a sub-select of the scan's filter,
 * evaluated on the row the scan finds before the UPDATE (its BEFORE
 * trigger) locks that row, and evaluated again, with the lock already
 * held, when a concurrent write makes the UPDATE recheck the row's latest
 * version.  So the order is the one every caller keeps, context then
 * command, in one statement.  Other steps (authz_pending, started) lock
 * the command alone: an end of the context writes the command
 * (commands_follow in context_fsm.c), so it waits for the step or the step
 * for it, without the context's lock.  When pending_question, a context
 * that holds a pending question (that the step may have to release) is
 * not the fast path's: the filter skips the row, and the function returns
 * false.
 */
static bool
move_command(Datum tenant, Datum command_id, CommandState to, Datum reason, Jsonb *detail,
			 Datum window, bool window_null, bool lock_context, bool pending_question,
			 MovedCommand *m)
{
	static SPIPlanPtr plans[3] = {NULL, NULL, NULL};
	static const Oid types[7] = {
		TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, BOOLOID
	};
	TupleDesc	desc = NULL;
	HeapTuple	row;
	bool		isnull;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	memset(m, 0, sizeof(*m));
	args[0] = tenant;
	args[1] = command_id;
	args[2] = CStringGetTextDatum(cscp_command_state_names[to]);
	args[3] = reason;
	nulls[3] = reason == (Datum) 0 ? 'n' : ' ';
	args[4] = PointerGetDatum(detail);
	nulls[4] = detail == NULL ? 'n' : ' ';
	args[5] = window;
	nulls[5] = window_null ? 'n' : ' ';
	args[6] = BoolGetDatum(pending_question);
	if (lock_context && to == CMD_STARTED)
		cscp_spi_plan(&plans[2],
					  "UPDATE cscp.command x"
					  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
					  "       window_expires_at = $6"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
					  "   AND (x.recovery_kind IS NULL OR x.recovery_kind OPERATOR(pg_catalog.<>) 'cancel'"
					  "        OR (SELECT $7 FROM cscp.context c"
					  "             WHERE c.tenant_id OPERATOR(pg_catalog.=) x.tenant_id"
					  "               AND c.context_id OPERATOR(pg_catalog.=) x.context_id"
					  "               FOR UPDATE) IS NOT TRUE)"
					  " RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id",
					  7, types);
	else if (lock_context && to != CMD_AUTHZ_PENDING)
		cscp_spi_plan(&plans[1],
					  "UPDATE cscp.command x"
					  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
					  "       window_expires_at = $6"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
					  "   AND (SELECT $7 AND c.slots OPERATOR(pg_catalog.?|)"
					  "                      '{pending_confirmation,pending_approval}'::pg_catalog.text[]"
					  "          FROM cscp.context c"
					  "         WHERE c.tenant_id OPERATOR(pg_catalog.=) x.tenant_id"
					  "           AND c.context_id OPERATOR(pg_catalog.=) x.context_id"
					  "           FOR UPDATE) IS NOT TRUE"
					  " RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id",
					  7, types);
	else
		cscp_spi_plan(&plans[0],
					  "UPDATE cscp.command x"
					  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
					  "       window_expires_at = $6"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
					  " RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id",
					  6, types);
	row = cscp_spi_update_one(plans[!lock_context ? 0 : to == CMD_STARTED ? 2 :
									to == CMD_AUTHZ_PENDING ? 0 : 1],
							  args, nulls, &desc, "move a command");
	if (row == NULL)
		return false;
	{
		Datum		d = heap_getattr(row, cscp_column(desc, "cscp.command", "reason_code"), desc, &isnull);

		m->reason_code = isnull ? NULL : TextDatumGetCString(d);
		d = heap_getattr(row, cscp_column(desc, "cscp.command", "recovery_kind"), desc, &isnull);
		m->recovery_kind = isnull ? NULL : TextDatumGetCString(d);
		m->target = heap_getattr(row, cscp_column(desc, "cscp.command", "target_command_id"), desc,
								 &m->target_null);
		m->tenant = heap_getattr(row, cscp_column(desc, "cscp.command", "tenant_id"), desc, &isnull);
	}
	return true;
}

/* A step asked of command_transition, and what it comes to. */
typedef struct Step
{
	Datum		command_id;
	Datum		tenant;			/* the session's tenant (cscp_lookup_tenant) */
	bool		tenant_null;	/* none set: any tenant the caller sees */
	CommandState to;
	Datum		reason;			/* text, or (Datum) 0 */
	Jsonb	   *detail;			/* or NULL */
	char	   *approver;		/* the approver_id detail names, or NULL */
	bool		approval;		/* authz_pending asking for an approval */
	bool		asking;			/* confirmation_required asking for a confirmation */
	HeapTuple	ctx;			/* the command's context, locked, or NULL */
	TupleDesc	ctxdesc;
	bool		ctx_read;		/* step_context read it (ctx NULL: none) */
	HeapTuple	cmd;			/* the command, locked with its context, or NULL */
	TupleDesc	cmddesc;
	Datum		window;			/* the question's window, when approval or asking */
	const char *context_refusal;	/* the context refuses the question, or NULL */
	bool		unseen;			/* the UPDATE found no row (the command was not locked first) */
	bool		fast;			/* a step tried by its UPDATE alone (step_fast) */
} Step;

/* Read and check command_transition's arguments into *st (22023). */
static void
step_args(FunctionCallInfo fcinfo, Oid state_type, Step *st)
{
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("to_state must not be null"),
				 errhint("Pass a cscp.command_state such as 'authorized'.")));
	st->to = cscp_command_state_of(state_type, PG_GETARG_DATUM(1));
	st->reason = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	if (!PG_ARGISNULL(2))
		cscp_check_id("reason_code", PG_GETARG_TEXT_PP(2));
	st->detail = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	check_object("detail", st->detail);
	st->approver = detail_approver(st->detail);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command_id must not be null"),
				 errhint("Pass the command_id returned by cscp.command_submit.")));
	st->command_id = PG_GETARG_DATUM(0);
	st->tenant = cscp_lookup_tenant(&st->tenant_null);
	st->approval = st->to == CMD_AUTHZ_PENDING && !PG_ARGISNULL(2) &&
		strcmp(text_to_cstring(PG_GETARG_TEXT_PP(2)), "approval_required") == 0;
	st->asking = st->to == CMD_CONFIRMATION_REQUIRED;
}

/*
 * Lock the command's context first when this step may change it (an
 * approval request, a question, or a step that answers or releases the
 * question the context holds) or needs it live (a step forward: an end
 * of the context also writes the command, so it waits for the step
 * either way).  Context
 * before command is the order every caller keeps (cscp.confirm and
 * cscp.approve too): a step that locked the command first and then
 * waited for the context could deadlock with one that holds the context
 * and waits for the command.  A step tried by its UPDATE alone
 * (step_fast) comes here only when that UPDATE wrote nothing.  The other
 * steps (executed, failed, compensated) write the command alone, and their
 * trigger reads no context: their UPDATE takes the command's lock itself.
 */
/*
 * Columns from..from+n-1 (0-based) of row (of desc) as a tuple of their
 * own, its descriptor in *out: one statement's row split into the rows of
 * the tables it joined, each read by column name as if selected alone.
 */
static HeapTuple
split_row(HeapTuple row, TupleDesc desc, int from, int n, TupleDesc *out)
{
	TupleDesc	d = CreateTemplateTupleDesc(n);
	Datum	   *values = palloc(desc->natts * sizeof(Datum));
	bool	   *nulls = palloc(desc->natts * sizeof(bool));

	heap_deform_tuple(row, desc, values, nulls);
	for (int i = 0; i < n; i++)
		TupleDescCopyEntry(d, i + 1, desc, from + i + 1);
	*out = d;
	return heap_form_tuple(d, values + from, nulls + from);
}

static void
step_context(Step *st)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {UUIDOID, TEXTOID};
	CommandState to = st->to;
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	if (!(st->approval || st->asking || to == CMD_CONFIRMED || to == CMD_AUTHZ_PENDING ||
		  to == CMD_AUTHORIZED || to == CMD_STARTED || to == CMD_REJECTED || to == CMD_CANCELED))
		return;

	/*
	 * The context and the command in one statement, locked in that order
	 * (PostgreSQL locks a row's marks in the order FOR UPDATE OF names
	 * them); a command without a (visible) context is locked alone by
	 * lock_command.
	 */
	cscp_spi_plan(&plan,
				  "SELECT " LOCKED_COMMAND_COLUMNS ", " CSCP_CONTEXT_COLUMNS
				  "  FROM cscp.command c_ JOIN cscp.context x"
				  "    ON x.tenant_id OPERATOR(pg_catalog.=) c_.tenant_id AND x.context_id OPERATOR(pg_catalog.=) c_.context_id"
				  " WHERE c_.command_id OPERATOR(pg_catalog.=) $1 AND c_.tenant_id OPERATOR(pg_catalog.=) coalesce($2, c_.tenant_id)"
				  "   FOR UPDATE OF x, c_",
				  2, types);
	args[0] = st->command_id;
	args[1] = st->tenant;
	nulls[1] = st->tenant_null ? 'n' : ' ';
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock a context");
	st->ctx_read = true;
	if (SPI_processed > 1)
		many_commands(st->command_id);
	if (SPI_processed == 1)
	{
		HeapTuple	row = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		st->cmd = split_row(row, desc, 0, LOCKED_COMMAND_NCOLS, &st->cmddesc);
		st->ctx = split_row(row, desc, LOCKED_COMMAND_NCOLS, desc->natts - LOCKED_COMMAND_NCOLS,
							&st->ctxdesc);
	}
}

/*
 * An approval or confirmation request is refused also for its context's
 * sake (not live, blocked), which only this function knows: with that
 * reason when the command's own rules allow the step.  Otherwise the
 * question's window opens now, for the tenant's approval_ttl or
 * confirmation_ttl.  A command with no context (inserted directly without
 * one) has no slot to ask in: its step to confirmation_required asks
 * nothing.
 */
static void
step_question(Step *st)
{
	char	   *status;
	bool		isnull;
	bool		live;
	Datum		tenant;

	if (st->asking && st->ctx == NULL)
		st->asking = false;
	if (!st->approval && !st->asking)
		return;
	status = st->ctx ? spi_text(st->ctx, st->ctxdesc, "cscp.context", "status") : NULL;
	live = st->ctx != NULL && cscp_context_row_usable(st->ctx, st->ctxdesc, cscp_now());
	if (status == NULL || !live ||
		(strcmp(status, "active") != 0 && strcmp(status, "pending") != 0))
	{
		st->context_refusal = (live && status != NULL && strcmp(status, "blocked") == 0) ?
			"context_blocked" :
			(status != NULL && strcmp(status, "closed") == 0) ? "context_closed" : "context_expired";
		return;
	}
	tenant = heap_getattr(st->ctx, cscp_column(st->ctxdesc, "cscp.context", "tenant_id"),
						  st->ctxdesc, &isnull);
	st->window = policy_window(tenant, st->approval ? "approval_ttl" : "confirmation_ttl");
}

static void cancel_target(Datum tenant, Datum target_id, Datum recovery_id);

/*
 * A step, written: the earlier question superseded first when this one
 * asks, the command moved by its UPDATE (judged by the trigger; *moving
 * is true while it runs), then what the step does to its context (the question asked,
 * or the slot naming the command released) and, for an executed
 * compensation, to its target.  The command's reason code, if any, into
 * *reason.  cmd is the command's row when it was locked first, or NULL:
 * then the UPDATE names it by the session's tenant, and one that finds no
 * row sets st->unseen for the caller to tell why.
 */
static void
step_write(Step *st, HeapTuple cmd, TupleDesc cmddesc, char **reason, volatile bool *moving)
{
	MovedCommand m;
	bool		isnull;
	CommandState to = st->to;
	Datum		tenant = cmd != NULL ?
		heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "tenant_id"), cmddesc, &isnull) :
		st->tenant;

	if (st->approval || st->asking)
		supersede_question(st->ctx, st->ctxdesc, st->approval, st->command_id);
	*moving = true;
	if (!move_command(tenant, st->command_id, to, st->reason, st->detail, st->window,
					  !st->approval && !st->asking, st->fast,
					  st->fast && (to == CMD_AUTHORIZED || to == CMD_REJECTED ||
								   to == CMD_CANCELED),
					  &m))
	{
		*moving = false;
		if (cmd == NULL)
		{
			st->unseen = true;
			return;
		}
		cscp_write_skipped(psprintf("move command %s to %s",
									DatumGetCString(DirectFunctionCall1(uuid_out, st->command_id)),
									cscp_command_state_names[to]));
	}
	*moving = false;
	*reason = m.reason_code;
	if (st->approval)
		request_approval(st->ctx, st->ctxdesc, st->command_id, st->approver, st->window);
	else if (st->asking)
		ask_confirmation(st->ctx, st->ctxdesc, st->command_id,
						 DatumGetTextPP(heap_getattr(cmd, cscp_column(cmddesc, "cscp.command",
																	  "idempotency_key"),
													 cmddesc, &isnull)),
						 command_fingerprint(cmd, cmddesc), st->window);
	else if (st->ctx != NULL && (to == CMD_CONFIRMED || to == CMD_AUTHORIZED ||
								 to == CMD_REJECTED || to == CMD_CANCELED))
		cscp_context_release(st->ctx, st->ctxdesc, st->command_id, NULL, NULL);
	if (to == CMD_EXECUTED && m.recovery_kind != NULL &&
		strcmp(m.recovery_kind, "compensate") == 0 && !m.target_null)
		compensate_target(m.tenant, st->command_id, m.target);
	/* A cancel recovery that starts (confirmed and approved as its class needs) cancels. */
	if (to == CMD_STARTED && m.recovery_kind != NULL &&
		strcmp(m.recovery_kind, "cancel") == 0 && !m.target_null)
		cancel_target(m.tenant, m.target, st->command_id);
}

/*
 * The step tried: step_write in a subtransaction, so that the command
 * trigger is the one judge of the step.  A refusal of the command's UPDATE
 * (55000 naming a constraint of cscp.command: the rule's reason code) is
 * rolled back with everything the step wrote and returned, as a reason
 * code in the caller's memory; NULL when the step was written (its reason
 * code into *reason).  Any other error is raised again.
 */
static const char *
step_try(Step *st, HeapTuple cmd, TupleDesc cmddesc, char **reason)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool moving = false;
	char	   *volatile why = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		step_write(st, cmd, cmddesc, reason, &moving);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (!moving || edata->sqlerrcode != ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
			edata->constraint_name == NULL || edata->schema_name == NULL ||
			edata->table_name == NULL || strcmp(edata->schema_name, "cscp") != 0 ||
			strcmp(edata->table_name, "command") != 0)
			ReThrowError(edata);
		why = pstrdup(edata->constraint_name);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return why;
}

/*
 * Whether the step is tried by its UPDATE alone first, with no statement
 * before it: a step that asks no question (authz_pending other than an
 * approval request, authorized, started, rejected, canceled), for a
 * session that names its tenant (cscp_lookup_tenant).  A step that may
 * write the command's context locks it in the same UPDATE before the
 * command (move_command's lock_context), in the order every caller keeps;
 * the others lock the command alone; its trigger judges it as any UPDATE.
 * An authorized, rejected or canceled whose context holds a pending
 * question, which the step may have to release, finds no row there and
 * takes the full path (step_context), as does a command the UPDATE does
 * not find; the UPDATE tried first then costs about 120,000 instructions
 * more than the full path alone (a cancel or reject of a command whose
 * context asks a question), and saves as many wherever no question waits.
 */
static bool
step_fast(const Step *st)
{
	return !st->tenant_null && !st->approval &&
		(st->to == CMD_AUTHZ_PENDING || st->to == CMD_AUTHORIZED || st->to == CMD_STARTED ||
		 st->to == CMD_REJECTED || st->to == CMD_CANCELED);
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
 * The one step it raises for (55000) is confirmed from confirmation_required:
 * only cscp.confirm records the answer that step needs.
 * authz_pending with reason approval_required asks for an approval (detail
 * may name its approver_id), confirmation_required asks for a confirmation
 * as command_submit does (window, pending slot, the earlier question
 * superseded); confirmed, authorized, rejected and canceled
 * release the context's pending slot naming the command.
 */
Datum
cscp_command_transition(PG_FUNCTION_ARGS)
{
	MemoryContext callerctx = CurrentMemoryContext;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			state_type;
	Step		st = {0};
	CommandState result_state = CMD_RECEIVED;
	char	   *reason = NULL;
	bool		accepted = false;
	HeapTuple	cmd;
	TupleDesc	cmddesc = NULL;
	const char *why;
	Datum		values[3];
	bool		result_nulls[3] = {false, false, false};

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	state_type = TupleDescAttr(rsinfo->setDesc, 1)->atttypid;
	step_args(fcinfo, state_type, &st);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	st.fast = step_fast(&st);
	why = st.fast ? step_try(&st, NULL, NULL, &reason) : NULL;
	if (!st.fast || st.unseen)
	{
		/* the full path: nothing was written */
		st.fast = false;
		st.unseen = false;
		step_context(&st);
		step_question(&st);
	}

	/*
	 * The step is tried: its UPDATE is judged by the command trigger alone,
	 * as any UPDATE is (RLS, privileges and triggers apply), and a refusal
	 * comes back as its reason code with nothing written.  A step that
	 * touches no context (step_context) or only locks it (step_fast), for a
	 * session bound to a tenant, is that UPDATE and what its trigger
	 * writes: the command's row is read again only when the step is refused
	 * or finds no row.  Otherwise (the context locked first, or no tenant
	 * set: an id may then be several tenants') the command's row is locked
	 * first.  Only a question the
	 * context refuses (step_question) is judged without writing, by the
	 * trigger's own rules (cscp_command_step_refusal) given the context
	 * step_context has read and locked, so that the command's own reason
	 * comes first.  A refused step is recorded as an
	 * invalid_transition_attempt and returned.
	 */
	cmd = st.cmd;
	cmddesc = st.cmddesc;
	if (cmd == NULL && (st.ctx_read || st.tenant_null))
	{
		cmd = lock_command(st.command_id, st.tenant, st.tenant_null, &cmddesc);
		if (cmd == NULL)
			no_command(st.command_id);
	}
	if (st.context_refusal != NULL)
	{
		why = cscp_command_step_refusal(cmd, cmddesc, st.ctx_read, st.ctx, st.ctxdesc, st.to,
										&result_state);
		if (why == NULL)
			why = st.context_refusal;
	}
	else
	{
		bool		isnull;
		int			statecol;

		if (!st.fast)
			why = step_try(&st, cmd, cmddesc, &reason);
		if (cmd == NULL && (why != NULL || st.unseen))
		{
			/* the row as it is now, for the refusal's record, or why none was written */
			cmd = lock_command(st.command_id, st.tenant, st.tenant_null, &cmddesc);
			if (cmd == NULL)
				no_command(st.command_id);
		}
		if (why == NULL && st.unseen)
			cscp_write_skipped(psprintf("move command %s to %s",
										DatumGetCString(DirectFunctionCall1(uuid_out, st.command_id)),
										cscp_command_state_names[st.to]));
		if (why == NULL)
		{
			accepted = true;
			result_state = st.to;
		}
		else
		{
			statecol = cscp_column(cmddesc, "cscp.command", "state");
			result_state = cscp_command_state_of(TupleDescAttr(cmddesc, statecol - 1)->atttypid,
												 heap_getattr(cmd, statecol, cmddesc, &isnull));
		}
	}
	if (why != NULL && strcmp(why, "not_answered") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("command %s cannot be confirmed without the user's answer",
						DatumGetCString(DirectFunctionCall1(uuid_out, st.command_id))),
				 errdetail("A command is confirmed only by the user's answer to its question."),
				 errhint("Record the user's answer with cscp.confirm.")));
	if (why != NULL)
	{
		cscp_command_record_refusal(cmd, cmddesc, result_state, st.to, why,
									refusal_detail(st.reason == (Datum) 0 ? NULL :
												   TextDatumGetCString(st.reason), st.detail));
		reason = (char *) why;
	}
	if (reason != NULL)
		reason = MemoryContextStrdup(callerctx, reason);
	SPI_finish();

	values[0] = BoolGetDatum(accepted);
	values[1] = cscp_command_state_datum(state_type, result_state);
	if (reason != NULL)
		values[2] = CStringGetTextDatum(reason);
	else
		result_nulls[2] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, result_nulls);
	return (Datum) 0;
}

/* Raise 22023 unless value (named argname) is null or a JSON object. */
static void
check_object(const char *argname, Jsonb *value)
{
	if (value != NULL && !JB_ROOT_IS_OBJECT(value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", argname),
				 errdetail("The value given is a JSON %s.",
						   TextDatumGetCString(DirectFunctionCall1(jsonb_typeof,
																   JsonbPGetDatum(value)))),
				 errhint("Pass an object such as '{}'.")));
}

/* What a command is formed from: command_submit's arguments, or a recovery's. */
typedef struct CommandRequest
{
	text	   *tenant_id;
	text	   *conversation_id;
	text	   *actor_id;
	text	   *idempotency_key;
	text	   *command_name;
	bool		mutating;
	ArrayType  *message_ids;
	Jsonb	   *payload;
	text	   *target_fingerprint; /* or NULL */
	Datum		target_command_id;	/* uuid, when has_target */
	bool		has_target;
	text	   *recovery_kind;	/* or NULL */
	const char *refuse_reason;	/* reject at once with this reason, or NULL */
	bool		context_required;	/* reject without a usable context */
	const CscpSubmitPrepared *prepared; /* message_turn's preparation, or NULL */
} CommandRequest;

/* What forming a command answers (command_submit's and command_recover's row). */
typedef struct CommandResult
{
	Datum		command_id;
	CommandState state;
	bool		replayed;
	Jsonb	   *outcome;		/* or NULL */
} CommandResult;

/* Column name of a SPI row, and whether it is null. */
static Datum
spi_col(HeapTuple tuple, TupleDesc desc, const char *table, const char *name, bool *isnull)
{
	return heap_getattr(tuple, cscp_column(desc, table, name), desc, isnull);
}

/* Whether text column name of a command row differs from value (IS DISTINCT FROM). */
static bool
text_differs(HeapTuple cmd, TupleDesc desc, const char *name, text *value)
{
	bool		isnull;
	Datum		d = spi_col(cmd, desc, "cscp.command", name, &isnull);

	if (isnull || value == NULL)
		return isnull != (value == NULL);
	return !DatumGetBool(DirectFunctionCall2Coll(texteq, DEFAULT_COLLATION_OID, d,
												 PointerGetDatum(value)));
}

/* The answer a command row gives: state, and the outcome _command_outcome would. */
static void
command_result(HeapTuple cmd, TupleDesc desc, bool replayed, CommandResult *r,
			   MemoryContext callerctx)
{
	int			attnum = cscp_column(desc, "cscp.command", "state");
	bool		isnull;
	Datum		d;
	MemoryContext old;

	r->state = cscp_command_state_of(TupleDescAttr(desc, attnum - 1)->atttypid,
									 heap_getattr(cmd, attnum, desc, &isnull));
	r->replayed = replayed;
	old = MemoryContextSwitchTo(callerctx);
	r->command_id = datumCopy(spi_col(cmd, desc, "cscp.command", "command_id", &isnull),
							  false, UUID_LEN);
	r->outcome = NULL;
	if (r->state == CMD_REJECTED || r->state == CMD_EXECUTED || r->state == CMD_FAILED ||
		r->state == CMD_CANCELED || r->state == CMD_COMPENSATED)
	{
		d = spi_col(cmd, desc, "cscp.command", "outcome", &isnull);
		if (!isnull)
			r->outcome = DatumGetJsonbPCopy(d);
	}
	else if (replayed)
	{
		StringInfoData buf;

		d = spi_col(cmd, desc, "cscp.command", "last_transition_at", &isnull);
		initStringInfo(&buf);
		appendStringInfo(&buf, "{\"state\": \"%s\", \"in_progress\": %s, \"last_transition_at\": ",
						 cscp_command_state_names[r->state],
						 r->state == CMD_STARTED ? "true" : "false");
		cscp_canonical_string(&buf, cscp_utc_iso(DatumGetTimestampTz(d)),
							  strlen(cscp_utc_iso(DatumGetTimestampTz(d))));
		appendStringInfoChar(&buf, '}');
		r->outcome = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
	}
	MemoryContextSwitchTo(old);
}


/* The last message id of an array, or NULL. */
static text *
last_message_id(ArrayType *message_ids)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (message_ids == NULL)
		return NULL;
	deconstruct_array(message_ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0 || nulls[n - 1])
		return NULL;
	return DatumGetTextPP(elems[n - 1]);
}

/* Run a saved plan that must succeed with the given SPI result code; the rows it returns. */
static SPITupleTable *
run(SPIPlanPtr plan, Datum *args, const char *nulls, bool read_only, int expected)
{
	int			rc = SPI_execute_plan(plan, args, nulls, read_only, 0);

	if (rc != expected)
		elog(ERROR, "cscp internal query failed: %s", SPI_result_code_string(rc));
	return SPI_tuptable;
}

/* Whether command row cmd is what request q asks for (a replay, not a conflict). */
static bool
same_request(HeapTuple cmd, TupleDesc desc, const CommandRequest *q)
{
	bool		isnull;
	Datum		target;

	if (text_differs(cmd, desc, "conversation_id", q->conversation_id) ||
		text_differs(cmd, desc, "actor_id", q->actor_id) ||
		text_differs(cmd, desc, "command_name", q->command_name) ||
		DatumGetBool(spi_col(cmd, desc, "cscp.command", "mutating", &isnull)) != q->mutating ||
		compareJsonbContainers(&DatumGetJsonbP(spi_col(cmd, desc, "cscp.command",
													   "payload", &isnull))->root,
							   &q->payload->root) != 0 ||
		text_differs(cmd, desc, "target_fingerprint", q->target_fingerprint) ||
		text_differs(cmd, desc, "recovery_kind", q->recovery_kind))
		return false;
	target = spi_col(cmd, desc, "cscp.command", "target_command_id", &isnull);
	if (isnull != !q->has_target)
		return false;
	return isnull || DatumGetBool(DirectFunctionCall2(uuid_eq, target, q->target_command_id));
}

/*
 * The replay step of forming a command (its caller holds the advisory lock
 * of tenant and key that serialises every submit of one key): a command
 * already under the key (committed while we waited for the lock, too) is
 * answered as a replay when it is the same request (true, *r filled in),
 * or refused (23505) when it is not.  False when the key is new.
 */
static bool
command_replay(const CommandRequest *q, CommandResult *r, MemoryContext callerctx)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, TEXTOID};
	Datum		args[2] = {PointerGetDatum(q->tenant_id), PointerGetDatum(q->idempotency_key)};
	SPITupleTable *tt;
	HeapTuple	cmd;

	cscp_spi_plan(&plan,
				  "SELECT " COMMAND_RESULT_COLUMNS ", x.conversation_id, x.actor_id, x.command_name,"
				  "       x.mutating, x.payload, x.target_fingerprint, x.recovery_kind,"
				  "       x.target_command_id"
				  "  FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.idempotency_key OPERATOR(pg_catalog.=) $2",
				  2, types);
	tt = run(plan, args, NULL, false, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	cmd = tt->vals[0];
	if (!same_request(cmd, tt->tupdesc, q))
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("idempotency key \"%s\" was already used for a different command",
						text_to_cstring(q->idempotency_key)),
				 errdetail("Command %s (%s) of conversation %s has this key.",
						   spi_text(cmd, tt->tupdesc, "cscp.command", "command_id"),
						   spi_text(cmd, tt->tupdesc, "cscp.command", "command_name"),
						   spi_text(cmd, tt->tupdesc, "cscp.command", "conversation_id")),
				 errhint("Use a new idempotency key for a new command; resend the same request to replay it.")));
	command_result(cmd, tt->tupdesc, true, r, callerctx);
	return true;
}

/* A new command as it is being formed: its context and whether it is refused. */
typedef struct Formation
{
	bool		has_ctx;		/* a context was found (and locked) */
	Datum		context_id;		/* uuid, when has_ctx */
	char	   *expires_at;		/* its expires_at, UTC, when has_ctx */
	bool		usable;			/* it is live and not past expires_at */
	const char *reason;			/* refused at once with this reason, or NULL */
	Jsonb	   *context_ref;	/* {context_id, expires_at} of a refused command, or NULL */
} Formation;

/*
 * The context step: the context of (tenant, conversation, actor) -- the
 * live one, else the latest -- locked (*ctx, its descriptor in *ctxdesc;
 * NULL when there is none), and whether the command is refused for its
 * sake: no_context, context_expired (a context past its expires_at is
 * recorded expired, by TTL, on the way), or context_blocked for a mutating
 * command.  A refusal the request carries comes first.
 */
static void
form_context(const CommandRequest *q, Formation *f, HeapTuple *ctx, TupleDesc *ctxdesc)
{
	static SPIPlanPtr expire_plan = NULL;
	static const Oid types[2] = {TEXTOID, UUIDOID};
	char	   *status = NULL;
	bool		isnull;

	f->reason = q->refuse_reason;
	f->has_ctx = cscp_context_for(q->tenant_id, q->conversation_id, q->actor_id, ctx, ctxdesc);
	if (f->has_ctx)
	{
		status = spi_text(*ctx, *ctxdesc, "cscp.context", "status");
		f->context_id = spi_col(*ctx, *ctxdesc, "cscp.context", "context_id", &isnull);
		f->expires_at = cscp_utc_iso(DatumGetTimestampTz(spi_col(*ctx, *ctxdesc, "cscp.context",
																 "expires_at", &isnull)));
		f->usable = cscp_context_row_usable(*ctx, *ctxdesc, cscp_now());
	}
	if (f->reason != NULL || !q->context_required)
		return;
	if (!f->has_ctx)
		f->reason = "no_context";
	else if (!f->usable)
	{
		f->reason = "context_expired";
		/* The expiry invariant made durable: recorded expired, by TTL. */
		if (cscp_status_live(status))
		{
			Datum		args[2] = {PointerGetDatum(q->tenant_id), f->context_id};

			cscp_spi_plan(&expire_plan,
						  "UPDATE cscp.context x SET status = 'expired', reason = 'ttl'"
						  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
						  2, types);
			run(expire_plan, args, NULL, false, SPI_OK_UPDATE);
		}
	}
	else if (q->mutating && strcmp(status, "blocked") == 0)
		f->reason = "context_blocked";
}

/*
 * The parameters every INSERT of a command formed here starts with: what the
 * request asks for ($1 to $12, in COMMAND_PARAM_COLUMNS' order).
 */
#define COMMAND_PARAMS 12
#define COMMAND_PARAM_COLUMNS \
	"tenant_id, conversation_id, actor_id, idempotency_key, message_ids, command_name," \
	" mutating, payload, target_fingerprint, target_command_id, recovery_kind, command_id"
#define COMMAND_PARAM_TYPES \
	TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, BOOLOID, JSONBOID, TEXTOID, \
	UUIDOID, TEXTOID, UUIDOID

/* Fill args[0..COMMAND_PARAMS - 1] and their nulls from request q. */
static void
command_params(const CommandRequest *q, Datum *args, char *nulls)
{
	memset(nulls, ' ', COMMAND_PARAMS);
	args[0] = PointerGetDatum(q->tenant_id);
	args[1] = PointerGetDatum(q->conversation_id);
	args[2] = PointerGetDatum(q->actor_id);
	args[3] = PointerGetDatum(q->idempotency_key);
	args[4] = PointerGetDatum(q->message_ids);
	nulls[4] = q->message_ids ? ' ' : 'n';
	args[5] = PointerGetDatum(q->command_name);
	args[6] = BoolGetDatum(q->mutating);
	args[7] = JsonbPGetDatum(q->payload);
	args[8] = PointerGetDatum(q->target_fingerprint);
	nulls[8] = q->target_fingerprint ? ' ' : 'n';
	args[9] = q->target_command_id;
	nulls[9] = q->has_target ? ' ' : 'n';
	args[10] = PointerGetDatum(q->recovery_kind);
	nulls[10] = q->recovery_kind ? ' ' : 'n';
	/* Its id: the one chosen by message_turn, else generated by the trigger. */
	args[11] = q->prepared != NULL ? q->prepared->command_id : (Datum) 0;
	nulls[11] = q->prepared != NULL ? ' ' : 'n';
}

/*
 * The replay, context and insert steps in one statement, the usual way:
 * the command inserted against the live context of (tenant, conversation,
 * actor), which the INSERT finds and locks (FOR UPDATE, as
 * cscp_context_for would), when the key is new, the request carries no
 * refusal and the context is usable and, for a mutating command, not
 * blocked; its trigger records its frame (frame_form in command_fsm.c).
 * Returns the row (RETURNING's, its descriptor in *desc), or NULL when it
 * inserted none: command_replay and form_context then tell why.
 */
static HeapTuple
insert_live(const CommandRequest *q, Formation *f, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[COMMAND_PARAMS + 1] = {COMMAND_PARAM_TYPES, TIMESTAMPTZOID};
	Datum		args[COMMAND_PARAMS + 1];
	char		nulls[COMMAND_PARAMS + 1];
	SPITupleTable *tt;
	bool		isnull;

	if (q->refuse_reason != NULL)
		return NULL;
	command_params(q, args, nulls);
	args[COMMAND_PARAMS] = TimestampTzGetDatum(cscp_now());
	nulls[COMMAND_PARAMS] = ' ';
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.command AS x (" COMMAND_PARAM_COLUMNS ","
				  "    context_id, frame_id, context_ref, reason_code, auto_confirm, state)"
				  " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
				  "        y.context_id, NULL, NULL, NULL, NULL, NULL"
				  "   FROM cscp.context y"
				  "  WHERE y.tenant_id OPERATOR(pg_catalog.=) $1"
				  "    AND y.context_id OPERATOR(pg_catalog.=) " CSCP_LIVE_CONTEXT_ID
				  "    AND cscp.context_usable(y.status, y.expires_at, $13)"
				  "    AND NOT ($7 AND y.status OPERATOR(pg_catalog.=) 'blocked'::cscp.context_status)"
				  "    AND NOT EXISTS (SELECT FROM cscp.command k WHERE k.tenant_id OPERATOR(pg_catalog.=) $1"
				  "                       AND k.idempotency_key OPERATOR(pg_catalog.=) $4)"
				  "    FOR UPDATE OF y"
				  " RETURNING " COMMAND_RESULT_COLUMNS ", x.context_id",
				  COMMAND_PARAMS + 1, types);
	tt = run(plan, args, nulls, false, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
		return NULL;
	f->has_ctx = true;
	f->usable = true;
	f->context_id = SPI_getbinval(tt->vals[0], tt->tupdesc, SPI_fnumber(tt->tupdesc, "context_id"),
								  &isnull);
	*desc = tt->tupdesc;
	return tt->vals[0];
}

/*
 * Every command with a context carries its context_ref: one formed against
 * a usable context gets it, with its frame, from the command trigger
 * (frame_form in command_fsm.c), which records the frame of the state it
 * reads; one refused for its context's sake names the context alone.
 */
static void
form_context_ref(Formation *f)
{
	JsonbParseState *st = NULL;

	if (!f->has_ctx || (f->usable && f->reason == NULL))
		return;
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cscp_jsonb_push_text(&st, "context_id",
						 DatumGetCString(DirectFunctionCall1(uuid_out, f->context_id)));
	cscp_jsonb_push_text(&st, "frame_id", NULL);
	cscp_jsonb_push_text(&st, "context_hash", NULL);
	cscp_jsonb_push_text(&st, "expires_at", f->expires_at);
	f->context_ref = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/*
 * The insert step: the command row as it was asked for, with its context,
 * frame and refusal.  Its birth is the command trigger's to decide
 * (insert_birth in command_fsm.c): auto_confirm and state are inserted
 * null, and it is born canonicalized, or confirmation_required with its
 * window (superseding the question its context asks) when it is mutating,
 * not auto-confirmed and formed against a usable context, or rejected with
 * the reason it was refused for; the trigger records the steps it was born
 * through, so that no row stands at canonicalized without its snapshot.
 * Returns the row (COMMAND_RESULT_COLUMNS), its descriptor
 * in *desc.
 */
static HeapTuple
insert_command(const CommandRequest *q, const Formation *f, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[COMMAND_PARAMS + 3] = {COMMAND_PARAM_TYPES, UUIDOID, JSONBOID, TEXTOID};
	Datum		args[COMMAND_PARAMS + 3];
	char		nulls[COMMAND_PARAMS + 3];
	SPITupleTable *tt;

	command_params(q, args, nulls);
	args[COMMAND_PARAMS] = f->context_id;
	nulls[COMMAND_PARAMS] = f->has_ctx ? ' ' : 'n';
	args[COMMAND_PARAMS + 1] = PointerGetDatum(f->context_ref);
	nulls[COMMAND_PARAMS + 1] = f->context_ref ? ' ' : 'n';
	args[COMMAND_PARAMS + 2] = f->reason != NULL ? CStringGetTextDatum(f->reason) : (Datum) 0;
	nulls[COMMAND_PARAMS + 2] = f->reason != NULL ? ' ' : 'n';
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.command AS x (" COMMAND_PARAM_COLUMNS ","
				  "    context_id, context_ref, reason_code, frame_id, auto_confirm, state)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,"
				  "         NULL, NULL, NULL)"
				  " RETURNING " COMMAND_RESULT_COLUMNS,
				  COMMAND_PARAMS + 3, types);
	tt = run(plan, args, nulls, false, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
		cscp_write_skipped("insert a command");
	*desc = tt->tupdesc;
	return tt->vals[0];
}

/*
 * The command becomes its context's last (a use: its TTL slides), with
 * last_message as the context's last message when given.
 */
static void
use_context(const CommandRequest *q, const Formation *f, Datum command_id, text *last_message)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID};
	Datum		args[4] = {PointerGetDatum(q->tenant_id), f->context_id, command_id,
	PointerGetDatum(last_message)};
	char		nulls[4] = {' ', ' ', ' ', last_message ? ' ' : 'n'};

	cscp_spi_plan(&plan,
				  "UPDATE cscp.context x"
				  "   SET last_command_id = $3,"
				  "       last_message_id = coalesce($4, x.last_message_id),"
				  "       expires_at = cscp.context_touch(x)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
				  4, types);
	cscp_spi_write_one(plan, args, nulls, SPI_OK_UPDATE, "make a command its context's last");
}

/*
 * A command whose context message_turn made name it as its last
 * (CscpSubmitPrepared.context_used) was not formed against that context:
 * what open_use checked under the key's lock and the context's (the key
 * new, the context usable and not blocked) no longer held, which nothing
 * may change before the command is formed.
 */
static void
prepared_use_formed(bool used)
{
	if (used)
		elog(ERROR, "a command whose context was made to name it was not formed against it");
}

/*
 * Form a command, or replay the one its idempotency key already names, in
 * named steps: replay, context, insert (the three in one statement when
 * the key is new and the context usable: insert_live; the trigger decides
 * its birth, records its frame and, when it is born asking, writes its
 * context's question), then the refusal, or the context's use (unless it
 * asked, or message_turn's open made it already: q->prepared).  Locks, in order: the advisory lock of (tenant,
 * key) (taken by message_turn when prepared), the context of (tenant,
 * conversation, actor), then the command rows.  The caller is connected to
 * SPI.
 */
static void
command_create(const CommandRequest *q, CommandResult *r, MemoryContext callerctx)
{
	Formation	f = {0};
	HeapTuple	cmd;
	TupleDesc	cmddesc;
	bool		used = q->prepared != NULL && q->prepared->context_used;

	if (q->prepared == NULL)
		cscp_key_lock(q->tenant_id, VARDATA_ANY(q->idempotency_key),
					  VARSIZE_ANY_EXHDR(q->idempotency_key));
	if ((cmd = insert_live(q, &f, &cmddesc)) == NULL)
	{
		HeapTuple	ctx;
		TupleDesc	ctxdesc;

		if (command_replay(q, r, callerctx))
		{
			prepared_use_formed(used);
			return;
		}
		form_context(q, &f, &ctx, &ctxdesc);
		form_context_ref(&f);
		cmd = insert_command(q, &f, &cmddesc);
	}
	command_result(cmd, cmddesc, false, r, callerctx);
	if (f.reason != NULL || !f.usable)
	{
		prepared_use_formed(used);
		return;
	}
	/* One born asking has asked its context already (its trigger did). */
	if (r->state != CMD_CONFIRMATION_REQUIRED && !used)
		use_context(q, &f, r->command_id, last_message_id(q->message_ids));
}

/* Return r as the one row of a command_submit or command_recover call. */
static Datum
return_result(FunctionCallInfo fcinfo, const CommandResult *r)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	values[0] = r->command_id;
	values[1] = cscp_command_state_datum(TupleDescAttr(rsinfo->setDesc, 1)->atttypid, r->state);
	values[2] = BoolGetDatum(r->replayed);
	if (r->outcome != NULL)
		values[3] = JsonbPGetDatum(r->outcome);
	else
		nulls[3] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/* Raise 22023 unless message_ids is a non-null one-dimensional array of ids. */
static void
check_message_ids(ArrayType *message_ids)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (message_ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("message_ids must not be null"),
				 errhint("Pass the ids of the messages the command was formed from, or '{}'.")));
	if (ARR_NDIM(message_ids) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("message_ids must be a one-dimensional array")));
	deconstruct_array(message_ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		cscp_check_id("message_ids element", nulls[i] ? NULL : DatumGetTextPP(elems[i]));
}

/*
 * The arguments of command_submit, unchecked; the rest of the request
 * empty.
 */
static void
request_args(FunctionCallInfo fcinfo, CommandRequest *q)
{
	memset(q, 0, sizeof(*q));
	q->tenant_id = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	q->conversation_id = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	q->actor_id = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	q->idempotency_key = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	q->command_name = PG_ARGISNULL(4) ? NULL : PG_GETARG_TEXT_PP(4);
	q->mutating = !PG_ARGISNULL(5) && PG_GETARG_BOOL(5);
	q->message_ids = PG_ARGISNULL(6) ? NULL : PG_GETARG_ARRAYTYPE_P(6);
	q->payload = PG_ARGISNULL(7) ? NULL : PG_GETARG_JSONB_P(7);
	q->target_fingerprint = PG_ARGISNULL(8) ? NULL : PG_GETARG_TEXT_PP(8);
}

/* Form the command q asks for and return its row. */
static Datum
form_command(FunctionCallInfo fcinfo, const CommandRequest *q)
{
	MemoryContext callerctx = CurrentMemoryContext;
	CommandResult r;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	command_create(q, &r, callerctx);
	SPI_finish();
	return return_result(fcinfo, &r);
}

/* What command_submit checks of its arguments (but mutating's NULL, which C callers cannot pass). */
static void
submit_checks(CommandRequest *q)
{
	cscp_check_tenant(q->tenant_id);
	cscp_check_id("conversation_id", q->conversation_id);
	cscp_check_id("actor_id", q->actor_id);
	cscp_check_id("idempotency_key", q->idempotency_key);
	cscp_check_id("command_name", q->command_name);
	check_message_ids(q->message_ids);
	if (q->payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload must not be null"),
				 errhint("Pass '{}' for a command without arguments.")));
	check_object("payload", q->payload);
	if (q->target_fingerprint != NULL)
		cscp_check_id("target_fingerprint", q->target_fingerprint);
	q->context_required = true;
	/* Whether it mutates is the registry's, not the caller's (registry.c). */
	q->mutating = cscp_registry_mutating(q->tenant_id, q->command_name, q->mutating,
										 CSCP_REGISTRY_ARGUMENT);
}

PG_FUNCTION_INFO_V1(cscp_command_submit);

/*
 * cscp.command_submit(tenant_id, conversation_id, actor_id, idempotency_key,
 *                     command_name, mutating, message_ids, payload,
 *                     target_fingerprint)
 * RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean,
 *               outcome jsonb)
 *
 * Forms a command against the live context of (tenant, conversation,
 * actor): a frame of the context, and a confirmation request when it is
 * mutating and not auto-confirmed; or replays the command its idempotency
 * key already names.
 */
Datum
cscp_command_submit(PG_FUNCTION_ARGS)
{
	CommandRequest q;

	request_args(fcinfo, &q);
	if (PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mutating must not be null"),
				 errhint("Say whether the command changes anything (true) or only reads (false).")));
	submit_checks(&q);
	return form_command(fcinfo, &q);
}

/*
 * cscp.command_submit from C (cscp.message_turn): the same checks and the
 * same forming, with what the caller prepared (NULL: nothing; else it holds
 * the key's lock, and the command takes the id chosen); the caller is not
 * connected to SPI.
 */
void
cscp_submit_command(text *tenant_id, text *conversation_id, text *actor_id,
					text *idempotency_key, text *command_name, bool mutating,
					ArrayType *message_ids, Jsonb *payload, text *target_fingerprint,
					const CscpSubmitPrepared *prepared, CscpSubmitted *result)
{
	MemoryContext callerctx = CurrentMemoryContext;
	CommandRequest q = {0};
	CommandResult r;

	q.tenant_id = tenant_id;
	q.conversation_id = conversation_id;
	q.actor_id = actor_id;
	q.idempotency_key = idempotency_key;
	q.command_name = command_name;
	q.mutating = mutating;
	q.message_ids = message_ids;
	q.payload = payload;
	q.target_fingerprint = target_fingerprint;
	q.prepared = prepared;
	submit_checks(&q);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	command_create(&q, &r, callerctx);
	SPI_finish();
	result->command_id = r.command_id;
	result->state = r.state;
	result->replayed = r.replayed;
	result->outcome = r.outcome;
}

/*
 * The cancellation of a cancel recovery recovery_id: its target (target_id,
 * of tenant) canceled, unless it has finished meanwhile, and its context's
 * slot released.  Locks: the target's context, then the target.
 */
static void
cancel_target(Datum tenant, Datum target_id, Datum recovery_id)
{
	static SPIPlanPtr target_plan = NULL;
	static SPIPlanPtr context_plan = NULL;
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr cancel_plan = NULL;
	static const Oid key_types[2] = {TEXTOID, UUIDOID};
	static const Oid cancel_types[3] = {TEXTOID, UUIDOID, UUIDOID};
	Datum		args[3] = {tenant, target_id, recovery_id};
	HeapTuple	ctx = NULL;
	TupleDesc	ctxdesc = NULL;
	bool		isnull;
	Datum		context_id;

	/* The target's context first, as everywhere; then the target. */
	cscp_spi_plan(&target_plan,
				  "SELECT x.context_id FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2",
				  2, key_types);
	run(target_plan, args, NULL, false, SPI_OK_SELECT);
	context_id = SPI_processed == 1 ? SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
													&isnull) : (Datum) 0;
	if (SPI_processed == 1 && !isnull)
	{
		Datum		cargs[2] = {tenant, context_id};

		cscp_spi_plan(&context_plan,
					  "SELECT * FROM cscp.context x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2"
					  "   FOR UPDATE",
					  2, key_types);
		run(context_plan, cargs, NULL, false, SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			ctx = SPI_copytuple(SPI_tuptable->vals[0]);
			ctxdesc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
		}
	}
	/* The target, locked: whether it is still to be canceled. */
	cscp_spi_plan(&lock_plan,
				  "SELECT x.state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL"
				  "       (ARRAY['rejected', 'executed', 'failed', 'canceled', 'compensated'])"
				  "  FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2 FOR UPDATE",
				  2, key_types);
	run(lock_plan, args, NULL, false, SPI_OK_SELECT);
	if (SPI_processed != 1 ||
		!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		return;

	/* A live target must move: a skipped UPDATE raises (27000). */
	cscp_spi_plan(&cancel_plan,
				  "UPDATE cscp.command x"
				  "   SET state = 'canceled', reason_code = 'canceled_by_recovery',"
				  "       detail = pg_catalog.jsonb_build_object('recovery_command_id', $3)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2",
				  3, cancel_types);
	cscp_spi_write_one(cancel_plan, args, NULL, SPI_OK_UPDATE, "cancel the target of a recovery");
	if (ctx != NULL)
		cscp_context_release(ctx, ctxdesc, target_id, NULL, NULL);
}

/*
 * The cancellation a cancel recovery of a command that is not gated carries
 * out itself, once its command recovery_id is formed: the target canceled
 * (cancel_target) and the recovery command run through its lifecycle to
 * executed.  Returns the recovery command's row as it ends (state and
 * outcome).
 */
static HeapTuple
recover_cancel(Datum tenant, Datum target_id, Datum recovery_id, TupleDesc *desc)
{
	static SPIPlanPtr step_plan = NULL;
	static const Oid step_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const char *const steps[] = {"authz_pending", "authorized", "started", "executed"};
	HeapTuple	row = NULL;

	cancel_target(tenant, target_id, recovery_id);

	cscp_spi_plan(&step_plan,
				  "UPDATE cscp.command x SET state = $3::cscp.command_state, reason_code = 'cancel_' OPERATOR(pg_catalog.||) $3"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
				  " RETURNING x.state, x.outcome",
				  3, step_types);
	for (int i = 0; i < (int) lengthof(steps); i++)
	{
		Datum		sargs[3] = {tenant, recovery_id, CStringGetTextDatum(steps[i])};

		run(step_plan, sargs, NULL, false, SPI_OK_UPDATE_RETURNING);
		if (SPI_processed == 1)
		{
			row = SPI_tuptable->vals[0];
			*desc = SPI_tuptable->tupdesc;
		}
	}
	if (row == NULL)
		elog(ERROR, "could not carry out the cancellation of a recovery");
	return row;
}

/* The text value of column name of a SPI row of cscp.command, or NULL. */
static text *
command_text(HeapTuple t, TupleDesc desc, const char *name)
{
	bool		isnull;
	Datum		d = spi_col(t, desc, "cscp.command", name, &isnull);

	return isnull ? NULL : DatumGetTextPCopy(d);
}

/* Raise 22023 unless command_recover's arguments are well formed; its kind. */
static char *
recover_args(FunctionCallInfo fcinfo)
{
	char	   *kind;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target_command_id must not be null"),
				 errhint("Pass the id of the command to recover.")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kind must not be null"),
				 errhint("Use retry, cancel, reprocess or compensate.")));
	kind = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (strcmp(kind, "retry") != 0 && strcmp(kind, "cancel") != 0 &&
		strcmp(kind, "reprocess") != 0 && strcmp(kind, "compensate") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown recovery kind \"%s\"", kind),
				 errhint("Use retry, cancel, reprocess or compensate.")));
	cscp_check_id("idempotency_key", PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload must not be null"),
				 errhint("Pass '{}'.")));
	check_object("payload", PG_GETARG_JSONB_P(3));
	return kind;
}

/*
 * Whether a recovery of kind applies to a target in state s: retry a
 * failed command; reprocess a rejected, failed or canceled one; cancel one
 * that has not finished (started included); compensate an executed or
 * failed one.
 */
static bool
recovery_applies(const char *kind, CommandState s)
{
	if (strcmp(kind, "retry") == 0)
		return s == CMD_FAILED;
	if (strcmp(kind, "reprocess") == 0)
		return s == CMD_REJECTED || s == CMD_FAILED || s == CMD_CANCELED;
	if (strcmp(kind, "cancel") == 0)
		return s == CMD_RECEIVED || s == CMD_CANONICALIZED || s == CMD_CONFIRMATION_REQUIRED ||
			s == CMD_CONFIRMED || s == CMD_AUTHZ_PENDING || s == CMD_AUTHORIZED || s == CMD_STARTED;
	return s == CMD_EXECUTED || s == CMD_FAILED;
}

/*
 * The command a recovery of kind forms against target t: retry and
 * reprocess form the same command again (payload merged, mutating as the
 * registry says); cancel and compensate form "<name>:<kind>", a
 * compensation mutating.  Refused at once (recovery_not_applicable) when
 * the kind does not apply; only a cancel needs no usable context.
 */
static void
recovery_request(HeapTuple t, TupleDesc tdesc, const char *kind, text *key, Jsonb *payload,
				 bool applies, bool gated, CommandRequest *q)
{
	bool		isnull;

	q->conversation_id = command_text(t, tdesc, "conversation_id");
	q->actor_id = command_text(t, tdesc, "actor_id");
	q->idempotency_key = key;
	q->message_ids = DatumGetArrayTypeP(spi_col(t, tdesc, "cscp.command", "message_ids", &isnull));
	if (strcmp(kind, "retry") == 0 || strcmp(kind, "reprocess") == 0)
	{
		Datum		own = spi_col(t, tdesc, "cscp.command", "payload", &isnull);

		q->command_name = command_text(t, tdesc, "command_name");
		q->mutating = cscp_registry_mutating(q->tenant_id, q->command_name,
											 DatumGetBool(spi_col(t, tdesc, "cscp.command", "mutating", &isnull)),
											 CSCP_REGISTRY_RECOVERY);
		q->payload = DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, own, JsonbPGetDatum(payload)));
		q->target_fingerprint = command_text(t, tdesc, "target_fingerprint");
	}
	else
	{
		q->command_name = cstring_to_text(psprintf("%s:%s",
												   text_to_cstring(command_text(t, tdesc, "command_name")),
												   kind));
		q->mutating = gated || (strcmp(kind, "compensate") == 0 &&
								cscp_registry_mutating(q->tenant_id, q->command_name, true,
													   CSCP_REGISTRY_RECOVERY));
		q->payload = payload;
	}
	q->has_target = true;
	q->target_command_id = spi_col(t, tdesc, "cscp.command", "command_id", &isnull);
	q->recovery_kind = cstring_to_text(kind);
	q->refuse_reason = applies ? NULL : "recovery_not_applicable";
	q->context_required = strcmp(kind, "cancel") != 0 || gated;
}

PG_FUNCTION_INFO_V1(cscp_command_recover);

/*
 * cscp.command_recover(target_command_id uuid, kind text, idempotency_key
 *                      text, payload jsonb)
 * RETURNS TABLE(command_id uuid, state cscp.command_state, replayed boolean,
 *               outcome jsonb)
 *
 * A new command aimed at the target, formed as command_submit forms one
 * (replayed by its idempotency key): retry and reprocess repeat the target
 * with payload merged over its own, cancel and compensate are commands
 * "<name>:<kind>".  A recovery that does not apply to the target's state is
 * rejected at once (recovery_not_applicable).  Risk drives recovery
 * (registry.c): a cancel or compensate recovery of a gated target is
 * mutating, so it asks the user's confirmation, and needs an approval when
 * its target's class does; a cancel of a gated target is carried out when
 * command_transition starts it.  A cancel that applies to any other target
 * is carried out here: the target canceled, the recovery command executed.
 */
Datum
cscp_command_recover(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr target_plan = NULL;
	static const Oid target_types[2] = {UUIDOID, TEXTOID};
	MemoryContext callerctx = CurrentMemoryContext;
	CommandRequest q = {0};
	CommandResult r;
	char	   *kind = recover_args(fcinfo);
	HeapTuple	t;
	TupleDesc	tdesc;
	Oid			state_type;
	bool		applies;
	bool		gated = false;
	bool		isnull;
	Datum		target_id = PG_GETARG_DATUM(0);
	Datum		target_args[2];
	char		target_nulls[2] = {' ', ' '};
	bool		tenant_null;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	state_type = TupleDescAttr(((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, 1)->atttypid;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * The target, as the caller may see it (row-level security), of the
	 * session's tenant when one is set.
	 */
	target_args[0] = target_id;
	target_args[1] = cscp_lookup_tenant(&tenant_null);
	target_nulls[1] = tenant_null ? 'n' : ' ';
	cscp_spi_plan(&target_plan,
				  "SELECT * FROM cscp.command x"
				  " WHERE x.command_id OPERATOR(pg_catalog.=) $1 AND x.tenant_id OPERATOR(pg_catalog.=) coalesce($2, x.tenant_id)",
				  2, target_types);
	run(target_plan, target_args, target_nulls, true, SPI_OK_SELECT);
	if (SPI_processed > 1)
		many_commands(target_id);
	if (SPI_processed != 1)
		no_command(target_id);
	t = SPI_copytuple(SPI_tuptable->vals[0]);
	tdesc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	q.tenant_id = command_text(t, tdesc, "tenant_id");
	cscp_check_tenant(q.tenant_id);
	applies = recovery_applies(kind, cscp_command_state_of(state_type,
														   spi_col(t, tdesc, "cscp.command",
																   "state", &isnull)));
	if (strcmp(kind, "cancel") == 0 || strcmp(kind, "compensate") == 0)
		gated = cscp_registry_recovery_gated(PointerGetDatum(q.tenant_id), target_id);
	recovery_request(t, tdesc, kind, PG_GETARG_TEXT_PP(2), PG_GETARG_JSONB_P(3), applies, gated, &q);
	command_create(&q, &r, callerctx);

	/* A cancel that applies cancels its target at once, and records its own run. */
	if (!r.replayed && applies && !gated && strcmp(kind, "cancel") == 0 && r.state == CMD_CANONICALIZED)
	{
		TupleDesc	rdesc;
		HeapTuple	rc = recover_cancel(PointerGetDatum(q.tenant_id), q.target_command_id,
										r.command_id, &rdesc);
		Datum		outcome;

		r.state = cscp_command_state_of(state_type, SPI_getbinval(rc, rdesc, 1, &isnull));
		r.outcome = NULL;
		outcome = SPI_getbinval(rc, rdesc, 2, &isnull);
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(callerctx);

			r.outcome = DatumGetJsonbPCopy(outcome);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	return return_result(fcinfo, &r);
}
