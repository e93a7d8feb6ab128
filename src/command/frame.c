/*-------------------------------------------------------------------------
 *
 * frame.c
 *	  Frames: the snapshot-on-execute record of the context state a command
 *	  was formed from.  The canonical state of a context (cscp_frame_state),
 *	  the frame a new command's trigger records (cscp_frame_record, called by
 *	  frame_form in command_fsm.c), and the guard of cscp.frame.
 *
 * Invariants kept here, whoever writes (an application role by direct SQL,
 * the owner), but cscp's own code as the owner:
 *	- a frame is append-only: an UPDATE is refused (DELETE is for the sweep
 *	  and erasure, which only the owner may run);
 *	- a new frame is its context's state as command_submit records it: the
 *	  context it names is of its tenant and conversation, usable (live and
 *	  not past expires_at), and its state equals what command_submit
 *	  computes from that context and the frame's message ids
 *	  (cscp._frame_state), or, given as the message ids alone, is
 *	  completed to it here; context_hash is generated from the state.
 * So a frame can be written by anyone who may form a command in the
 * conversation, but never one that says something else than the context
 * said at that moment: a forged frame is refused.
 *
 * A command formed by the API (or a direct INSERT that names its context
 * and message ids alone) gets its frame from the command's trigger, which
 * reads the context with the writer's rights (its row-level security
 * applies), computes the state and records it as the owner, as it records
 * the command's evidence: the guard does not check that write again, which
 * would read the context a second time (cscp's code runs as the owner with
 * a local change of user id; a superuser's own SQL is checked).
 *
 * The context is read by a saved statement with the caller's rights (its
 * row-level security applies).
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
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

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

/* A whole jsonb as a value that pushJsonbValue copies in. */
static JsonbValue *
binary_value(Jsonb *j, JsonbValue *v)
{
	v->type = jbvBinary;
	v->val.binary.data = &j->root;
	v->val.binary.len = VARSIZE(j) - VARHDRSZ;
	return v;
}

/* Whether a jsonb key is one of the pending-question slots. */
static bool
is_pending_key(JsonbValue *key)
{
	return (key->val.string.len == (int) strlen("pending_confirmation") &&
			memcmp(key->val.string.val, "pending_confirmation", key->val.string.len) == 0) ||
		(key->val.string.len == (int) strlen("pending_approval") &&
		 memcmp(key->val.string.val, "pending_approval", key->val.string.len) == 0);
}

/* Push the slots of c, with command_id left out of the pending ones. */
static void
push_slots(JsonbParseState **st, const FrameContext *c)
{
	JsonbValue	v;
	JsonbIterator *it;
	JsonbIteratorToken tok;
	bool		pending = false;

	if (c->slots == NULL)
	{
		v.type = jbvNull;
		pushJsonbValue(st, WJB_VALUE, &v);
		return;
	}
	if (!JB_ROOT_IS_OBJECT(c->slots))
	{
		pushJsonbValue(st, WJB_VALUE, binary_value(c->slots, &v));
		return;
	}
	it = JsonbIteratorInit(&c->slots->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			pending = is_pending_key(&v);
			pushJsonbValue(st, WJB_KEY, &v);
		}
		else if (tok == WJB_VALUE && pending && v.type == jbvBinary &&
				 JsonContainerIsObject(v.val.binary.data))
		{
			Jsonb	   *obj = JsonbValueToJsonb(&v);
			JsonbValue	w;

			obj = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(obj),
													 CStringGetTextDatum("command_id")));
			pushJsonbValue(st, WJB_VALUE, binary_value(obj, &w));
		}
		else
			pushJsonbValue(st, tok, tok == WJB_BEGIN_OBJECT || tok == WJB_END_OBJECT ?
						   NULL : &v);
	}
}

/* Push message_ids (text[], or NULL) as a JSON array (or null). */
static void
push_message_ids(JsonbParseState **st, ArrayType *message_ids)
{
	JsonbValue	v;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (message_ids == NULL)
	{
		v.type = jbvNull;
		pushJsonbValue(st, WJB_VALUE, &v);
		return;
	}
	deconstruct_array(message_ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	pushJsonbValue(st, WJB_BEGIN_ARRAY, NULL);
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
		pushJsonbValue(st, WJB_ELEM, &v);
	}
	pushJsonbValue(st, WJB_END_ARRAY, NULL);
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
	JsonbValue	k;

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
	push_slots(&st, c);
	k.val.string.val = "message_ids";
	k.val.string.len = strlen("message_ids");
	pushJsonbValue(&st, WJB_KEY, &k);
	push_message_ids(&st, message_ids);
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/*
 * The canonical state (frame_state) of the context row ctx, as a query
 * returns it with columns tenant_id, conversation_id, actor_id, status,
 * expires_at, last_message_id and slots, for a command formed from
 * message_ids.
 */
Jsonb *
cscp_frame_state(HeapTuple ctx, TupleDesc desc, ArrayType *message_ids)
{
	FrameContext c;
	bool		isnull;
	Datum		d;

	c.tenant_id = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "tenant_id"));
	c.conversation_id = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "conversation_id"));
	c.actor_id = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "actor_id"));
	c.status = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "status"));
	d = heap_getattr(ctx, cscp_column(desc, "cscp.context", "expires_at"), desc, &isnull);
	c.expires_at = isnull ? NULL : cscp_utc_iso(DatumGetTimestampTz(d));
	c.last_message_id = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "last_message_id"));
	d = heap_getattr(ctx, cscp_column(desc, "cscp.context", "slots"), desc, &isnull);
	c.slots = isnull ? NULL : DatumGetJsonbP(d);
	return frame_state(&c, message_ids);
}

PG_FUNCTION_INFO_V1(cscp_frame_state_sql);

/*
 * cscp._frame_state(c cscp.context, message_ids text[]) RETURNS jsonb: the
 * state a frame of context c records, for a writer of frames by direct SQL
 * (the guard below takes no other).
 */
Datum
cscp_frame_state_sql(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec;
	HeapTupleData tuple;
	TupleDesc	desc;
	Jsonb	   *state;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	rec = PG_GETARG_HEAPTUPLEHEADER(0);
	desc = cscp_record_tuple(rec, &tuple);
	state = cscp_frame_state(&tuple, desc, PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1));
	ReleaseTupleDesc(desc);
	PG_RETURN_JSONB_P(state);
}

/*
 * Record the frame of state (cscp_frame_state of context context_id, of
 * tenant and conversation, whose routing hash is routing), as
 * command_submit does before it forms a command: a new frame, or the one
 * that records the same state already (frames are unique by context and
 * hash).  Returns its frame_id; *hash gets the SHA-256 of the state.  By an ordinary INSERT with the caller's
 * rights, so the guard below and any policy on cscp.frame apply.  The
 * caller is connected to SPI.
 */
Datum
cscp_frame_record(Datum tenant, text *conversation, int32 routing, Datum context_id,
				  Jsonb *state, char **hash)
{
	static SPIPlanPtr insert_plan = NULL;
	static SPIPlanPtr find_plan = NULL;
	static const Oid insert_types[6] = {TEXTOID, UUIDOID, TEXTOID, UUIDOID, JSONBOID,
	TIMESTAMPTZOID};
	static const Oid find_types[3] = {TEXTOID, UUIDOID, TEXTOID};
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));
	StringInfoData buf;
	Datum		args[6];
	bool		isnull;

	/*
	 * Usually a new state: insert first, look up only when it is known.  The
	 * hash is the table's (context_hash, generated from the state), read
	 * back, not computed a second time here.
	 */
	cscp_routing_uuid(routing, uuid);
	args[0] = tenant;
	args[1] = UUIDPGetDatum(uuid);
	args[2] = PointerGetDatum(conversation);
	args[3] = context_id;
	args[4] = JsonbPGetDatum(state);
	args[5] = TimestampTzGetDatum(cscp_now());
	cscp_spi_plan(&insert_plan,
				  "INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id,"
				  "                        state, created_at)"
				  " VALUES ($1, $2, $3, $4, $5, $6)"
				  " ON CONFLICT (tenant_id, context_id, context_hash) DO NOTHING"
				  " RETURNING frame_id, context_hash",
				  6, insert_types);
	if (SPI_execute_plan(insert_plan, args, NULL, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not record a frame");
	if (SPI_processed == 1)
		*hash = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	else
	{
		initStringInfo(&buf);
		cscp_canonical_append(&buf, state);
		*hash = cscp_sha256_hex(buf.data, buf.len);
		args[1] = context_id;
		args[2] = CStringGetTextDatum(*hash);
		cscp_spi_plan(&find_plan,
					  "SELECT f.frame_id FROM cscp.frame f"
					  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.context_id OPERATOR(pg_catalog.=) $2 AND f.context_hash OPERATOR(pg_catalog.=) $3",
					  3, find_types);
		if (SPI_execute_plan(find_plan, args, NULL, false, 0) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "frame %s of context %s is neither new nor found", *hash,
				 DatumGetCString(DirectFunctionCall1(uuid_out, context_id)));
	}
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
}

/* The columns of cscp.frame the guard reads. */
typedef enum
{
	FR_TENANT_ID,
	FR_CONVERSATION_ID,
	FR_CONTEXT_ID,
	FR_STATE,
	FR_NUM_COLUMNS
} FrameColumn;

static const char *const frame_column_names[FR_NUM_COLUMNS] = {
	"tenant_id",
	"conversation_id",
	"context_id",
	"state",
};

static CscpColumns frame_columns = {
	.table = "cscp.frame", .n = FR_NUM_COLUMNS, .names = frame_column_names
};

/* The column number of c in cscp.frame. */
#define FRAME_COL(c) (frame_columns.attnum[c])

/*
 * The message ids of a frame's state (its "message_ids", a JSON array of
 * strings and nulls) as text[], or NULL with *problem set when it has none
 * or holds anything else (no context's state has).
 */
static ArrayType *
state_message_ids(Jsonb *state, const char **problem)
{
	JsonbValue *v = cscp_jsonb_get(state, "message_ids");
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	Datum	   *elems;
	bool	   *enulls;
	int			n = 0;
	int			dims[1];
	int			lbs[1] = {1};

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
	{
		*problem = "its state has no message ids";
		return NULL;
	}
	dims[0] = JsonContainerSize(v->val.binary.data);
	elems = palloc0(sizeof(Datum) * (dims[0] + 1));
	enulls = palloc0(sizeof(bool) * (dims[0] + 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (e.type == jbvNull)
			enulls[n] = true;
		else if (e.type == jbvString)
			elems[n] = PointerGetDatum(cstring_to_text_with_len(e.val.string.val,
																e.val.string.len));
		else
		{
			*problem = "its state is not the context's";
			return NULL;
		}
		n++;
	}
	dims[0] = n;
	return construct_md_array(elems, enulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * Read the context a frame records (context_id of tenant), with the caller's
 * rights and locked as lock asks, the columns cscp_frame_state reads, into
 * *ctx and *ctxdesc (SPI's; NULL when there is none); returns what keeps it
 * from being framed for conversation, and for actor when actor is not NULL,
 * at now ("its context is ..."), or NULL.  The caller is connected to SPI.
 */
const char *
cscp_frame_context(Datum tenant, Datum context_id, Datum conversation, const Datum *actor,
				   CscpFrameLock lock, HeapTuple *ctx, TupleDesc *ctxdesc)
{
	static SPIPlanPtr plans[3] = {NULL, NULL, NULL};
	static const char *const locks[3] = {"", " FOR SHARE", " FOR NO KEY UPDATE"};
	static const Oid types[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {tenant, context_id};
	bool		isnull;
	Datum		c;

	if (plans[lock] == NULL)
		cscp_spi_plan(&plans[lock],
					  psprintf("SELECT c.tenant_id, c.conversation_id, c.actor_id, c.status, c.expires_at,"
							   "       c.last_message_id, c.slots"
							   "  FROM cscp.context c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.context_id OPERATOR(pg_catalog.=) $2%s",
							   locks[lock]),
					  2, types);
	if (SPI_execute_plan(plans[lock], args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the context of a frame");
	*ctx = NULL;
	*ctxdesc = NULL;
	if (SPI_processed == 0)
		return "its context does not exist";
	*ctx = SPI_tuptable->vals[0];
	*ctxdesc = SPI_tuptable->tupdesc;
	c = SPI_getbinval(*ctx, *ctxdesc, 2, &isnull);
	if (isnull || !DatumGetBool(DirectFunctionCall2Coll(texteq, DEFAULT_COLLATION_OID, c,
														conversation)))
		return "its context is of another conversation";
	c = SPI_getbinval(*ctx, *ctxdesc, 3, &isnull);
	if (actor != NULL &&
		(isnull || !DatumGetBool(DirectFunctionCall2Coll(texteq, DEFAULT_COLLATION_OID, c, *actor))))
		return "its context is of another actor";
	if (!cscp_context_row_usable(*ctx, *ctxdesc, cscp_now()))
		return "its context is expired or closed";
	return NULL;
}

/*
 * A new frame: its context's state as command_submit records it, or 55000.
 * The context is read by key; what the frame must say of it is compared
 * here, the state as frame_state computes it.  A state of the message ids
 * alone ({"message_ids": [...]}) is completed here instead, from the
 * context read, so that its writer need not read the context to compute it
 * (a direct INSERT of a frame; cscp's own frames are formed by the command
 * trigger and pass unchecked: cscp_owner_writing).
 */
static HeapTuple
frame_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	MemoryContext rowctx = CurrentMemoryContext;
	Datum		args[2];
	Datum		conversation;
	Datum		state;
	Jsonb	   *given;
	Jsonb	   *completed = NULL;
	const char *problem = NULL;
	HeapTuple	r;
	TupleDesc	rdesc;
	bool		isnull[4];

	/*
	 * cscp's own write as the owner (cscp_owner_writing) is a command
	 * trigger's, which has just computed the state from the context it read
	 * (frame_form in command_fsm.c).
	 */
	if (cscp_owner_writing(rel))
		return tuple;
	args[0] = heap_getattr(tuple, FRAME_COL(FR_TENANT_ID), desc, &isnull[0]);
	args[1] = heap_getattr(tuple, FRAME_COL(FR_CONTEXT_ID), desc, &isnull[1]);
	conversation = heap_getattr(tuple, FRAME_COL(FR_CONVERSATION_ID), desc, &isnull[2]);
	state = heap_getattr(tuple, FRAME_COL(FR_STATE), desc, &isnull[3]);
	if (isnull[0] || isnull[1] || isnull[2] || isnull[3])
		return tuple;			/* the NOT NULL constraints refuse it */
	given = DatumGetJsonbP(state);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	problem = cscp_frame_context(args[0], args[1], conversation, NULL, CSCP_FRAME_READ, &r,
								 &rdesc);
	if (problem == NULL)
	{
		ArrayType  *ids;

		if ((ids = state_message_ids(given, &problem)) != NULL)
		{
			Jsonb	   *computed = cscp_frame_state(r, rdesc, ids);

			/* The message ids alone: the state is the context's, completed here. */
			if (JB_ROOT_IS_OBJECT(given) && JB_ROOT_COUNT(given) == 1)
			{
				MemoryContext old = MemoryContextSwitchTo(rowctx);

				completed = DatumGetJsonbPCopy(JsonbPGetDatum(computed));
				MemoryContextSwitchTo(old);
			}
			else if (!DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(computed), state)))
				problem = "its state is not the context's";
		}
	}
	SPI_finish();
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a frame must record its context's state as it is"),
				 errdetail("The frame names context %s of tenant \"%s\", but %s.",
						   SPI_getvalue(tuple, desc, FRAME_COL(FR_CONTEXT_ID)),
						   SPI_getvalue(tuple, desc, FRAME_COL(FR_TENANT_ID)), problem),
				 errhint("Frames are written by cscp.command_submit; form commands with it.")));
	if (completed != NULL)
	{
		int			col = FRAME_COL(FR_STATE);
		Datum		value = JsonbPGetDatum(completed);
		bool		valnull = false;

		tuple = heap_modify_tuple_by_cols(tuple, desc, 1, &col, &value, &valnull);
	}
	return tuple;
}

/* Frames never change. */
static HeapTuple
frame_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("frames cannot be changed"),
			 errdetail("A frame records the context state a command was formed from; it is append-only."),
			 errhint("Form a new command with cscp.command_submit.")));
	return NULL;				/* not reached */
}

static const CscpRowGuard frame_guard = {
	.name = "cscp.frame_guard()",
	.columns = &frame_columns,
	.insert = frame_insert,
	.update = frame_update,
};

PG_FUNCTION_INFO_V1(cscp_frame_guard);

/* Trigger cscp.frame_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_frame_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &frame_guard);
}
