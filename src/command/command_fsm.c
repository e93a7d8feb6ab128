/*-------------------------------------------------------------------------
 *
 * command_fsm.c
 *	  The command lifecycle (RFC-WF-0018): the transition table, the
 *	  ordering invariants, and the BEFORE INSERT OR UPDATE trigger that holds
 *	  every write to cscp.command to them and records each transition in the
 *	  evidence trail.
 *
 * Invariants kept here:
 *	- a command is born received or canonicalized, with an id whose first
 *	  32 bits are the routing hash of its conversation; auto_confirm only
 *	  when the tenant's policy lists the command (the policy is recorded in
 *	  the command.accepted evidence);
 *	- a new command that leaves its birth to cscp (auto_confirm and state
 *	  null, as command_submit inserts it) has it decided here, once: the
 *	  policy's auto_confirm, and rejected, canonicalized or
 *	  confirmation_required with its window, superseding the question its
 *	  context asks and then asking it (insert_birth, guard_insert, due_take,
 *	  ask_context);
 *	- a new command formed against its context (its context_id given, no
 *	  frame, as command_submit inserts it) gets its frame here, from the
 *	  context it reads: of its conversation and actor, usable now; the frame
 *	  is recorded as the owner and named in the row (frame_form);
 *	- every UPDATE is a transition of the table below; the columns that say
 *	  what the command is never change; message_ids only grow;
 *	- started needs authorized, and a mutating command needs confirmed too
 *	  unless it was auto-confirmed; a command the registry declares
 *	  needs_approval needs an approval answered by cscp.approve (registry.c);
 *	- confirmed and authorized (from authz_pending) only while the confirmation
 *	  or approval window is open;
 *	- confirmed only with the user's recorded answer: a cscp.answer row
 *	  (written by cscp.confirm, as the owner) with outcome confirmed for the
 *	  command and the message id the step appends; command_transition is
 *	  refused the step (not_answered);
 *	- nothing moves forward (confirmed, authz_pending, authorized, started)
 *	  once the command's context has expired or closed; a started command
 *	  may still finish, and a cancel recovery (which only records that its
 *	  target was canceled) runs whatever its context;
 *	- compensated needs an executed compensate recovery aimed at it;
 *	- each transition appends one evidence row (evidence.c) and, with
 *	  cscp.notify on, one notification.
 * Each step is judged once, here: command_transition's UPDATE is judged
 * like any other, and the error of a refusal names the rule's reason code
 * as its constraint, which command_transition returns (it tries the
 * UPDATE in a subtransaction).  cscp_command_step_refusal judges a step
 * by the same rules without writing it, for a question its context
 * refuses and for command_next_allowed.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

const char *const cscp_command_state_names[CMD_NUM_STATES] = {
	"received", "canonicalized", "confirmation_required", "confirmed",
	"authz_pending", "authorized", "rejected", "started", "executed",
	"failed", "canceled", "compensated"
};

static CscpEnumCache state_cache = {.n = CMD_NUM_STATES, .names = cscp_command_state_names};

#define T true
#define F false
/*
 * allowed[from][to].  RFC-WF-0018's path received -> canonicalized ->
 * [confirmation_required -> confirmed ->] authz_pending -> authorized ->
 * started -> executed | failed, authz_pending -> rejected; the extensions
 * canonicalized -> rejected and confirmation_required -> rejected; cancel
 * from every state before started and from started (RFC-WF-0018 section
 * VI.A: a running command is stopped); compensated from executed and failed.
 */
static const bool allowed[CMD_NUM_STATES][CMD_NUM_STATES] = {
	/* to: rcv can cfr cfd azp aut rej sta exe fai cnl cmp */
	/* received */ {F, T, F, F, F, F, F, F, F, F, F, F},
	/* canonicalized */ {F, F, T, F, T, F, T, F, F, F, T, F},
	/* confirmation_required */ {F, F, F, T, F, F, T, F, F, F, T, F},
	/* confirmed */ {F, F, F, F, T, F, F, F, F, F, T, F},
	/* authz_pending */ {F, F, F, F, F, T, T, F, F, F, T, F},
	/* authorized */ {F, F, F, F, F, F, F, T, F, F, T, F},
	/* rejected */ {F, F, F, F, F, F, F, F, F, F, F, F},
	/* started */ {F, F, F, F, F, F, F, F, T, T, T, F},
	/* executed */ {F, F, F, F, F, F, F, F, F, F, F, T},
	/* failed */ {F, F, F, F, F, F, F, F, F, F, F, T},
	/* canceled */ {F, F, F, F, F, F, F, F, F, F, F, F},
	/* compensated */ {F, F, F, F, F, F, F, F, F, F, F, F},
};
#undef T
#undef F

#define IS_TERMINAL(s) ((s) == CMD_REJECTED || (s) == CMD_EXECUTED || \
						(s) == CMD_FAILED || (s) == CMD_CANCELED || \
						(s) == CMD_COMPENSATED)

/* The RFC-WF-0018 section IX event type of a transition, and its decision. */
static const char *
event_type(CommandState from, CommandState to, const char **decision)
{
	*decision = NULL;
	switch (to)
	{
		case CMD_CANONICALIZED:
			return "command.accepted";
		case CMD_CONFIRMATION_REQUIRED:
			return "command.confirmation.requested";
		case CMD_CONFIRMED:
			*decision = "confirmed";
			return "command.confirmation.satisfied";
		case CMD_AUTHZ_PENDING:
			return "authz.requested";
		case CMD_AUTHORIZED:
			*decision = "allow";
			return "authz.decided";
		case CMD_REJECTED:
			if (from == CMD_AUTHZ_PENDING)
			{
				*decision = "deny";
				return "authz.decided";
			}
			*decision = "reject";
			return "execution.rejected";
		case CMD_STARTED:
			return "execution.started";
		case CMD_EXECUTED:
			return "execution.executed";
		case CMD_FAILED:
			return "execution.failed";
		case CMD_CANCELED:
			*decision = "cancel";
			return "execution.canceled";
		case CMD_COMPENSATED:
			return "compensation.compensated";
		default:
			return "command.received";
	}
}

/*
 * The command's promise that its context is live (context_live_until): 0
 * when the table has no such column (before ALTER EXTENSION UPDATE), and
 * then every step that needs the context reads it.
 */
static int	promise_att = 0;

/* What the checks need to know of a command. */
typedef struct CommandFacts
{
	CommandState state;
	bool		mutating;
	bool		auto_confirm;
	bool		confirmed;		/* has passed confirmed */
	bool		authorized;		/* has passed authorized */
	bool		window_closed;	/* its confirmation or approval window has passed */
	bool		answered;		/* a recorded answer confirms it (cscp.answer) */
	bool		cancel_recovery;	/* a cancel recovery: it only records a cancellation */
	bool		recovery_approval;	/* a cancel or compensate recovery, or not known:
									 * its target's class may need an approval */
	Datum		tenant_id;		/* text */
	Datum		command_id;		/* uuid */
	HeapTuple	row;			/* the row, for snapshot_refusal, or NULL */
	TupleDesc	desc;			/* its descriptor */
	Datum		context_id;		/* uuid, when has_context */
	bool		has_context;
	bool		promised;		/* the row's context_live_until is set: */
	TimestampTz live_until;		/* its context is live at least until then */
	bool		ended_read;		/* answer_recorded has read the context: */
	const char *ended;			/* why it has ended, or NULL (context_ended) */
	bool		read_live;		/* the context was read, live, */
	TimestampTz read_until;		/* until its expires_at */
	bool		read_blocked;	/* ... and blocked */
	bool		birth;			/* a new row: its frame's read also reads its
								 * context, locked, for its first promise */
	bool		asks;			/* ... and it asks its context, which it writes
								 * then: locked FOR NO KEY UPDATE (ask_context) */
	bool		ctx_given;		/* the caller has read and locked the context: */
	HeapTuple	ctx;			/* its row (NULL: none), */
	TupleDesc	ctxdesc;		/* with its descriptor */
	bool		stored;			/* a stored row: its frame was checked when it was
								 * inserted (insert_snapshot_check) */
} CommandFacts;

/* Whether an executed compensate recovery aims at the command. */
static bool
compensation_executed(CommandFacts *c)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {c->tenant_id, c->command_id};

	return cscp_spi_exists(&plan,
						   "SELECT 1 FROM cscp.command r"
						   " WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 AND r.target_command_id OPERATOR(pg_catalog.=) $2"
						   " AND r.recovery_kind OPERATOR(pg_catalog.=) 'compensate' AND r.state OPERATOR(pg_catalog.=) 'executed'",
						   2, argtypes, args, false, "look up compensations");
}

/* Column name of c's row, or (Datum) 0 with *isnull set when null. */
static Datum
fact_col(CommandFacts *c, const char *name, bool *isnull)
{
	return heap_getattr(c->row, cscp_column(c->desc, "cscp.command", name), c->desc, isnull);
}

/* The command's name, when its row is known and has the column, or NULL. */
static text *
fact_name(CommandFacts *c)
{
	bool		isnull;
	int			attnum;
	Datum		d;

	if (c->row == NULL || (attnum = SPI_fnumber(c->desc, "command_name")) <= 0)
		return NULL;
	d = heap_getattr(c->row, attnum, c->desc, &isnull);
	return isnull ? NULL : DatumGetTextPP(d);
}

/*
 * What snapshot_refusal learns of a command's frame and recovery target, by
 * one statement with the caller's rights: whether the frame it names
 * exists, whether that frame is its context's as command_submit records it
 * (same conversation and context, hash of its state, the command's
 * context_ref, tenant, conversation, actor and message ids), whether the
 * recovery target is of its conversation and actor, and whether its
 * recovery kind applies to the target now.
 */
typedef struct SnapshotFacts
{
	bool		has_frame;
	bool		frame_ok;
	bool		target_ok;
	bool		applies;
	bool		canceled_by_it; /* a cancel recovery's target is canceled by it */
} SnapshotFacts;

/* Whether state's key is a JSON string equal to text value (not null). */
static bool
state_text_is(Jsonb *state, const char *key, Datum value, bool isnull)
{
	JsonbValue *v = cscp_jsonb_get(state, key);
	text	   *t;

	if (isnull || v == NULL || v->type != jbvString)
		return false;
	t = DatumGetTextPP(value);
	return v->val.string.len == (int) VARSIZE_ANY_EXHDR(t) &&
		memcmp(v->val.string.val, VARDATA_ANY(t), v->val.string.len) == 0;
}

/*
 * Whether state's message_ids is a JSON array of strings that are the
 * first elements of ids (text[]; not null), as command_submit records it.
 */
static bool
state_ids_prefix(Jsonb *state, Datum ids, bool isnull)
{
	JsonbValue *v = cscp_jsonb_get(state, "message_ids");
	Datum	   *elems;
	bool	   *enulls;
	int			n;
	int			i = 0;
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;

	if (isnull || v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return false;
	deconstruct_array(DatumGetArrayTypeP(ids), TEXTOID, -1, false, TYPALIGN_INT, &elems, &enulls, &n);
	if ((int) JsonContainerSize(v->val.binary.data) > n)
		return false;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		text	   *t;

		if (tok != WJB_ELEM)
			continue;
		if (e.type != jbvString || enulls[i])
			return false;
		t = DatumGetTextPP(elems[i]);
		if (e.val.string.len != (int) VARSIZE_ANY_EXHDR(t) ||
			memcmp(e.val.string.val, VARDATA_ANY(t), e.val.string.len) != 0)
			return false;
		i++;
	}
	return true;
}

/* A uuid Datum as a text Datum. */
static Datum
uuid_text(Datum uuid)
{
	return CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(uuid_out, uuid)));
}

/*
 * snapshot_facts of a command that names no recovery target (args as
 * snapshot_facts builds them): its frame read alone, by key, and compared
 * here, where the general statement would join a target that is not there.
 * The same answers as that statement gives.  For a new row (c->birth) the
 * same statement reads the frame's context while live, FOR SHARE (FOR NO
 * KEY UPDATE when the row asks it: c->asks), so that
 * it cannot end until the row commits (its end then finds the row and
 * takes the promise back: commands_follow in context_fsm.c): its
 * expires_at is the row's first promise (c->read_live, c->read_until),
 * and whether it is blocked (c->read_blocked) is the birth's
 * (blocked_refusal).
 */
static SnapshotFacts
frame_facts(const Datum *args, const char *nulls, CommandFacts *c)
{
	static SPIPlanPtr plans[3] = {NULL, NULL, NULL};
	static const Oid types[2] = {TEXTOID, UUIDOID};
	Datum		fargs[2] = {args[0], args[5]};
	bool		with_context = c->birth && promise_att > 0 && nulls[4] != 'n';
	int			plan = with_context ? (c->asks ? 2 : 1) : 0;
	SnapshotFacts f = {0};
	HeapTuple	row;
	TupleDesc	desc;
	Jsonb	   *ref;
	bool		isnull;
	Datum		d;

	if (nulls[5] == 'n')
		return f;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
#define FRAME_WITH_CONTEXT(lock) \
	"SELECT f.conversation_id, f.context_id, f.context_hash, f.state, x.expires_at," \
	"       x.status OPERATOR(pg_catalog.=) 'blocked'" \
	"  FROM cscp.frame f" \
	"  LEFT JOIN LATERAL (SELECT y.expires_at, y.status FROM cscp.context y" \
	"         WHERE y.tenant_id OPERATOR(pg_catalog.=) f.tenant_id AND y.context_id OPERATOR(pg_catalog.=) f.context_id" \
	"           AND y.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') " lock ") x ON true" \
	" WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.frame_id OPERATOR(pg_catalog.=) $2"
	cscp_spi_plan(&plans[plan],
				  plan == 2 ? FRAME_WITH_CONTEXT("FOR NO KEY UPDATE") :
				  plan == 1 ? FRAME_WITH_CONTEXT("FOR SHARE") :
				  "SELECT f.conversation_id, f.context_id, f.context_hash, f.state FROM cscp.frame f"
				  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.frame_id OPERATOR(pg_catalog.=) $2",
				  2, types);
#undef FRAME_WITH_CONTEXT
	if (SPI_execute_plan(plans[plan], fargs, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the frame of a command");
	if (SPI_processed == 1)
	{
		row = SPI_tuptable->vals[0];
		desc = SPI_tuptable->tupdesc;
		ref = nulls[6] == 'n' ? NULL : DatumGetJsonbP(args[6]);
		f.has_frame = true;
		d = SPI_getbinval(row, desc, 2, &isnull);
		f.frame_ok = nulls[4] != 'n' && ref != NULL &&
			state_text_is(ref, "frame_id", uuid_text(args[5]), false) &&
			state_text_is(ref, "context_id", uuid_text(args[4]), false) &&
			DatumGetBool(DirectFunctionCall2(uuid_eq, d, args[4]));
		d = SPI_getbinval(row, desc, 1, &isnull);
		f.frame_ok = f.frame_ok && nulls[2] != 'n' &&
			DatumGetBool(DirectFunctionCall2Coll(texteq, DEFAULT_COLLATION_OID, d, args[2]));
		d = SPI_getbinval(row, desc, 3, &isnull);
		f.frame_ok = f.frame_ok && state_text_is(ref, "context_hash", d, isnull);
		if (f.frame_ok)
		{
			Jsonb	   *st;

			d = SPI_getbinval(row, desc, 4, &isnull);
			st = isnull ? NULL : DatumGetJsonbP(d);
			f.frame_ok = st != NULL && JB_ROOT_IS_OBJECT(st) &&
				state_text_is(st, "tenant_id", args[0], nulls[0] == 'n') &&
				state_text_is(st, "conversation_id", args[2], nulls[2] == 'n') &&
				state_text_is(st, "actor_id", args[3], nulls[3] == 'n') &&
				state_ids_prefix(st, args[7], nulls[7] == 'n');
		}
		if (with_context && f.frame_ok)
		{
			d = SPI_getbinval(row, desc, 5, &isnull);
			if (!isnull && DatumGetTimestampTz(d) > cscp_now())
			{
				c->read_live = true;
				c->read_until = DatumGetTimestampTz(d);
				c->read_blocked = DatumGetBool(SPI_getbinval(row, desc, 6, &isnull));
			}
		}
	}
	SPI_finish();
	return f;
}

static SnapshotFacts
snapshot_facts(CommandFacts *c)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[11] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, UUIDOID, UUIDOID,
	JSONBOID, TEXTARRAYOID, TEXTOID, UUIDOID, BOOLOID};
	static const char *const names[8] = {"conversation_id", "actor_id", "context_id", "frame_id",
	"context_ref", "message_ids", "recovery_kind", "target_command_id"};
	Datum		args[11];
	char		nulls[11];
	SnapshotFacts f;
	bool		isnull;
	Datum		state;

	args[0] = c->tenant_id;
	args[1] = c->command_id;
	nulls[0] = nulls[1] = ' ';
	for (int i = 0; i < 8; i++)
	{
		args[i + 2] = fact_col(c, names[i], &isnull);
		nulls[i + 2] = isnull ? 'n' : ' ';
	}
	args[10] = BoolGetDatum(c->mutating);
	nulls[10] = ' ';
	if (nulls[9] == 'n')
		return frame_facts(args, nulls, c);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * The frame's columns are compared here, its state (read once: it may
	 * be stored compressed) in C below.  Its context_hash is generated from
	 * its state by the table (a generated column, never written), so it is
	 * compared with the command's context_ref, not computed again.
	 */
	cscp_spi_plan(&plan,
				  "SELECT f.frame_id IS NOT NULL,"
				  "       coalesce(f.conversation_id OPERATOR(pg_catalog.=) $3 AND f.context_id OPERATOR(pg_catalog.=) $5"
				  "                AND $7 OPERATOR(pg_catalog.->>) 'frame_id' OPERATOR(pg_catalog.=) $6::pg_catalog.text AND $7 OPERATOR(pg_catalog.->>) 'context_id' OPERATOR(pg_catalog.=) $5::pg_catalog.text"
				  "                AND $7 OPERATOR(pg_catalog.->>) 'context_hash' OPERATOR(pg_catalog.=) f.context_hash, false),"
				  "       coalesce(t.conversation_id OPERATOR(pg_catalog.=) $3 AND t.actor_id OPERATOR(pg_catalog.=) $4, false),"
				  "       coalesce(CASE WHEN $9 OPERATOR(pg_catalog.=) 'retry' THEN t.state OPERATOR(pg_catalog.=) 'failed'"
				  "                WHEN $9 OPERATOR(pg_catalog.=) 'reprocess' THEN t.state OPERATOR(pg_catalog.=) ANY ('{rejected,failed,canceled}')"
				  "                WHEN $9 OPERATOR(pg_catalog.=) 'compensate' THEN t.state OPERATOR(pg_catalog.=) ANY ('{executed,failed}')"
				  "                WHEN $9 OPERATOR(pg_catalog.=) 'cancel' THEN (t.state OPERATOR(pg_catalog.=) 'canceled'"
				  "                                    AND t.detail OPERATOR(pg_catalog.->>) 'recovery_command_id' OPERATOR(pg_catalog.=) $2::pg_catalog.text)"
				  "                                   OR ($11 AND t.state OPERATOR(pg_catalog.<>) ALL ('{rejected,executed,failed,canceled,compensated}'))"
				  "                END, false),"
				  "       coalesce(t.state OPERATOR(pg_catalog.=) 'canceled' AND t.detail OPERATOR(pg_catalog.->>) 'recovery_command_id' OPERATOR(pg_catalog.=) $2::pg_catalog.text, false),"
				  "       f.state"
				  "  FROM (VALUES (1)) AS one (x)"
				  "  LEFT JOIN cscp.frame f ON f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.frame_id OPERATOR(pg_catalog.=) $6"
				  "  LEFT JOIN cscp.command t ON t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.command_id OPERATOR(pg_catalog.=) $10",
				  11, types);
	if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up the frame and target of a command");
	f.has_frame = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	f.frame_ok = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	f.target_ok = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	f.applies = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	f.canceled_by_it = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	state = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);
	/* the state is its command's: tenant, conversation, actor and message ids */
	if (f.frame_ok)
	{
		Jsonb	   *st = isnull ? NULL : DatumGetJsonbP(state);

		f.frame_ok = st != NULL && JB_ROOT_IS_OBJECT(st) &&
			state_text_is(st, "tenant_id", args[0], nulls[0] == 'n') &&
			state_text_is(st, "conversation_id", args[2], nulls[2] == 'n') &&
			state_text_is(st, "actor_id", args[3], nulls[3] == 'n') &&
			state_ids_prefix(st, args[7], nulls[7] == 'n');
	}
	SPI_finish();
	return f;
}

/*
 * Why a command may not reach canonicalized, or leave it for a state that
 * goes on (not rejected or canceled: leaving), as a reason code, or NULL: snapshot-on-execute
 * needs a mutating command to carry its context, a frame that is its
 * context's as command_submit records it, and its message ids; a frame a
 * command names must match it, mutating or not; a recovery leaves
 * canonicalized only while its kind applies to its target (retry: failed; reprocess: rejected,
 * failed or canceled; compensate: executed or failed; cancel: canceled by
 * this very recovery, or, for a mutating cancel that asks the user first
 * (of a gated command: registry.c), not finished yet).
 */
static const char *
snapshot_refusal(CommandFacts *c, bool leaving, char **detail)
{
	SnapshotFacts f;
	bool		ctxnull,
				framenull,
				idsnull,
				kindnull;
	Datum		ids;

	if (c->row == NULL)
		return NULL;
	(void) fact_col(c, "context_id", &ctxnull);
	(void) fact_col(c, "frame_id", &framenull);
	ids = fact_col(c, "message_ids", &idsnull);
	(void) fact_col(c, "recovery_kind", &kindnull);
	if (c->mutating &&
		(ctxnull || framenull || idsnull || ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(ids)),
														  ARR_DIMS(DatumGetArrayTypeP(ids))) == 0))
	{
		*detail = pstrdup("A mutating command goes on from canonicalized only with its context, "
						  "the frame of that context's state and the ids of the messages it was formed from.");
		return "snapshot_missing";
	}
	/* A read-only command too, but a cancel recovery, which only records a cancellation. */
	if (!c->mutating && !c->cancel_recovery && (ctxnull || framenull))
	{
		*detail = pstrdup("A command goes on from canonicalized only with its context and the frame "
						  "of that context's state it was formed from.");
		return "snapshot_missing";
	}
	/*
	 * A stored row's frame was found its context's when the row was
	 * inserted, and stays so: the columns that name it never change
	 * (update_fixed_check), message_ids only grow, a frame is append-only
	 * and only the owner deletes one, never while a command names it (the
	 * sweep) or without its commands (erasure).  So a step of a stored row
	 * reads the frame no more; only a recovery leaving canonicalized reads
	 * its target.
	 */
	if ((framenull || c->stored) && (kindnull || !leaving))
		return NULL;
	f = snapshot_facts(c);
	if (!framenull && !f.frame_ok)
	{
		*detail = pstrdup(f.has_frame ?
						  "The frame the command names is not its context's state as cscp.command_submit records it." :
						  "The frame the command names does not exist.");
		return "snapshot_mismatch";
	}
	if (leaving && !kindnull && (!f.target_ok || !f.applies))
	{
		*detail = pstrdup(f.target_ok ?
						  "The recovery's kind does not apply to its target's state." :
						  "The recovery's target is not a command of its conversation and actor.");
		return "recovery_not_applicable";
	}
	return NULL;
}

/* Whether a recovery_kind value (text; isnull when none) is a cancel. */
static bool
is_cancel(bool isnull, Datum kind)
{
	text	   *t;

	if (isnull)
		return false;
	t = DatumGetTextPP(kind);
	return VARSIZE_ANY_EXHDR(t) == 6 && memcmp(VARDATA_ANY(t), "cancel", 6) == 0;
}

/*
 * Whether a recovery_kind value (text; isnull when none) is a cancel or a
 * compensate: a recovery that needs an approval when its target does.
 */
static bool
is_approval_recovery(bool isnull, Datum kind)
{
	text	   *t;

	if (isnull)
		return false;
	t = DatumGetTextPP(kind);
	return is_cancel(false, kind) ||
		(VARSIZE_ANY_EXHDR(t) == 10 && memcmp(VARDATA_ANY(t), "compensate", 10) == 0);
}

/*
 * Why a context with status (NULL: no row) and expires_at (expires_null:
 * none) has ended, at cscp.now(): "context_closed" when it is closed,
 * "context_expired" when it is expired (recorded or past its expires_at)
 * or there is no row; NULL while it is live.
 */
static const char *
ended_of(const char *status, bool expires_null, Datum expires)
{
	if (status == NULL)
		return "context_expired";
	if (strcmp(status, "closed") == 0)
		return "context_closed";
	if (!cscp_context_usable(status, expires_null,
							 expires_null ? 0 : DatumGetTimestampTz(expires), cscp_now()))
		return "context_expired";
	return NULL;
}

/*
 * Whether c's context_live_until promises a live context at cscp.now().
 * The promise is a lower bound of the context's life that every write
 * ending the context, or bringing its end nearer, lowers on each command
 * of it that could still take a step forward (commands_follow in
 * context_fsm.c): so while it lies ahead the context is live, without a
 * read.
 */
static bool
promise_holds(CommandFacts *c)
{
	return c->promised && c->live_until > cscp_now();
}

/*
 * Remember that c's context was read live (status, expires_at), so that
 * the step stores its expires_at as the command's new promise.
 */
static const char *
context_read(CommandFacts *c, const char *status, bool expires_null, Datum expires)
{
	const char *why = ended_of(status, expires_null, expires);

	if (why == NULL && !expires_null)
	{
		c->read_live = true;
		c->read_until = DatumGetTimestampTz(expires);
	}
	return why;
}

/*
 * Whether the command's context has ended (ended_of): NULL while it is
 * live or when the command has no context.  The row's promise
 * (promise_holds) answers without a read while it lies ahead; otherwise
 * the context is read as the caller (row-level security applies as to any
 * statement), without a lock: a context's end writes every command of it
 * that could still step forward, so it waits for a step that has written
 * its command and a step written after it finds the promise gone; under
 * REPEATABLE READ the later of the two fails to serialize.  A step to
 * confirmed has read it already, with its answer (answer_recorded).
 */
static const char *
context_ended(CommandFacts *c)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2];
	const char *why = NULL;

	if (!c->has_context || c->cancel_recovery)
		return NULL;
	if (c->ended_read)
		return c->ended;
	if (promise_holds(c))
		return NULL;
	if (c->ctx_given)
	{
		/* The row the caller read and locked: judged the same, not read again. */
		bool		isnull;
		Datum		expires;

		if (c->ctx == NULL)
			return ended_of(NULL, true, (Datum) 0);
		expires = cscp_column_value(c->ctx, c->ctxdesc, "cscp.context", "expires_at", &isnull);
		return context_read(c, SPI_getvalue(c->ctx, c->ctxdesc,
											cscp_column(c->ctxdesc, "cscp.context", "status")),
							isnull, expires);
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT x.status::pg_catalog.text, x.expires_at FROM cscp.context x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
				  2, argtypes);
	args[0] = c->tenant_id;
	args[1] = c->context_id;
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the context of a command");
	if (SPI_processed == 0)
		why = ended_of(NULL, true, (Datum) 0);
	else
	{
		HeapTuple	row = SPI_tuptable->vals[0];
		bool		isnull;
		Datum		expires = SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull);

		why = context_read(c, SPI_getvalue(row, SPI_tuptable->tupdesc, 1), isnull, expires);
	}
	SPI_finish();
	return why;
}

/*
 * Whether cscp.answer records the user's "yes" to the command c (of
 * conversation) given by message message_id: the answer cscp.confirm
 * writes, as the owner, before it confirms the command.  Found by the
 * table's primary key, whatever its statistics say
 * (cscp_spi_execute_keyed).  A step whose context context_ended would read
 * reads it in the same statement, into c->ended: one statement proves
 * both.  With no context row, no answer is read: context_ended's refusal
 * comes first.
 */
static bool
answer_recorded(CommandFacts *c, Datum conversation, Datum message_id)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	static const Oid argtypes[5] = {TEXTOID, TEXTOID, UUIDOID, TEXTOID, UUIDOID};
	Datum		args[5] = {c->tenant_id, conversation, c->command_id, message_id, c->context_id};
	bool		with_context = c->has_context && !c->cancel_recovery &&
		!c->ctx_given && !c->ended_read && !promise_holds(c);
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plans[with_context],
				  with_context ?
				  "SELECT x.status::pg_catalog.text, x.expires_at,"
				  "       EXISTS (SELECT 1 FROM cscp.answer a"
				  "                WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.conversation_id OPERATOR(pg_catalog.=) $2"
				  "                  AND a.kind OPERATOR(pg_catalog.=) 'confirm' AND a.message_id OPERATOR(pg_catalog.=) $4"
				  "                  AND a.command_id OPERATOR(pg_catalog.=) $3 AND a.outcome OPERATOR(pg_catalog.=) 'confirmed')"
				  "  FROM cscp.context x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $5" :
				  "SELECT 1 FROM cscp.answer a"
				  " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.conversation_id OPERATOR(pg_catalog.=) $2 AND a.kind OPERATOR(pg_catalog.=) 'confirm'"
				  "   AND a.message_id OPERATOR(pg_catalog.=) $4 AND a.command_id OPERATOR(pg_catalog.=) $3 AND a.outcome OPERATOR(pg_catalog.=) 'confirmed'",
				  with_context ? 5 : 4, argtypes);
	if (cscp_spi_execute_keyed(plans[with_context], args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the answer of a command");
	found = SPI_processed > 0;
	if (with_context)
	{
		c->ended_read = true;
		c->ended = ended_of(NULL, true, (Datum) 0);
		if (found)
		{
			HeapTuple	row = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		expires = SPI_getbinval(row, desc, 2, &isnull);

			c->ended = context_read(c, SPI_getvalue(row, desc, 1), isnull, expires);
			found = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull)) && !isnull;
		}
	}
	SPI_finish();
	return found;
}

/*
 * Why from -> to is refused for this command, as a reason code, or NULL when
 * it is allowed.  *detail gets a sentence for an error message.
 */
static const char *
refusal(CommandFacts *c, CommandState to, char **detail)
{
	CommandState from = c->state;

	if (!allowed[from][to])
	{
		StringInfoData buf;

		initStringInfo(&buf);
		for (int s = 0; s < CMD_NUM_STATES; s++)
			if (allowed[from][s])
				appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", cscp_command_state_names[s]);
		*detail = psprintf("The command is %s; allowed next: %s.", cscp_command_state_names[from],
						   buf.len ? buf.data : "none (it is terminal)");
		return "invalid_transition";
	}
	if (c->window_closed && to == CMD_CONFIRMED)
	{
		*detail = pstrdup("The confirmation window has passed; ask the user again.");
		return "confirmation_expired";
	}
	if (c->window_closed && to == CMD_AUTHORIZED)
	{
		*detail = pstrdup("The approval window has passed; ask for approval again.");
		return "approval_expired";
	}
	if (to == CMD_CONFIRMED || to == CMD_AUTHZ_PENDING || to == CMD_AUTHORIZED ||
		to == CMD_STARTED)
	{
		const char *ended = context_ended(c);

		if (ended != NULL)
		{
			*detail = psprintf("The command's context has %s; nothing of it moves forward.",
							   strcmp(ended, "context_closed") == 0 ? "closed" : "expired");
			return ended;
		}
	}
	if (to == CMD_CONFIRMED && !c->answered)
	{
		*detail = pstrdup("A command is confirmed only by the user's answer, recorded by cscp.confirm.");
		return "not_answered";
	}
	if (to == CMD_AUTHZ_PENDING && from == CMD_CANONICALIZED &&
		c->mutating && !c->auto_confirm)
	{
		*detail = pstrdup("A mutating command goes through confirmation_required and confirmed "
						  "unless the tenant's policy auto-confirms it.");
		return "not_confirmed";
	}
	if (to == CMD_STARTED)
	{
		if (c->mutating && !c->auto_confirm && !c->confirmed)
		{
			*detail = pstrdup("A mutating command starts only after it was confirmed.");
			return "not_confirmed";
		}
		if (!c->authorized)
		{
			*detail = pstrdup("A command starts only after it was authorized.");
			return "not_authorized";
		}
		if (cscp_registry_unapproved(c->tenant_id, c->command_id, fact_name(c),
									 c->recovery_approval))
		{
			*detail = pstrdup("The command registry says this command needs an approval; "
							  "it starts only after cscp.approve approved it.");
			return "not_approved";
		}
	}
	if ((from == CMD_CANONICALIZED && to != CMD_REJECTED && to != CMD_CANCELED) ||
		to == CMD_CANONICALIZED)
	{
		const char *why = snapshot_refusal(c, to != CMD_CANONICALIZED, detail);

		if (why != NULL)
			return why;
	}
	if (to == CMD_EXECUTED && c->cancel_recovery && c->row != NULL && !snapshot_facts(c).canceled_by_it)
	{
		*detail = pstrdup("A cancel recovery is executed only once its target is canceled by it "
						  "(command_transition cancels it when the recovery starts).");
		return "cancel_not_carried_out";
	}
	if (to == CMD_CANCELED && from == CMD_STARTED &&
		cscp_registry_cancel_unapproved(c->tenant_id, c->command_id))
	{
		*detail = pstrdup("The command registry declares this command needs_approval or of risk "
						  "high or critical: once started it is canceled only by a cancel recovery "
						  "(cscp.command_recover) that the user confirmed and that started.");
		return "cancel_not_approved";
	}
	if (to == CMD_COMPENSATED && !compensation_executed(c))
	{
		*detail = pstrdup("A command is compensated only when a compensate recovery "
						  "aimed at it (cscp.command_recover) has executed.");
		return "compensation_not_executed";
	}
	return NULL;
}

/* The columns of cscp.command the guards read. */
typedef enum
{
	CM_TENANT_ID,
	CM_COMMAND_ID,
	CM_CONVERSATION_ID,
	CM_CONTEXT_ID,
	CM_CONTEXT_REF,
	CM_MESSAGE_IDS,
	CM_COMMAND_NAME,
	CM_MUTATING,
	CM_AUTO_CONFIRM,
	CM_STATE,
	CM_REASON_CODE,
	CM_DETAIL,
	CM_OUTCOME,
	CM_WINDOW_EXPIRES_AT,
	CM_RECOVERY_KIND,
	CM_CONFIRMED_AT,
	CM_AUTHORIZED_AT,
	CM_CREATED_AT,
	CM_UPDATED_AT,
	CM_LAST_TRANSITION_AT,
	CM_VERSION,
	CM_FRAME_ID,
	CM_IDEMPOTENCY_KEY,
	CM_TARGET_FINGERPRINT,
	CM_NUM_COLUMNS
} CommandColumn;

static const char *const column_names[CM_NUM_COLUMNS] = {
	"tenant_id",
	"command_id",
	"conversation_id",
	"context_id",
	"context_ref",
	"message_ids",
	"command_name",
	"mutating",
	"auto_confirm",
	"state",
	"reason_code",
	"detail",
	"outcome",
	"window_expires_at",
	"recovery_kind",
	"confirmed_at",
	"authorized_at",
	"created_at",
	"updated_at",
	"last_transition_at",
	"version",
	"frame_id",
	"idempotency_key",
	"target_fingerprint",
};

static CscpColumns columns = {.table = "cscp.command", .n = CM_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.command. */
#define COL(c) (columns.attnum[c])

/* Columns that say what a command is: never changed by an UPDATE. */
static const char *const fixed_columns[] = {
	"tenant_id", "command_id", "idempotency_key", "conversation_id", "actor_id",
	"context_id", "frame_id", "context_ref", "command_name", "mutating",
	"auto_confirm", "payload", "target_fingerprint", "target_command_id",
	"recovery_kind", "created_at"
};
static CscpColumns fixed_cols = {
	.table = "cscp.command", .n = lengthof(fixed_columns), .names = fixed_columns
};

/*
 * The head of the command's evidence chain, kept in its row (evidence_seq,
 * evidence_hash): 0 when the table has no such columns (the 0.1.0 schema,
 * before ALTER EXTENSION UPDATE), and then the head is read from
 * cscp.evidence.
 */
static Oid	head_relid = InvalidOid;
static int	head_natts = 0;
static int	head_seq_att = 0;
static int	head_hash_att = 0;

/* Look up the columns of rel the guards read, unless they were looked up already. */
static void
load_columns(Relation rel)
{
	cscp_columns_load(&columns, rel);
	cscp_columns_load(&fixed_cols, rel);
	if (head_relid != RelationGetRelid(rel) || head_natts != RelationGetDescr(rel)->natts)
	{
		int			seq = SPI_fnumber(RelationGetDescr(rel), "evidence_seq");
		int			hash = SPI_fnumber(RelationGetDescr(rel), "evidence_hash");
		int			until = SPI_fnumber(RelationGetDescr(rel), "context_live_until");

		head_seq_att = seq > 0 && hash > 0 ? seq : 0;
		head_hash_att = seq > 0 && hash > 0 ? hash : 0;
		promise_att = until > 0 ? until : 0;
		head_relid = RelationGetRelid(rel);
		head_natts = RelationGetDescr(rel)->natts;
	}
}

static bool
is_null(HeapTuple t, TupleDesc desc, int attnum)
{
	bool		isnull;

	(void) heap_getattr(t, attnum, desc, &isnull);
	return isnull;
}

static CommandState
get_state(HeapTuple t, TupleDesc desc)
{
	bool		isnull;
	Datum		d = heap_getattr(t, COL(CM_STATE), desc, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("state of a command must not be null")));
	return (CommandState) cscp_enum_index(&state_cache,
										  TupleDescAttr(desc, COL(CM_STATE) - 1)->atttypid, d);
}

/*
 * A cscp.command row deformed once: its values and nulls by attnum - 1.
 * The table is wide and has variable-length columns early, so each
 * heap_getattr of a later column walks the tuple from its start; the guard
 * reads some thirty columns of two tuples per update.
 */
typedef struct CmdRow
{
	Datum	   *v;
	bool	   *n;
} CmdRow;

#define ROW_V(r, attnum) ((r).v[(attnum) - 1])
#define ROW_N(r, attnum) ((r).n[(attnum) - 1])

static CmdRow
deform(HeapTuple t, TupleDesc desc)
{
	CmdRow		r;

	r.v = palloc(desc->natts * sizeof(Datum));
	r.n = palloc(desc->natts * sizeof(bool));
	heap_deform_tuple(t, desc, r.v, r.n);
	return r;
}

/* A text column as a C string, or NULL. */
static char *
row_text(CmdRow r, int attnum)
{
	return ROW_N(r, attnum) ? NULL : TextDatumGetCString(ROW_V(r, attnum));
}

static CommandState
row_state(CmdRow r, TupleDesc desc)
{
	if (ROW_N(r, COL(CM_STATE)))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("state of a command must not be null")));
	return (CommandState) cscp_enum_index(&state_cache,
										  TupleDescAttr(desc, COL(CM_STATE) - 1)->atttypid,
										  ROW_V(r, COL(CM_STATE)));
}

static CommandFacts
row_facts(CmdRow r, TupleDesc desc)
{
	CommandFacts c = {0};		/* what a line below does not set: false, 0, NULL */

	c.state = row_state(r, desc);
	c.mutating = !ROW_N(r, COL(CM_MUTATING)) && DatumGetBool(ROW_V(r, COL(CM_MUTATING)));
	c.auto_confirm = !ROW_N(r, COL(CM_AUTO_CONFIRM)) && DatumGetBool(ROW_V(r, COL(CM_AUTO_CONFIRM)));
	c.confirmed = !ROW_N(r, COL(CM_CONFIRMED_AT));
	c.authorized = !ROW_N(r, COL(CM_AUTHORIZED_AT));
	c.window_closed = !ROW_N(r, COL(CM_WINDOW_EXPIRES_AT)) &&
		DatumGetTimestampTz(ROW_V(r, COL(CM_WINDOW_EXPIRES_AT))) <= cscp_now();
	c.cancel_recovery = is_cancel(ROW_N(r, COL(CM_RECOVERY_KIND)), ROW_V(r, COL(CM_RECOVERY_KIND)));
	c.recovery_approval = is_approval_recovery(ROW_N(r, COL(CM_RECOVERY_KIND)),
											   ROW_V(r, COL(CM_RECOVERY_KIND)));
	c.tenant_id = ROW_V(r, COL(CM_TENANT_ID));
	c.command_id = ROW_V(r, COL(CM_COMMAND_ID));
	c.row = NULL;				/* the caller sets the tuple r came from */
	c.desc = desc;
	c.has_context = !ROW_N(r, COL(CM_CONTEXT_ID));
	c.context_id = ROW_V(r, COL(CM_CONTEXT_ID));
	c.promised = promise_att > 0 && !ROW_N(r, promise_att);
	c.live_until = c.promised ? DatumGetTimestampTz(ROW_V(r, promise_att)) : 0;
	c.stored = true;			/* the old version of an UPDATE */
	return c;
}

/* The tuple of row r, standing where like stood (as heap_modify_tuple keeps it). */
static HeapTuple
form_like(HeapTuple like, TupleDesc desc, CmdRow r)
{
	HeapTuple	t = heap_form_tuple(desc, r.v, r.n);

	t->t_data->t_ctid = like->t_data->t_ctid;
	t->t_self = like->t_self;
	t->t_tableOid = like->t_tableOid;
	return t;
}

/* Whether array a is a prefix of array b (both text[], non-null). */
static bool
array_is_prefix(Datum a, Datum b)
{
	Datum	   *ae,
			   *be;
	bool	   *an,
			   *bn;
	int			na,
				nb;

	deconstruct_array(DatumGetArrayTypeP(a), TEXTOID, -1, false, TYPALIGN_INT, &ae, &an, &na);
	deconstruct_array(DatumGetArrayTypeP(b), TEXTOID, -1, false, TYPALIGN_INT, &be, &bn, &nb);
	if (na > nb)
		return false;
	for (int i = 0; i < na; i++)
	{
		if (an[i] || bn[i])
		{
			if (an[i] != bn[i])
				return false;
			continue;
		}
		if (!datum_image_eq(ae[i], be[i], false, -1))
			return false;
	}
	return true;
}

/* The outcome a terminal command replays: {"state", "reason_code", "detail"}. */
static Datum
make_outcome(CommandState to, const char *reason, Jsonb *detail)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"state\":");
	cscp_canonical_string(&buf, cscp_command_state_names[to], strlen(cscp_command_state_names[to]));
	appendStringInfoString(&buf, ",\"reason_code\":");
	if (reason)
		cscp_canonical_string(&buf, reason, strlen(reason));
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ",\"detail\":");
	if (detail)
		cscp_canonical_append(&buf, detail);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoChar(&buf, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
}

/* The evidence row of a transition the row r has just made, into *e. */
static void
transition_event(CmdRow r, CommandState from, CommandState to, TimestampTz now,
				 const char *decision_override, const char *reason_override, CscpEvidence *e)
{
	const char *decision;

	memset(e, 0, sizeof(*e));
	e->tenant_id = row_text(r, COL(CM_TENANT_ID));
	e->conversation_id = row_text(r, COL(CM_CONVERSATION_ID));
	e->command_id = DatumGetCString(DirectFunctionCall1(uuid_out, ROW_V(r, COL(CM_COMMAND_ID))));
	e->stage = cscp_command_state_names[to];
	e->event_type = event_type(from, to, &decision);
	e->decision = decision_override ? decision_override : decision;
	e->from_state = cscp_command_state_names[from];
	e->to_state = cscp_command_state_names[to];
	e->message_ids = ROW_N(r, COL(CM_MESSAGE_IDS)) ? NULL :
		DatumGetArrayTypeP(ROW_V(r, COL(CM_MESSAGE_IDS)));
	e->context_ref = ROW_N(r, COL(CM_CONTEXT_REF)) ? NULL :
		DatumGetJsonbP(ROW_V(r, COL(CM_CONTEXT_REF)));
	e->reason_code = reason_override ? reason_override : row_text(r, COL(CM_REASON_CODE));
	e->detail = ROW_N(r, COL(CM_DETAIL)) ? NULL : DatumGetJsonbP(ROW_V(r, COL(CM_DETAIL)));
	e->created_at = now;
}

/*
 * Append events[0..n-1], the transitions the write of row r makes, to its
 * command's chain in one INSERT, after the head the old version o carries
 * (o.v NULL: a new command, whose chain starts now) as a hint, keep the
 * new head in r, and announce each transition.  The row is being written,
 * so its lock is held and no other transition appends meanwhile; a
 * refused attempt appended since (without writing the row) is found by
 * cscp_evidence_append_chain.  Whatever head an INSERT or UPDATE gives is
 * replaced.
 */
static void
record_transitions(CmdRow o, CmdRow r, CscpEvidence *events, int n)
{
	bool		hint = head_seq_att > 0;
	int32		seq = 0;
	const char *hash = NULL;

	if (hint && o.v != NULL)
	{
		seq = ROW_N(o, head_seq_att) ? 0 : DatumGetInt32(ROW_V(o, head_seq_att));
		hash = row_text(o, head_hash_att);
	}
	cscp_evidence_append_chain(events, n, hint, seq, hash);
	if (hint)
	{
		ROW_V(r, head_seq_att) = Int32GetDatum(events[n - 1].seq);
		ROW_N(r, head_seq_att) = false;
		ROW_V(r, head_hash_att) = CStringGetTextDatum(events[n - 1].hash);
		ROW_N(r, head_hash_att) = false;
	}
	for (int i = 0; i < n; i++)
		cscp_notify_transition(events[i].tenant_id, "command", events[i].command_id,
							   events[i].from_state, events[i].to_state);
}

static const char *const recovery_kinds[] = {"retry", "cancel", "reprocess", "compensate", NULL};

/* Whether kind is one of recovery_kinds. */
static bool
is_recovery_kind(const char *kind)
{
	for (int i = 0; recovery_kinds[i] != NULL; i++)
		if (strcmp(kind, recovery_kinds[i]) == 0)
			return true;
	return false;
}

/* Log the refusal of a new command born in state, before raising it. */
static void
log_refused_insert(HeapTuple tuple, TupleDesc desc, CommandState state, const char *why)
{
	cscp_log_refused_step("command", SPI_getvalue(tuple, desc, COL(CM_TENANT_ID)),
						  SPI_getvalue(tuple, desc, COL(CM_COMMAND_ID)), NULL,
						  cscp_command_state_names[state], why);
}

/*
 * A mutating command is not formed while its context is blocked (waiting on
 * an external completion or an operator): command_submit records it
 * rejected with context_blocked as it forms it; a direct INSERT of one
 * born canonicalized or confirmation_required against a blocked context
 * (the frame_form or insert_snapshot_check read) is refused, 55000.
 */
static void
blocked_refusal(HeapTuple tuple, TupleDesc desc, CommandState state)
{
	log_refused_insert(tuple, desc, state, "context_blocked");
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a mutating command cannot be formed while its context is blocked (context_blocked)"),
			 errdetail("Context %s of tenant \"%s\" waits on an external completion or an operator.",
					   SPI_getvalue(tuple, desc, COL(CM_CONTEXT_ID)),
					   SPI_getvalue(tuple, desc, COL(CM_TENANT_ID))),
			 errhint("Move the context back to active with cscp.context_transition first.")));
}

/*
 * The snapshot and recovery rules of a new command (tuple, born in state):
 * a recovery names a command of its conversation and actor, a compensate
 * recovery is mutating (it goes through confirmation), and a command born
 * in canonicalized or confirmation_required is held to snapshot_refusal
 * (a frame of its own context; a command reaches canonicalized only with
 * the snapshot it was formed from).  Returns true, with *promise, when
 * its frame's read found its context live (frame_facts): its first
 * promise.
 */
static bool
insert_snapshot_check(HeapTuple tuple, TupleDesc desc, CommandState state, bool formed,
					  bool asks, TimestampTz *promise)
{
	CommandFacts c = {0};
	bool		kindnull,
				targetnull,
				framenull;
	Datum		kind;
	char	   *detail = NULL;
	const char *why;

	c.state = CMD_CANONICALIZED;
	c.birth = state == CMD_CANONICALIZED || state == CMD_CONFIRMATION_REQUIRED;
	c.stored = formed;			/* its frame was formed from its context here */
	c.asks = asks;
	c.mutating = cscp_column_true(tuple, desc, COL(CM_MUTATING));
	c.auto_confirm = cscp_column_true(tuple, desc, COL(CM_AUTO_CONFIRM));
	c.tenant_id = heap_getattr(tuple, COL(CM_TENANT_ID), desc, &kindnull);
	c.command_id = heap_getattr(tuple, COL(CM_COMMAND_ID), desc, &kindnull);
	c.row = tuple;
	c.desc = desc;
	kind = fact_col(&c, "recovery_kind", &kindnull);
	(void) fact_col(&c, "target_command_id", &targetnull);
	c.cancel_recovery = is_cancel(kindnull, kind);
	c.recovery_approval = is_approval_recovery(kindnull, kind);
	/* An unknown kind or a missing target is the column rules' to refuse (23514). */
	if (!kindnull && !targetnull && is_recovery_kind(TextDatumGetCString(kind)))
	{
		SnapshotFacts f = snapshot_facts(&c);

		if (!f.target_ok)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("target_command_id of a recovery must name a command of its conversation and actor"),
					 errdetail("No command of tenant \"%s\" with that id has conversation \"%s\" and the recovery's actor.",
							   SPI_getvalue(tuple, desc, COL(CM_TENANT_ID)),
							   SPI_getvalue(tuple, desc, COL(CM_CONVERSATION_ID))),
					 errhint("Form recoveries with cscp.command_recover.")));
		if (strcmp(TextDatumGetCString(kind), "compensate") == 0 && !c.mutating)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a compensate recovery must be mutating"),
					 errdetail("A compensation changes the world again, so the user confirms it."),
					 errhint("Form recoveries with cscp.command_recover.")));
		if (strcmp(TextDatumGetCString(kind), "cancel") == 0 && !c.mutating &&
			cscp_registry_recovery_gated(c.tenant_id,
										 fact_col(&c, "target_command_id", &targetnull)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a cancel recovery of a command declared needs_approval or of risk high or critical must be mutating"),
					 errdetail("Recovering such a command needs the confirmation a forward command of its class needs."),
					 errhint("Form recoveries with cscp.command_recover.")));
	}
	/* A frame named at birth is its own context's, as command_submit records it. */
	(void) fact_col(&c, "frame_id", &framenull);
	if (!framenull && state != CMD_CONFIRMATION_REQUIRED && state != CMD_CANONICALIZED &&
		!snapshot_facts(&c).frame_ok)
	{
		log_refused_insert(tuple, desc, state, "snapshot_mismatch");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new command must name a frame of its own context (snapshot_mismatch)"),
				 errdetail("The frame a command names is its context's state as cscp.command_submit records it: same context, conversation, actor and message ids, and the hash its context_ref gives."),
				 errhint("Submit it with cscp.command_submit, which records the frame.")));
	}
	if (state != CMD_CONFIRMATION_REQUIRED && state != CMD_CANONICALIZED)
		return false;
	why = snapshot_refusal(&c, state == CMD_CONFIRMATION_REQUIRED, &detail);
	if (why != NULL)
		log_refused_insert(tuple, desc, state, why);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 state == CMD_CANONICALIZED ?
				 errmsg("a new command cannot be canonicalized (%s)", why) :
				 errmsg("a new command cannot ask for confirmation (%s)", why),
				 errdetail("%s", detail),
				 errhint("Submit it with cscp.command_submit, then move it with cscp.command_transition.")));
	if (formed)
		return true;			/* *promise is frame_form's */
	if (c.read_blocked && c.mutating)
		blocked_refusal(tuple, desc, state);
	*promise = c.read_until;
	return c.read_live;
}

/*
 * Whether a new command leaves its frame to this trigger: it names its
 * context and the ids of the messages it was formed from, but no frame and
 * no context_ref, and was not refused as it was formed (no reason_code).
 * command_submit, command_recover and message_turn insert every command
 * formed against a usable context so; a direct INSERT may too.
 */
static bool
forms_frame(HeapTuple tuple, TupleDesc desc)
{
	return is_null(tuple, desc, COL(CM_FRAME_ID)) && is_null(tuple, desc, COL(CM_CONTEXT_REF)) &&
		!is_null(tuple, desc, COL(CM_CONTEXT_ID)) && !is_null(tuple, desc, COL(CM_MESSAGE_IDS)) &&
		is_null(tuple, desc, COL(CM_REASON_CODE));
}

/*
 * The frame of a new command that leaves it to the trigger (forms_frame),
 * born in state (canonicalized or confirmation_required): its context read
 * by key with the caller's rights, FOR SHARE (so that it cannot end before
 * the command commits: its end then finds the command and takes its
 * promise back; FOR NO KEY UPDATE when the command asks its context a
 * question, asks, which writes it: ask_context), which must be of the
 * command's tenant, conversation and actor and usable now, and not blocked
 * for a mutating command (blocked_refusal); the frame of its
 * state and the command's message ids recorded as the owner, or the one
 * that records that state already (cscp_frame_record: frames are unique
 * by context and hash); its frame_id and context_ref written into the row.
 * The one judge of a formed command's frame: it writes the frame from what
 * it read, so the frame's guard has nothing left to check and the command's
 * nothing to read back.  Returns the row; *promise is the context's
 * expires_at, its first promise.
 */
static HeapTuple
frame_form(HeapTuple tuple, TupleDesc desc, CommandState state, bool asks, TimestampTz *promise)
{
	MemoryContext rowctx = CurrentMemoryContext;
	CscpOwnerScope owner;
	Datum		args[2];
	Datum		conversation;
	Datum		actor;
	bool		actor_null;
	HeapTuple	ctx = NULL;
	TupleDesc	ctxdesc = NULL;
	Jsonb	   *frame_state;
	JsonbValue *expires;
	JsonbParseState *st = NULL;
	char	   *hash;
	Datum		frame_id;
	Datum		ref;
	const char *problem;
	bool		isnull;
	int			cols[2] = {COL(CM_FRAME_ID), COL(CM_CONTEXT_REF)};
	Datum		values[2];
	bool		nulls[2] = {false, false};
	pg_uuid_t	command_id;

	args[0] = heap_getattr(tuple, COL(CM_TENANT_ID), desc, &isnull);
	args[1] = heap_getattr(tuple, COL(CM_CONTEXT_ID), desc, &isnull);
	conversation = heap_getattr(tuple, COL(CM_CONVERSATION_ID), desc, &isnull);
	actor = heap_getattr(tuple, cscp_column(desc, "cscp.command", "actor_id"), desc, &actor_null);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	problem = isnull || actor_null ? "the command names no conversation or actor" :
		cscp_frame_context(args[0], args[1], conversation, &actor,
						   asks ? CSCP_FRAME_UPDATE : CSCP_FRAME_SHARE, &ctx, &ctxdesc);
	if (problem != NULL)
	{
		log_refused_insert(tuple, desc, state, "snapshot_mismatch");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new command must be formed against its own usable context (snapshot_mismatch)"),
				 errdetail("The command names context %s of tenant \"%s\", but %s.",
						   SPI_getvalue(tuple, desc, COL(CM_CONTEXT_ID)),
						   SPI_getvalue(tuple, desc, COL(CM_TENANT_ID)), problem),
				 errhint("Submit it with cscp.command_submit, which forms it against the live context.")));
	}
	if (cscp_column_true(tuple, desc, COL(CM_MUTATING)) &&
		strcmp(SPI_getvalue(ctx, ctxdesc, 4), "blocked") == 0)
		blocked_refusal(tuple, desc, state);
	*promise = DatumGetTimestampTz(SPI_getbinval(ctx, ctxdesc, 5, &isnull));
	frame_state = cscp_frame_state(ctx, ctxdesc,
								   DatumGetArrayTypeP(heap_getattr(tuple, COL(CM_MESSAGE_IDS), desc,
																   &isnull)));

	/* The frame is the command's record: written as the owner, unchecked. */
	memcpy(command_id.data, DatumGetUUIDP(heap_getattr(tuple, COL(CM_COMMAND_ID), desc, &isnull))->data,
		   UUID_LEN);
	cscp_owner_enter("frame", &owner);
	frame_id = cscp_frame_record(args[0], DatumGetTextPP(conversation),
								 cscp_routing_hash_uuid(&command_id), args[1], frame_state, &hash);
	cscp_owner_leave(&owner);

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cscp_jsonb_push_text(&st, "context_id", DatumGetCString(DirectFunctionCall1(uuid_out, args[1])));
	cscp_jsonb_push_text(&st, "frame_id", DatumGetCString(DirectFunctionCall1(uuid_out, frame_id)));
	cscp_jsonb_push_text(&st, "context_hash", hash);
	expires = cscp_jsonb_get(frame_state, "expires_at");
	cscp_jsonb_push_text(&st, "expires_at", expires != NULL && expires->type == jbvString ?
						 pnstrdup(expires->val.string.val, expires->val.string.len) : NULL);
	ref = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL)));

	/* into the row's memory, past SPI_finish */
	{
		MemoryContext old = MemoryContextSwitchTo(rowctx);

		values[0] = datumCopy(frame_id, false, UUID_LEN);
		values[1] = datumCopy(ref, false, -1);
		tuple = heap_modify_tuple_by_cols(tuple, desc, 2, cols, values, nulls);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return tuple;
}

static bool due_row(HeapTuple row, TupleDesc desc, CommandState s, bool window, Datum *args,
					bool *ctxnull);
static void due_take(bool window, Datum *args, bool ctxnull, bool supersede);
static bool forms_frame(HeapTuple tuple, TupleDesc desc);

/*
 * The birth a new command leaves to cscp, into edit: how command_submit and
 * command_recover insert one (auto_confirm and state null), and a direct
 * INSERT that does the same.  A null auto_confirm is the tenant's policy
 * (auto_confirm) for a mutating command not refused as it was formed (no
 * reason_code); a null state is rejected when the row carries a
 * reason_code (refused as it was formed), else confirmation_required for a
 * mutating command not auto-confirmed that names the frame it was formed
 * from (its context was usable), with the policy's confirmation_ttl as its
 * window unless it gives one, else canonicalized.  Returns the state it is
 * born in; *auto_confirm as it is stored, *decided when the state was
 * decided here (the row then needs no insert_state_check, and when it asks
 * it supersedes its context's question: guard_insert, due_take).
 */
static CommandState
insert_birth(HeapTuple tuple, TupleDesc desc, CscpRowEdit *edit, bool *auto_confirm,
			 bool *decided)
{
	bool		refused = !is_null(tuple, desc, COL(CM_REASON_CODE));
	bool		mutating = cscp_column_true(tuple, desc, COL(CM_MUTATING));
	CommandState state;

	if (is_null(tuple, desc, COL(CM_AUTO_CONFIRM)))
	{
		*auto_confirm = false;
		if (mutating && !refused)
		{
			char	   *tenant = SPI_getvalue(tuple, desc, COL(CM_TENANT_ID));
			char	   *name = SPI_getvalue(tuple, desc, COL(CM_COMMAND_NAME));

			*auto_confirm = tenant != NULL && name != NULL &&
				cscp_policy_lists(cscp_policy_get(tenant), "auto_confirm", name);
		}
		cscp_row_edit_set(edit, COL(CM_AUTO_CONFIRM), BoolGetDatum(*auto_confirm), false);
	}
	else
		*auto_confirm = cscp_column_true(tuple, desc, COL(CM_AUTO_CONFIRM));
	*decided = is_null(tuple, desc, COL(CM_STATE));
	if (!*decided)
		return get_state(tuple, desc);
	if (refused)
		state = CMD_REJECTED;
	else if (mutating && !*auto_confirm &&
			 (!is_null(tuple, desc, COL(CM_FRAME_ID)) || forms_frame(tuple, desc)))
		state = CMD_CONFIRMATION_REQUIRED;
	else
		state = CMD_CANONICALIZED;
	cscp_row_edit_set(edit, COL(CM_STATE),
					  cscp_command_state_datum(TupleDescAttr(desc, COL(CM_STATE) - 1)->atttypid,
											   state), false);
	if (state == CMD_CONFIRMATION_REQUIRED && is_null(tuple, desc, COL(CM_WINDOW_EXPIRES_AT)))
		cscp_row_edit_set(edit, COL(CM_WINDOW_EXPIRES_AT),
						  TimestampTzGetDatum(cscp_window_end(SPI_getvalue(tuple, desc,
																		   COL(CM_TENANT_ID)),
															  "confirmation_ttl")),
						  false);
	return state;
}

/*
 * Reject the command of context args[1] of tenant args[0] that waits on
 * question args[3] (confirmation or approval) in state args[5], superseded
 * by command args[2] with reason args[4]: an UPDATE its own trigger judges
 * (its row in cscp.command_window goes with it), with the caller's rights.
 * The caller is connected to SPI.
 */
static void
supersede_waiting(Datum *args)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID};

	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = 'rejected', reason_code = $5,"
				  "       detail = pg_catalog.jsonb_build_object('superseded_by', $3)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2 AND x.command_id OPERATOR(pg_catalog.<>) $3"
				  "   AND x.state OPERATOR(pg_catalog.=) $6::cscp.command_state"
				  "   AND x.command_id OPERATOR(pg_catalog.=) ANY (SELECT w.command_id FROM cscp.command_window w"
				  "                         WHERE w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.context_id OPERATOR(pg_catalog.=) $2"
				  "                           AND w.question OPERATOR(pg_catalog.=) $4)",
				  6, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not supersede a question");
}

/* supersede_waiting's arguments for a question of a context. */
static void
supersede_args(Datum tenant, Datum context_id, bool approval, Datum command_id, Datum *args)
{
	args[0] = tenant;
	args[1] = context_id;
	args[2] = command_id;
	args[3] = CStringGetTextDatum(approval ? "approval" : "confirmation");
	args[4] = CStringGetTextDatum(approval ? "approval_superseded" : "confirmation_superseded");
	args[5] = CStringGetTextDatum(approval ? "authz_pending" : "confirmation_required");
}

/*
 * Supersede the question (a confirmation, or an approval) that context
 * context_id of tenant asks now, before command_id starts to wait on a new
 * one: every other command of the context that cscp.command_window lists
 * as waiting on that question, and that is still in its waiting state, is
 * rejected (confirmation_superseded or approval_superseded, superseded_by
 * command_id).  A context asks one question of each kind at a time (the
 * unique index command_window_question_key holds it), so this is the one
 * its slot names, or one a direct write left without a slot.  Usually none
 * waits: the window is looked up by its unique key first, and the UPDATE
 * runs only when there is one.  For a step (command_transition); a new
 * command born asking supersedes from its trigger, where the unique index
 * finds the question that waits without a lookup (due_take).  The caller
 * is connected to SPI and has locked the context row.
 */
void
cscp_command_supersede(Datum tenant, Datum context_id, bool approval, Datum command_id)
{
	static SPIPlanPtr find_plan = NULL;
	static const Oid find_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	Datum		args[6];
	Datum		find_args[3];

	supersede_args(tenant, context_id, approval, command_id, args);
	find_args[0] = args[0];
	find_args[1] = args[1];
	find_args[2] = args[3];
	cscp_spi_plan(&find_plan,
				  "SELECT w.command_id FROM cscp.command_window w"
				  " WHERE w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.context_id OPERATOR(pg_catalog.=) $2"
				  "   AND w.question OPERATOR(pg_catalog.=) $3",
				  3, find_types);
	if (SPI_execute_plan(find_plan, find_args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the question of a context");
	if (SPI_processed == 0)
		return;
	supersede_waiting(args);
}

/*
 * The state a new command may be born in when its writer names one:
 * received, canonicalized, rejected (a command refused as it is formed), or
 * confirmation_required when it says all the two steps need (mutating, not
 * auto-confirmed, a window); a context that already asks is not superseded
 * then: its question stays and the row is refused (due_take).
 */
static void
insert_state_check(HeapTuple tuple, TupleDesc desc, CommandState state)
{
	if (state == CMD_REJECTED)
		return;
	if (state == CMD_CONFIRMATION_REQUIRED)
	{
		if (!cscp_column_true(tuple, desc, COL(CM_MUTATING)) ||
			cscp_column_true(tuple, desc, COL(CM_AUTO_CONFIRM)) ||
			is_null(tuple, desc, COL(CM_WINDOW_EXPIRES_AT)))
		{
			log_refused_insert(tuple, desc, state, "not_a_question");
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a new command in confirmation_required must be mutating, not auto-confirmed, and have a window"),
					 errdetail("Only a mutating command goes through confirmation, and window_expires_at says until when."),
					 errhint("Submit it with cscp.command_submit, then move it with cscp.command_transition.")));
		}
	}
	else if (state != CMD_RECEIVED && state != CMD_CANONICALIZED)
	{
		log_refused_insert(tuple, desc, state, "invalid_birth_state");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new command must be received, canonicalized or rejected, not %s",
						cscp_command_state_names[state]),
				 errhint("Submit it with cscp.command_submit, then move it with cscp.command_transition.")));
	}
}

/*
 * An auto-confirmed command must be listed in its tenant's auto_confirm
 * policy (22023; listed already when insert_birth decided it, checked);
 * the policy that skipped confirmation is recorded with the acceptance:
 * *decision and *reason for its evidence, else NULL.
 */
static void
insert_auto_confirm(HeapTuple tuple, TupleDesc desc, bool auto_confirm, bool checked,
					const char **decision, const char **reason)
{
	char	   *tenant;
	char	   *name;

	*decision = *reason = NULL;
	if (!auto_confirm)
		return;
	*decision = "auto_confirm";
	*reason = "policy.auto_confirm";
	if (checked)
		return;
	tenant = SPI_getvalue(tuple, desc, COL(CM_TENANT_ID));
	name = SPI_getvalue(tuple, desc, COL(CM_COMMAND_NAME));
	if (tenant == NULL || name == NULL ||
		!cscp_policy_lists(cscp_policy_get(tenant), "auto_confirm", name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command \"%s\" is not auto-confirmed by the policy of tenant \"%s\"",
						name ? name : "", tenant ? tenant : ""),
				 errhint("List the command in the policy key auto_confirm with cscp.policy_set, "
						 "or let it go through confirmation.")));
}

/*
 * Whether it mutates is the registry's (registry.c), for a direct INSERT
 * too; a cancel recovery ("<name>:cancel") changes nothing itself, and an
 * empty name is left to the table's CHECK constraint.
 */
static void
insert_registry_check(HeapTuple tuple, TupleDesc desc)
{
	bool		tnull,
				nnull;
	Datum		tenant = heap_getattr(tuple, COL(CM_TENANT_ID), desc, &tnull);
	Datum		name = heap_getattr(tuple, COL(CM_COMMAND_NAME), desc, &nnull);
	char	   *kind = SPI_getvalue(tuple, desc, COL(CM_RECOVERY_KIND));
	char	   *name_c = nnull ? NULL : TextDatumGetCString(name);
	size_t		len = name_c ? strlen(name_c) : 0;
	bool		cancel = kind != NULL && strcmp(kind, "cancel") == 0 &&
		len > 7 && strcmp(name_c + len - 7, ":cancel") == 0;

	if (!tnull && len > 0 && !cancel)
		(void) cscp_registry_mutating(DatumGetTextPP(tenant), DatumGetTextPP(name),
									  cscp_column_true(tuple, desc, COL(CM_MUTATING)),
									  kind == NULL ? CSCP_REGISTRY_ROW : CSCP_REGISTRY_RECOVERY_ROW);
}

/*
 * The columns a new command does not choose: no confirmation or
 * authorization yet, no outcome (but a rejected one's), no window unless
 * born asking, the times now, and one version per step (2 when born asking
 * or rejected, as if inserted canonicalized and then moved).  Into edit.
 */
static void
insert_defaults(HeapTuple tuple, TupleDesc desc, CommandState state, TimestampTz now,
				CscpRowEdit *edit)
{
	if (state == CMD_REJECTED)
	{
		bool		rnull,
					dnull;
		Datum		reason = heap_getattr(tuple, COL(CM_REASON_CODE), desc, &rnull);
		Datum		detail = heap_getattr(tuple, COL(CM_DETAIL), desc, &dnull);

		cscp_row_edit_set(edit, COL(CM_OUTCOME),
						  make_outcome(state, rnull ? NULL : TextDatumGetCString(reason),
									   dnull ? NULL : DatumGetJsonbP(detail)),
						  false);
	}
	else
		cscp_row_edit_set(edit, COL(CM_OUTCOME), (Datum) 0, true);
	cscp_row_edit_set(edit, COL(CM_CONFIRMED_AT), (Datum) 0, true);
	cscp_row_edit_set(edit, COL(CM_AUTHORIZED_AT), (Datum) 0, true);
	if (state != CMD_CONFIRMATION_REQUIRED)
		cscp_row_edit_set(edit, COL(CM_WINDOW_EXPIRES_AT), (Datum) 0, true);
	cscp_row_edit_set(edit, COL(CM_CREATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(edit, COL(CM_UPDATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(edit, COL(CM_LAST_TRANSITION_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(edit, COL(CM_VERSION),
					  Int64GetDatum(state == CMD_CONFIRMATION_REQUIRED ||
									state == CMD_REJECTED ? 2 : 1), false);
	if (head_seq_att > 0)
	{
		cscp_row_edit_set(edit, head_seq_att, Int32GetDatum(0), false);
		cscp_row_edit_set(edit, head_hash_att, (Datum) 0, true);
	}
	/* no promise but the one its frame's read finds (insert_snapshot_check) */
	if (promise_att > 0)
		cscp_row_edit_set(edit, promise_att, (Datum) 0, true);
}

/*
 * A new command born asking (its state decided here, its context usable:
 * insert_snapshot_check) asks its context: the context becomes pending,
 * its pending_confirmation slot naming the command with its key,
 * fingerprint and window, the command its last and the last of its message
 * ids its last message (cscp_context_ask).  Written as the owner from the
 * row in hand, which this trigger has just judged, so the context's
 * trigger does not read the command back to bind the slot to it; the
 * context was locked FOR NO KEY UPDATE by the writer, with its rights, as
 * its frame was formed or read (frame_form, frame_facts), or as the
 * command_submit that formed it found it.
 */
static void
ask_context(HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	Datum		ids = heap_getattr(tuple, COL(CM_MESSAGE_IDS), desc, &isnull);
	text	   *last_message = NULL;
	Datum		key;
	Datum		fp;
	bool		fpnull;

	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(ids), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &n);
		if (n > 0 && !nulls[n - 1])
			last_message = DatumGetTextPP(elems[n - 1]);
	}
	key = heap_getattr(tuple, COL(CM_IDEMPOTENCY_KEY), desc, &isnull);
	if (isnull)
		return;					/* the NOT NULL constraint refuses the row */
	fp = heap_getattr(tuple, COL(CM_TARGET_FINGERPRINT), desc, &fpnull);
	cscp_context_ask(heap_getattr(tuple, COL(CM_TENANT_ID), desc, &isnull),
					 heap_getattr(tuple, COL(CM_CONTEXT_ID), desc, &isnull),
					 heap_getattr(tuple, COL(CM_COMMAND_ID), desc, &isnull),
					 DatumGetTextPP(key),
					 fpnull ? NULL : DatumGetTextPP(fp),
					 DatumGetTimestampTz(heap_getattr(tuple, COL(CM_WINDOW_EXPIRES_AT), desc,
													  &isnull)),
					 last_message, true);
}

/* The checks and defaults of INSERT, in steps; returns the tuple to store. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CscpRowEdit edit;
	CommandState state;
	bool		auto_confirm;
	bool		decided;
	bool		auto_null = is_null(tuple, desc, COL(CM_AUTO_CONFIRM));
	const char *reason;
	const char *decision;
	TimestampTz promise = 0;
	bool		formed;
	bool		asks;

	cscp_row_edit_init(&edit, desc);
	state = insert_birth(tuple, desc, &edit, &auto_confirm, &decided);
	if (!decided)
		insert_state_check(tuple, desc, state);
	cscp_routing_id_fill(tuple, desc, COL(CM_CONVERSATION_ID), COL(CM_COMMAND_ID), "command",
						 "Leave command_id null to have one generated.", &edit);
	insert_auto_confirm(tuple, desc, auto_confirm, auto_null, &decision, &reason);
	insert_registry_check(tuple, desc);
	insert_defaults(tuple, desc, state, now, &edit);
	tuple = cscp_row_edit_apply(&edit, tuple);
	formed = (state == CMD_CANONICALIZED || state == CMD_CONFIRMATION_REQUIRED) &&
		forms_frame(tuple, desc);
	asks = decided && state == CMD_CONFIRMATION_REQUIRED;
	if (formed)
		tuple = frame_form(tuple, desc, state, asks, &promise);
	if (insert_snapshot_check(tuple, desc, state, formed, asks, &promise) && promise_att > 0)
	{
		Datum		value = TimestampTzGetDatum(promise);
		bool		isnull = false;

		tuple = heap_modify_tuple_by_cols(tuple, desc, 1, &promise_att, &value, &isnull);
	}

	/*
	 * A command born asking asks its context (ask_context: its row locked
	 * before the question's window row, in command_submit's order) and
	 * takes its context's question now, superseding the one that waits, so
	 * that the evidence shows that one rejected before this one asks;
	 * cscp_command_guard's lists skip it then.
	 */
	if (asks)
	{
		Datum		args[6];
		bool		ctxnull = true;

		if (due_row(tuple, desc, state, true, args, &ctxnull))
		{
			if (!ctxnull)
				ask_context(tuple, desc);
			due_take(true, args, ctxnull, true);
		}
	}

	/*
	 * The steps it was born through, recorded as an insert and an update
	 * would, in one INSERT of evidence: a rejected command was accepted
	 * for the record (no reason, no detail) and then rejected.
	 */
	if (state == CMD_CANONICALIZED || state == CMD_CONFIRMATION_REQUIRED ||
		state == CMD_REJECTED)
	{
		CmdRow		r = deform(tuple, desc);
		CmdRow		none = {NULL, NULL};
		CscpEvidence events[2];
		int			n = 0;

		transition_event(r, CMD_RECEIVED, CMD_CANONICALIZED, now,
						 decision, ROW_N(r, COL(CM_REASON_CODE)) ? reason : NULL, &events[n++]);
		if (state == CMD_REJECTED)
		{
			events[0].reason_code = NULL;
			events[0].detail = NULL;
		}
		if (state != CMD_CANONICALIZED)
			transition_event(r, CMD_CANONICALIZED, state, now, NULL, NULL, &events[n++]);
		record_transitions(none, r, events, n);
		if (head_seq_att > 0)
			tuple = form_like(tuple, desc, r);
	}
	return tuple;
}

/* The columns that say what a command is never change (55000). */
static void
update_fixed_check(CmdRow o, CmdRow nw, TupleDesc desc)
{
	for (int i = 0; i < (int) lengthof(fixed_columns); i++)
	{
		int			a = fixed_cols.attnum[i];
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);

		if (ROW_N(o, a) != ROW_N(nw, a) ||
			(!ROW_N(o, a) && !datum_image_eq(ROW_V(o, a), ROW_V(nw, a), att->attbyval, att->attlen)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of a command cannot be changed", fixed_columns[i]),
					 errhint("Submit a new command, or a recovery with cscp.command_recover.")));
	}
}

/* Log the refusal of the step from c's state to to (command id), before raising it. */
static void
log_refused(CommandFacts *c, CommandState to, const char *id, const char *why)
{
	cscp_log_refused_step("command", TextDatumGetCString(c->tenant_id), id,
						  cscp_command_state_names[c->state], cscp_command_state_names[to], why);
}

/*
 * Judge the step from c's state to to (the new version nw, command id, of
 * rel): every rule of refusal(), a yes being the recorded answer whose
 * message id the step appends; raised, 55000, with the rule's reason and
 * detail, the reason code also as the error's constraint name (with the
 * table's schema and name), which is how cscp.command_transition, whose
 * UPDATE this judges like any other, learns why a step was refused.
 */
static void
update_step_check(Relation rel, CommandFacts *c, CmdRow o, CmdRow nw, CommandState to,
				  const char *id)
{
	const char *why;
	char	   *detail = NULL;

	if (to == c->state)
	{
		log_refused(c, to, id, "same_state");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("command %s is already %s", id, cscp_command_state_names[to]),
				 errdetail("Every update of a command is a transition of its lifecycle."),
				 errhint("Use cscp.command_transition."),
				 errtableconstraint(rel, "invalid_transition")));
	}
	if (to == CMD_CONFIRMED && !ROW_N(nw, COL(CM_MESSAGE_IDS)))
	{
		Datum	   *elems;
		bool	   *enulls;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(ROW_V(nw, COL(CM_MESSAGE_IDS))), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, &enulls, &n);
		c->answered = n > 0 && !enulls[n - 1] &&
			answer_recorded(c, ROW_V(o, COL(CM_CONVERSATION_ID)), elems[n - 1]);
	}
	why = refusal(c, to, &detail);
	if (why != NULL)
		log_refused(c, to, id, why);
	if (why != NULL && strcmp(why, "not_answered") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("command %s cannot be confirmed without the user's answer", id),
				 errdetail("%s", detail),
				 errhint("Record the user's answer with cscp.confirm."),
				 errtableconstraint(rel, why)));
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 strcmp(why, "invalid_transition") == 0 ?
				 errmsg("invalid command transition from \"%s\" to \"%s\"",
						cscp_command_state_names[c->state], cscp_command_state_names[to]) :
				 errmsg("command %s cannot move from \"%s\" to \"%s\" (%s)",
						id, cscp_command_state_names[c->state], cscp_command_state_names[to], why),
				 errdetail("%s", detail),
				 errhint("Use cscp.command_transition, which returns a refusal instead of raising it."),
				 errtableconstraint(rel, why)));
	if (ROW_N(nw, COL(CM_MESSAGE_IDS)) ||
		(!ROW_N(o, COL(CM_MESSAGE_IDS)) &&
		 !array_is_prefix(ROW_V(o, COL(CM_MESSAGE_IDS)), ROW_V(nw, COL(CM_MESSAGE_IDS)))))
	{
		log_refused(c, to, id, "message_ids_shrunk");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("message_ids of command %s can only grow", id),
				 errhint("Append the ids of new messages; never remove one."),
				 errtableconstraint(rel, "message_ids_shrunk")));
	}
}

/*
 * What a step writes beside the state, into the new version nw: the
 * latest transition's reason and detail (none when the UPDATE gives
 * none), when it was confirmed and authorized, its window (only while
 * waiting), the times, the version, and a terminal state's outcome.
 */
static void
update_bookkeeping(CmdRow o, CmdRow nw, CommandState to, const Bitmapset *updatedcols,
				   TimestampTz now)
{
	if (!cscp_column_updated(updatedcols, COL(CM_REASON_CODE)))
		ROW_N(nw, COL(CM_REASON_CODE)) = true;
	if (!cscp_column_updated(updatedcols, COL(CM_DETAIL)))
		ROW_N(nw, COL(CM_DETAIL)) = true;
	ROW_V(nw, COL(CM_CONFIRMED_AT)) = to == CMD_CONFIRMED ? TimestampTzGetDatum(now) :
		ROW_V(o, COL(CM_CONFIRMED_AT));
	ROW_N(nw, COL(CM_CONFIRMED_AT)) = to == CMD_CONFIRMED ? false : ROW_N(o, COL(CM_CONFIRMED_AT));
	ROW_V(nw, COL(CM_AUTHORIZED_AT)) = to == CMD_AUTHORIZED ? TimestampTzGetDatum(now) :
		ROW_V(o, COL(CM_AUTHORIZED_AT));
	ROW_N(nw, COL(CM_AUTHORIZED_AT)) = to == CMD_AUTHORIZED ? false : ROW_N(o, COL(CM_AUTHORIZED_AT));
	if (to != CMD_CONFIRMATION_REQUIRED && to != CMD_AUTHZ_PENDING)
		ROW_N(nw, COL(CM_WINDOW_EXPIRES_AT)) = true;
	ROW_V(nw, COL(CM_UPDATED_AT)) = TimestampTzGetDatum(now);
	ROW_N(nw, COL(CM_UPDATED_AT)) = false;
	ROW_V(nw, COL(CM_LAST_TRANSITION_AT)) = TimestampTzGetDatum(now);
	ROW_N(nw, COL(CM_LAST_TRANSITION_AT)) = false;
	ROW_V(nw, COL(CM_VERSION)) = Int64GetDatum(DatumGetInt64(ROW_V(o, COL(CM_VERSION))) + 1);
	ROW_N(nw, COL(CM_VERSION)) = false;
	if (IS_TERMINAL(to) && !cscp_column_updated(updatedcols, COL(CM_OUTCOME)))
	{
		ROW_V(nw, COL(CM_OUTCOME)) =
			make_outcome(to, row_text(nw, COL(CM_REASON_CODE)),
						 ROW_N(nw, COL(CM_DETAIL)) ? NULL : DatumGetJsonbP(ROW_V(nw, COL(CM_DETAIL))));
		ROW_N(nw, COL(CM_OUTCOME)) = false;
	}
}

/*
 * Whether the update from o to nw is about context_live_until alone: it
 * changes no other column, and it changes that one or its SET names that
 * one alone (updatedcols).  Such an update is no step of the command.
 */
static bool
promise_only(CmdRow o, CmdRow nw, TupleDesc desc, const Bitmapset *updatedcols)
{
	bool		changed = false;

	for (int a = 1; a <= desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);

		if (att->attisdropped)
			continue;
		if (ROW_N(o, a) == ROW_N(nw, a) &&
			(ROW_N(o, a) || datum_image_eq(ROW_V(o, a), ROW_V(nw, a), att->attbyval, att->attlen)))
			continue;
		if (a != promise_att)
			return false;
		changed = true;
	}
	return changed ||
		(bms_num_members(updatedcols) == 1 && cscp_column_updated(updatedcols, promise_att));
}

/*
 * The promise an update leaves in c (context_live_until, o to nw): an
 * update may lower it or take it away, never raise it; only the guard
 * raises it, from a read of the context (context_ended).  An update that
 * changes nothing else (no step: a context's end, commands_follow in
 * context_fsm.c) and raises it is refused (55000).
 */
static void
update_promise(CommandFacts *c, CmdRow o, CmdRow nw, const Bitmapset *updatedcols,
			   const char *id)
{
	bool		given = !ROW_N(nw, promise_att);
	TimestampTz value = given ? DatumGetTimestampTz(ROW_V(nw, promise_att)) : 0;

	if (!given)
		c->promised = false;
	else if (c->promised && value < c->live_until)
		c->live_until = value;
	else if (!c->promised || value > c->live_until)
	{
		if (c->state == row_state(nw, c->desc) && promise_only(o, nw, c->desc, updatedcols))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("context_live_until of command %s can only be lowered", id),
					 errdetail("It is a lower bound of the life of the command's context, kept by cscp: "
							   "raised only when a step reads the context."),
					 errhint("Set it to null, or earlier, to have the next step read the context.")));
	}
}

/* The checks and bookkeeping of UPDATE, in steps; returns the tuple to store. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CmdRow		o = deform(oldtup, desc);
	CmdRow		nw = deform(newtup, desc);
	char	   *id = DatumGetCString(DirectFunctionCall1(uuid_out, ROW_V(o, COL(CM_COMMAND_ID))));
	CommandFacts c = row_facts(o, desc);
	CommandState to = row_state(nw, desc);
	CscpEvidence e;

	c.row = oldtup;
	if (promise_att > 0)
	{
		update_promise(&c, o, nw, updatedcols, id);
		/* The promise lowered or taken away, nothing else: not a step. */
		if (to == c.state && promise_only(o, nw, desc, updatedcols))
			return newtup;
	}
	update_fixed_check(o, nw, desc);

	/*
	 * A question has a window, until when the answer counts: one an UPDATE
	 * does not give is the tenant's confirmation_ttl, as the API gives it.
	 */
	if (to == CMD_CONFIRMATION_REQUIRED && to != c.state && ROW_N(nw, COL(CM_WINDOW_EXPIRES_AT)))
	{
		ROW_V(nw, COL(CM_WINDOW_EXPIRES_AT)) =
			TimestampTzGetDatum(cscp_window_end(row_text(o, COL(CM_TENANT_ID)), "confirmation_ttl"));
		ROW_N(nw, COL(CM_WINDOW_EXPIRES_AT)) = false;
	}
	update_step_check(rel, &c, o, nw, to, id);
	update_bookkeeping(o, nw, to, updatedcols, now);
	if (promise_att > 0)
	{
		/* the promise kept, or the context's expires_at when the step read it live */
		ROW_N(nw, promise_att) = !c.read_live && !c.promised;
		ROW_V(nw, promise_att) = TimestampTzGetDatum(c.read_live ? c.read_until : c.live_until);
	}
	transition_event(nw, c.state, to, now, NULL, NULL, &e);
	record_transitions(o, nw, &e, 1);
	return form_like(newtup, desc, nw);
}

static CscpRowRules rules = {
	.table = "cscp.command",
	.n = 8,
	.rule = {
		{"tenant_id", CSCP_RULE_TENANT},
		{"idempotency_key", CSCP_RULE_NOT_EMPTY},
		{"conversation_id", CSCP_RULE_NOT_EMPTY},
		{"actor_id", CSCP_RULE_NOT_EMPTY},
		{"command_name", CSCP_RULE_NOT_EMPTY},
		{"payload", CSCP_RULE_JSON_OBJECT},
		{"recovery_kind", CSCP_RULE_ONE_OF, recovery_kinds},
		{"target_command_id", CSCP_RULE_NULL_WITH, NULL, "recovery_kind"},
	},
};

static const CscpRowGuard guard = {
	.name = "cscp.command_guard()",
	.rules = &rules,
	.load_columns = load_columns,
	.insert = guard_insert,
	.update = guard_update,
};

/*
 * Run one statement on cscp.command_window or cscp.command_retired as their
 * owner (application roles only read them); returns the rows it wrote.
 */
static uint64
due_exec(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes, Datum *args,
		 const char *nulls, int expect)
{
	return cscp_owner_exec("command_window", plan, sql, nargs, argtypes, args, nulls, expect,
						   "keep the list of open windows and finished commands");
}

/*
 * The row of a command (in state s) in cscp.command_window (window) or
 * cscp.command_retired: its key into args[0..2] and its time into args[3];
 * for a window, its context into args[4] (*ctxnull when none) and the
 * question it waits on into args[5].  False when the command has no such
 * row: not in a window (or with no end to it), or not finished (row is not
 * read then, and may be NULL); or a key column is null, which the NOT NULL
 * constraints refuse.
 */
static bool
due_row(HeapTuple row, TupleDesc desc, CommandState s, bool window, Datum *args, bool *ctxnull)
{
	bool		isnull;

	if (window ? (s != CMD_CONFIRMATION_REQUIRED && s != CMD_AUTHZ_PENDING) : !IS_TERMINAL(s))
		return false;
	args[0] = heap_getattr(row, COL(CM_TENANT_ID), desc, &isnull);
	if (isnull)
		return false;
	args[1] = heap_getattr(row, COL(CM_CONVERSATION_ID), desc, &isnull);
	if (isnull)
		return false;
	args[2] = heap_getattr(row, COL(CM_COMMAND_ID), desc, &isnull);
	if (isnull)
		return false;
	args[3] = heap_getattr(row, window ? COL(CM_WINDOW_EXPIRES_AT) : COL(CM_LAST_TRANSITION_AT),
						   desc, &isnull);
	if (window)
	{
		args[4] = heap_getattr(row, COL(CM_CONTEXT_ID), desc, ctxnull);
		args[5] = CStringGetTextDatum(s == CMD_CONFIRMATION_REQUIRED ? "confirmation" : "approval");
	}
	return !isnull;
}

/* The state of a command row, or CMD_RECEIVED (listed nowhere) when null. */
static CommandState
due_state(HeapTuple row, TupleDesc desc)
{
	return is_null(row, desc, COL(CM_STATE)) ? CMD_RECEIVED : get_state(row, desc);
}

static const Oid due_types[6] = {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID, UUIDOID, TEXTOID};

/*
 * The statements on each list, [1] cscp.command_window and [0]
 * cscp.command_retired, with due_row's arguments.
 */
static const char *const due_delete_sql[2] = {
	"DELETE FROM cscp.command_retired r"
	" WHERE r.retired_at OPERATOR(pg_catalog.=) $4 AND r.tenant_id OPERATOR(pg_catalog.=) $1 AND r.command_id OPERATOR(pg_catalog.=) $3",
	"DELETE FROM cscp.command_window w"
	" WHERE w.window_expires_at OPERATOR(pg_catalog.=) $4 AND w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.command_id OPERATOR(pg_catalog.=) $3",
};
static const char *const due_insert_sql[2] = {
	"INSERT INTO cscp.command_retired (tenant_id, conversation_id, command_id, retired_at)"
	" VALUES ($1, $2, $3, $4)",
	"INSERT INTO cscp.command_window (tenant_id, conversation_id, command_id, window_expires_at,"
	"                                 context_id, question)"
	" VALUES ($1, $2, $3, $4, $5, $6)"
	" ON CONFLICT (tenant_id, context_id, question) WHERE context_id IS NOT NULL DO NOTHING",
};
static const int due_nargs[2] = {4, 6};

/*
 * A command's row out of cscp.command_window (window) or
 * cscp.command_retired, by its DELETE statement, as the owner.
 */
static void
due_release(bool window, Datum *args)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};

	due_exec(&plans[window], due_delete_sql[window], 4, due_types, args, NULL, SPI_OK_DELETE);
}

/*
 * The command that waits on the same question (args as due_row's, for a
 * window) in the same context, as text, or NULL.  Read as the owner.
 */
static char *
due_other_question(Datum *args)
{
	static SPIPlanPtr plan = NULL;
	CscpOwnerScope owner;
	char	   *other = NULL;

	cscp_owner_enter("command_window", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT w.command_id::pg_catalog.text FROM cscp.command_window w"
				  " WHERE w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.context_id OPERATOR(pg_catalog.=) $5 AND w.question OPERATOR(pg_catalog.=) $6"
				  "   AND w.command_id OPERATOR(pg_catalog.<>) $3",
				  6, due_types);
	/* not read-only: a fresh snapshot sees the writer we waited for */
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the question of a context");
	if (SPI_processed > 0)
		other = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	SPI_finish();
	cscp_owner_leave(&owner);
	return other;
}

/*
 * A command's row into cscp.command_window (window) or
 * cscp.command_retired, by its INSERT statement, as the owner.  A context
 * asks one question of each kind at a time: a window row that the unique
 * index command_window_question_key finds taken already (another command
 * of the context waits on the same question, committed before or while we
 * waited for it) is refused, 55000; unless supersede (a new command whose
 * birth the trigger decided to ask): then the command that waits is
 * superseded by it, with the caller's rights, and the row taken again (a
 * few times, as writers that raced it commit).  So the common case, no
 * question waiting, costs no lookup.
 */
static void
due_take(bool window, Datum *args, bool ctxnull, bool supersede)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	char		nulls[6] = {' ', ' ', ' ', ' ', ctxnull ? 'n' : ' ', ' '};
	char	   *other;

	if (due_exec(&plans[window], due_insert_sql[window], due_nargs[window], due_types, args, nulls,
				 SPI_OK_INSERT) == 1)
		return;
	for (int attempt = 0; window && supersede && !ctxnull && attempt < 3; attempt++)
	{
		Datum		sargs[6];

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		supersede_args(args[0], args[4], strcmp(TextDatumGetCString(args[5]), "approval") == 0,
					   args[2], sargs);
		supersede_waiting(sargs);
		SPI_finish();
		if (due_exec(&plans[window], due_insert_sql[window], due_nargs[window], due_types, args,
					 nulls, SPI_OK_INSERT) == 1)
			return;
	}
	other = due_other_question(args);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the context already has a command waiting for %s",
					TextDatumGetCString(args[5])),
			 errdetail("Command %s waits for the user's answer in context %s; a context asks one question at a time.",
					   other ? other : "(not visible to this statement)",
					   DatumGetCString(DirectFunctionCall1(uuid_out, args[4]))),
			 errhint("Ask with cscp.command_submit or cscp.command_transition, which supersede the earlier question.")));
}

/*
 * Keep cscp.command_window and cscp.command_retired in step with a command
 * written (oldtup NULL for an INSERT, newtup the version to be stored): for
 * each list, a row that no longer matches goes, one the new version needs
 * comes.  No index of cscp.command names the state or these times, so its
 * transitions stay HOT updates; these short rows carry what the sweep
 * finds commands by, and the one question a context waits on.  born_asking:
 * a new command whose state the trigger decided, whose window guard_insert
 * took already (superseding the question its context asked).
 */
static void
due_follow(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, bool born_asking)
{
	CommandState from = oldtup != NULL ? due_state(oldtup, desc) : CMD_RECEIVED;
	CommandState to = due_state(newtup, desc);

	for (int w = 0; w < 2; w++)
	{
		bool		window = (w == 0);
		Datum		oldargs[6];
		Datum		newargs[6];
		bool		oldctxnull = true,
					newctxnull = true;
		bool		had = due_row(oldtup, desc, from, window, oldargs, &oldctxnull);
		bool		has = due_row(newtup, desc, to, window, newargs, &newctxnull);

		if (had && has && oldargs[3] == newargs[3])
			continue;			/* same time (and key, which never changes) */
		if (had)
			due_release(window, oldargs);
		if (has && !(window && born_asking))
			due_take(window, newargs, newctxnull, false);
	}
}

PG_FUNCTION_INFO_V1(cscp_command_guard);

/*
 * Trigger cscp.command_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW.  The
 * row it returns is the one stored (NULL: skipped), so the lists follow it.
 */
Datum
cscp_command_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	row;
	bool		update;

	cscp_tenancy_check_trigger(fcinfo);
	row = (HeapTuple) DatumGetPointer(cscp_row_guard(fcinfo, &guard));
	if (row == NULL)
		return PointerGetDatum(NULL);
	desc = RelationGetDescr(trigdata->tg_relation);
	update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	/* a new row inserted with a null state was born as insert_birth decided */
	due_follow(update ? trigdata->tg_trigtuple : NULL, row, desc,
			   !update && is_null(trigdata->tg_trigtuple, desc, COL(CM_STATE)));
	return PointerGetDatum(row);
}

PG_FUNCTION_INFO_V1(cscp_command_unlist);

/*
 * Trigger cscp.command_unlist(): BEFORE DELETE FOR EACH ROW, a command
 * deleted gives up its row in cscp.command_window or cscp.command_retired;
 * BEFORE TRUNCATE, both are emptied.
 */
Datum
cscp_command_unlist(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	TupleDesc	desc;
	CommandState state;

	cscp_tenancy_check_trigger(fcinfo);
	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.command_unlist() must be a BEFORE trigger")));
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
	{
		static SPIPlanPtr plan = NULL;

		due_exec(&plan,
				 "WITH gone AS (DELETE FROM cscp.command_window)"
				 " DELETE FROM cscp.command_retired",
				 0, NULL, NULL, NULL, SPI_OK_DELETE);
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.command_unlist() fires BEFORE DELETE FOR EACH ROW or BEFORE TRUNCATE")));
	load_columns(trigdata->tg_relation);
	row = trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);
	state = due_state(row, desc);
	for (int w = 0; w < 2; w++)
	{
		Datum		args[6];
		bool		ctxnull;

		if (due_row(row, desc, state, w == 0, args, &ctxnull))
			due_release(w == 0, args);
	}
	return PointerGetDatum(row);
}

PG_FUNCTION_INFO_V1(cscp_command_transition_allowed);

/* cscp.command_transition_allowed(from, to) RETURNS boolean: the table alone. */
Datum
cscp_command_transition_allowed(PG_FUNCTION_ARGS)
{
	Oid			typoid = get_fn_expr_argtype(fcinfo->flinfo, 0);

	PG_RETURN_BOOL(allowed[cscp_enum_index(&state_cache, typoid, PG_GETARG_DATUM(0))]
					   [cscp_enum_index(&state_cache, typoid, PG_GETARG_DATUM(1))]);
}

/*
 * Facts of a cscp.command row passed as a composite (named argname); its
 * key and state must be set (22004): the invariants query by the key.
 */
static CommandFacts
facts_of_record(HeapTupleHeader rec, const char *argname, Oid *typoid)
{
	static const char *const required[] = {"tenant_id", "command_id", "state", NULL};
	CommandFacts c = {0};		/* what a line below does not set: false, 0, NULL */
	bool		isnull;
	Datum		d;
	TupleDesc	desc;

	c.row = palloc0(sizeof(HeapTupleData));
	desc = cscp_record_tuple(rec, c.row);
	*typoid = TupleDescAttr(desc, SPI_fnumber(desc, "state") - 1)->atttypid;
	c.desc = CreateTupleDescCopy(desc);
	ReleaseTupleDesc(desc);

	cscp_record_require(rec, argname, required);
	d = GetAttributeByName(rec, "state", &isnull);
	c.state = (CommandState) cscp_enum_index(&state_cache, *typoid, d);
	d = GetAttributeByName(rec, "mutating", &isnull);
	c.mutating = !isnull && DatumGetBool(d);
	d = GetAttributeByName(rec, "auto_confirm", &isnull);
	c.auto_confirm = !isnull && DatumGetBool(d);
	(void) GetAttributeByName(rec, "confirmed_at", &isnull);
	c.confirmed = !isnull;
	(void) GetAttributeByName(rec, "authorized_at", &isnull);
	c.authorized = !isnull;
	d = GetAttributeByName(rec, "window_expires_at", &isnull);
	c.window_closed = !isnull && DatumGetTimestampTz(d) <= cscp_now();
	c.tenant_id = GetAttributeByName(rec, "tenant_id", &isnull);
	c.command_id = GetAttributeByName(rec, "command_id", &isnull);
	c.context_id = GetAttributeByName(rec, "context_id", &isnull);
	c.has_context = !isnull;
	d = GetAttributeByName(rec, "recovery_kind", &isnull);
	c.cancel_recovery = is_cancel(isnull, d);
	c.recovery_approval = is_approval_recovery(isnull, d);
	/* What may come next: the answer, when it comes, is cscp.confirm's to record. */
	c.answered = true;
	c.stored = false;			/* any record: its frame is read */
	return c;
}

/*
 * Facts of a cscp.command row as a query returns it: columns found by name
 * in desc, which need not number them as the table does (state, mutating,
 * auto_confirm, confirmed_at, authorized_at, window_expires_at, tenant_id
 * and command_id are needed).
 */
static CommandFacts
facts_of_row(HeapTuple row, TupleDesc desc)
{
	CommandFacts c = {0};		/* what a line below does not set: false, 0, NULL */
	int			statecol = cscp_column(desc, "cscp.command", "state");
	bool		isnull;
	Datum		d;

	d = heap_getattr(row, statecol, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("state of a command must not be null")));
	c.state = (CommandState) cscp_enum_index(&state_cache,
											 TupleDescAttr(desc, statecol - 1)->atttypid, d);
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "mutating"), desc, &isnull);
	c.mutating = !isnull && DatumGetBool(d);
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "auto_confirm"), desc, &isnull);
	c.auto_confirm = !isnull && DatumGetBool(d);
	(void) heap_getattr(row, cscp_column(desc, "cscp.command", "confirmed_at"), desc, &isnull);
	c.confirmed = !isnull;
	(void) heap_getattr(row, cscp_column(desc, "cscp.command", "authorized_at"), desc, &isnull);
	c.authorized = !isnull;
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "window_expires_at"), desc, &isnull);
	c.window_closed = !isnull && DatumGetTimestampTz(d) <= cscp_now();
	c.tenant_id = heap_getattr(row, cscp_column(desc, "cscp.command", "tenant_id"), desc, &isnull);
	c.command_id = heap_getattr(row, cscp_column(desc, "cscp.command", "command_id"), desc, &isnull);
	c.row = row;
	c.desc = desc;
	c.context_id = heap_getattr(row, cscp_column(desc, "cscp.command", "context_id"), desc, &isnull);
	c.has_context = !isnull;
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "recovery_kind"), desc, &isnull);
	c.cancel_recovery = is_cancel(isnull, d);
	c.recovery_approval = is_approval_recovery(isnull, d);
	/* A step asked for by command_transition carries no answer. */
	c.answered = false;
	c.stored = true;			/* a row command_transition read from the table */
	return c;
}

/*
 * Why the step of command row (as a query returns it, locked by the
 * caller) to state to is refused, as a reason code, or NULL when it is
 * allowed; *from gets the state it is in.  The trigger's own judgement
 * (refusal), so that command_transition and a direct UPDATE answer alike.
 */
const char *
cscp_command_step_refusal(HeapTuple row, TupleDesc desc, bool ctx_read, HeapTuple ctx,
						  TupleDesc ctxdesc, CommandState to, CommandState *from)
{
	CommandFacts c = facts_of_row(row, desc);
	char	   *detail;

	c.ended_read = false;
	c.ended = NULL;
	c.ctx_given = ctx_read;
	c.ctx = ctx;
	c.ctxdesc = ctxdesc;
	*from = c.state;
	if (to == c.state)
		return "invalid_transition";
	return refusal(&c, to, &detail);
}

/*
 * Record a refused step of command row (as a query returns it, with
 * tenant_id, conversation_id, command_id, message_ids and context_ref) from
 * state from to state to: an invalid_transition_attempt with reason code
 * why and detail.
 */
void
cscp_command_record_refusal(HeapTuple row, TupleDesc desc, CommandState from, CommandState to,
							const char *why, Jsonb *detail)
{
	CscpEvidence e = {0};
	bool		isnull;
	Datum		d;

	e.tenant_id = SPI_getvalue(row, desc, cscp_column(desc, "cscp.command", "tenant_id"));
	e.conversation_id = SPI_getvalue(row, desc, cscp_column(desc, "cscp.command", "conversation_id"));
	e.command_id = SPI_getvalue(row, desc, cscp_column(desc, "cscp.command", "command_id"));
	e.stage = e.to_state = cscp_command_state_names[to];
	e.from_state = cscp_command_state_names[from];
	e.event_type = "invalid_transition_attempt";
	e.decision = "refused";
	e.reason_code = why;
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "message_ids"), desc, &isnull);
	e.message_ids = isnull ? NULL : DatumGetArrayTypeP(d);
	d = heap_getattr(row, cscp_column(desc, "cscp.command", "context_ref"), desc, &isnull);
	e.context_ref = isnull ? NULL : DatumGetJsonbP(d);
	e.detail = detail;
	e.created_at = cscp_now();
	cscp_evidence_append(&e);
}

/* The state a cscp.command_state value of type typoid names. */
CommandState
cscp_command_state_of(Oid typoid, Datum value)
{
	return (CommandState) cscp_enum_index(&state_cache, typoid, value);
}

/* The cscp.command_state value (of type typoid) of state. */
Datum
cscp_command_state_datum(Oid typoid, CommandState state)
{
	return cscp_enum_datum(&state_cache, typoid, state);
}

PG_FUNCTION_INFO_V1(cscp_command_next_allowed);

/*
 * cscp.command_next_allowed(c cscp.command) RETURNS cscp.command_state[]:
 * the states the command may move to now, invariants included.
 */
Datum
cscp_command_next_allowed(PG_FUNCTION_ARGS)
{
	Oid			typoid;
	CommandFacts c = facts_of_record(cscp_record_arg(fcinfo, 0, "c"), "c", &typoid);
	Datum		elems[CMD_NUM_STATES];
	int			n = 0;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	for (int to = 0; to < CMD_NUM_STATES; to++)
	{
		char	   *detail;

		if (allowed[c.state][to] && refusal(&c, (CommandState) to, &detail) == NULL)
			elems[n++] = cscp_enum_datum(&state_cache, typoid, to);
	}
	get_typlenbyvalalign(typoid, &typlen, &typbyval, &typalign);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, n, typoid, typlen, typbyval, typalign));
}
