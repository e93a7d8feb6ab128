/*-------------------------------------------------------------------------
 *
 * turn_guard.c
 *	  The BEFORE INSERT OR UPDATE trigger of cscp.turn, which holds every
 *	  turn to the rules whether cscp's functions or direct SQL write it, and
 *	  the recording of a turn: its event, the conversation's counters, its
 *	  sender's context and, for a final turn, the close.
 *
 * Invariants kept by the trigger, under the conversation's row lock (taken
 * here with SELECT ... FOR UPDATE, so concurrent appends to one
 * conversation queue and each sees the last one's index):
 *	- the conversation exists, and the state machine allows the turn
 *	  (cscp_conversation_turn_verdict): open, not past its deadline,
 *	  turn_index its next_turn_index (assigned when NULL): 0, 1, 2, ...
 *	  without a gap or a duplicate, found in O(1) from the conversation row;
 *	- message_id is assigned "conversationId:turnIndex:role" when NULL; the
 *	  unique index (tenant_id, conversation_id, message_id) refuses a second
 *	  turn with one message id;
 *	- content obeys the schema the conversation was started with, and the
 *	  size and depth limits; content_hash and content_size are computed
 *	  here, and under the policy turn_content = reference only they are
 *	  stored (content becomes NULL);
 *	- turns never change (UPDATE is refused; only the sweep deletes them,
 *	  once past retention_turns).
 *
 * An ordinary turn is recorded here (cscp_turn_record).  A final turn is
 * recorded by the caller first, with the same function: the close
 * (conversation.closed, the conversation closed, its contexts closed) and
 * then the INSERT of the turn the event names, which this trigger accepts
 * into the closed conversation because the event says it is the final
 * turn.  Only cscp's code writes events, so direct SQL cannot close a
 * conversation, and the trigger learns of a close from the event log, not
 * from its caller.
 *
 * The trigger locks and reads the conversation itself: nothing tells it
 * what its caller read, and no channel may (a direct INSERT meets the same
 * trigger).  cscp.conversation_exchange therefore inserts a new turn
 * without locking the conversation first (conversation_api.c), so that this
 * lock is the only one a new turn takes; only a turn the trigger refuses as
 * taken, closed or timed out goes on to the API's locked path.  The locked
 * read also tells turns.c whether the conversation has a schema
 * (cscp_turn_note_schema), so the next turn needs no read before the lock.
 *
 *-------------------------------------------------------------------------
 */
#include "context/context.h"
#include "conversation/conversation.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* Append "key": string (or null) to a JSON object under construction. */
static void
append_member(StringInfo buf, const char *key, const char *value)
{
	appendStringInfo(buf, "%s\"%s\":", buf->len > 1 ? "," : "", key);
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		cscp_canonical_string(buf, value, strlen(value));
}

/*
 * Record turn of conv, locked, whose verdict was CSCP_TURN_OK: its sender's
 * live context notes it, close closes the conversation's contexts, its event
 * is appended and the conversation advanced (closed, with outcome, unless
 * close is CSCP_CLOSE_NONE).  Returns the event's id.
 */
char *
cscp_turn_record(const CscpConversation *conv, const CscpTurnFacts *turn, CscpCloseKind close,
				 Jsonb *outcome, TimestampTz now)
{
	const char *convid = conv->conversation_id;
	int32		seq = conv->next_event_seq;
	char	   *event_id = cscp_event_id(convid, seq);
	const char *type;
	const char *causation;
	StringInfoData payload;

	if (turn->turn_index == 0)
	{
		type = "conversation.opened";
		causation = conv->causation_id;
	}
	else
	{
		type = close != CSCP_CLOSE_NONE ? "conversation.closed" : "conversation.exchanged";
		causation = seq > 0 ? cscp_event_id(convid, seq - 1) : NULL;
	}
	initStringInfo(&payload);
	appendStringInfoChar(&payload, '{');
	append_member(&payload, "messageId", turn->message_id);
	appendStringInfo(&payload, ",\"turnIndex\":%d", turn->turn_index);
	append_member(&payload, "role", turn->role);
	append_member(&payload, "from", turn->sender);
	append_member(&payload, "contentHash", turn->content_hash);

	if (close != CSCP_CLOSE_NONE)
	{
		/* the final turn is its sender's last message before the close */
		cscp_context_note_message(conv->tenant_id, convid, turn->sender, turn->message_id, now);
		append_member(&payload, "reason", close == CSCP_CLOSE_BY_TIMEOUT ? "timeout" : "closed");
		appendStringInfoString(&payload, ",\"outcome\":");
		if (outcome != NULL)
			cscp_canonical_append(&payload, outcome);
		else
			appendStringInfoString(&payload, "null");
		appendStringInfoString(&payload, ",\"contexts\":[");
		cscp_contexts_close(conv->tenant_id, convid, event_id, now, &payload);
		appendStringInfoChar(&payload, ']');
	}
	appendStringInfoChar(&payload, '}');
	cscp_event_append(conv->tenant_id, convid, seq, type, causation, turn->turn_index,
					  payload.data, now);
	/* an ordinary turn's note rides on the conversation's UPDATE */
	cscp_conversation_advance(conv, turn->turn_index + 1, seq + 1,
							  close == CSCP_CLOSE_NONE ? NULL :
							  close == CSCP_CLOSE_BY_TIMEOUT ? "timeout" : "closed",
							  outcome, close == CSCP_CLOSE_NONE ? turn : NULL, now);
	return event_id;
}

/* The columns of cscp.turn the trigger reads or sets, by name. */
typedef enum TurnColumn
{
	T_TENANT_ID,
	T_CONVERSATION_ID,
	T_TURN_INDEX,
	T_MESSAGE_ID,
	T_ROLE,
	T_SENDER,
	T_CONTENT,
	T_CONTENT_HASH,
	T_CONTENT_SIZE,
	T_TS,
	T_EVENT_ID,
	T_RECORDED_AT,
	T_EXTRA,
	T_NUM_COLUMNS
} TurnColumn;

static const char *const column_names[T_NUM_COLUMNS] = {
	"tenant_id",
	"conversation_id",
	"turn_index",
	"message_id",
	"role",
	"sender",
	"content",
	"content_hash",
	"content_size",
	"ts",
	"event_id",
	"recorded_at",
	"extra",
};

static CscpColumns columns = {.table = "cscp.turn", .n = T_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.turn. */
#define COL(c) (columns.attnum[c])

/* A text column of tuple as a C string; 22023 naming what when it is NULL. */
static char *
required_text(HeapTuple tuple, TupleDesc desc, int attnum, const char *what)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of a turn must not be null", what)));
	return TextDatumGetCString(d);
}

/* A turn row as written, checked column by column before any lock. */
typedef struct TurnRow
{
	char	   *tenant;
	char	   *convid;
	CscpTurnFacts facts;		/* message_id: NULL when not written */
	bool		has_index;		/* turn_index written */
	Jsonb	   *content;
} TurnRow;

/* Read tuple into *row; 22023 for a column a turn cannot have. */
static void
read_turn_row(HeapTuple tuple, TupleDesc desc, TurnRow *row)
{
	bool		isnull;
	Datum		d;
	char	   *role;
	char	   *sender;

	row->tenant = required_text(tuple, desc, COL(T_TENANT_ID), "tenant_id");
	row->convid = required_text(tuple, desc, COL(T_CONVERSATION_ID), "conversation_id");
	role = required_text(tuple, desc, COL(T_ROLE), "role");
	sender = required_text(tuple, desc, COL(T_SENDER), "sender (the turn's \"from\")");
	if (cscp_turn_role(role, strlen(role)) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("turn role \"%s\" is not one of \"user\", \"agent\", \"system\"", role)));
	if (sender[0] == '\0' || strlen(sender) > CSCP_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the sender of a turn (its \"from\") must be a non-empty id of at most %d bytes",
						CSCP_MAX_ID_BYTES)));
	row->facts.role = role;
	row->facts.sender = sender;
	d = heap_getattr(tuple, COL(T_TS), desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ts of a turn must not be null"),
				 errhint("Give the time of the turn as a number, such as milliseconds since 1970.")));
	cscp_turn_check_ts(DatumGetNumeric(d), "ts of a turn");
	d = heap_getattr(tuple, COL(T_CONTENT), desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("content of a turn must not be null"),
				 errhint("A turn without content carries the JSON value null: 'null'::jsonb.")));
	row->content = DatumGetJsonbP(d);
	cscp_check_json_limits(row->content, "turn content");
	d = heap_getattr(tuple, COL(T_EXTRA), desc, &isnull);
	if (!isnull)
		(void) cscp_turn_optional_fields(DatumGetJsonbP(d), "column \"extra\" of a turn", true);

	d = heap_getattr(tuple, COL(T_TURN_INDEX), desc, &isnull);
	row->has_index = !isnull;
	row->facts.turn_index = isnull ? 0 : DatumGetInt32(d);
	d = heap_getattr(tuple, COL(T_MESSAGE_ID), desc, &isnull);
	row->facts.message_id = isnull ? NULL : TextDatumGetCString(d);
}

/* Assign the message id of row when it has none; else 22023 unless it is one. */
static void
settle_message_id(TurnRow *row)
{
	const char *message_id = row->facts.message_id;

	if (message_id == NULL)
		row->facts.message_id = cscp_turn_message_id(row->convid, row->facts.turn_index,
													 row->facts.role);
	else
		cscp_turn_check_message_id(message_id, strlen(message_id), "the message id of a turn");
}

/* Whether conv already holds a turn at turn_index. */
static bool
turn_stored(const CscpConversation *conv, int32 turn_index)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		args[3];

	args[0] = CStringGetTextDatum(conv->tenant_id);
	args[1] = CStringGetTextDatum(conv->conversation_id);
	args[2] = Int32GetDatum(turn_index);
	return cscp_spi_exists(&plan,
						   "SELECT 1 FROM cscp.turn t"
						   " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.conversation_id OPERATOR(pg_catalog.=) $2 AND t.turn_index OPERATOR(pg_catalog.=) $3",
						   3, types, args, false, "look up a turn");
}

/*
 * Whether row is the final turn of conv, closed, that the close recorded
 * just before it: the event at next_event_seq - 1 is conversation.closed
 * and names this turn (index, message id, content), which is not stored
 * yet.  *ev is that event.
 */
static bool
is_recorded_final_turn(const CscpConversation *conv, const TurnRow *row, CscpEvent *ev)
{
	return conv->closed && row->facts.turn_index == conv->next_turn_index - 1 &&
		row->facts.message_id != NULL &&
		cscp_event_read(conv->tenant_id, conv->conversation_id, conv->next_event_seq - 1, ev) &&
		strcmp(ev->type, "conversation.closed") == 0 &&
		ev->turn_index == row->facts.turn_index &&
		ev->message_id != NULL && strcmp(ev->message_id, row->facts.message_id) == 0 &&
		ev->content_hash != NULL && strcmp(ev->content_hash, row->facts.content_hash) == 0 &&
		!turn_stored(conv, row->facts.turn_index);
}

/* The checks and bookkeeping of INSERT; returns the tuple to store. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CscpRowEdit edit;
	TurnRow		row;
	CscpConversation conv;
	CscpEvent	final;
	CscpTurnVerdict verdict;
	char	   *turn_content;
	char	   *event_id;
	int32		size;

	read_turn_row(tuple, desc, &row);

	/* The content is validated before the lock (turns.c), then the row locked. */
	cscp_turn_validate_early(row.tenant, row.convid, row.content, now);
	if (!cscp_conversation_lock(row.tenant, row.convid, &conv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("conversation \"%s\" does not exist", row.convid),
				 errhint("Start it with cscp.conversation_start, and check that cscp.tenant_id names its tenant.")));
	cscp_turn_note_schema(&conv);

	if (!row.has_index)
		row.facts.turn_index = conv.next_turn_index;
	row.facts.content_hash = cscp_turn_content_hash(row.content, &size);
	verdict = cscp_conversation_turn_verdict(&conv, row.facts.turn_index, CSCP_CLOSE_NONE, now);
	if (verdict == CSCP_TURN_CLOSED && is_recorded_final_turn(&conv, &row, &final))
		verdict = CSCP_TURN_OK;
	else
		final.type = NULL;
	cscp_conversation_refuse_turn(verdict, &conv, row.facts.turn_index);

	/* the timeout's own system turn states the reason; no schema applies to it */
	if (conv.schema != NULL && !(final.type != NULL && strcmp(final.reason, "timeout") == 0))
		cscp_turn_check_schema(row.convid, conv.schema, row.content);
	settle_message_id(&row);

	if (final.type != NULL)
		event_id = cscp_event_id(row.convid, conv.next_event_seq - 1);
	else
		event_id = cscp_turn_record(&conv, &row.facts, CSCP_CLOSE_NONE, NULL, now);

	cscp_row_edit_init(&edit, desc);
	cscp_row_edit_set(&edit, COL(T_TURN_INDEX), Int32GetDatum(row.facts.turn_index), false);
	cscp_row_edit_set(&edit, COL(T_MESSAGE_ID), CStringGetTextDatum(row.facts.message_id), false);
	turn_content = cscp_jsonb_get_cstring(cscp_policy_get(row.tenant), "turn_content");
	if (turn_content != NULL && strcmp(turn_content, "reference") == 0)
		cscp_row_edit_set(&edit, COL(T_CONTENT), (Datum) 0, true);
	cscp_row_edit_set(&edit, COL(T_CONTENT_HASH), CStringGetTextDatum(row.facts.content_hash), false);
	cscp_row_edit_set(&edit, COL(T_CONTENT_SIZE), Int32GetDatum(size), false);
	cscp_row_edit_set(&edit, COL(T_EVENT_ID), CStringGetTextDatum(event_id), false);
	cscp_row_edit_set(&edit, COL(T_RECORDED_AT), TimestampTzGetDatum(now), false);
	return cscp_row_edit_apply(&edit, tuple);
}

/* UPDATE of a turn: refused, turns never change. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("turns of a conversation never change"),
			 errdetail("The transcript is append-only: cscp.conversation_turns returns the same turns on every call."),
			 errhint("Record a new turn with cscp.conversation_exchange.")));
	return NULL;
}

static const CscpRowGuard guard = {
	.name = "cscp.turn_guard()",
	.columns = &columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_turn_guard);

/* Trigger cscp.turn_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_turn_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &guard);
}
