/*-------------------------------------------------------------------------
 *
 * context.h
 *	  Contexts: opening and reading one, the claim of its triple, its slots, and
 *	  what a conversation's turns and close do to its contexts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_CONTEXT_H
#define CSCP_CONTEXT_H

#include "cscp.h"

/*
 * The use of a context by the command a caller forms right after opening it
 * (cscp.message_turn): written by the open's UPDATE when it reuses a live
 * context, so that forming the command need not write the context again.
 */
typedef struct CscpContextUse
{
	Datum		command_id;		/* uuid the command is to be inserted with */
	text	   *key;			/* its idempotency key; the caller holds its lock */
	text	   *message_id;		/* the message it is formed from */
} CscpContextUse;

/* context_api.c: opening a context, and the context as readers see it */
extern HeapTuple cscp_context_open_row(text *tenant, text *conversation, text *actor,
									   Jsonb *slots, Interval *ttl, text *correlation,
									   const CscpContextUse *use, TupleDesc *desc);
extern void cscp_context_check_open_args(text *tenant, text *conversation, text *actor,
										 Jsonb *slots);
extern Datum cscp_context_view_datum(HeapTuple row, TupleDesc desc, TupleDesc rowdesc);
extern void cscp_context_record_expiry(HeapTuple ctx, TupleDesc desc);
extern TimestampTz cscp_context_touch(const char *tenant_id, TimestampTz expires_at, Interval *ttl);

/*
 * The columns of a context row that the command and answer functions read
 * (by name): the select list of every query that hands a context row to
 * them.
 */
#define CSCP_CONTEXT_COLUMNS \
	"x.tenant_id, x.context_id, x.conversation_id, x.actor_id, x.status, x.expires_at," \
	" x.slots, x.last_message_id, x.last_command_id, x.reason"

/* context_api.c: the context a command or an answer works against */
extern void cscp_key_lock(text *tenant, const char *key, int keylen);
extern bool cscp_context_for(text *tenant, text *conversation, text *actor,
							 HeapTuple *ctx, TupleDesc *desc);
extern void cscp_context_release(HeapTuple ctx, TupleDesc desc, Datum command_id,
								 text *message_id, const char *why);
extern void cscp_context_ask(Datum tenant, Datum context_id, Datum command_id, text *key,
							 text *fingerprint, TimestampTz window, text *last_message,
							 bool owner);

/*
 * SQL: the id of the live context of ($1 tenant, $2 conversation, $3 actor),
 * through cscp.context_live (NULL when none), for "x.context_id = " in the
 * lookups of the live context.
 */
#define CSCP_LIVE_CONTEXT_ID \
	" (SELECT l.context_id FROM cscp.context_live l" \
	"   WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2 AND l.actor_id OPERATOR(pg_catalog.=) $3)"

/*
 * SQL: a turn's message ($4) becomes the last message of the live, unexpired
 * context of ($1 tenant, $2 conversation, $3 actor) at $5, when it is not
 * already (context_link.c): a statement of its own, or a data-modifying WITH
 * of the conversation's UPDATE that records the turn (conversation_fsm.c).
 * The live context is found by joining cscp.context_live rather than by
 * CSCP_LIVE_CONTEXT_ID's sub-select, whose initplan cost some 5,000
 * instructions more per turn.
 */
#define CSCP_NOTE_MESSAGE_SQL \
	"UPDATE cscp.context x SET last_message_id = $4 FROM cscp.context_live l" \
	" WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2 AND l.actor_id OPERATOR(pg_catalog.=) $3" \
	" AND x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) l.context_id" \
	" AND cscp.context_usable(x.status, x.expires_at, $5)" \
	" AND coalesce(x.last_message_id OPERATOR(pg_catalog.<>) $4, (x.last_message_id IS NULL) OPERATOR(pg_catalog.<>) ($4 IS NULL))"

/* context_fsm.c: the sweep's expiry of contexts, called by sweep.c */
extern PGDLLEXPORT Datum cscp_expire_contexts(PG_FUNCTION_ARGS);

/* slots.c */
extern Jsonb *cscp_slots_validate(Jsonb *newslots, Jsonb *oldslots,
								  const char *tenant_id);
extern Jsonb *cscp_slots_visible(Jsonb *slots, Jsonb *policy);
extern void cscp_context_field_check(const char *tenant_id, const char *field,
									 const char *value, int len);
extern void cscp_pending_slots_bound(Jsonb *newslots, Jsonb *oldslots, Datum tenant,
									 Datum context_id, Datum conversation, Datum actor);

/* context_link.c: what a turn and a close do to the conversation's contexts */
extern void cscp_context_note_message(const char *tenant_id, const char *conversation_id,
									  const char *actor_id, const char *message_id,
									  TimestampTz now);
extern void cscp_contexts_close(const char *tenant_id, const char *conversation_id,
								const char *event_id, TimestampTz now, StringInfo closed);

#endif							/* CSCP_CONTEXT_H */
