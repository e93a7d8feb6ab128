/*-------------------------------------------------------------------------
 *
 * command_api.c
 *	  cscp.command_transition and the context release it shares with the
 *	  answers (confirm, approve): the calls a command makes most often once
 *	  it exists, in C with saved plans rather than in PL/pgSQL.
 *
 * The rules themselves are not here: the transition table and the ordering
 * invariants are command_fsm.c's, enforced by its trigger on every write.
 * command_transition locks the command's row, asks the same rules
 * (cscp_command_step_refusal) whether the step is allowed, and records a
 * refused step as an invalid_transition_attempt and returns it with
 * accepted = false instead of running an UPDATE the trigger would refuse.
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

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

static void check_object(const char *argname, Jsonb *value);

/*
 * The columns of a context row that the functions here read (by name):
 * the select list of every query that hands a context row to them.
 */
#define CONTEXT_COLUMNS \
	"x.tenant_id, x.context_id, x.conversation_id, x.actor_id, x.status, x.expires_at," \
	" x.slots, x.last_message_id, x.last_command_id, x.reason"

/* The columns of a command row that a replay and an answer read. */
#define COMMAND_RESULT_COLUMNS \
	"x.command_id, x.state, x.outcome, x.last_transition_at"


/* Whether slots holds a pending question under key (an object) naming command_id. */
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
 * Supersede the question (a confirmation, or an approval) that the context
 * ctx (its row, locked by the caller) asks now, before command_id starts to
 * wait on a new one: every other command of the context that
 * cscp.command_window lists as waiting on that question, and that is still
 * in its waiting state, is rejected (confirmation_superseded or
 * approval_superseded, superseded_by command_id).  A context asks one
 * question of each kind at a time (the command trigger holds it), so this
 * is the one its slot names, or one a direct write left without a slot.
 */
static void
supersede_question(HeapTuple ctx, TupleDesc ctxdesc, bool approval, Datum command_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID};
	bool		isnull;
	Datum		args[6];

	args[0] = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"), ctxdesc, &isnull);
	args[1] = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"), ctxdesc, &isnull);
	args[2] = command_id;
	args[3] = CStringGetTextDatum(approval ? "approval" : "confirmation");
	args[4] = CStringGetTextDatum(approval ? "approval_superseded" : "confirmation_superseded");
	args[5] = CStringGetTextDatum(approval ? "authz_pending" : "confirmation_required");
	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = 'rejected', reason_code = $5,"
				  "       detail = jsonb_build_object('superseded_by', $3)"
				  " WHERE x.tenant_id = $1 AND x.context_id = $2 AND x.command_id <> $3"
				  "   AND x.state = $6::cscp.command_state"
				  "   AND x.command_id IN (SELECT w.command_id FROM cscp.command_window w"
				  "                         WHERE w.tenant_id = $1 AND w.context_id = $2"
				  "                           AND w.question = $4)",
				  6, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not supersede a question");
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

	if (!cscp_status_live(status) || DatumGetTimestampTz(expires) <= cscp_now())
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
				  "       expires_at = cscp.context_touch(x)"
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
	static const char *const release_reads[] = {"tenant_id", "status", "expires_at", "slots", NULL};
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
	cscp_record_require(rec, "c", release_reads);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_context_release(&tuple, desc, PG_GETARG_DATUM(1),
						 PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2)));
	SPI_finish();
	ReleaseTupleDesc(desc);
	PG_RETURN_VOID();
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

/* The end of an approval window opened now: cscp.now() + the tenant's approval_ttl. */
static Datum
approval_window(Datum tenant)
{
	return policy_window(tenant, "approval_ttl");
}

/*
 * What a confirmation request does beside the command's own transition
 * (command_submit's mutating command, or a step to confirmation_required),
 * once supersede_question has made way for it: the context becomes pending
 * with its pending_confirmation slot naming command_id (key, fingerprint
 * and the window, the command's own); the command becomes the context's
 * last, and last_message, when given, its last message.  ctx is the
 * context's row, locked by the caller.
 */
static void
ask_confirmation(HeapTuple ctx, TupleDesc ctxdesc, Datum command_id, text *key, text *fingerprint,
				 Datum window, text *last_message)
{
	static SPIPlanPtr pending_plan = NULL;
	static const Oid pending_types[7] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID,
	TEXTOID, TEXTOID};
	bool		isnull;
	Datum		tenant = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
									  ctxdesc, &isnull);
	Datum		context_id = heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "context_id"),
										  ctxdesc, &isnull);
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = tenant;
	args[1] = context_id;
	args[2] = command_id;
	args[3] = PointerGetDatum(key);
	args[4] = PointerGetDatum(fingerprint);
	nulls[4] = fingerprint ? ' ' : 'n';
	args[5] = CStringGetTextDatum(cscp_utc_iso(DatumGetTimestampTz(window)));
	args[6] = PointerGetDatum(last_message);
	nulls[6] = last_message ? ' ' : 'n';
	cscp_spi_plan(&pending_plan,
				  "UPDATE cscp.context x"
				  "   SET status = CASE WHEN x.status = 'active' THEN 'pending'::cscp.context_status"
				  "                     ELSE x.status END,"
				  "       slots = x.slots || jsonb_build_object('pending_confirmation',"
				  "                   jsonb_build_object('command_id', $3, 'idempotency_key', $4,"
				  "                                      'target_fingerprint', $5,"
				  "                                      'expires_at', $6)),"
				  "       last_command_id = $3,"
				  "       last_message_id = coalesce($7, x.last_message_id),"
				  "       expires_at = cscp.context_touch(x)"
				  " WHERE x.tenant_id = $1 AND x.context_id = $2",
				  7, pending_types);
	if (SPI_execute_plan(pending_plan, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a confirmation request on its context");
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
				  "       slots = x.slots || jsonb_build_object('pending_approval', jsonb_build_object("
				  "                   'command_id', $3, 'approver_id', $4, 'expires_at', $5)),"
				  "       expires_at = cscp.context_touch(x)"
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
 * Whether the step of command command_id to authorized can do without its
 * context's row lock: yes when the command waits in authz_pending with no
 * approval window (no approval was asked for), and its context's slots
 * name it in no pending question, so that there is nothing to release.
 *
 * Both are read without locks, by one query as the caller (row-level
 * security applies as to any statement), after the writes of this
 * transaction so far.  The lifecycle has no way back into authz_pending, so
 * no later version of the command can come to wait for an approval: from
 * every later state, authorized is refused.  A question naming the command
 * that is written into the context after the read is ordered after the
 * whole step, as if the step had committed first.  The id can be held by
 * several tenants (seen together by a role row-level security does not
 * bind); every row found must qualify, and none found means no.
 */
static bool
authorize_alone(Datum command_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {UUIDOID};
	char	   *id = NULL;
	bool		alone;

	cscp_spi_plan(&plan,
				  "SELECT c.state = 'authz_pending' AND c.window_expires_at IS NULL, x.slots"
				  "  FROM cscp.command c LEFT JOIN cscp.context x"
				  "    ON x.tenant_id = c.tenant_id AND x.context_id = c.context_id"
				  " WHERE c.command_id = $1",
				  1, argtypes);
	if (SPI_execute_plan(plan, &command_id, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read command %s",
			 DatumGetCString(DirectFunctionCall1(uuid_out, command_id)));
	alone = SPI_processed > 0;
	for (uint64 i = 0; i < SPI_processed && alone; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		waiting = SPI_getbinval(row, desc, 1, &isnull);
		Datum		slots;

		if (isnull || !DatumGetBool(waiting))
		{
			alone = false;
			break;
		}
		slots = SPI_getbinval(row, desc, 2, &isnull);
		if (isnull)
			continue;
		if (id == NULL)
			id = DatumGetCString(DirectFunctionCall1(uuid_out, command_id));
		if (slot_names_command(DatumGetJsonbP(slots), "pending_confirmation", id) ||
			slot_names_command(DatumGetJsonbP(slots), "pending_approval", id))
			alone = false;
	}
	SPI_freetuptable(SPI_tuptable);
	return alone;
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
 * The row of command command_id, locked FOR UPDATE (as the caller: the
 * row-level security of SELECT and UPDATE applies, and the UPDATE
 * privilege is needed), with its descriptor in *desc; NULL when there is
 * none.  An id held by more than one tenant's command (seen together by a
 * role row-level security does not bind) is an error.
 */
static HeapTuple
lock_command(Datum command_id, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {UUIDOID};

	cscp_spi_plan(&plan,
				  "SELECT x.tenant_id, x.command_id, x.conversation_id, x.state, x.mutating,"
				  "       x.auto_confirm, x.confirmed_at, x.authorized_at, x.window_expires_at,"
				  "       x.message_ids, x.context_ref, x.actor_id, x.context_id, x.frame_id,"
				  "       x.recovery_kind, x.target_command_id, x.idempotency_key, x.target_fingerprint"
				  "  FROM cscp.command x WHERE x.command_id = $1 FOR UPDATE",
				  1, argtypes);
	if (SPI_execute_plan(plan, &command_id, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock command %s",
			 DatumGetCString(DirectFunctionCall1(uuid_out, command_id)));
	if (SPI_processed == 0)
		return NULL;
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("command id %s is held by more than one tenant's command",
						DatumGetCString(DirectFunctionCall1(uuid_out, command_id))),
				 errdetail("A role that row-level security does not bind sees the commands of every tenant."),
				 errhint("Move the command as a role bound to its tenant.")));
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * Move command cmd (its row as lock_command returned it) to state to by
 *
 *	 UPDATE cscp.command x
 *		SET state = to, reason_code = reason, detail = detail,
 *			window_expires_at = window
 *	  WHERE x.tenant_id = <cmd's> AND x.command_id = <cmd's>
 *	 RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id
 *
 * and fill in *m from the row written.  reason and detail: (Datum) 0 or
 * NULL for null.  Returns false when no row was written: a BEFORE trigger
 * skipped it.  The statement runs with the caller's rights: row-level
 * security, privileges, rules and every trigger apply as to any UPDATE.
 */
static bool
move_command(HeapTuple cmd, TupleDesc cmddesc, CommandState to, Datum reason, Jsonb *detail,
			 Datum window, bool window_null, MovedCommand *m)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID};
	TupleDesc	desc = NULL;
	HeapTuple	row;
	bool		isnull;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	memset(m, 0, sizeof(*m));
	args[0] = heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "tenant_id"), cmddesc, &isnull);
	args[1] = heap_getattr(cmd, cscp_column(cmddesc, "cscp.command", "command_id"), cmddesc, &isnull);
	args[2] = CStringGetTextDatum(cscp_command_state_names[to]);
	args[3] = reason;
	nulls[3] = reason == (Datum) 0 ? 'n' : ' ';
	args[4] = PointerGetDatum(detail);
	nulls[4] = detail == NULL ? 'n' : ' ';
	args[5] = window;
	nulls[5] = window_null ? 'n' : ' ';
	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
				  "       window_expires_at = $6"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2"
				  " RETURNING x.reason_code, x.recovery_kind, x.target_command_id, x.tenant_id",
				  6, types);
	row = cscp_spi_update_one(plan, args, nulls, &desc, "move a command");
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
	static SPIPlanPtr context_plan = NULL;
	static const Oid find_types[1] = {UUIDOID};
	MemoryContext callerctx = CurrentMemoryContext;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			state_type;
	CommandState to,
				result_state = CMD_RECEIVED;
	char	   *reason_code = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	Jsonb	   *detail = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	char	   *approver = NULL;
	bool		approval;
	bool		asking;
	char	   *result_reason = NULL;
	bool		accepted = false;
	const char *context_refusal = NULL;
	bool		isnull;
	Datum		args[1];
	Datum		window = (Datum) 0;
	HeapTuple	ctx = NULL;
	TupleDesc	ctxdesc = NULL;
	TupleDesc	cmddesc = NULL;
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
	check_object("detail", detail);
	approver = detail_approver(detail);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command_id must not be null"),
				 errhint("Pass the command_id returned by cscp.command_submit.")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * Lock the command's row, and its context's row first when this step may
	 * change the context: an approval request, or a step that answers the
	 * question (pending_confirmation or pending_approval) its context holds.
	 * Context before command is the order every caller keeps (cscp.confirm
	 * and cscp.approve too); the other steps never touch the context, so
	 * they lock the command alone, and so does the step to authorized when
	 * it has nothing to release (authorize_alone).
	 */
	approval = to == CMD_AUTHZ_PENDING && reason_code != NULL &&
		strcmp(reason_code, "approval_required") == 0;
	asking = to == CMD_CONFIRMATION_REQUIRED;
	args[0] = PG_GETARG_DATUM(0);
	if (approval || asking || to == CMD_CONFIRMED ||
		(to == CMD_AUTHORIZED && !authorize_alone(args[0])) ||
		to == CMD_REJECTED || to == CMD_CANCELED)
	{
		cscp_spi_plan(&context_plan,
					  "SELECT " CONTEXT_COLUMNS " FROM cscp.command c JOIN cscp.context x"
					  "    ON x.tenant_id = c.tenant_id AND x.context_id = c.context_id"
					  " WHERE c.command_id = $1 FOR UPDATE OF x",
					  1, find_types);
		if (SPI_execute_plan(context_plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not lock a context");
		if (SPI_processed == 1)
		{
			ctx = SPI_tuptable->vals[0];
			ctxdesc = SPI_tuptable->tupdesc;
		}
	}
	/*
	 * An approval or confirmation request is refused also for its context's
	 * sake (not live, blocked), which only this function knows: with that
	 * reason when the command's own rules allow the step.  A command with no
	 * context (inserted directly without one) has no slot to ask in: its
	 * step to confirmation_required asks nothing, as before.
	 */
	if (asking && ctx == NULL)
		asking = false;
	if (approval || asking)
	{
		char	   *status = ctx ? spi_text(ctx, ctxdesc, "cscp.context", "status") : NULL;
		bool		live = ctx != NULL &&
			DatumGetTimestampTz(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "expires_at"),
											 ctxdesc, &isnull)) > cscp_now();

		if (status == NULL || !live ||
			(strcmp(status, "active") != 0 && strcmp(status, "pending") != 0))
			context_refusal = (live && status != NULL && strcmp(status, "blocked") == 0) ?
				"context_blocked" :
				(status != NULL && strcmp(status, "closed") == 0) ? "context_closed" : "context_expired";
		else if (approval)
			window = approval_window(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
												  ctxdesc, &isnull));
		else
			window = policy_window(heap_getattr(ctx, cscp_column(ctxdesc, "cscp.context", "tenant_id"),
												ctxdesc, &isnull), "confirmation_ttl");
	}

	{
		/*
		 * The step itself.  The command's row is locked and judged by the
		 * command trigger's own rules (cscp_command_step_refusal); a refused
		 * step is recorded as an invalid_transition_attempt and returned, and
		 * only an allowed one is written, by an UPDATE that the trigger
		 * judges again and that RLS, privileges and triggers apply to.
		 */
		HeapTuple	cmd = lock_command(PG_GETARG_DATUM(0), &cmddesc);
		const char *why;
		MovedCommand m;

		if (cmd == NULL)
			no_command(PG_GETARG_DATUM(0));
		why = cscp_command_step_refusal(cmd, cmddesc, to, &result_state);
		if (why != NULL && strcmp(why, "not_answered") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("command %s cannot be confirmed without the user's answer",
							DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)))),
					 errdetail("A command is confirmed only by the user's answer to its question."),
					 errhint("Record the user's answer with cscp.confirm.")));
		if (why == NULL)
			why = context_refusal;
		if (why != NULL)
		{
			cscp_command_record_refusal(cmd, cmddesc, result_state, to, why,
										refusal_detail(reason_code, detail));
			accepted = false;
			result_reason = MemoryContextStrdup(callerctx, why);
		}
		else
		{
			/* A new question first makes way: the earlier one is superseded. */
			if (approval || asking)
				supersede_question(ctx, ctxdesc, approval, PG_GETARG_DATUM(0));
			if (!move_command(cmd, cmddesc, to, PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2),
							  detail, window, !approval && !asking, &m))
				no_command(PG_GETARG_DATUM(0));
			if (m.reason_code != NULL)
				result_reason = MemoryContextStrdup(callerctx, m.reason_code);

			if (approval)
				request_approval(ctx, ctxdesc, PG_GETARG_DATUM(0), approver, window);
			else if (asking)
				ask_confirmation(ctx, ctxdesc, PG_GETARG_DATUM(0),
								 DatumGetTextPP(heap_getattr(cmd, cscp_column(cmddesc, "cscp.command",
																			  "idempotency_key"),
															 cmddesc, &isnull)),
								 command_fingerprint(cmd, cmddesc), window, NULL);
			else if (ctx != NULL && (to == CMD_CONFIRMED || to == CMD_AUTHORIZED ||
									 to == CMD_REJECTED || to == CMD_CANCELED))
				cscp_context_release(ctx, ctxdesc, PG_GETARG_DATUM(0), NULL);

			if (to == CMD_EXECUTED && m.recovery_kind != NULL &&
				strcmp(m.recovery_kind, "compensate") == 0 && !m.target_null)
				compensate_target(m.tenant, PG_GETARG_DATUM(0), m.target);
			accepted = true;
			result_state = to;
		}
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

/* What a frame records of a context. */
typedef struct FrameContext
{
	const char *tenant_id;
	const char *conversation_id;
	const char *actor_id;
	const char *status;
	const char *expires_at;		/* UTC text */
	const char *last_message_id;
	Jsonb	   *slots;
} FrameContext;

/* Whether a jsonb key is one of the pending-question slots. */
static bool
is_pending_key(JsonbValue *key)
{
	return (key->val.string.len == (int) strlen("pending_confirmation") &&
			memcmp(key->val.string.val, "pending_confirmation", key->val.string.len) == 0) ||
		(key->val.string.len == (int) strlen("pending_approval") &&
		 memcmp(key->val.string.val, "pending_approval", key->val.string.len) == 0);
}

/*
 * The canonical context state a command frame records: the context's
 * identity, status, expiry (UTC), last message and slots, with the ids of
 * pending commands left out of the pending slots (they are random, and the
 * same calls must give the same hash on every database), and the command's
 * message ids.
 */
static Jsonb *
frame_state(const FrameContext *c, ArrayType *message_ids)
{
	JsonbParseState *st = NULL;
	JsonbValue	k,
				v;
	JsonbValue *result;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cscp_jsonb_push_text(&st, "tenant_id", c->tenant_id);
	cscp_jsonb_push_text(&st, "conversation_id", c->conversation_id);
	cscp_jsonb_push_text(&st, "actor_id", c->actor_id);
	cscp_jsonb_push_text(&st, "status", c->status);
	cscp_jsonb_push_text(&st, "expires_at", c->expires_at);
	cscp_jsonb_push_text(&st, "last_message_id", c->last_message_id);

	k.type = jbvString;
	k.val.string.val = "slots";
	k.val.string.len = strlen("slots");
	pushJsonbValue(&st, WJB_KEY, &k);
	if (c->slots == NULL)
	{
		v.type = jbvNull;
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	else if (!JB_ROOT_IS_OBJECT(c->slots))
		pushJsonbValue(&st, WJB_VALUE, binary_value(c->slots, &v));
	else
	{
		JsonbIterator *it = JsonbIteratorInit(&c->slots->root);
		JsonbIteratorToken tok;
		bool		pending = false;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
			{
				pending = is_pending_key(&v);
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
	if (message_ids == NULL)
	{
		v.type = jbvNull;
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	else
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(message_ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
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
	return JsonbValueToJsonb(result);
}

PG_FUNCTION_INFO_V1(cscp_frame_state);

/* cscp._frame_state(c cscp.context, message_ids text[]) RETURNS jsonb */
Datum
cscp_frame_state(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec;
	FrameContext c;
	bool		isnull;
	Datum		d;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	rec = PG_GETARG_HEAPTUPLEHEADER(0);
	c.tenant_id = field_text(rec, "tenant_id");
	c.conversation_id = field_text(rec, "conversation_id");
	c.actor_id = field_text(rec, "actor_id");
	d = GetAttributeByName(rec, "status", &isnull);
	c.status = isnull ? NULL : DatumGetCString(DirectFunctionCall1(enum_out, d));
	d = GetAttributeByName(rec, "expires_at", &isnull);
	c.expires_at = isnull ? NULL : cscp_utc_iso(DatumGetTimestampTz(d));
	c.last_message_id = field_text(rec, "last_message_id");
	d = GetAttributeByName(rec, "slots", &isnull);
	c.slots = isnull ? NULL : DatumGetJsonbP(d);
	PG_RETURN_JSONB_P(frame_state(&c, PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1)));
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

/* Lock tag class of idempotency keys and answered message ids (pg_locks.objsubid). */
#define CSCP_LOCKTAG_KEY	0x636b	/* "ck" */

/*
 * Take the transaction advisory lock that serialises every use of key in
 * tenant: class CSCP_LOCKTAG_KEY, its key the SHA-256 of tenant, NUL and
 * key (cscp_hash_lock), so that no tenant can choose keys whose lock
 * another tenant's submits or answers wait on.
 */
void
cscp_key_lock(text *tenant, const char *key, int keylen)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant));
	appendStringInfoChar(&buf, '\0');
	appendBinaryStringInfo(&buf, key, keylen);
	(void) cscp_hash_lock(CSCP_LOCKTAG_KEY, buf.data, buf.len, ExclusiveLock);
	pfree(buf.data);
}

/*
 * The context of (tenant, conversation, actor) a command or an answer
 * works against -- the live one, else the latest -- locked FOR UPDATE, in
 * *ctx (its CONTEXT_COLUMNS) and *desc (valid until SPI_finish).  False when the triple never had
 * a context.  The caller is connected to SPI.
 */
bool
cscp_context_for(text *tenant, text *conversation, text *actor, HeapTuple *ctx, TupleDesc *desc)
{
	static SPIPlanPtr live_plan = NULL;
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3] = {PointerGetDatum(tenant), PointerGetDatum(conversation),
	PointerGetDatum(actor)};
	SPITupleTable *tt;

	/*
	 * The live context first, through cscp.context_live, which holds at most
	 * one per triple (its id found first, so that both reads are by key
	 * whatever the plan).  A row that stopped being live while we waited for
	 * its lock is not taken.  Only without one, the latest of all.
	 */
	cscp_spi_plan(&live_plan,
				  "SELECT " CONTEXT_COLUMNS " FROM cscp.context x"
				  " WHERE x.tenant_id = $1"
				  "   AND x.context_id = (SELECT l.context_id FROM cscp.context_live l"
				  "                        WHERE l.tenant_id = $1 AND l.conversation_id = $2"
				  "                          AND l.actor_id = $3)"
				  "   AND x.status IN ('active', 'pending', 'blocked')"
				  " FOR UPDATE",
				  3, argtypes);
	tt = run(live_plan, args, NULL, false, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		*ctx = tt->vals[0];
		*desc = tt->tupdesc;
		return true;
	}

	cscp_spi_plan(&plan,
				  "SELECT " CONTEXT_COLUMNS " FROM cscp.context x"
				  " WHERE x.tenant_id = $1 AND x.conversation_id = $2 AND x.actor_id = $3"
				  " ORDER BY x.status IN ('active', 'pending', 'blocked') DESC,"
				  "          x.created_at DESC, x.version DESC"
				  " LIMIT 1 FOR UPDATE",
				  3, argtypes);
	tt = run(plan, args, NULL, false, SPI_OK_SELECT);
	if (SPI_processed != 1)
	{
		*ctx = NULL;
		*desc = NULL;
		return false;
	}
	*ctx = tt->vals[0];
	*desc = tt->tupdesc;
	return true;
}

/*
 * Form a command, or replay the one its idempotency key already names.
 * Locks, in order: the advisory lock of (tenant, key), the context of
 * (tenant, conversation, actor) -- the live one, else the latest -- then
 * the command rows.  The caller is connected to SPI.
 */
static void
command_create(const CommandRequest *q, CommandResult *r, MemoryContext callerctx)
{
	static SPIPlanPtr key_plan = NULL;
	static SPIPlanPtr expire_plan = NULL;
	static SPIPlanPtr frame_find_plan = NULL;
	static SPIPlanPtr frame_insert_plan = NULL;
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr reject_plan = NULL;
	static SPIPlanPtr use_plan = NULL;
	static const Oid key_types[2] = {TEXTOID, TEXTOID};
	static const Oid id_types[2] = {TEXTOID, UUIDOID};
	static const Oid frame_find_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const Oid frame_insert_types[6] = {TEXTOID, UUIDOID, TEXTOID, UUIDOID, JSONBOID,
	TIMESTAMPTZOID};
	static const Oid insert_types[18] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, UUIDOID, UUIDOID,
		JSONBOID, TEXTARRAYOID, TEXTOID, BOOLOID, BOOLOID, JSONBOID, TEXTOID, UUIDOID,
	TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
	static const Oid reject_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const Oid use_types[4] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID};
	TimestampTz now = cscp_now();
	Datum		tenant = PointerGetDatum(q->tenant_id);
	Datum		args[18];
	char		nulls[18];
	SPITupleTable *tt;
	HeapTuple	cmd,
				ctx = NULL;
	TupleDesc	cmddesc,
				ctxdesc = NULL;
	bool		isnull;
	bool		usable = false;
	bool		asking;
	Datum		window = (Datum) 0;
	const char *reason = q->refuse_reason;
	char	   *status = NULL;
	Datum		context_id = (Datum) 0,
				frame_id = (Datum) 0,
				command_id = (Datum) 0;
	bool		has_frame = false;
	char	   *hash = NULL;
	Jsonb	   *context_ref = NULL;
	bool		auto_confirm = false;
	char	   *tenant_c = text_to_cstring(q->tenant_id);
	char	   *name_c = text_to_cstring(q->command_name);
	text	   *last_message = last_message_id(q->message_ids);

	memset(nulls, ' ', sizeof(nulls));

	/* Every submit of one key is serialised. */
	cscp_key_lock(q->tenant_id, VARDATA_ANY(q->idempotency_key),
				  VARSIZE_ANY_EXHDR(q->idempotency_key));

	/* A command already under the key (committed while we waited for its lock, too) replays. */
	args[0] = tenant;
	args[1] = PointerGetDatum(q->idempotency_key);
	cscp_spi_plan(&key_plan,
				  "SELECT " COMMAND_RESULT_COLUMNS ", x.conversation_id, x.actor_id, x.command_name,"
				  "       x.mutating, x.payload, x.target_fingerprint, x.recovery_kind,"
				  "       x.target_command_id"
				  "  FROM cscp.command x WHERE x.tenant_id = $1 AND x.idempotency_key = $2",
				  2, key_types);
	tt = run(key_plan, args, NULL, false, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		cmd = tt->vals[0];
		cmddesc = tt->tupdesc;
		if (text_differs(cmd, cmddesc, "conversation_id", q->conversation_id) ||
			text_differs(cmd, cmddesc, "actor_id", q->actor_id) ||
			text_differs(cmd, cmddesc, "command_name", q->command_name) ||
			DatumGetBool(spi_col(cmd, cmddesc, "cscp.command", "mutating", &isnull)) != q->mutating ||
			compareJsonbContainers(&DatumGetJsonbP(spi_col(cmd, cmddesc, "cscp.command",
														   "payload", &isnull))->root,
								   &q->payload->root) != 0 ||
			text_differs(cmd, cmddesc, "target_fingerprint", q->target_fingerprint) ||
			text_differs(cmd, cmddesc, "recovery_kind", q->recovery_kind))
			goto conflict;
		{
			Datum		target = spi_col(cmd, cmddesc, "cscp.command", "target_command_id", &isnull);

			if (isnull != !q->has_target ||
				(!isnull && !DatumGetBool(DirectFunctionCall2(uuid_eq, target, q->target_command_id))))
				goto conflict;
		}
		command_result(cmd, cmddesc, true, r, callerctx);
		return;

conflict:
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("idempotency key \"%s\" was already used for a different command",
						text_to_cstring(q->idempotency_key)),
				 errdetail("Command %s (%s) of conversation %s has this key.",
						   spi_text(cmd, cmddesc, "cscp.command", "command_id"),
						   spi_text(cmd, cmddesc, "cscp.command", "command_name"),
						   spi_text(cmd, cmddesc, "cscp.command", "conversation_id")),
				 errhint("Use a new idempotency key for a new command; resend the same request to replay it.")));
	}

	if (cscp_context_for(q->tenant_id, q->conversation_id, q->actor_id, &ctx, &ctxdesc))
	{
		status = spi_text(ctx, ctxdesc, "cscp.context", "status");
		context_id = spi_col(ctx, ctxdesc, "cscp.context", "context_id", &isnull);
		usable = cscp_status_live(status) &&
			DatumGetTimestampTz(spi_col(ctx, ctxdesc, "cscp.context", "expires_at", &isnull)) > now;
	}

	if (reason == NULL && q->context_required)
	{
		if (ctx == NULL)
			reason = "no_context";
		else if (!usable)
		{
			reason = "context_expired";
			/* The expiry invariant made durable: recorded expired, by TTL. */
			if (cscp_status_live(status))
			{
				args[0] = tenant;
				args[1] = context_id;
				cscp_spi_plan(&expire_plan,
							  "UPDATE cscp.context x SET status = 'expired', reason = 'ttl'"
							  " WHERE x.tenant_id = $1 AND x.context_id = $2"
							  " RETURNING " CONTEXT_COLUMNS,
							  2, id_types);
				tt = run(expire_plan, args, NULL, false, SPI_OK_UPDATE_RETURNING);
				if (SPI_processed == 1)
				{
					ctx = tt->vals[0];
					ctxdesc = tt->tupdesc;
				}
			}
		}
		else if (q->mutating && strcmp(status, "blocked") == 0)
			reason = "context_blocked";
	}

	if (usable && reason == NULL)
	{
		/* Snapshot-on-execute: the frame of the state the command is formed from. */
		FrameContext fc;
		Jsonb	   *state;
		StringInfoData buf;
		Datum		d;

		fc.tenant_id = tenant_c;
		fc.conversation_id = spi_text(ctx, ctxdesc, "cscp.context", "conversation_id");
		fc.actor_id = spi_text(ctx, ctxdesc, "cscp.context", "actor_id");
		fc.status = status;
		d = spi_col(ctx, ctxdesc, "cscp.context", "expires_at", &isnull);
		fc.expires_at = cscp_utc_iso(DatumGetTimestampTz(d));
		fc.last_message_id = spi_text(ctx, ctxdesc, "cscp.context", "last_message_id");
		d = spi_col(ctx, ctxdesc, "cscp.context", "slots", &isnull);
		fc.slots = isnull ? NULL : DatumGetJsonbP(d);
		state = frame_state(&fc, q->message_ids);
		initStringInfo(&buf);
		cscp_canonical_append(&buf, state);
		hash = cscp_sha256_hex(buf.data, buf.len);

		args[0] = tenant;
		args[1] = context_id;
		args[2] = CStringGetTextDatum(hash);
		{
			pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

			/* Usually a new state: insert first, look up only when it is known. */
			cscp_routing_uuid(cscp_routing_hash_text(q->conversation_id), uuid);
			args[0] = tenant;
			args[1] = UUIDPGetDatum(uuid);
			args[2] = PointerGetDatum(q->conversation_id);
			args[3] = context_id;
			args[4] = JsonbPGetDatum(state);
			args[5] = TimestampTzGetDatum(now);
			cscp_spi_plan(&frame_insert_plan,
						  "INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id,"
						  "                        state, created_at)"
						  " VALUES ($1, $2, $3, $4, $5, $6)"
						  " ON CONFLICT (tenant_id, context_id, context_hash) DO NOTHING"
						  " RETURNING frame_id",
						  6, frame_insert_types);
			tt = run(frame_insert_plan, args, NULL, false, SPI_OK_INSERT_RETURNING);
		}
		if (SPI_processed == 0)
		{
			args[0] = tenant;
			args[1] = context_id;
			args[2] = CStringGetTextDatum(hash);
			cscp_spi_plan(&frame_find_plan,
						  "SELECT f.frame_id FROM cscp.frame f"
						  " WHERE f.tenant_id = $1 AND f.context_id = $2 AND f.context_hash = $3",
						  3, frame_find_types);
			tt = run(frame_find_plan, args, NULL, false, SPI_OK_SELECT);
			if (SPI_processed != 1)
				elog(ERROR, "frame %s of context %s is neither new nor found", hash,
					 DatumGetCString(DirectFunctionCall1(uuid_out, context_id)));
		}
		frame_id = SPI_getbinval(tt->vals[0], tt->tupdesc, 1, &isnull);
		has_frame = true;
	}
	if (ctx != NULL)
	{
		JsonbParseState *st = NULL;
		JsonbValue	k,
					v;
		char	   *ctxid = DatumGetCString(DirectFunctionCall1(uuid_out, context_id));

		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		cscp_jsonb_push_text(&st, "context_id", ctxid);
		cscp_jsonb_push_text(&st, "frame_id", has_frame ?
				  DatumGetCString(DirectFunctionCall1(uuid_out, frame_id)) : NULL);
		cscp_jsonb_push_text(&st, "context_hash", hash);
		cscp_jsonb_push_text(&st, "expires_at",
				  cscp_utc_iso(DatumGetTimestampTz(spi_col(ctx, ctxdesc, "cscp.context",
														   "expires_at", &isnull))));
		(void) k;
		(void) v;
		context_ref = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
	}

	auto_confirm = q->mutating && reason == NULL &&
		cscp_policy_lists(cscp_policy_get(tenant_c), "auto_confirm", name_c);

	/*
	 * A mutating command that is not auto-confirmed asks for confirmation
	 * at once: it is inserted in confirmation_required with its window, and
	 * the trigger records both steps (received -> canonicalized ->
	 * confirmation_required), as an insert and an update would.
	 */
	asking = usable && reason == NULL && q->mutating && !auto_confirm;
	if (asking)
	{
		/* Its id now, so that the question it replaces is superseded by it first. */
		pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

		cscp_routing_uuid(cscp_routing_hash_text(q->conversation_id), uuid);
		command_id = UUIDPGetDatum(uuid);
		window = policy_window(tenant, "confirmation_ttl");
		supersede_question(ctx, ctxdesc, false, command_id);
	}

	args[0] = tenant;
	args[1] = PointerGetDatum(q->idempotency_key);
	args[2] = PointerGetDatum(q->conversation_id);
	args[3] = PointerGetDatum(q->actor_id);
	args[4] = context_id;
	nulls[4] = ctx ? ' ' : 'n';
	args[5] = frame_id;
	nulls[5] = has_frame ? ' ' : 'n';
	args[6] = PointerGetDatum(context_ref);
	nulls[6] = context_ref ? ' ' : 'n';
	args[7] = PointerGetDatum(q->message_ids);
	args[8] = PointerGetDatum(q->command_name);
	args[9] = BoolGetDatum(q->mutating);
	args[10] = BoolGetDatum(auto_confirm);
	args[11] = JsonbPGetDatum(q->payload);
	args[12] = PointerGetDatum(q->target_fingerprint);
	nulls[12] = q->target_fingerprint ? ' ' : 'n';
	args[13] = q->target_command_id;
	nulls[13] = q->has_target ? ' ' : 'n';
	args[14] = PointerGetDatum(q->recovery_kind);
	nulls[14] = q->recovery_kind ? ' ' : 'n';
	args[15] = CStringGetTextDatum(asking ? "confirmation_required" : "canonicalized");
	args[16] = window;
	nulls[16] = asking ? ' ' : 'n';
	args[17] = command_id;
	nulls[17] = asking ? ' ' : 'n';
	cscp_spi_plan(&insert_plan,
				  "INSERT INTO cscp.command AS x (tenant_id, idempotency_key, conversation_id,"
				  "    actor_id, context_id, frame_id, context_ref, message_ids, command_name,"
				  "    mutating, auto_confirm, payload, target_fingerprint, state,"
				  "    target_command_id, recovery_kind, window_expires_at, command_id)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
				  "         $16::cscp.command_state, $14, $15, $17, $18)"
				  " RETURNING " COMMAND_RESULT_COLUMNS,
				  18, insert_types);
	tt = run(insert_plan, args, nulls, false, SPI_OK_INSERT_RETURNING);
	cmd = tt->vals[0];
	cmddesc = tt->tupdesc;
	memset(nulls, ' ', sizeof(nulls));

	if (reason != NULL)
	{
		args[0] = tenant;
		args[1] = spi_col(cmd, cmddesc, "cscp.command", "command_id", &isnull);
		args[2] = CStringGetTextDatum(reason);
		cscp_spi_plan(&reject_plan,
					  "UPDATE cscp.command x SET state = 'rejected', reason_code = $3"
					  " WHERE x.tenant_id = $1 AND x.command_id = $2"
					  " RETURNING " COMMAND_RESULT_COLUMNS,
					  3, reject_types);
		tt = run(reject_plan, args, NULL, false, SPI_OK_UPDATE_RETURNING);
		command_result(tt->vals[0], tt->tupdesc, false, r, callerctx);
		return;
	}
	if (!usable)
	{
		command_result(cmd, cmddesc, false, r, callerctx);
		return;
	}

	/*
	 * The command becomes its context's last (a use: its TTL slides); one
	 * that asks for confirmation makes the context pending with it.
	 */
	if (asking)
		ask_confirmation(ctx, ctxdesc, spi_col(cmd, cmddesc, "cscp.command", "command_id", &isnull),
						 q->idempotency_key, q->target_fingerprint, window, last_message);
	else
	{
		args[0] = tenant;
		args[1] = context_id;
		args[2] = spi_col(cmd, cmddesc, "cscp.command", "command_id", &isnull);
		args[3] = PointerGetDatum(last_message);
		nulls[3] = last_message ? ' ' : 'n';
		cscp_spi_plan(&use_plan,
					  "UPDATE cscp.context x"
					  "   SET last_command_id = $3,"
					  "       last_message_id = coalesce($4, x.last_message_id),"
					  "       expires_at = cscp.context_touch(x)"
					  " WHERE x.tenant_id = $1 AND x.context_id = $2",
					  4, use_types);
		run(use_plan, args, nulls, false, SPI_OK_UPDATE);
	}
	command_result(cmd, cmddesc, false, r, callerctx);
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
 * same forming; the caller is not connected to SPI.
 */
void
cscp_submit_command(text *tenant_id, text *conversation_id, text *actor_id,
					text *idempotency_key, text *command_name, bool mutating,
					ArrayType *message_ids, Jsonb *payload, text *target_fingerprint,
					CscpSubmitted *result)
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
 * The cancellation a cancel recovery carries out itself, once its command
 * recovery_id is formed: the target (target_id, of tenant) is canceled, its
 * context's slot released, and the recovery command run through its
 * lifecycle to executed.  Locks: the target's context, then the target.
 * Returns the recovery command's row as it ends (state and outcome).
 */
static HeapTuple
recover_cancel(Datum tenant, Datum target_id, Datum recovery_id, TupleDesc *desc)
{
	static SPIPlanPtr target_plan = NULL;
	static SPIPlanPtr context_plan = NULL;
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr cancel_plan = NULL;
	static SPIPlanPtr step_plan = NULL;
	static const Oid key_types[2] = {TEXTOID, UUIDOID};
	static const Oid cancel_types[3] = {TEXTOID, UUIDOID, UUIDOID};
	static const Oid step_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	static const char *const steps[] = {"authz_pending", "authorized", "started", "executed"};
	Datum		args[3] = {tenant, target_id, recovery_id};
	HeapTuple	ctx = NULL;
	TupleDesc	ctxdesc = NULL;
	HeapTuple	row = NULL;
	bool		isnull;
	Datum		context_id;

	/* The target's context first, as everywhere; then the target. */
	cscp_spi_plan(&target_plan,
				  "SELECT x.context_id FROM cscp.command x WHERE x.tenant_id = $1 AND x.command_id = $2",
				  2, key_types);
	run(target_plan, args, NULL, false, SPI_OK_SELECT);
	context_id = SPI_processed == 1 ? SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
													&isnull) : (Datum) 0;
	if (SPI_processed == 1 && !isnull)
	{
		Datum		cargs[2] = {tenant, context_id};

		cscp_spi_plan(&context_plan,
					  "SELECT * FROM cscp.context x WHERE x.tenant_id = $1 AND x.context_id = $2"
					  "   FOR UPDATE",
					  2, key_types);
		run(context_plan, cargs, NULL, false, SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			ctx = SPI_copytuple(SPI_tuptable->vals[0]);
			ctxdesc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
		}
	}
	cscp_spi_plan(&lock_plan,
				  "SELECT 1 FROM cscp.command x WHERE x.tenant_id = $1 AND x.command_id = $2 FOR UPDATE",
				  2, key_types);
	run(lock_plan, args, NULL, false, SPI_OK_SELECT);

	cscp_spi_plan(&cancel_plan,
				  "UPDATE cscp.command x"
				  "   SET state = 'canceled', reason_code = 'canceled_by_recovery',"
				  "       detail = jsonb_build_object('recovery_command_id', $3)"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2",
				  3, cancel_types);
	run(cancel_plan, args, NULL, false, SPI_OK_UPDATE);
	if (ctx != NULL)
		cscp_context_release(ctx, ctxdesc, target_id, NULL);

	cscp_spi_plan(&step_plan,
				  "UPDATE cscp.command x SET state = $3::cscp.command_state, reason_code = 'cancel_' || $3"
				  " WHERE x.tenant_id = $1 AND x.command_id = $2"
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
 * rejected at once (recovery_not_applicable); a cancel that applies is
 * carried out here: the target canceled, the recovery command executed.
 */
Datum
cscp_command_recover(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr target_plan = NULL;
	static const Oid target_types[1] = {UUIDOID};
	MemoryContext callerctx = CurrentMemoryContext;
	CommandRequest q = {0};
	CommandResult r;
	char	   *kind;
	Jsonb	   *payload;
	HeapTuple	t;
	TupleDesc	tdesc;
	Oid			state_type;
	CommandState target_state;
	bool		applies;
	bool		isnull;
	Datum		target_id;

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
	payload = PG_GETARG_JSONB_P(3);
	check_object("payload", payload);
	target_id = PG_GETARG_DATUM(0);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	state_type = TupleDescAttr(((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, 1)->atttypid;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* The target, as the caller may see it (row-level security). */
	cscp_spi_plan(&target_plan, "SELECT * FROM cscp.command x WHERE x.command_id = $1",
				  1, target_types);
	run(target_plan, &target_id, NULL, true, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command %s does not exist",
						DatumGetCString(DirectFunctionCall1(uuid_out, target_id))),
				 errhint("Check the id, and that cscp.tenant_id names the command's tenant.")));
	t = SPI_copytuple(SPI_tuptable->vals[0]);
	tdesc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	q.tenant_id = command_text(t, tdesc, "tenant_id");
	cscp_check_tenant(q.tenant_id);
	target_state = cscp_command_state_of(state_type, spi_col(t, tdesc, "cscp.command", "state", &isnull));

	if (strcmp(kind, "retry") == 0)
		applies = target_state == CMD_FAILED;
	else if (strcmp(kind, "reprocess") == 0)
		applies = target_state == CMD_REJECTED || target_state == CMD_FAILED ||
			target_state == CMD_CANCELED;
	else if (strcmp(kind, "cancel") == 0)
		applies = target_state == CMD_RECEIVED || target_state == CMD_CANONICALIZED ||
			target_state == CMD_CONFIRMATION_REQUIRED || target_state == CMD_CONFIRMED ||
			target_state == CMD_AUTHZ_PENDING || target_state == CMD_AUTHORIZED ||
			target_state == CMD_STARTED;
	else
		applies = target_state == CMD_EXECUTED || target_state == CMD_FAILED;

	q.conversation_id = command_text(t, tdesc, "conversation_id");
	q.actor_id = command_text(t, tdesc, "actor_id");
	q.idempotency_key = PG_GETARG_TEXT_PP(2);
	q.message_ids = DatumGetArrayTypeP(spi_col(t, tdesc, "cscp.command", "message_ids", &isnull));
	if (strcmp(kind, "retry") == 0 || strcmp(kind, "reprocess") == 0)
	{
		Datum		own = spi_col(t, tdesc, "cscp.command", "payload", &isnull);

		q.command_name = command_text(t, tdesc, "command_name");
		q.mutating = cscp_registry_mutating(q.tenant_id, q.command_name,
											DatumGetBool(spi_col(t, tdesc, "cscp.command", "mutating", &isnull)),
											CSCP_REGISTRY_RECOVERY);
		q.payload = DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, own, JsonbPGetDatum(payload)));
		q.target_fingerprint = command_text(t, tdesc, "target_fingerprint");
	}
	else
	{
		q.command_name = cstring_to_text(psprintf("%s:%s",
												  text_to_cstring(command_text(t, tdesc, "command_name")),
												  kind));
		q.mutating = strcmp(kind, "compensate") == 0;
		if (q.mutating)
			q.mutating = cscp_registry_mutating(q.tenant_id, q.command_name, true,
												CSCP_REGISTRY_RECOVERY);
		q.payload = payload;
	}
	q.has_target = true;
	q.target_command_id = spi_col(t, tdesc, "cscp.command", "command_id", &isnull);
	q.recovery_kind = cstring_to_text(kind);
	q.refuse_reason = applies ? NULL : "recovery_not_applicable";
	q.context_required = strcmp(kind, "cancel") != 0;
	command_create(&q, &r, callerctx);

	if (!r.replayed && applies && strcmp(kind, "cancel") == 0 && r.state == CMD_CANONICALIZED)
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
