/*-------------------------------------------------------------------------
 *
 * conversation_api.c
 *	  The SQL-callable API of multi-turn conversations (OpenWOP RFC 0005):
 *	  conversation_start, conversation_exchange, conversation_close, the
 *	  timeout the sweep records, and capabilities.
 *
 * The API does what a row trigger cannot: replay and divergence by
 * messageId, and recording the timeout before answering a late turn.
 *
 * An exchange first tries the turn's INSERT alone, in a subtransaction: the
 * turn trigger locks the conversation row, judges the turn and records it,
 * so a new turn (almost every call) takes one conversation lock and no
 * look-up of its message id.  When the turn is not new or the conversation
 * does not take it, the trigger or the unique index on message ids refuses
 * it (23505: the message id or the turn index is taken; 55000: closed,
 * timed out, forgotten), the attempt is rolled back whole (its event, its
 * counters, its context's last message) and the call takes the locked
 * path, which decides nothing the trigger decides: it locks the
 * conversation row (SELECT ... FOR UPDATE) and looks the message id up, so
 * a re-delivery, also one that waited behind its first delivery, finds it
 * recorded and replays it, also after close (a new turn for a closed
 * conversation is 22023, RFC 0005 §E), and a late turn records the
 * timeout.  conversation_close and the sweep's timeout take the locked path
 * directly.  Business outcomes (replayed, diverged, aborted, timed_out) are
 * returned, never raised, so what they record (a replay.diverged event
 * under either divergence policy, the timeout's close) is kept.
 *
 * Every row is written by an ordinary statement, held by the triggers
 * (conversation_fsm.c, turn_guard.c) as direct SQL is; where the API
 * decides before writing (a close), it asks the same state machine.
 *
 *-------------------------------------------------------------------------
 */
#include "conversation/conversation.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/* What a call answers: the event, turn index and message id, and its outcome. */
typedef CscpTurnResult TurnResult;

/*
 * INSERT the turn t, an ordinary statement: the turn trigger checks and
 * records it (turn_guard.c).  Fills res from the row stored.
 */
static void
insert_turn(const char *tenant_id, const char *conversation_id, CscpTurn *t, TurnResult *res)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[9] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID,
		JSONBOID, NUMERICOID, JSONBOID};
	MemoryContext callerctx = CurrentMemoryContext;
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index,"
				  " message_id, role, sender, content, ts, extra)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
				  " RETURNING event_id, turn_index, message_id", 9, argtypes);
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

	cscp_spi_write_one(plan, args, nulls, SPI_OK_INSERT_RETURNING,
					   psprintf("record a turn of conversation \"%s\"", conversation_id));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	res->event_id = MemoryContextStrdup(callerctx, SPI_getvalue(tup, desc, 1));
	res->turn_index = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	res->message_id = MemoryContextStrdup(callerctx, SPI_getvalue(tup, desc, 3));
	SPI_finish();
}

/*
 * Close conv, locked and open, with its final turn t (close: by the turn or
 * by the timeout, with outcome): the state machine's verdict, the close
 * recorded first (cscp_turn_record: the contexts, conversation.closed, the
 * conversation closed), then the turn inserted under the index and message
 * id that event names, which the turn trigger accepts as the final turn.
 * Fills res.
 */
static void
close_with_turn(const CscpConversation *conv, CscpTurn *t, CscpCloseKind close, Jsonb *outcome,
				TimestampTz now, TurnResult *res)
{
	CscpTurnFacts facts;
	int32		size;

	facts.turn_index = t->has_index ? t->turn_index : conv->next_turn_index;
	cscp_conversation_refuse_turn(cscp_conversation_turn_verdict(conv, facts.turn_index, close, now),
								  conv, facts.turn_index);
	facts.message_id = t->message_id ? t->message_id :
		cscp_turn_message_id(conv->conversation_id, facts.turn_index, t->role);
	facts.role = t->role;
	facts.sender = t->sender;
	facts.content_hash = cscp_turn_content_hash(t->content, &size);
	(void) cscp_turn_record(conv, &facts, close, outcome, now);

	t->has_index = true;
	t->turn_index = facts.turn_index;
	t->message_id = pstrdup(facts.message_id);
	insert_turn(conv->tenant_id, conv->conversation_id, t, res);
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
 *
 * The look-up, which every exchange makes and which almost always finds
 * nothing, reads three plain columns: the ConversationTurn a replay answers
 * with (cscp.turn_json, an expression of some twenty nodes that the
 * executor would build for every look-up, found or not) is read by a second
 * statement, only when there is a turn to replay.
 */
static bool
find_turn(const char *tenant_id, const char *conversation_id, const char *message_id,
		  RecordedTurn *found)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr json_plan = NULL;
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
				  "SELECT t.turn_index, t.content_hash, t.event_id FROM cscp.turn t"
				  " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.conversation_id OPERATOR(pg_catalog.=) $2 AND t.message_id OPERATOR(pg_catalog.=) $3",
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
		MemoryContextSwitchTo(spictx);

		/*
		 * Turns never change: the row found is the row read again (unless the
		 * sweep's retention purged it in between: no turn to show then).
		 */
		cscp_spi_plan(&json_plan,
					  "SELECT cscp.turn_json(t) FROM cscp.turn t"
					  " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.conversation_id OPERATOR(pg_catalog.=) $2 AND t.message_id OPERATOR(pg_catalog.=) $3",
					  3, types);
		if (SPI_execute_plan(json_plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read a turn");
		found->turn = NULL;
		if (SPI_processed == 1)
		{
			spictx = MemoryContextSwitchTo(callerctx);
			found->turn = DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 1, &isnull));
			MemoryContextSwitchTo(spictx);
		}
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
		return cscp_turn_message_id(conversation_id, t->turn_index, t->role);
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
	close_with_turn(conv, &t, CSCP_CLOSE_BY_TIMEOUT, NULL, now, res);
	res->outcome = "timed_out";
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

/*
 * INSERT the conversation row of cscp.conversation_start (arguments 0 to 6
 * of fcinfo), an ordinary statement held by conversation_guard; false when
 * a conversation of that id exists already.
 */
static bool
insert_conversation(FunctionCallInfo fcinfo, const char *conv_s)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT8OID, TEXTOID};
	static const int argnums[6] = {0, 1, 2, 4, 5, 6};
	Datum		args[6];
	char		nulls[6];
	bool		inserted;

	for (int i = 0; i < 6; i++)
	{
		args[i] = PG_ARGISNULL(argnums[i]) ? (Datum) 0 : PG_GETARG_DATUM(argnums[i]);
		nulls[i] = PG_ARGISNULL(argnums[i]) ? 'n' : ' ';
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id,"
				  " schema, timeout_ms, causation_id)"
				  " VALUES ($1, $2, $3, $4, $5, $6)"
				  " ON CONFLICT (tenant_id, conversation_id) DO NOTHING",
				  6, types);
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not start conversation \"%s\"", conv_s);
	inserted = SPI_processed == 1;
	SPI_finish();
	return inserted;
}

/*
 * A start of a conversation that exists: the same agent sending the same
 * first turn t replays it (fills res); anything else is 23505.
 */
static void
replay_start(const char *tenant_s, const char *conv_s, const char *agent, CscpTurn *t,
			 TurnResult *res)
{
	CscpConversation conv;
	RecordedTurn first;
	char	   *msg = t->message_id ? t->message_id : cscp_turn_message_id(conv_s, 0, t->role);
	int32		size;

	if (!cscp_conversation_lock(tenant_s, conv_s, &conv))
		cscp_conversation_missing(tenant_s, conv_s);
	if (strcmp(conv.agent_id, agent) != 0 ||
		!find_turn(tenant_s, conv_s, msg, &first) || first.turn_index != 0 ||
		strcmp(first.content_hash, cscp_turn_content_hash(t->content, &size)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("conversation \"%s\" already exists", conv_s),
				 errdetail("It was started by agent \"%s\"; only the same agent sending the same first turn replays that start.",
						   conv.agent_id),
				 errhint("Use a new conversation id, or resend the original start to replay it.")));
	res->event_id = first.event_id;
	res->turn_index = 0;
	res->message_id = msg;
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
	text	   *tenant = text_arg(fcinfo, 0);
	text	   *convid = text_arg(fcinfo, 1);
	text	   *agent = text_arg(fcinfo, 2);
	text	   *causation = text_arg(fcinfo, 6);
	char	   *tenant_s,
			   *conv_s;
	CscpTurn	t;
	TurnResult	res = {0};

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

	if (insert_conversation(fcinfo, conv_s))
		insert_turn(tenant_s, conv_s, &t, &res);
	else
		replay_start(tenant_s, conv_s, text_to_cstring(agent), &t, &res);
	return_row(fcinfo, &res, false);
	return (Datum) 0;
}

/*
 * What exchange and close do first: check the arguments, parse the turn
 * and read the clock.
 */
static void
read_turn_args(text *tenant, text *convid, Jsonb *turn, char **tenant_s, char **conv_s,
			   CscpTurn *t, TimestampTz *now)
{
	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", convid);
	cscp_turn_parse(turn, "turn", t);
	*tenant_s = text_to_cstring(tenant);
	*conv_s = text_to_cstring(convid);
	*now = cscp_now();
}

/*
 * The locked path of exchange and close: validate the turn's content
 * (before the lock: cscp_turn_validate_early), lock the conversation and
 * refuse a closed one (22023) unless the turn replays one of its turns.
 * Past its deadline the conversation is closed by timeout and the timed_out
 * row returned: the caller then returns at once (true).
 */
static bool
lock_for_turn(const char *tenant_s, const char *conv_s, CscpTurn *t, CscpConversation *conv,
			  TurnResult *res, TimestampTz now)
{
	RecordedTurn found;
	char	   *msg;

	cscp_turn_validate_early(tenant_s, conv_s, t->content, now);
	if (!cscp_conversation_lock(tenant_s, conv_s, conv))
		cscp_conversation_missing(tenant_s, conv_s);
	cscp_turn_note_schema(conv);
	if (conv->closed)
	{
		/*
		 * A turn of the closed conversation sent again, same content: a
		 * replay, as while it was open (the final turn included).
		 */
		int32		size;

		msg = candidate_message_id(conv_s, t);
		if (msg != NULL && find_turn(tenant_s, conv_s, msg, &found) &&
			strcmp(found.content_hash, cscp_turn_content_hash(t->content, &size)) == 0)
		{
			res->event_id = found.event_id;
			res->turn_index = found.turn_index;
			res->message_id = msg;
			res->turn = found.turn;
			res->outcome = "replayed";
			return true;
		}
		cscp_conversation_closed_error(conv, ERRCODE_INVALID_PARAMETER_VALUE);
	}
	if (!cscp_conversation_past_deadline(conv, now))
		return false;
	record_timeout(conv, now, res);
	return true;
}

/*
 * INSERT the turn t as a new turn, in a subtransaction (insert_turn; the
 * turn trigger locks, judges and records it) and fill res: true.  False,
 * with nothing of the attempt kept, when the turn is refused as one the
 * locked path answers: 23505 (its message id or turn index is taken: a
 * replay, a divergence, or a taken index) or 55000 (the conversation is
 * closed, timed out or forgotten).  Any other error is raised.
 */
static bool
try_new_turn(const char *tenant_s, const char *conv_s, CscpTurn *t, TurnResult *res)
{
	MemoryContext oldctx = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool inserted = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldctx);
	PG_TRY();
	{
		insert_turn(tenant_s, conv_s, t, res);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldctx);
		CurrentResourceOwner = oldowner;
		inserted = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldctx);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldctx);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION &&
			edata->sqlerrcode != ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return inserted;
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

	read_turn_args(tenant, convid, turn, &tenant_s, &conv_s, &t, &now);
	if (try_new_turn(tenant_s, conv_s, &t, res))
	{
		res->outcome = "exchanged";
		return;
	}
	if (lock_for_turn(tenant_s, conv_s, &t, &conv, res, now))
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
			cscp_conversation_advance(&conv, conv.next_turn_index, seq + 1, NULL, NULL, NULL, now);
			res->outcome = abort_replay ? "aborted" : "diverged";
			return;
		}
	}

	insert_turn(tenant_s, conv_s, &t, res);
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
	RecordedTurn found;
	TurnResult	res = {0};
	TimestampTz now;

	InitMaterializedSRF(fcinfo, 0);
	read_turn_args(text_arg(fcinfo, 0), text_arg(fcinfo, 1),
				   PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), &tenant_s, &conv_s, &t, &now);
	if (lock_for_turn(tenant_s, conv_s, &t, &conv, &res, now))
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

	close_with_turn(&conv, &t, CSCP_CLOSE_BY_TURN, PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3),
					now, &res);
	res.outcome = "closed";
	return_row(fcinfo, &res, true);
	return (Datum) 0;
}

/*
 * The sweep's timeout of one conversation (sweep.c): closed with a system
 * turn and a null outcome when it is open and past its deadline, locked
 * first; whether it was.
 */
bool
cscp_conversation_time_out(text *tenant, text *conversation)
{
	char	   *tenant_s = text_to_cstring(tenant);
	char	   *conv_s = text_to_cstring(conversation);
	CscpConversation conv;
	TurnResult	res = {0};
	TimestampTz now = cscp_now();

	if (!cscp_conversation_lock(tenant_s, conv_s, &conv) || conv.closed ||
		!cscp_conversation_past_deadline(&conv, now))
		return false;
	record_timeout(&conv, now, &res);
	return true;
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
