/*-------------------------------------------------------------------------
 *
 * conversation.c
 *	  Multi-turn conversations (OpenWOP RFC 0005): the trigger that guards
 *	  cscp.conversation, and the API functions conversation_start,
 *	  conversation_exchange and conversation_close, the timeout and
 *	  capabilities.
 *
 * Invariants kept by conversation_guard:
 *	- a conversation is born open, its counters at 0, with a schema of the
 *	  supported subset (jsonschema.c: an unknown keyword is refused, 22023)
 *	  and a timeout within the policy's max_ttl; deadline = opened_at +
 *	  timeout_ms;
 *	- what it was started with (agent, schema, timeout, causation) never
 *	  changes; a closed conversation never changes at all;
 *	- state, counters, outcome and close times move only with its turns:
 *	  the turn trigger (turns.c) sets them through
 *	  cscp_conversation_advance, which no SQL can call.
 *
 * The API functions do what the trigger cannot: replay and divergence by
 * messageId, and recording the timeout before answering a late turn.  Each
 * locks the conversation row first (SELECT ... FOR UPDATE), so concurrent
 * calls on one conversation queue: a re-delivery waiting behind its first
 * delivery finds it recorded and replays it, also after close (a new turn
 * for a closed conversation is 22023, RFC 0005 §E).  Business outcomes
 * (replayed, diverged, aborted, timed_out) are returned, never raised, so
 * what they record (a replay.diverged event under either divergence
 * policy, the timeout's close) is kept.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

uint64		cscp_conversation_generation = 0;
const CscpConversation *cscp_turn_conversation = NULL;

/* True only while cscp_conversation_advance updates a conversation. */
static bool internal_write = false;

typedef enum ConversationState
{
	CONV_OPEN,
	CONV_CLOSED,
	CONV_NUM_STATES
} ConversationState;

static const char *const state_names[CONV_NUM_STATES] = {"open", "closed"};
static CscpEnumCache state_cache = {.n = CONV_NUM_STATES, .names = state_names};

/* Column numbers of cscp.conversation, looked up by name once per relation. */
typedef struct ConversationColumns
{
	Oid			relid;
	int			tenant_id,
				conversation_id,
				state,
				schema,
				timeout_ms,
				deadline,
				opened_at,
				closed_at,
				outcome,
				close_reason,
				next_turn_index,
				next_event_seq,
				updated_at;
} ConversationColumns;

static ConversationColumns cols = {InvalidOid};

static void
load_columns(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (cols.relid == RelationGetRelid(rel))
		return;
	cols.tenant_id = cscp_column(desc, "cscp.conversation", "tenant_id");
	cols.conversation_id = cscp_column(desc, "cscp.conversation", "conversation_id");
	cols.state = cscp_column(desc, "cscp.conversation", "state");
	cols.schema = cscp_column(desc, "cscp.conversation", "schema");
	cols.timeout_ms = cscp_column(desc, "cscp.conversation", "timeout_ms");
	cols.deadline = cscp_column(desc, "cscp.conversation", "deadline");
	cols.opened_at = cscp_column(desc, "cscp.conversation", "opened_at");
	cols.closed_at = cscp_column(desc, "cscp.conversation", "closed_at");
	cols.outcome = cscp_column(desc, "cscp.conversation", "outcome");
	cols.close_reason = cscp_column(desc, "cscp.conversation", "close_reason");
	cols.next_turn_index = cscp_column(desc, "cscp.conversation", "next_turn_index");
	cols.next_event_seq = cscp_column(desc, "cscp.conversation", "next_event_seq");
	cols.updated_at = cscp_column(desc, "cscp.conversation", "updated_at");
	cols.relid = RelationGetRelid(rel);
}

/*
 * The deadline of a conversation of tenant started at now with timeout_ms;
 * 22023 unless timeout_ms is positive and the deadline within the tenant's
 * max_ttl (lifetime.c), so that no deadline leaves the timestamp range.
 */
static TimestampTz
timeout_deadline(int64 timeout_ms, const char *tenant, TimestampTz now)
{
	/* More than any max_ttl allows; capped so that it converts to an interval. */
	const int64 cap_ms = INT64CONST(CSCP_MAX_LIFETIME_YEARS + 1) * 366 * SECS_PER_DAY * 1000;
	Interval	iv = {0};
	TimestampTz deadline = 0;
	char	   *max_text;

	if (timeout_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms must be positive"),
				 errdetail("The timeout given is %lld ms.", (long long) timeout_ms),
				 errhint("Pass a positive number of milliseconds, or NULL for no timeout.")));
	iv.time = Min(timeout_ms, cap_ms) * 1000;
	if (cscp_expiry_status(cscp_policy_get(tenant), now, &iv, &deadline, &max_text) != CSCP_EXPIRY_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms is too long"),
				 errdetail("The timeout given is %lld ms; the policy allows lifetimes up to %s (policy key \"max_ttl\").",
						   (long long) timeout_ms, max_text),
				 errhint("Pass a shorter timeout, or raise \"max_ttl\" with cscp.policy_set.")));
	return deadline;
}

/* The checks and defaults of INSERT; returns the tuple to store. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			natts = desc->natts;
	Datum	   *values = palloc0(natts * sizeof(Datum));
	bool	   *nulls = palloc0(natts * sizeof(bool));
	bool	   *repl = palloc0(natts * sizeof(bool));
	bool		isnull;
	Datum		d;
	char	   *tenant = SPI_getvalue(tuple, desc, cols.tenant_id);

	d = heap_getattr(tuple, cols.state, desc, &isnull);
	if (!isnull &&
		cscp_enum_index(&state_cache, TupleDescAttr(desc, cols.state - 1)->atttypid, d) != CONV_OPEN)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new conversation must be open"),
				 errhint("Start it with cscp.conversation_start; close it with cscp.conversation_close.")));

	d = heap_getattr(tuple, cols.schema, desc, &isnull);
	if (!isnull)
	{
		cscp_check_json_limits(DatumGetJsonbP(d), "schema");
		cscp_jsonschema_check(DatumGetJsonbP(d));
	}

	d = heap_getattr(tuple, cols.timeout_ms, desc, &isnull);
	if (!isnull)
	{
		values[cols.deadline - 1] =
			TimestampTzGetDatum(timeout_deadline(DatumGetInt64(d), tenant ? tenant : "*", now));
	}
	else
		nulls[cols.deadline - 1] = true;
	repl[cols.deadline - 1] = true;

	values[cols.opened_at - 1] = TimestampTzGetDatum(now);
	repl[cols.opened_at - 1] = true;
	values[cols.updated_at - 1] = TimestampTzGetDatum(now);
	repl[cols.updated_at - 1] = true;
	values[cols.next_turn_index - 1] = Int32GetDatum(0);
	repl[cols.next_turn_index - 1] = true;
	values[cols.next_event_seq - 1] = Int32GetDatum(0);
	repl[cols.next_event_seq - 1] = true;
	nulls[cols.closed_at - 1] = nulls[cols.outcome - 1] = nulls[cols.close_reason - 1] = true;
	repl[cols.closed_at - 1] = repl[cols.outcome - 1] = repl[cols.close_reason - 1] = true;
	return heap_modify_tuple(tuple, desc, values, nulls, repl);
}

/* The checks and bookkeeping of UPDATE; returns the tuple to store. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			natts = desc->natts;
	Datum	   *values = palloc0(natts * sizeof(Datum));
	bool	   *nulls = palloc0(natts * sizeof(bool));
	bool	   *repl = palloc0(natts * sizeof(bool));
	static const char *const fixed[] = {
		"tenant_id", "conversation_id", "agent_id", "schema", "timeout_ms", "deadline",
		"causation_id", "opened_at"
	};
	static const char *const moved_by_turns[] = {
		"state", "next_turn_index", "next_event_seq", "closed_at", "outcome", "close_reason"
	};
	bool		isnull,
				isnull_state;
	char	   *id = SPI_getvalue(oldtup, desc, cols.conversation_id);

	if (cscp_enum_index(&state_cache, TupleDescAttr(desc, cols.state - 1)->atttypid,
						heap_getattr(oldtup, cols.state, desc, &isnull)) == CONV_CLOSED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("conversation \"%s\" is closed", id),
				 errdetail("A closed conversation never changes."),
				 errhint("Start a new conversation with cscp.conversation_start.")));

	for (int i = 0; i < (int) lengthof(fixed); i++)
		if (!cscp_same_value(oldtup, newtup, desc, cscp_column(desc, "cscp.conversation", fixed[i])))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of a conversation cannot be changed", fixed[i]),
					 errhint("Start a new conversation with cscp.conversation_start.")));

	if (!internal_write)
		for (int i = 0; i < (int) lengthof(moved_by_turns); i++)
			if (!cscp_same_value(oldtup, newtup, desc,
								 cscp_column(desc, "cscp.conversation", moved_by_turns[i])))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("column \"%s\" of a conversation changes only with its turns",
								moved_by_turns[i]),
						 errhint("Use cscp.conversation_exchange to add a turn and cscp.conversation_close to close it.")));

	values[cols.updated_at - 1] = TimestampTzGetDatum(now);
	repl[cols.updated_at - 1] = true;
	newtup = heap_modify_tuple(newtup, desc, values, nulls, repl);

	/* closed exactly when it has closed_at (and close_reason, by the rules) */
	(void) heap_getattr(newtup, cols.closed_at, desc, &isnull);
	if ((cscp_enum_index(&state_cache, TupleDescAttr(desc, cols.state - 1)->atttypid,
						 heap_getattr(newtup, cols.state, desc, &isnull_state)) == CONV_CLOSED) == isnull)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("conversation \"%s\" must have closed_at and close_reason exactly when it is closed", id),
				 errtable(rel)));
	return newtup;
}

static const char *const close_reasons[] = {"closed", "timeout", NULL};

static CscpRowRules rules = {
	.table = "cscp.conversation",
	.n = 8,
	.rule = {
		{"tenant_id", CSCP_RULE_TENANT},
		{"conversation_id", CSCP_RULE_NOT_EMPTY},
		{"agent_id", CSCP_RULE_NOT_EMPTY},
		{"timeout_ms", CSCP_RULE_POSITIVE},
		{"close_reason", CSCP_RULE_ONE_OF, close_reasons},
		{"closed_at", CSCP_RULE_NULL_WITH, NULL, "close_reason"},
		{"next_turn_index", CSCP_RULE_NOT_NEGATIVE},
		{"next_event_seq", CSCP_RULE_NOT_NEGATIVE},
	},
};

static const CscpRowGuard guard = {
	.name = "cscp.conversation_guard()",
	.rules = &rules,
	.load_columns = load_columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_conversation_guard);

/* Trigger cscp.conversation_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_conversation_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &guard);
}

/*
 * Lock the conversation row FOR UPDATE with the caller's rights (a saved
 * SELECT ... FOR UPDATE) and read it into *conv, allocated in the caller's
 * memory context.  False when there is no such conversation.
 */
bool
cscp_conversation_lock(const char *tenant_id, const char *conversation_id,
					   CscpConversation *conv)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, TEXTOID};
	MemoryContext callerctx = CurrentMemoryContext;
	MemoryContext spictx;
	HeapTuple	tup;
	TupleDesc	desc;
	Datum		args[2];
	bool		isnull;
	Datum		d;
	char	   *state;

	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT c.agent_id, c.state::text, c.schema, c.timeout_ms, c.deadline,"
				  "       c.causation_id, c.next_turn_index, c.next_event_seq, c.close_reason"
				  "  FROM cscp.conversation c"
				  " WHERE c.tenant_id = $1 AND c.conversation_id = $2"
				  "   FOR UPDATE",
				  2, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock conversation \"%s\"", conversation_id);
	if (SPI_processed == 0)
	{
		SPI_finish();
		return false;
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	spictx = MemoryContextSwitchTo(callerctx);
	memset(conv, 0, sizeof(CscpConversation));
	conv->generation = cscp_conversation_generation;
	conv->tenant_id = pstrdup(tenant_id);
	conv->conversation_id = pstrdup(conversation_id);
	conv->agent_id = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
	d = SPI_getbinval(tup, desc, 2, &isnull);
	state = isnull ? NULL : TextDatumGetCString(d);
	conv->closed = state != NULL && strcmp(state, "closed") == 0;
	d = SPI_getbinval(tup, desc, 3, &isnull);
	if (!isnull)
		conv->schema = DatumGetJsonbPCopy(d);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	if (!isnull)
	{
		conv->timeout_ms = DatumGetInt64(d);
		conv->deadline = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
	}
	d = SPI_getbinval(tup, desc, 6, &isnull);
	if (!isnull)
		conv->causation_id = TextDatumGetCString(d);
	conv->next_turn_index = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
	conv->next_event_seq = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
	d = SPI_getbinval(tup, desc, 9, &isnull);
	if (!isnull)
		conv->close_reason = TextDatumGetCString(d);
	MemoryContextSwitchTo(spictx);
	SPI_finish();
	return true;
}

/*
 * Set the counters of a conversation the caller has locked and, when
 * close_reason is given, close it with outcome.  The only way these
 * columns change (conversation_guard refuses every other).
 */
void
cscp_conversation_advance(const CscpConversation *conv, int32 next_turn_index,
						  int32 next_event_seq, const char *close_reason, Jsonb *outcome,
						  TimestampTz now)
{
	static SPIPlanPtr move_plan = NULL;
	static SPIPlanPtr close_plan = NULL;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (move_plan == NULL)
	{
		Oid			argtypes[4] = {TEXTOID, TEXTOID, INT4OID, INT4OID};

		move_plan = SPI_prepare("UPDATE cscp.conversation c"
								" SET next_turn_index = $3, next_event_seq = $4"
								" WHERE c.tenant_id = $1 AND c.conversation_id = $2",
								4, argtypes);
		if (move_plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(move_plan);
	}
	if (close_plan == NULL)
	{
		Oid			argtypes[7] = {TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, JSONBOID,
		TIMESTAMPTZOID};

		close_plan = SPI_prepare("UPDATE cscp.conversation c"
								 " SET next_turn_index = $3, next_event_seq = $4,"
								 " state = 'closed', close_reason = $5, outcome = $6,"
								 " closed_at = $7"
								 " WHERE c.tenant_id = $1 AND c.conversation_id = $2",
								 7, argtypes);
		if (close_plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(close_plan);
	}
	args[0] = CStringGetTextDatum(conv->tenant_id);
	args[1] = CStringGetTextDatum(conv->conversation_id);
	args[2] = Int32GetDatum(next_turn_index);
	args[3] = Int32GetDatum(next_event_seq);
	plan = move_plan;
	if (close_reason != NULL)
	{
		plan = close_plan;
		args[4] = CStringGetTextDatum(close_reason);
		args[5] = JsonbPGetDatum(outcome);
		nulls[5] = outcome ? ' ' : 'n';
		args[6] = TimestampTzGetDatum(now);
	}

	cscp_conversation_generation++;
	internal_write = true;
	PG_TRY();
	{
		if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_UPDATE ||
			SPI_processed != 1)
			elog(ERROR, "could not advance conversation \"%s\"", conv->conversation_id);
	}
	PG_FINALLY();
	{
		internal_write = false;
	}
	PG_END_TRY();
	SPI_finish();
}

/* What a call answers: the event, turn index and message id, and its outcome. */
typedef CscpTurnResult TurnResult;

/*
 * Raise 22023: the conversation does not exist (for this tenant); 55000 when
 * it was forgotten.
 */
static void
no_conversation(const char *tenant_id, const char *conversation_id)
{
	cscp_refuse_forgotten(tenant_id, "conversation", conversation_id);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("conversation \"%s\" does not exist", conversation_id),
			 errhint("Start it with cscp.conversation_start, and check that cscp.tenant_id names its tenant.")));
}

/*
 * Raise 22023: the conversation is closed (RFC 0005 §E: a turn for a closed
 * conversation is a validation error).
 */
static void
closed_conversation(const CscpConversation *conv)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("conversation \"%s\" is closed", conv->conversation_id),
			 errdetail("%s turn %d; a closed conversation takes no more turns.",
					   strcmp(conv->close_reason, "timeout") == 0 ?
					   "It timed out, recorded by its final" : "It was closed by its final",
					   conv->next_turn_index - 1),
			 errhint("Start a new conversation with cscp.conversation_start.")));
}

/*
 * INSERT the turn t (the turn trigger does the rest); intent, when given,
 * makes it the closing turn.  locked, when given, is the conversation as the
 * caller locked and read it, handed to the trigger so that it need not lock
 * and read it again.  Fills res from the row stored.
 */
static void
insert_turn(const char *tenant_id, const char *conversation_id, CscpTurn *t,
			const CscpConversation *locked, CscpCloseIntent *intent, TurnResult *res)
{
	static SPIPlanPtr plan = NULL;
	MemoryContext callerctx = CurrentMemoryContext;
	const CscpConversation *outer = cscp_turn_conversation;
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan == NULL)
	{
		Oid			argtypes[9] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID,
		JSONBOID, NUMERICOID, JSONBOID};

		plan = SPI_prepare("INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index,"
						   " message_id, role, sender, content, ts, extra)"
						   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
						   " RETURNING event_id, turn_index, message_id", 9, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
	}
	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	args[2] = Int32GetDatum(t->turn_index);
	nulls[2] = t->has_index ? ' ' : 'n';
	args[3] = t->message_id ? CStringGetTextDatum(t->message_id) : (Datum) 0;
	nulls[3] = t->message_id ? ' ' : 'n';
	args[4] = CStringGetTextDatum(t->role);
	args[5] = CStringGetTextDatum(t->sender);
	args[6] = JsonbPGetDatum(t->content);
	args[7] = t->ts;
	args[8] = t->extra ? JsonbPGetDatum(t->extra) : (Datum) 0;
	nulls[8] = t->extra ? ' ' : 'n';

	cscp_close_intent = intent;
	cscp_turn_conversation = locked;
	PG_TRY();
	{
		if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING ||
			SPI_processed != 1)
			elog(ERROR, "could not record a turn of conversation \"%s\"", conversation_id);
	}
	PG_FINALLY();
	{
		cscp_close_intent = NULL;
		cscp_turn_conversation = outer;
	}
	PG_END_TRY();

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	res->event_id = MemoryContextStrdup(callerctx, SPI_getvalue(tup, desc, 1));
	res->turn_index = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	res->message_id = MemoryContextStrdup(callerctx, SPI_getvalue(tup, desc, 3));
	SPI_finish();
}

/* A turn already recorded under a message id. */
typedef struct RecordedTurn
{
	int32		turn_index;
	char	   *content_hash;
	char	   *event_id;
	Jsonb	   *turn;			/* the ConversationTurn recorded (cscp.turn_json) */
} RecordedTurn;

/*
 * Look up the turn with message_id in the conversation; false when there is
 * none.  A statement that is not read-only, so a turn committed while we
 * waited for the conversation's lock is seen.
 */
static bool
find_turn(const char *tenant_id, const char *conversation_id, const char *message_id,
		  RecordedTurn *found)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};
	MemoryContext callerctx = CurrentMemoryContext;
	Datum		args[3];
	bool		exists;

	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	args[2] = CStringGetTextDatum(message_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT t.turn_index, t.content_hash, t.event_id, cscp.turn_json(t) FROM cscp.turn t"
				  " WHERE t.tenant_id = $1 AND t.conversation_id = $2 AND t.message_id = $3",
				  3, types);
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a turn");
	exists = SPI_processed == 1;
	if (exists)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext spictx;
		bool		isnull;

		found->turn_index = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		spictx = MemoryContextSwitchTo(callerctx);
		found->content_hash = SPI_getvalue(tup, desc, 2);
		found->event_id = SPI_getvalue(tup, desc, 3);
		found->turn = DatumGetJsonbPCopy(SPI_getbinval(tup, desc, 4, &isnull));
		MemoryContextSwitchTo(spictx);
	}
	SPI_finish();
	return exists;
}

/* The message id a turn is (or would be) recorded under, or NULL when not yet known. */
static char *
candidate_message_id(const char *conversation_id, CscpTurn *t)
{
	if (t->message_id != NULL)
		return t->message_id;
	if (t->has_index)
		return psprintf("%s:%d:%s", conversation_id, t->turn_index, t->role);
	return NULL;
}

/* Milliseconds since 1970-01-01 UTC of ts, as a numeric datum. */
static Datum
epoch_ms(TimestampTz ts)
{
	int64		ms = ts / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * (SECS_PER_DAY * INT64CONST(1000));

	return NumericGetDatum(int64_to_numeric(ms));
}

/*
 * Close the locked, open conversation conv, past its deadline: a system
 * turn stating the timeout, event conversation.closed, outcome null.
 */
static void
record_timeout(CscpConversation *conv, TimestampTz now, TurnResult *res)
{
	CscpTurn	t = {0};
	CscpCloseIntent intent = {conv->tenant_id, conv->conversation_id,
	CSCP_CLOSE_BY_TIMEOUT, NULL};
	StringInfoData content;

	initStringInfo(&content);
	appendStringInfo(&content,
					 "{\"reason\": \"timeout\", \"timeoutMs\": " INT64_FORMAT
					 ", \"deadline\": \"%s\", \"text\": \"The conversation timed out: no close within %lld ms of its start.\"}",
					 conv->timeout_ms, cscp_utc_iso(conv->deadline),
					 (long long) conv->timeout_ms);
	t.role = "system";
	t.sender = "cscp";
	t.content = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(content.data)));
	t.ts = epoch_ms(now);
	insert_turn(conv->tenant_id, conv->conversation_id, &t, conv, &intent, res);
	res->outcome = "timed_out";
}

/* Whether conv has a deadline that has passed. */
static bool
past_deadline(const CscpConversation *conv, TimestampTz now)
{
	return conv->timeout_ms > 0 && conv->deadline <= now;
}

/* Return res as the one row of a RETURNS TABLE function (with_outcome: 4 columns). */
static void
return_row(FunctionCallInfo fcinfo, TurnResult *res, bool with_outcome)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, true};

	values[0] = CStringGetTextDatum(res->event_id);
	values[1] = Int32GetDatum(res->turn_index);
	values[2] = CStringGetTextDatum(res->message_id);
	values[3] = with_outcome ? CStringGetTextDatum(res->outcome) : (Datum) 0;
	/* exchange's fifth column: the recorded turn, when the answer replays one */
	if (rsinfo->setDesc->natts > 4 && res->turn != NULL)
	{
		values[4] = JsonbPGetDatum(res->turn);
		nulls[4] = false;
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* The text argument n, or NULL. */
static text *
text_arg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : PG_GETARG_TEXT_PP(n);
}

PG_FUNCTION_INFO_V1(cscp_conversation_start);

/*
 * cscp.conversation_start(tenant_id, conversation_id, agent_id, initial_turn,
 *                         schema, timeout_ms, causation_id)
 *     RETURNS TABLE(event_id text, turn_index int, message_id text)
 */
Datum
cscp_conversation_start(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	text	   *tenant = text_arg(fcinfo, 0);
	text	   *convid = text_arg(fcinfo, 1);
	text	   *agent = text_arg(fcinfo, 2);
	text	   *causation = text_arg(fcinfo, 6);
	char	   *tenant_s,
			   *conv_s;
	CscpTurn	t;
	TurnResult	res = {0};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		inserted;

	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", convid);
	cscp_check_id("agent_id", agent);
	if (causation != NULL)
		cscp_check_id("causation_id", causation);
	cscp_turn_parse(PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3), "initial_turn", &t);
	tenant_s = text_to_cstring(tenant);
	conv_s = text_to_cstring(convid);
	InitMaterializedSRF(fcinfo, 0);

	/*
	 * The schema checked and the first turn validated before the INSERT,
	 * which a concurrent start of the same conversation waits for
	 * (cscp_turn_validate_early).
	 */
	if (!PG_ARGISNULL(4))
	{
		cscp_jsonschema_check(PG_GETARG_JSONB_P(4));
		cscp_turn_check_schema(conv_s, PG_GETARG_JSONB_P(4), t.content);
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan == NULL)
	{
		Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT8OID, TEXTOID};

		plan = SPI_prepare("INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id,"
						   " schema, timeout_ms, causation_id)"
						   " VALUES ($1, $2, $3, $4, $5, $6)"
						   " ON CONFLICT (tenant_id, conversation_id) DO NOTHING",
						   6, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
	}
	args[0] = PointerGetDatum(tenant);
	args[1] = PointerGetDatum(convid);
	args[2] = PointerGetDatum(agent);
	args[3] = PG_ARGISNULL(4) ? (Datum) 0 : PG_GETARG_DATUM(4);
	nulls[3] = PG_ARGISNULL(4) ? 'n' : ' ';
	args[4] = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	nulls[4] = PG_ARGISNULL(5) ? 'n' : ' ';
	args[5] = PointerGetDatum(causation);
	nulls[5] = causation ? ' ' : 'n';
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not start conversation \"%s\"", conv_s);
	inserted = SPI_processed == 1;
	SPI_finish();

	if (inserted)
	{
		insert_turn(tenant_s, conv_s, &t, NULL, NULL, &res);
	}
	else
	{
		/* The same start sent again replays it; anything else is a clash. */
		CscpConversation conv;
		RecordedTurn first;
		char	   *msg = t.message_id ? t.message_id : psprintf("%s:0:%s", conv_s, t.role);
		int32		size;

		if (!cscp_conversation_lock(tenant_s, conv_s, &conv))
			no_conversation(tenant_s, conv_s);
		if (strcmp(conv.agent_id, text_to_cstring(agent)) != 0 ||
			!find_turn(tenant_s, conv_s, msg, &first) || first.turn_index != 0 ||
			strcmp(first.content_hash, cscp_turn_content_hash(t.content, &size)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("conversation \"%s\" already exists", conv_s),
					 errdetail("It was started by agent \"%s\"; only the same agent sending the same first turn replays that start.",
							   conv.agent_id),
					 errhint("Use a new conversation id, or resend the original start to replay it.")));
		res.event_id = first.event_id;
		res.turn_index = 0;
		res.message_id = msg;
	}
	return_row(fcinfo, &res, false);
	return (Datum) 0;
}

/*
 * The conversations this backend has read, under their row lock, without
 * a schema: their turns need no read before the lock (a read costs about
 * 1% of a message turn).  A conversation's schema never changes while it
 * exists; only one deleted (forgotten, or purged after retention) and
 * started again under the same id with a schema makes an entry wrong, and
 * then for one turn only: that turn is validated under the lock, by the
 * trigger, as every turn was before validation moved ahead of the lock,
 * and the locked read drops the entry.  Never consulted for anything but
 * skipping that read.
 */
#define SCHEMALESS_KEY_BYTES (2 * CSCP_MAX_ID_BYTES + 2)
#define SCHEMALESS_MAX_ENTRIES 4096

typedef struct SchemalessEntry
{
	char		key[SCHEMALESS_KEY_BYTES];	/* tenant_id, a 0x1f byte, conversation_id */
} SchemalessEntry;

static HTAB *schemaless = NULL;

/* The key of a conversation in schemaless, into key; false when the ids are too long. */
static bool
schemaless_key(const char *tenant_id, const char *conversation_id, char *key)
{
	size_t		t = strlen(tenant_id),
				c = strlen(conversation_id);

	if (t + c + 2 > SCHEMALESS_KEY_BYTES)
		return false;
	memset(key, 0, SCHEMALESS_KEY_BYTES);
	memcpy(key, tenant_id, t);
	key[t] = '\x1f';
	memcpy(key + t + 1, conversation_id, c);
	return true;
}

/* Note what the locked read conv says about its schema. */
static void
schemaless_note(const CscpConversation *conv)
{
	char		key[SCHEMALESS_KEY_BYTES];

	if (!schemaless_key(conv->tenant_id, conv->conversation_id, key))
		return;
	if (conv->schema != NULL)
	{
		if (schemaless != NULL)
			(void) hash_search(schemaless, key, HASH_REMOVE, NULL);
		return;
	}
	if (schemaless == NULL || hash_get_num_entries(schemaless) >= SCHEMALESS_MAX_ENTRIES)
	{
		HASHCTL		ctl;

		if (schemaless != NULL)
			hash_destroy(schemaless);
		ctl.keysize = SCHEMALESS_KEY_BYTES;
		ctl.entrysize = sizeof(SchemalessEntry);
		ctl.hcxt = TopMemoryContext;
		schemaless = hash_create("cscp conversations without a schema", 64, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	(void) hash_search(schemaless, key, HASH_ENTER, NULL);
}

/* Whether a locked read has shown the conversation without a schema. */
static bool
schemaless_known(const char *tenant_id, const char *conversation_id)
{
	char		key[SCHEMALESS_KEY_BYTES];

	return schemaless != NULL && schemaless_key(tenant_id, conversation_id, key) &&
		hash_search(schemaless, key, HASH_FIND, NULL) != NULL;
}

/*
 * Raise 22023 unless content obeys the schema of the open conversation
 * (cscp_turn_check_schema), before its row is locked: a slow validation
 * never holds the conversation's lock, and content the schema refuses is
 * refused without waiting for it.  A conversation's schema never changes
 * once it is started, so the one read here without a lock is the one the
 * turn trigger checks again under the lock, where jsonschema.c's memo of
 * its last validation gives the answer without the work.  Nothing to do
 * when the conversation is absent, closed, past its deadline or without a
 * schema: the locked path answers those.
 */
void
cscp_turn_validate_early(const char *tenant_id, const char *conversation_id, Jsonb *content,
						 TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	Datum		args[3];
	bool		isnull;
	Datum		d;

	if (schemaless_known(tenant_id, conversation_id))
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plan == NULL)
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};

		plan = SPI_prepare("SELECT c.schema FROM cscp.conversation c"
						   " WHERE c.tenant_id = $1 AND c.conversation_id = $2"
						   "   AND c.state = 'open' AND (c.deadline IS NULL OR c.deadline > $3)",
						   3, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
	}
	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	args[2] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the schema of conversation \"%s\"", conversation_id);
	if (SPI_processed == 1)
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			cscp_turn_check_schema(conversation_id, DatumGetJsonbP(d), content);
	}
	SPI_finish();
}

/*
 * What exchange and close do first: check the arguments, parse the turn,
 * validate its content (before the lock: cscp_turn_validate_early), lock
 * the conversation and refuse a closed one (55000).  Past its deadline
 * the conversation is closed by timeout and the timed_out row returned:
 * the caller then returns at once (true).
 */
static bool
lock_for_turn(text *tenant, text *convid, Jsonb *turn, char **tenant_s, char **conv_s,
			  CscpTurn *t, CscpConversation *conv, TurnResult *res, TimestampTz *now)
{
	RecordedTurn found;
	char	   *msg;

	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", convid);
	cscp_turn_parse(turn, "turn", t);
	*tenant_s = text_to_cstring(tenant);
	*conv_s = text_to_cstring(convid);
	*now = cscp_now();

	cscp_turn_validate_early(*tenant_s, *conv_s, t->content, *now);
	if (!cscp_conversation_lock(*tenant_s, *conv_s, conv))
		no_conversation(*tenant_s, *conv_s);
	schemaless_note(conv);
	if (conv->closed)
	{
		/*
		 * A turn of the closed conversation sent again, same content: a
		 * replay, as while it was open (the final turn included).
		 */
		int32		size;

		msg = candidate_message_id(*conv_s, t);
		if (msg != NULL && find_turn(*tenant_s, *conv_s, msg, &found) &&
			strcmp(found.content_hash, cscp_turn_content_hash(t->content, &size)) == 0)
		{
			res->event_id = found.event_id;
			res->turn_index = found.turn_index;
			res->message_id = msg;
			res->turn = found.turn;
			res->outcome = "replayed";
			return true;
		}
		closed_conversation(conv);
	}
	if (!past_deadline(conv, *now))
		return false;
	record_timeout(conv, *now, res);
	return true;
}

/*
 * Record turn in the conversation (cscp.conversation_exchange): the turn
 * exchanged, a re-delivery replayed (or diverged, kept as first recorded),
 * or the conversation timed out first.  Fills res.
 */
void
cscp_exchange_turn(text *tenant, text *convid, Jsonb *turn, CscpTurnResult *res)
{
	char	   *tenant_s,
			   *conv_s,
			   *msg;
	CscpTurn	t;
	CscpConversation conv;
	RecordedTurn found;
	TimestampTz now;

	if (lock_for_turn(tenant, convid, turn, &tenant_s, &conv_s, &t, &conv, res, &now))
		return;

	msg = candidate_message_id(conv_s, &t);
	if (msg != NULL && find_turn(tenant_s, conv_s, msg, &found))
	{
		int32		size;
		char	   *hash = cscp_turn_content_hash(t.content, &size);
		char	   *policy_says;

		res->turn_index = found.turn_index;
		res->message_id = msg;
		res->turn = found.turn;
		if (strcmp(hash, found.content_hash) == 0)
		{
			res->event_id = found.event_id;
			res->outcome = "replayed";
			return;
		}

		/*
		 * Divergence (RFC 0005 §G): the replay.diverged event is recorded
		 * whatever the policy, then the replay continues (keep: the original
		 * stands, "diverged") or is aborted (error: "aborted", the caller
		 * must stop).  Both are returned, not raised: an ERROR would roll the
		 * event back.
		 */
		else
		{
			StringInfoData payload;
			int32		seq = conv.next_event_seq;
			bool		abort_replay;

			policy_says = cscp_jsonb_get_cstring(cscp_policy_get(tenant_s), "replay_divergence");
			abort_replay = (policy_says != NULL && strcmp(policy_says, "error") == 0);
			initStringInfo(&payload);
			appendStringInfoString(&payload, "{\"messageId\":");
			cscp_canonical_string(&payload, msg, strlen(msg));
			appendStringInfo(&payload, ",\"turnIndex\":%d,\"recordedHash\":\"%s\",\"receivedHash\":\"%s\","
							 "\"policy\":\"%s\"}",
							 found.turn_index, found.content_hash, hash, abort_replay ? "error" : "keep");
			res->event_id = cscp_event_append(tenant_s, conv_s, seq, "replay.diverged",
											  seq > 0 ? cscp_event_id(conv_s, seq - 1) : NULL,
											  found.turn_index, payload.data, now);
			cscp_conversation_advance(&conv, conv.next_turn_index, seq + 1, NULL, NULL, now);
			res->outcome = abort_replay ? "aborted" : "diverged";
			return;
		}
	}

	insert_turn(tenant_s, conv_s, &t, &conv, NULL, res);
	res->outcome = "exchanged";
}

PG_FUNCTION_INFO_V1(cscp_conversation_exchange);

/*
 * cscp.conversation_exchange(tenant_id, conversation_id, turn)
 *     RETURNS TABLE(event_id text, turn_index int, message_id text, outcome text)
 */
Datum
cscp_conversation_exchange(PG_FUNCTION_ARGS)
{
	TurnResult	res = {0};

	InitMaterializedSRF(fcinfo, 0);
	cscp_exchange_turn(text_arg(fcinfo, 0), text_arg(fcinfo, 1),
					   PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), &res);
	return_row(fcinfo, &res, true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(cscp_conversation_close);

/*
 * cscp.conversation_close(tenant_id, conversation_id, turn, outcome)
 *     RETURNS TABLE(event_id text, turn_index int, message_id text, result text)
 */
Datum
cscp_conversation_close(PG_FUNCTION_ARGS)
{
	char	   *tenant_s,
			   *conv_s,
			   *msg;
	CscpTurn	t;
	CscpConversation conv;
	CscpCloseIntent intent;
	RecordedTurn found;
	TurnResult	res = {0};
	TimestampTz now;

	InitMaterializedSRF(fcinfo, 0);
	if (lock_for_turn(text_arg(fcinfo, 0), text_arg(fcinfo, 1),
					  PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2),
					  &tenant_s, &conv_s, &t, &conv, &res, &now))
	{
		return_row(fcinfo, &res, true);
		return (Datum) 0;
	}
	msg = candidate_message_id(conv_s, &t);
	if (msg != NULL && find_turn(tenant_s, conv_s, msg, &found))
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("message \"%s\" is already turn %d of conversation \"%s\"",
						msg, found.turn_index, conv_s),
				 errhint("Close with a new turn: a new messageId, or none to have one assigned.")));

	intent.tenant_id = tenant_s;
	intent.conversation_id = conv_s;
	intent.kind = CSCP_CLOSE_BY_TURN;
	intent.outcome = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	insert_turn(tenant_s, conv_s, &t, &conv, &intent, &res);
	res.outcome = "closed";
	return_row(fcinfo, &res, true);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(cscp_conversation_timeout);

/* cscp._conversation_timeout(tenant_id, conversation_id) RETURNS boolean: closed by it? */
Datum
cscp_conversation_timeout(PG_FUNCTION_ARGS)
{
	char	   *tenant_s = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *conv_s = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CscpConversation conv;
	TurnResult	res = {0};
	TimestampTz now = cscp_now();

	cscp_check_id("tenant_id", PG_GETARG_TEXT_PP(0));
	cscp_check_id("conversation_id", PG_GETARG_TEXT_PP(1));
	if (!cscp_conversation_lock(tenant_s, conv_s, &conv) || conv.closed ||
		!past_deadline(&conv, now))
		PG_RETURN_BOOL(false);
	record_timeout(&conv, now, &res);
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(cscp_capabilities);

/* cscp.capabilities() RETURNS jsonb: what this cscp implements. */
Datum
cscp_capabilities(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf,
						   "{\"conversationPrimitive\": true,"
						   " \"interrupts\": {\"kinds\": [\"approval\", \"conversation\"],"
						   " \"x-host-cscp-kinds\": [\"confirmation\"]},"
						   " \"conversation\": {\"roles\": [\"user\", \"agent\", \"system\"],"
						   " \"replay\": true, \"replayDivergence\": [\"keep\", \"error\"],"
						   " \"timeout\": true, \"turnContent\": [\"full\", \"reference\"],"
						   " \"schemaKeywords\": ");
	cscp_jsonschema_keywords(&buf);
	appendStringInfoString(&buf, "}}");
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}
