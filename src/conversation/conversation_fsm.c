/*-------------------------------------------------------------------------
 *
 * conversation_fsm.c
 *	  The state machine of a conversation (OpenWOP RFC 0005): open, then
 *	  closed by its final turn or by its timeout.  Its pure functions say
 *	  whether a turn may be recorded and why not; the trigger that guards
 *	  cscp.conversation holds every write of the row to the same rules,
 *	  whether cscp's functions or direct SQL make it.
 *
 * Invariants kept by conversation_guard:
 *	- a conversation is born open, its counters at 0, with a schema of the
 *	  supported subset (jsonschema.c: an unknown keyword is refused, 22023)
 *	  and a timeout within the policy's max_ttl; deadline = opened_at +
 *	  timeout_ms;
 *	- what it was started with (agent, schema, timeout, causation) never
 *	  changes; a closed conversation never changes at all;
 *	- state, counters, outcome and close times follow its event log
 *	  (events.c): an UPDATE may move them only to what the event recorded
 *	  at the row's next_event_seq says (one more event; one more turn for a
 *	  turn's event; closed, with the event's reason, outcome and time, for
 *	  conversation.closed).  Application roles cannot write events, so they
 *	  cannot move these columns by hand, and cscp's own UPDATE
 *	  (cscp_conversation_advance) is held to the same rule as theirs.
 *
 * Lock order: the conversation row, then context rows.
 *
 *-------------------------------------------------------------------------
 */
#include "context/context.h"
#include "conversation/conversation.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

typedef enum ConversationState
{
	CONV_OPEN,
	CONV_CLOSED,
	CONV_NUM_STATES
} ConversationState;

static const char *const state_names[CONV_NUM_STATES] = {"open", "closed"};
static CscpEnumCache state_cache = {.n = CONV_NUM_STATES, .names = state_names};

/* The columns of cscp.conversation the C code reads, by name. */
typedef enum ConversationColumn
{
	C_TENANT_ID,
	C_CONVERSATION_ID,
	C_AGENT_ID,
	C_STATE,
	C_SCHEMA,
	C_TIMEOUT_MS,
	C_DEADLINE,
	C_CAUSATION_ID,
	C_OPENED_AT,
	C_CLOSED_AT,
	C_OUTCOME,
	C_CLOSE_REASON,
	C_NEXT_TURN_INDEX,
	C_NEXT_EVENT_SEQ,
	C_UPDATED_AT,
	C_NUM_COLUMNS
} ConversationColumn;

static const char *const column_names[C_NUM_COLUMNS] = {
	"tenant_id",
	"conversation_id",
	"agent_id",
	"state",
	"schema",
	"timeout_ms",
	"deadline",
	"causation_id",
	"opened_at",
	"closed_at",
	"outcome",
	"close_reason",
	"next_turn_index",
	"next_event_seq",
	"updated_at",
};

static CscpColumns columns = {.table = "cscp.conversation", .n = C_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.conversation. */
#define COL(c) (columns.attnum[c])

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
	CscpRowEdit edit;
	bool		isnull;
	Datum		d;
	char	   *tenant = SPI_getvalue(tuple, desc, COL(C_TENANT_ID));

	d = heap_getattr(tuple, COL(C_STATE), desc, &isnull);
	if (!isnull &&
		cscp_enum_index(&state_cache, TupleDescAttr(desc, COL(C_STATE) - 1)->atttypid, d) != CONV_OPEN)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new conversation must be open"),
				 errhint("Start it with cscp.conversation_start; close it with cscp.conversation_close.")));

	/* OpenWOP's payloads carry both ids, each at most 256 characters. */
	for (int i = 0; i < 2; i++)
	{
		int			col = i == 0 ? COL(C_CONVERSATION_ID) : COL(C_AGENT_ID);
		const char *name = i == 0 ? "conversation_id" : "agent_id";

		d = heap_getattr(tuple, col, desc, &isnull);
		if (!isnull && VARSIZE_ANY_EXHDR(DatumGetTextPP(d)) > CSCP_MAX_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s of a conversation is too long", name),
					 errdetail("It is %zu bytes long; the limit is %d bytes.",
							   (size_t) VARSIZE_ANY_EXHDR(DatumGetTextPP(d)), CSCP_MAX_ID_BYTES)));
	}

	d = heap_getattr(tuple, COL(C_SCHEMA), desc, &isnull);
	if (!isnull)
	{
		cscp_check_json_limits(DatumGetJsonbP(d), "schema");
		cscp_jsonschema_check(DatumGetJsonbP(d));
	}

	cscp_row_edit_init(&edit, desc);
	d = heap_getattr(tuple, COL(C_TIMEOUT_MS), desc, &isnull);
	if (!isnull)
		cscp_row_edit_set(&edit, COL(C_DEADLINE),
						  TimestampTzGetDatum(timeout_deadline(DatumGetInt64(d),
															   tenant ? tenant : "*", now)),
						  false);
	else
		cscp_row_edit_set(&edit, COL(C_DEADLINE), (Datum) 0, true);
	cscp_row_edit_set(&edit, COL(C_OPENED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(C_UPDATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(C_NEXT_TURN_INDEX), Int32GetDatum(0), false);
	cscp_row_edit_set(&edit, COL(C_NEXT_EVENT_SEQ), Int32GetDatum(0), false);
	cscp_row_edit_set(&edit, COL(C_CLOSED_AT), (Datum) 0, true);
	cscp_row_edit_set(&edit, COL(C_OUTCOME), (Datum) 0, true);
	cscp_row_edit_set(&edit, COL(C_CLOSE_REASON), (Datum) 0, true);
	return cscp_row_edit_apply(&edit, tuple);
}

/* The columns that move only with the event log, in the order they are named. */
typedef struct ConversationProgress
{
	bool		closed;
	int32		next_turn_index;
	int32		next_event_seq;
	bool		has_closed_at;
	TimestampTz closed_at;
	Jsonb	   *outcome;		/* NULL: SQL null */
	char	   *close_reason;	/* NULL: SQL null */
} ConversationProgress;

static const char *const progress_columns[] = {
	"state", "next_turn_index", "next_event_seq", "closed_at", "outcome", "close_reason"
};

/* The progress columns of tuple. */
static void
read_progress(HeapTuple tuple, TupleDesc desc, ConversationProgress *p)
{
	bool		isnull;
	Datum		d;

	p->closed = cscp_enum_index(&state_cache, TupleDescAttr(desc, COL(C_STATE) - 1)->atttypid,
								heap_getattr(tuple, COL(C_STATE), desc, &isnull)) == CONV_CLOSED;
	p->next_turn_index = DatumGetInt32(heap_getattr(tuple, COL(C_NEXT_TURN_INDEX), desc, &isnull));
	p->next_event_seq = DatumGetInt32(heap_getattr(tuple, COL(C_NEXT_EVENT_SEQ), desc, &isnull));
	d = heap_getattr(tuple, COL(C_CLOSED_AT), desc, &isnull);
	p->has_closed_at = !isnull;
	p->closed_at = isnull ? 0 : DatumGetTimestampTz(d);
	d = heap_getattr(tuple, COL(C_OUTCOME), desc, &isnull);
	p->outcome = isnull ? NULL : DatumGetJsonbP(d);
	d = heap_getattr(tuple, COL(C_CLOSE_REASON), desc, &isnull);
	p->close_reason = isnull ? NULL : TextDatumGetCString(d);
}

/* Whether j is SQL null or the JSON null. */
static bool
outcome_is_null(Jsonb *j)
{
	JsonbValue	v;

	return j == NULL || (JsonbExtractScalar(&j->root, &v) && v.type == jbvNull);
}

/* Whether two outcomes are the same; SQL null and JSON null alike. */
static bool
same_outcome(Jsonb *a, Jsonb *b)
{
	bool		anull = outcome_is_null(a);
	bool		bnull = outcome_is_null(b);

	if (anull || bnull)
		return anull == bnull;
	return compareJsonbContainers(&a->root, &b->root) == 0;
}

/*
 * The state machine's step for the row itself: where the event ev (the one
 * recorded at old's next_event_seq; NULL when there is none) lets a
 * conversation at old go.  No event: nowhere.
 */
static void
progress_after(const ConversationProgress *old, const CscpEvent *ev, ConversationProgress *to)
{
	*to = *old;
	if (ev == NULL)
		return;
	to->next_event_seq = old->next_event_seq + 1;
	if (ev->turn_index == old->next_turn_index && strcmp(ev->type, "replay.diverged") != 0)
		to->next_turn_index = old->next_turn_index + 1;
	if (strcmp(ev->type, "conversation.closed") == 0)
	{
		to->closed = true;
		to->has_closed_at = true;
		to->closed_at = ev->created_at;
		to->outcome = ev->outcome;
		to->close_reason = ev->reason;
	}
}

/*
 * The first progress column (index into progress_columns) in which new is
 * not where the event log lets old go; -1 when it is.
 */
static int
progress_out_of_step(const ConversationProgress *old, const ConversationProgress *new,
					 const CscpEvent *ev)
{
	ConversationProgress to;

	progress_after(old, ev, &to);
	if (new->closed != to.closed)
		return 0;
	if (new->next_turn_index != to.next_turn_index)
		return 1;
	if (new->next_event_seq != to.next_event_seq)
		return 2;
	if (new->has_closed_at != to.has_closed_at ||
		(new->has_closed_at && new->closed_at != to.closed_at))
		return 3;
	if (!same_outcome(new->outcome, to.outcome))
		return 4;
	if ((new->close_reason == NULL) != (to.close_reason == NULL) ||
		(new->close_reason != NULL && strcmp(new->close_reason, to.close_reason) != 0))
		return 5;
	return -1;
}

/*
 * Raise 55000 unless the progress columns of newtup stay as in oldtup or
 * follow the event recorded at oldtup's next_event_seq (read only when
 * something moved).
 */
static void
check_progress(TupleDesc desc, HeapTuple oldtup, HeapTuple newtup, const char *tenant,
			   const char *id)
{
	ConversationProgress old,
				new;
	CscpEvent	ev;
	int			bad;

	read_progress(oldtup, desc, &old);
	read_progress(newtup, desc, &new);
	if (progress_out_of_step(&old, &new, NULL) < 0)
		return;
	bad = progress_out_of_step(&old, &new,
							   cscp_event_read(tenant, id, old.next_event_seq, &ev) ? &ev : NULL);
	if (bad >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of a conversation changes only with its turns",
						progress_columns[bad]),
				 errhint("Use cscp.conversation_exchange to add a turn and cscp.conversation_close to close it.")));
}

/* The checks and bookkeeping of UPDATE; returns the tuple to store. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CscpRowEdit edit;
	static const ConversationColumn fixed[] = {
		C_TENANT_ID, C_CONVERSATION_ID, C_AGENT_ID, C_SCHEMA, C_TIMEOUT_MS, C_DEADLINE,
		C_CAUSATION_ID, C_OPENED_AT
	};
	bool		isnull,
				isnull_state;
	char	   *id = SPI_getvalue(oldtup, desc, COL(C_CONVERSATION_ID));

	if (cscp_enum_index(&state_cache, TupleDescAttr(desc, COL(C_STATE) - 1)->atttypid,
						heap_getattr(oldtup, COL(C_STATE), desc, &isnull)) == CONV_CLOSED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("conversation \"%s\" is closed", id),
				 errdetail("A closed conversation never changes."),
				 errhint("Start a new conversation with cscp.conversation_start.")));

	for (int i = 0; i < (int) lengthof(fixed); i++)
		if (!cscp_same_value(oldtup, newtup, desc, COL(fixed[i])))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of a conversation cannot be changed", column_names[fixed[i]]),
					 errhint("Start a new conversation with cscp.conversation_start.")));

	check_progress(desc, oldtup, newtup, SPI_getvalue(oldtup, desc, COL(C_TENANT_ID)), id);

	cscp_row_edit_init(&edit, desc);
	cscp_row_edit_set(&edit, COL(C_UPDATED_AT), TimestampTzGetDatum(now), false);
	newtup = cscp_row_edit_apply(&edit, newtup);

	/* closed exactly when it has closed_at (and close_reason, by the rules) */
	(void) heap_getattr(newtup, COL(C_CLOSED_AT), desc, &isnull);
	if ((cscp_enum_index(&state_cache, TupleDescAttr(desc, COL(C_STATE) - 1)->atttypid,
						 heap_getattr(newtup, COL(C_STATE), desc, &isnull_state)) == CONV_CLOSED) == isnull)
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
	.columns = &columns,
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

/* Whether conv has a deadline that has passed. */
bool
cscp_conversation_past_deadline(const CscpConversation *conv, TimestampTz now)
{
	return conv->timeout_ms > 0 && conv->deadline <= now;
}

/*
 * The state machine's verdict on recording turn turn_index (close: how it
 * ends the conversation) in conv, locked, at now.  The API asks before it
 * writes; the turn trigger asks for every row.
 */
CscpTurnVerdict
cscp_conversation_turn_verdict(const CscpConversation *conv, int32 turn_index,
							   CscpCloseKind close, TimestampTz now)
{
	if (conv->closed)
		return CSCP_TURN_CLOSED;
	if (cscp_conversation_past_deadline(conv, now) && close != CSCP_CLOSE_BY_TIMEOUT)
		return CSCP_TURN_TIMED_OUT;
	if (turn_index < conv->next_turn_index)
		return CSCP_TURN_INDEX_TAKEN;
	if (turn_index > conv->next_turn_index)
		return CSCP_TURN_INDEX_GAP;
	if (turn_index >= PG_INT32_MAX - 1 || conv->next_event_seq >= PG_INT32_MAX - 2)
		return CSCP_TURN_TOO_MANY;
	return CSCP_TURN_OK;
}

/*
 * Raise sqlerrcode: conv is closed.  The turn trigger says 55000; the API
 * says 22023, a validation error (RFC 0005 §E).
 */
void
cscp_conversation_closed_error(const CscpConversation *conv, int sqlerrcode)
{
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg("conversation \"%s\" is closed", conv->conversation_id),
			 errdetail("%s turn %d; a closed conversation takes no more turns.",
					   strcmp(conv->close_reason, "timeout") == 0 ?
					   "It timed out, recorded by its final" : "It was closed by its final",
					   conv->next_turn_index - 1),
			 errhint("Start a new conversation with cscp.conversation_start.")));
}

/* Raise the error that verdict (not CSCP_TURN_OK) stands for. */
void
cscp_conversation_refuse_turn(CscpTurnVerdict verdict, const CscpConversation *conv,
							  int32 turn_index)
{
	const char *id = conv->conversation_id;

	switch (verdict)
	{
		case CSCP_TURN_OK:
			return;
		case CSCP_TURN_CLOSED:
			cscp_conversation_closed_error(conv, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
			break;
		case CSCP_TURN_TIMED_OUT:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("conversation \"%s\" has timed out", id),
					 errdetail("Its deadline was %s.", timestamptz_to_str(conv->deadline)),
					 errhint("cscp.conversation_exchange and cscp.sweep record the timeout; start a new conversation.")));
			break;
		case CSCP_TURN_INDEX_TAKEN:
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("turn index %d of conversation \"%s\" is already taken", turn_index, id),
					 errdetail("The next turn index is %d.", conv->next_turn_index),
					 errhint("Omit turnIndex to append at the next index, or resend the original turn with its messageId to replay it.")));
			break;
		case CSCP_TURN_INDEX_GAP:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("turn index %d of conversation \"%s\" would leave a gap", turn_index, id),
					 errdetail("The next turn index is %d.", conv->next_turn_index),
					 errhint("Turn indexes are gapless: omit turnIndex to append at the next index.")));
			break;
		case CSCP_TURN_TOO_MANY:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("conversation \"%s\" has too many turns", id)));
			break;
	}
}

/*
 * Raise 22023: the conversation does not exist (for this tenant); 55000 when
 * it was forgotten.
 */
void
cscp_conversation_missing(const char *tenant_id, const char *conversation_id)
{
	cscp_refuse_forgotten(tenant_id, "conversation", conversation_id);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("conversation \"%s\" does not exist", conversation_id),
			 errhint("Start it with cscp.conversation_start, and check that cscp.tenant_id names its tenant.")));
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
				  "SELECT c.agent_id, c.state::pg_catalog.text, c.schema, c.timeout_ms, c.deadline,"
				  "       c.causation_id, c.next_turn_index, c.next_event_seq, c.close_reason"
				  "  FROM cscp.conversation c"
				  " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2"
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
 * close_reason is given, close it with outcome: an ordinary UPDATE, which
 * conversation_guard holds to the event the caller has just recorded.  With
 * noted (an ordinary turn, no close), the same statement makes the turn's
 * message the last message of its sender's live context, a data-modifying
 * WITH (CSCP_NOTE_MESSAGE_SQL, context_link.c) held by context_guard as its
 * own statement would be: one statement less per turn.
 */
void
cscp_conversation_advance(const CscpConversation *conv, int32 next_turn_index,
						  int32 next_event_seq, const char *close_reason, Jsonb *outcome,
						  const CscpTurnFacts *noted, TimestampTz now)
{
	static SPIPlanPtr move_plan = NULL;
	static SPIPlanPtr close_plan = NULL;
	static SPIPlanPtr note_plan = NULL;
	static const Oid types[7] = {TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, JSONBOID,
	TIMESTAMPTZOID};
	static const Oid note_types[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
	INT4OID, INT4OID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;

	if (noted != NULL && close_reason != NULL)
		elog(ERROR, "a close notes its turn's message before it closes the contexts");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	args[0] = CStringGetTextDatum(conv->tenant_id);
	args[1] = CStringGetTextDatum(conv->conversation_id);
	if (noted != NULL)
	{
		cscp_spi_plan(&note_plan,
					  "WITH noted AS (" CSCP_NOTE_MESSAGE_SQL ")"
					  " UPDATE cscp.conversation c"
					  "    SET next_turn_index = $6, next_event_seq = $7"
					  "  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2",
					  7, note_types);
		plan = note_plan;
		args[2] = CStringGetTextDatum(noted->sender);
		args[3] = CStringGetTextDatum(noted->message_id);
		args[4] = TimestampTzGetDatum(now);
		args[5] = Int32GetDatum(next_turn_index);
		args[6] = Int32GetDatum(next_event_seq);
	}
	else
	{
		cscp_spi_plan(&move_plan,
					  "UPDATE cscp.conversation c"
					  "   SET next_turn_index = $3, next_event_seq = $4"
					  " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2",
					  4, types);
		cscp_spi_plan(&close_plan,
					  "UPDATE cscp.conversation c"
					  "   SET next_turn_index = $3, next_event_seq = $4,"
					  "       state = 'closed', close_reason = $5, outcome = $6, closed_at = $7"
					  " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2",
					  7, types);
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
	}

	cscp_spi_write_one(plan, args, nulls, SPI_OK_UPDATE,
					   psprintf("advance conversation \"%s\"", conv->conversation_id));
	SPI_finish();
}
