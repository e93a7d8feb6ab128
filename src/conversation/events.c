/*-------------------------------------------------------------------------
 *
 * events.c
 *	  The events of a conversation (OpenWOP RFC 0005): conversation.opened,
 *	  conversation.exchanged, conversation.closed and replay.diverged.
 *
 * Events are appended only, by cscp's C code (the turn trigger, and the
 * replay path of cscp.conversation_exchange), with the rights of the owner
 * of cscp.event: application roles read their tenant's events and write
 * none, so an event always records something cscp did.
 *
 * Each event takes the conversation's next_event_seq, read and advanced by
 * the caller under the conversation's row lock, so a conversation's events
 * are numbered 0, 1, 2, ... without gaps and never fork.  Its id is
 * "<conversation_id>:e<seq>" (cscp_event_id, written by the INSERT here: a
 * generated column cost some 60,000 instructions of expression planning in
 * every INSERT, for a rule no other writer can break), and its causation_id
 * is the previous event's id (or, for conversation.opened, the caller's).
 *
 * The log is what the conversation's row follows: its counters and its
 * state move only by the event just recorded at its next_event_seq, which
 * conversation_guard reads back (cscp_event_read) to hold every UPDATE of
 * the row to it.
 *
 *-------------------------------------------------------------------------
 */
#include "conversation/conversation.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

/* The id of event seq of a conversation, as cscp.event stores it. */
char *
cscp_event_id(const char *conversation_id, int32 seq)
{
	return psprintf("%s:e%d", conversation_id, seq);
}

/*
 * Append one event as the owner of cscp.event; turn_index < 0 means none,
 * payload_json is JSON text.  Returns the event's id.
 */
char *
cscp_event_append(const char *tenant_id, const char *conversation_id, int32 seq,
				  const char *type, const char *causation_id, int32 turn_index,
				  const char *payload_json, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[9] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID,
		INT4OID, JSONBOID, TIMESTAMPTZOID, TEXTOID};
	CscpOwnerScope owner;
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char	   *event_id = cscp_event_id(conversation_id, seq);

	if (seq < 0)
		elog(ERROR, "event %d of conversation \"%s\" has a negative sequence number",
			 seq, conversation_id);
	cscp_owner_enter("event", &owner);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.event (tenant_id, conversation_id, seq, type,"
				  " causation_id, turn_index, payload, created_at, event_id)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", 9, argtypes);
	values[0] = CStringGetTextDatum(tenant_id);
	values[1] = CStringGetTextDatum(conversation_id);
	values[2] = Int32GetDatum(seq);
	values[3] = CStringGetTextDatum(type);
	if (causation_id != NULL)
		values[4] = CStringGetTextDatum(causation_id);
	else
		nulls[4] = 'n';
	if (turn_index >= 0)
		values[5] = Int32GetDatum(turn_index);
	else
		nulls[5] = 'n';
	values[6] = DirectFunctionCall1(jsonb_in, CStringGetDatum(payload_json));
	values[7] = TimestampTzGetDatum(now);
	values[8] = CStringGetTextDatum(event_id);

	cscp_spi_write_one(plan, values, nulls, SPI_OK_INSERT,
					   psprintf("append event %d of conversation \"%s\"", seq, conversation_id));
	SPI_finish();
	cscp_owner_leave(&owner);
	return event_id;
}

/*
 * Read event seq of the conversation into *ev, with the caller's rights
 * (application roles read their tenant's events); false when there is none.
 * The payload's fields are read for conversation.closed only.
 */
bool
cscp_event_read(const char *tenant_id, const char *conversation_id, int32 seq, CscpEvent *ev)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, INT4OID};
	MemoryContext callerctx = CurrentMemoryContext;
	Datum		args[3];
	bool		found;

	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	args[2] = Int32GetDatum(seq);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT e.type, e.turn_index, e.created_at,"
				  "       CASE WHEN e.type OPERATOR(pg_catalog.=) 'conversation.closed' THEN e.payload END"
				  "  FROM cscp.event e"
				  " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.conversation_id OPERATOR(pg_catalog.=) $2 AND e.seq OPERATOR(pg_catalog.=) $3",
				  3, types);
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read event %d of conversation \"%s\"", seq, conversation_id);
	found = SPI_processed == 1;
	if (found)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext spictx = MemoryContextSwitchTo(callerctx);
		bool		isnull;
		Datum		d;

		ev->type = SPI_getvalue(tup, desc, 1);
		d = SPI_getbinval(tup, desc, 2, &isnull);
		ev->turn_index = isnull ? -1 : DatumGetInt32(d);
		ev->created_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
		ev->message_id = ev->content_hash = ev->reason = NULL;
		ev->outcome = NULL;
		d = SPI_getbinval(tup, desc, 4, &isnull);
		if (!isnull)
		{
			Jsonb	   *payload = DatumGetJsonbP(d);
			JsonbValue *outcome = cscp_jsonb_get(payload, "outcome");

			ev->message_id = cscp_jsonb_get_cstring(payload, "messageId");
			ev->content_hash = cscp_jsonb_get_cstring(payload, "contentHash");
			ev->reason = cscp_jsonb_get_cstring(payload, "reason");
			if (outcome != NULL)
				ev->outcome = cscp_jsonb_value_to_jsonb(outcome);
		}
		MemoryContextSwitchTo(spictx);
	}
	SPI_finish();
	return found;
}
