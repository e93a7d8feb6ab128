/*-------------------------------------------------------------------------
 *
 * context_link.c
 *	  What a conversation's turns do to its contexts (DESIGN.md section 6):
 *	  a recorded turn becomes the last message of its sender's live context,
 *	  and closing the conversation closes its live contexts.
 *
 * Both run inside the turn trigger, under the conversation's row lock (an
 * ordinary turn's note as a data-modifying WITH of the conversation's UPDATE,
 * conversation_fsm.c, a final turn's as a statement of its own), and
 * write cscp.context with the caller's rights, so context_guard holds them
 * to the context lifecycle and row-level security to the caller's tenant:
 *	- a context past expires_at is never touched by a turn (it is expired
 *	  whatever its stored status), and is recorded "expired" (reason ttl),
 *	  not "closed", when its conversation closes;
 *	- each context closed or expired by a close leaves a standalone evidence
 *	  row (event_type context.closed or context.expired, reason_code
 *	  conversation_closed or ttl) naming the conversation's closing event.
 * Locks: the context rows, after the conversation row (the order every
 * conversation path follows).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "context/context.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

/*
 * Set last_message_id of the live, unexpired context of (conversation, actor),
 * if any: for a final turn, before the close closes the contexts.  An
 * ordinary turn's note rides on the conversation's UPDATE instead
 * (cscp_conversation_advance), the same SQL (CSCP_NOTE_MESSAGE_SQL).
 */
void
cscp_context_note_message(const char *tenant_id, const char *conversation_id,
						  const char *actor_id, const char *message_id, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[5];

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan, CSCP_NOTE_MESSAGE_SQL, 5, argtypes);
	values[0] = CStringGetTextDatum(tenant_id);
	values[1] = CStringGetTextDatum(conversation_id);
	values[2] = CStringGetTextDatum(actor_id);
	values[3] = CStringGetTextDatum(message_id);
	values[4] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the last message of a context");
	SPI_finish();
}

/*
 * Close the live contexts of a conversation (those past expires_at are
 * recorded expired instead), with one evidence row each.  event_id is the
 * conversation's closing event; closed receives a JSON array of
 * {"contextId", "status"} for the event's payload.
 */
void
cscp_contexts_close(const char *tenant_id, const char *conversation_id,
					const char *event_id, TimestampTz now, StringInfo closed)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};
	MemoryContext callerctx = CurrentMemoryContext;
	Datum		values[3];
	CscpEvidence *rows;
	uint64		n;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "WITH live AS ("
				  "  SELECT x.context_id, x.status"
				  "    FROM cscp.context_live l JOIN cscp.context x"
				  "         ON x.tenant_id OPERATOR(pg_catalog.=) l.tenant_id AND x.context_id OPERATOR(pg_catalog.=) l.context_id"
				  "   WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2"
				  "     AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')"
				  "   ORDER BY x.context_id FOR UPDATE OF x)"
				  " UPDATE cscp.context c"
				  "    SET status = CASE WHEN c.expires_at OPERATOR(pg_catalog.<=) $3 THEN 'expired'"
				  "                      ELSE 'closed' END::cscp.context_status,"
				  "        reason = CASE WHEN c.expires_at OPERATOR(pg_catalog.<=) $3 THEN 'ttl'"
				  "                      ELSE 'conversation_closed' END"
				  "   FROM live"
				  "  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.context_id OPERATOR(pg_catalog.=) live.context_id"
				  " RETURNING c.context_id::pg_catalog.text, live.status::pg_catalog.text, c.status::pg_catalog.text,"
				  "           c.expires_at, c.last_message_id",
				  3, argtypes);
	values[0] = CStringGetTextDatum(tenant_id);
	values[1] = CStringGetTextDatum(conversation_id);
	values[2] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not close the contexts of conversation \"%s\"", conversation_id);

	/* Copy the rows out before SPI_finish; evidence is appended afterwards. */
	n = SPI_processed;
	rows = MemoryContextAllocZero(callerctx, sizeof(CscpEvidence) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *context_id = SPI_getvalue(tup, desc, 1);
		char	   *from = SPI_getvalue(tup, desc, 2);
		char	   *to = SPI_getvalue(tup, desc, 3);
		bool		isnull;
		TimestampTz expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		char	   *last = SPI_getvalue(tup, desc, 5);
		MemoryContext old = MemoryContextSwitchTo(callerctx);
		StringInfoData ref;
		CscpEvidence *e = &rows[i];

		initStringInfo(&ref);
		appendStringInfoString(&ref, "{\"context_id\":");
		cscp_canonical_string(&ref, context_id, strlen(context_id));
		appendStringInfo(&ref, ",\"expires_at\":\"%s\"}", cscp_utc_iso(expires_at));

		e->tenant_id = tenant_id;
		e->conversation_id = conversation_id;
		e->stage = "context";
		e->from_state = pstrdup(from);
		e->to_state = pstrdup(to);
		e->event_type = strcmp(to, "expired") == 0 ? "context.expired" : "context.closed";
		e->reason_code = strcmp(to, "expired") == 0 ? "ttl" : "conversation_closed";
		e->decision = NULL;
		if (last != NULL)
		{
			Datum		d = CStringGetTextDatum(last);

			e->message_ids = construct_array(&d, 1, TEXTOID, -1, false, TYPALIGN_INT);
		}
		e->context_ref = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(ref.data)));
		resetStringInfo(&ref);
		appendStringInfoString(&ref, "{\"event_id\":");
		cscp_canonical_string(&ref, event_id, strlen(event_id));
		appendStringInfoChar(&ref, '}');
		e->detail = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(ref.data)));
		e->created_at = now;

		appendStringInfo(closed, "%s{\"contextId\":", i > 0 ? "," : "");
		cscp_canonical_string(closed, context_id, strlen(context_id));
		appendStringInfoString(closed, ",\"status\":");
		cscp_canonical_string(closed, to, strlen(to));
		appendStringInfoChar(closed, '}');
		MemoryContextSwitchTo(old);
	}
	SPI_finish();

	for (uint64 i = 0; i < n; i++)
		cscp_evidence_append(&rows[i]);
}
