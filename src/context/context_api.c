/*-------------------------------------------------------------------------
 *
 * context_api.c
 *	  cscp.context_open, cscp.slot_set and cscp.context_transition in C
 *	  (cscp.context_get, a read, is SQL).  context_open: the live
 *	  usable context of (tenant, conversation, actor), or a new active one,
 *	  with the given slots merged in.  The context trigger (context_fsm.c)
 *	  holds every write to its rules; this file only finds, extends and
 *	  inserts.
 *
 *	  The common case, a live context in use, is found, locked and
 *	  extended by one UPDATE.  When there is none, a new one is inserted;
 *	  only when the triple still has a live context (past its TTL) does the
 *	  open look further: record the expiry, then insert a new one.  Every
 *	  read and write is a saved SPI statement, so row-level security,
 *	  privileges, triggers, rules and ALTER TABLE apply as to any statement.
 *	  The live context is found through cscp.context_live, whose primary key
 *	  allows one per triple.  A new context's INSERT claims its triple there
 *	  in the context trigger (context_fsm.c), the one place that decides the
 *	  rule for cscp's functions and direct SQL alike; a concurrent open may
 *	  have made the live context between the look and the INSERT: the claim
 *	  then refuses it (23505), the INSERT's subtransaction is rolled back,
 *	  having written nothing, and the loop finds that context.
 *
 *	  Beside them, the context as commands and answers use it: the
 *	  advisory lock of an idempotency key (cscp_key_lock), the context a
 *	  command or an answer works against, locked (cscp_context_for), and the
 *	  question a command asks of it (cscp_context_ask) and the release of
 *	  the question slots that name a command (cscp_context_release).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/* The attempts an open makes before it gives up (40001). */
#define OPEN_ATTEMPTS 3

/* The arguments of an open, as its statements take them. */
typedef struct OpenArgs
{
	text	   *tenant;
	text	   *conversation;
	text	   *actor;
	Jsonb	   *slots;
	Interval   *ttl;
	text	   *correlation;
	TimestampTz now;
	const CscpContextUse *use;	/* or NULL */
} OpenArgs;

/*
 * The live context of the triple in use (unexpired): found, locked,
 * extended and given the slots by one UPDATE.  NULL when there is none.
 *
 * With a use (o->use), the same UPDATE makes the command about to be formed
 * the context's last, as forming it would (use_context, or the question of
 * a mutating one, in command_api.c): when its key is new (the caller holds
 * the key's lock), the context is not blocked (a mutating command is then
 * refused and leaves the context alone) and its last message is already the
 * command's (which the turn just noted; so the frame records what it would
 * have).  The caller sees whether it did from the row returned
 * (last_command_id).
 */
static HeapTuple
open_use(const OpenArgs *o, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr use_plan = NULL;
	static const Oid types[9] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID,
	UUIDOID, TEXTOID, TEXTOID};
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	SPIPlanPtr	chosen;

	args[0] = PointerGetDatum(o->tenant);
	args[1] = PointerGetDatum(o->conversation);
	args[2] = PointerGetDatum(o->actor);
	args[3] = JsonbPGetDatum(o->slots);
	args[4] = PointerGetDatum(o->correlation);
	nulls[4] = o->correlation ? ' ' : 'n';
	args[5] = TimestampTzGetDatum(o->now);
	if (o->use == NULL)
	{
		cscp_spi_plan(&plan,
					  "UPDATE cscp.context x"
					  "   SET slots = x.slots OPERATOR(pg_catalog.||) $4,"
					  "       expires_at = cscp.context_touch(x),"
					  "       correlation_id = coalesce($5, x.correlation_id)"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1"
					  "   AND x.context_id OPERATOR(pg_catalog.=) " CSCP_LIVE_CONTEXT_ID
					  "   AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') AND x.expires_at OPERATOR(pg_catalog.>) $6"
					  " RETURNING *",
					  6, types);
		chosen = plan;
	}
	else
	{
		args[6] = o->use->command_id;
		args[7] = PointerGetDatum(o->use->key);
		args[8] = PointerGetDatum(o->use->message_id);
		cscp_spi_plan(&use_plan,
					  "UPDATE cscp.context x"
					  "   SET slots = x.slots OPERATOR(pg_catalog.||) $4,"
					  "       expires_at = cscp.context_touch(x),"
					  "       correlation_id = coalesce($5, x.correlation_id),"
					  "       last_command_id = CASE WHEN x.status OPERATOR(pg_catalog.<>) 'blocked'"
					  "             AND coalesce(x.last_message_id OPERATOR(pg_catalog.=) $9, false)"
					  "             AND NOT EXISTS (SELECT FROM cscp.command k"
					  "                              WHERE k.tenant_id OPERATOR(pg_catalog.=) $1"
					  "                                AND k.idempotency_key OPERATOR(pg_catalog.=) $8)"
					  "           THEN $7 ELSE x.last_command_id END"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1"
					  "   AND x.context_id OPERATOR(pg_catalog.=) " CSCP_LIVE_CONTEXT_ID
					  "   AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') AND x.expires_at OPERATOR(pg_catalog.>) $6"
					  " RETURNING *",
					  9, types);
		chosen = use_plan;
	}
	if (SPI_execute_plan(chosen, args, nulls, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not extend a context");
	if (SPI_processed != 1)
		return NULL;
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * Record the expiry of the context row ctx (its tenant_id and context_id
 * columns), live and past its TTL: the expiry invariant made durable,
 * expired by ttl, by one UPDATE that the context trigger judges like any
 * other.  The caller holds the row's lock.
 */
void
cscp_context_record_expiry(HeapTuple ctx, TupleDesc desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, UUIDOID};
	bool		isnull;
	Datum		args[2];

	args[0] = cscp_column_value(ctx, desc, "cscp.context", "tenant_id", &isnull);
	args[1] = cscp_column_value(ctx, desc, "cscp.context", "context_id", &isnull);

	cscp_spi_plan(&plan,
				  "UPDATE cscp.context x SET status = 'expired', reason = 'ttl'"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
				  2, types);
	cscp_spi_write_one(plan, args, NULL, SPI_OK_UPDATE, "record the expiry of a context");
}

/*
 * The triple's claim failed: its live context, if any, is locked, and
 * recorded expired when past its TTL.  Returns true when it recorded an
 * expiry (the triple is free to claim again), false when the live context
 * is in use (a concurrent open committed it since open_use looked) or
 * this role cannot see it: look again.
 */
static bool
open_expire_stale(const OpenArgs *o)
{
	static SPIPlanPtr live_plan = NULL;
	static const Oid live_types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	HeapTuple	live;
	TupleDesc	livedesc;
	bool		isnull;

	args[0] = PointerGetDatum(o->tenant);
	args[1] = PointerGetDatum(o->conversation);
	args[2] = PointerGetDatum(o->actor);
	cscp_spi_plan(&live_plan,
				  "SELECT x.tenant_id, x.context_id, x.expires_at FROM cscp.context x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1"
				  "   AND x.context_id OPERATOR(pg_catalog.=) " CSCP_LIVE_CONTEXT_ID
				  "   AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')"
				  " FOR UPDATE",
				  3, live_types);
	if (SPI_execute_plan(live_plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a live context");
	if (SPI_processed != 1)
		return false;
	live = SPI_tuptable->vals[0];
	livedesc = SPI_tuptable->tupdesc;
	if (DatumGetTimestampTz(SPI_getbinval(live, livedesc, 3, &isnull)) > o->now)
		return false;
	cscp_context_record_expiry(live, livedesc);
	return true;
}

/*
 * A new context: the row inserted, which the trigger judges like any other;
 * its claim of the triple in cscp.context_live (context_fsm.c, the one
 * place that decides it) refuses it, 23505 on context_live_key, when the
 * triple has a live context: a concurrent open committed one since open_use
 * looked, or the live one is past its TTL and not yet recorded expired.
 * The open reacts to that refusal rather than looking first: the INSERT
 * runs in a subtransaction, and a refused claim returns NULL, having
 * written nothing.  Any other error is raised.
 */
static HeapTuple
open_insert(const OpenArgs *o, TupleDesc *desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[8] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID,
	INTERVALOID, TEXTOID, UUIDOID};
	MemoryContext oldctx = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	TimestampTz expires_at;
	pg_uuid_t	id;
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	HeapTuple	row = NULL;

	expires_at = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														 TimestampTzGetDatum(o->now),
														 IntervalPGetDatum(o->ttl)));
	cscp_routing_uuid(cscp_routing_hash_text(o->conversation), &id);
	args[0] = PointerGetDatum(o->tenant);
	args[1] = PointerGetDatum(o->conversation);
	args[2] = PointerGetDatum(o->actor);
	args[3] = JsonbPGetDatum(o->slots);
	args[4] = TimestampTzGetDatum(expires_at);
	args[5] = IntervalPGetDatum(o->ttl);
	args[6] = PointerGetDatum(o->correlation);
	nulls[6] = o->correlation ? ' ' : 'n';
	args[7] = UUIDPGetDatum(&id);
	cscp_spi_plan(&plan,
				  "INSERT INTO cscp.context AS x (tenant_id, conversation_id, actor_id, slots,"
				  "    expires_at, ttl, correlation_id, context_id)"
				  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
				  " RETURNING *",
				  8, types);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldctx);
	PG_TRY();
	{
		cscp_spi_write_one(plan, args, nulls, SPI_OK_INSERT_RETURNING, "insert a context");
		*desc = SPI_tuptable->tupdesc;
		row = SPI_tuptable->vals[0];
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldctx);
		CurrentResourceOwner = oldowner;
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
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION || edata->constraint_name == NULL ||
			strcmp(edata->constraint_name, "context_live_key") != 0)
			ReThrowError(edata);
		FreeErrorData(edata);
		row = NULL;
	}
	PG_END_TRY();
	return row;
}

/*
 * Open (or reuse) the context of (tenant, conversation, actor) with slots
 * merged in; see the file header.  use, when not NULL, is the command the
 * caller forms next, which a reused context is made to name as its last
 * when that is what forming it would do (open_use).  Connected to SPI by
 * the caller; returns the row as stored (in SPI memory), with its
 * descriptor in *desc.
 */
HeapTuple
cscp_context_open_row(text *tenant, text *conversation, text *actor, Jsonb *slots,
					  Interval *ttl, text *correlation, const CscpContextUse *use,
					  TupleDesc *desc)
{
	OpenArgs	o = {tenant, conversation, actor, slots, ttl, correlation, cscp_now(), use};

	if (o.slots == NULL)
	{
		JsonbParseState *st = NULL;

		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		o.slots = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
	}
	o.ttl = cscp_lifetime(cscp_policy_get(text_to_cstring(tenant)), ttl, "context_ttl", "ttl");

	for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++)
	{
		HeapTuple	row = open_use(&o, desc);

		if (row == NULL)
			row = open_insert(&o, desc);
		if (row == NULL && open_expire_stale(&o))
			row = open_insert(&o, desc);
		if (row != NULL)
			return row;
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not open a context for conversation \"%s\" and actor \"%s\"",
					text_to_cstring(conversation), text_to_cstring(actor)),
			 errdetail("The conversation and actor have a live context that this role could not lock, or concurrent opens kept replacing it."),
			 errhint("Retry the transaction; if it fails again, look for a row-level security policy on cscp.context that keeps this role from updating the context.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * The context row (as SPI read it, described by desc) as readers see it,
 * like cscp.context_get: its effective status (expired once past
 * expires_at) and the slots the policy lets them see; a datum of the
 * composite type cscp.context described by rowdesc.
 */
Datum
cscp_context_view_datum(HeapTuple row, TupleDesc desc, TupleDesc rowdesc)
{
	int			natts = desc->natts;
	Datum	   *values = palloc(natts * sizeof(Datum));
	bool	   *nulls = palloc(natts * sizeof(bool));
	int			status = cscp_column(desc, "cscp.context", "status");
	int			expires = cscp_column(desc, "cscp.context", "expires_at");
	int			slots = cscp_column(desc, "cscp.context", "slots");
	int			tenant = cscp_column(desc, "cscp.context", "tenant_id");
	char	   *label;

	if (rowdesc->natts == natts)
		heap_deform_tuple(row, desc, values, nulls);
	else
	{
		/*
		 * The row type keeps the place of a dropped column, which RETURNING *
		 * leaves out: the row's columns by name.
		 */
		natts = rowdesc->natts;
		values = palloc(natts * sizeof(Datum));
		nulls = palloc(natts * sizeof(bool));
		for (int i = 0; i < natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(rowdesc, i);

			nulls[i] = true;
			if (!att->attisdropped)
				values[i] = SPI_getbinval(row, desc,
										  cscp_column(desc, "cscp.context", NameStr(att->attname)),
										  &nulls[i]);
		}
		status = cscp_column(rowdesc, "cscp.context", "status");
		expires = cscp_column(rowdesc, "cscp.context", "expires_at");
		slots = cscp_column(rowdesc, "cscp.context", "slots");
		tenant = cscp_column(rowdesc, "cscp.context", "tenant_id");
	}
	label = DatumGetCString(DirectFunctionCall1(enum_out, values[status - 1]));
	if (cscp_status_live(label) &&
		!cscp_context_usable(label, nulls[expires - 1], DatumGetTimestampTz(values[expires - 1]),
							 cscp_now()))
		values[status - 1] =
			DirectFunctionCall2(enum_in, CStringGetDatum("expired"),
								ObjectIdGetDatum(TupleDescAttr(rowdesc, status - 1)->atttypid));
	values[slots - 1] =
		JsonbPGetDatum(cscp_slots_visible(DatumGetJsonbP(values[slots - 1]),
										  cscp_policy_get(TextDatumGetCString(values[tenant - 1]))));
	return heap_copy_tuple_as_datum(heap_form_tuple(rowdesc, values, nulls), rowdesc);
}

/*
 * Raise 22023 unless the arguments of an open (cscp.context_open,
 * cscp.message_turn) are well formed: tenant, conversation and actor ids,
 * and slots (NULL: none) a JSON object.
 */
void
cscp_context_check_open_args(text *tenant, text *conversation, text *actor, Jsonb *slots)
{
	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", conversation);
	cscp_check_id("actor_id", actor);
	if (slots != NULL && !JB_ROOT_IS_OBJECT(slots))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be a JSON object"),
				 errhint("Pass an object such as '{\"active_intent\": \"transfer\"}'.")));
}

/* The blessed row type (cscp.context) the SQL function fname returns. */
static TupleDesc
context_rowdesc(FunctionCallInfo fcinfo, const char *fname)
{
	TupleDesc	rowdesc;

	if (get_call_result_type(fcinfo, NULL, &rowdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "%s must return a composite type", fname);
	return BlessTupleDesc(rowdesc);
}

/*
 * The context row (in SPI memory) as the result of an API function:
 * cscp_context_view_datum in callerctx, then SPI_finish.
 */
static Datum
context_result(HeapTuple row, TupleDesc desc, TupleDesc rowdesc, MemoryContext callerctx)
{
	MemoryContext spictx = MemoryContextSwitchTo(callerctx);
	Datum		result = cscp_context_view_datum(row, desc, rowdesc);

	MemoryContextSwitchTo(spictx);
	SPI_finish();
	return result;
}

/* 22023 unless argument 0 of an API function, a context_id, is given. */
static void
check_context_id_arg(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("context_id must not be null"),
				 errhint("Pass the context_id returned by cscp.context_open.")));
}

/* 22023: the context id (text) names no context this role can see. */
static void
context_missing(const char *id)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("context %s does not exist", id),
			 errhint("Check the id, and that cscp.tenant_id names the context's tenant.")));
}

PG_FUNCTION_INFO_V1(cscp_context_open);

/*
 * cscp.context_open(tenant_id text, conversation_id text, actor_id text,
 *                   slots jsonb, ttl interval, correlation_id text)
 * RETURNS cscp.context
 */
Datum
cscp_context_open(PG_FUNCTION_ARGS)
{
	text	   *tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *conversation = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	text	   *actor = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	Jsonb	   *slots = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	Interval   *ttl = PG_ARGISNULL(4) ? NULL : PG_GETARG_INTERVAL_P(4);
	text	   *correlation = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	MemoryContext callerctx = CurrentMemoryContext;
	TupleDesc	rowdesc = context_rowdesc(fcinfo, "cscp.context_open");
	TupleDesc	desc;
	HeapTuple	row;

	cscp_context_check_open_args(tenant, conversation, actor, slots);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	row = cscp_context_open_row(tenant, conversation, actor, slots, ttl, correlation, NULL, &desc);
	PG_RETURN_DATUM(context_result(row, desc, rowdesc, callerctx));
}

/*
 * The expires_at a use of a context sets (cscp.context_touch): extended to
 * now + ttl under a sliding TTL (at most now + max_ttl), kept under a
 * fixed one (the tenant's policy, context_ttl_mode), and kept once passed.
 */
TimestampTz
cscp_context_touch(const char *tenant_id, TimestampTz expires_at, Interval *ttl)
{
	TimestampTz now = cscp_now();
	Jsonb	   *policy;
	char	   *mode;
	TimestampTz slid;

	if (expires_at <= now)
		return expires_at;
	policy = cscp_policy_get(tenant_id);
	mode = cscp_jsonb_get_cstring(policy, "context_ttl_mode");
	if (mode != NULL && strcmp(mode, "fixed") == 0)
		return expires_at;
	/* Slid only as far as max_ttl allows, and never back (cscp_expiry_status). */
	switch (cscp_expiry_status(policy, now, ttl, &slid, NULL))
	{
		case CSCP_EXPIRY_OK:
			break;
		case CSCP_EXPIRY_TOO_LONG:
			slid = cscp_expiry_limit(policy, now);
			break;
		case CSCP_EXPIRY_NOT_POSITIVE:
			return expires_at;
	}
	return Max(expires_at, slid);
}

PG_FUNCTION_INFO_V1(cscp_context_touch_sql);

/* cscp.context_touch(c cscp.context) RETURNS timestamptz */
Datum
cscp_context_touch_sql(PG_FUNCTION_ARGS)
{
	HeapTupleHeader c = PG_GETARG_HEAPTUPLEHEADER(0);
	bool		tnull,
				enull,
				inull;
	Datum		tenant = GetAttributeByName(c, "tenant_id", &tnull);
	Datum		expires = GetAttributeByName(c, "expires_at", &enull);
	Datum		ttl = GetAttributeByName(c, "ttl", &inull);

	if (enull)
		PG_RETURN_NULL();
	if (tnull || inull)
		PG_RETURN_DATUM(expires);
	PG_RETURN_TIMESTAMPTZ(cscp_context_touch(TextDatumGetCString(tenant), DatumGetTimestampTz(expires),
											 DatumGetIntervalP(ttl)));
}

PG_FUNCTION_INFO_V1(cscp_slot_set);

/*
 * cscp.slot_set(context_id uuid, slot text, value jsonb) RETURNS cscp.context
 *
 * Set one slot of a live context (SQL NULL removes it), as a use of the
 * context: one UPDATE, which the context trigger holds to the slot rules
 * and the expiry invariant.
 */
Datum
cscp_slot_set(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {UUIDOID, TEXTOID, JSONBOID, TEXTOID};
	MemoryContext callerctx = CurrentMemoryContext;
	TupleDesc	rowdesc;
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	bool		tenant_null;
	TupleDesc	desc = NULL;
	HeapTuple	row;

	cscp_check_id("slot", PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	check_context_id_arg(fcinfo);
	rowdesc = context_rowdesc(fcinfo, "cscp.slot_set");

	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = cscp_lookup_tenant(&tenant_null);
	nulls[3] = tenant_null ? 'n' : ' ';
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "UPDATE cscp.context x"
				  "   SET slots = CASE WHEN $3 IS NULL THEN x.slots OPERATOR(pg_catalog.-) $2"
				  "                    ELSE x.slots OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object($2, $3) END,"
				  "       expires_at = cscp.context_touch(x)"
				  " WHERE x.context_id OPERATOR(pg_catalog.=) $1 AND x.tenant_id OPERATOR(pg_catalog.=) coalesce($4, x.tenant_id)"
				  " RETURNING *",
				  4, types);
	row = cscp_spi_update_one(plan, args, nulls, &desc, "set a slot");
	if (row == NULL)
	{
		static SPIPlanPtr exists_plan = NULL;
		char	   *id = DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)));
		Datum		eargs[2] = {args[0], args[3]};
		char		enulls[2] = {' ', nulls[3]};
		static const Oid etypes[2] = {UUIDOID, TEXTOID};

		/* There, yet not written: a trigger or rule skipped the write. */
		cscp_spi_plan(&exists_plan,
					  "SELECT 1 FROM cscp.context x"
					  " WHERE x.context_id OPERATOR(pg_catalog.=) $1 AND x.tenant_id OPERATOR(pg_catalog.=) coalesce($2, x.tenant_id)",
					  2, etypes);
		if (SPI_execute_plan(exists_plan, eargs, enulls, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up a context");
		if (SPI_processed > 0)
			cscp_write_skipped(psprintf("set a slot of context %s", id));
		context_missing(id);
	}
	PG_RETURN_DATUM(context_result(row, desc, rowdesc, callerctx));
}

PG_FUNCTION_INFO_V1(cscp_context_transition);

/*
 * cscp.context_transition(context_id uuid, to_status cscp.context_status,
 *                         reason text) RETURNS cscp.context
 *
 * Move a context along its lifecycle: the row locked, then one UPDATE that
 * the context trigger holds to the transition table and the expiry
 * invariant (a refused step raises 55000 and changes nothing).  A move to a
 * live status is a use of the context (cscp_context_touch).  Row-level
 * security hides other tenants' contexts; a role it does not bind finds
 * the context among the session's tenant's (cscp_lookup_tenant).
 */
Datum
cscp_context_transition(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr update_plan = NULL;
	static const Oid lock_types[2] = {UUIDOID, TEXTOID};
	static const Oid update_types[5] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	MemoryContext callerctx = CurrentMemoryContext;
	TupleDesc	rowdesc;
	TupleDesc	desc = NULL;
	HeapTuple	row;
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		tenant_null;
	char	   *id;
	char	   *from;
	char	   *to;
	bool		isnull;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("to_status must not be null"),
				 errhint("Pass one of active, pending, blocked, expired, closed.")));
	check_context_id_arg(fcinfo);
	rowdesc = context_rowdesc(fcinfo, "cscp.context_transition");
	id = DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)));
	to = DatumGetCString(DirectFunctionCall1(enum_out, PG_GETARG_DATUM(1)));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&lock_plan,
				  "SELECT x.tenant_id, x.status::pg_catalog.text, x.expires_at, x.ttl FROM cscp.context x"
				  " WHERE x.context_id OPERATOR(pg_catalog.=) $1 AND x.tenant_id OPERATOR(pg_catalog.=) coalesce($2, x.tenant_id)"
				  "   FOR UPDATE",
				  2, lock_types);
	args[0] = PG_GETARG_DATUM(0);
	args[1] = cscp_lookup_tenant(&tenant_null);
	nulls[1] = tenant_null ? 'n' : ' ';
	if (SPI_execute_plan(lock_plan, args, nulls, false, 2) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a context");
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("context id %s is held by more than one tenant's context", id),
				 errdetail("A role that row-level security does not bind sees the contexts of every tenant."),
				 errhint("Set cscp.tenant_id to the context's tenant.")));
	nulls[1] = ' ';
	if (SPI_processed == 1)
	{
		HeapTuple	c = SPI_tuptable->vals[0];
		TupleDesc	cdesc = SPI_tuptable->tupdesc;
		TimestampTz expires_at = DatumGetTimestampTz(SPI_getbinval(c, cdesc, 3, &isnull));

		from = SPI_getvalue(c, cdesc, 2);
		if (strcmp(from, to) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("invalid context transition from \"%s\" to \"%s\"", from, to),
					 errdetail("Context %s is already %s.", id, from)));
		args[0] = SPI_getbinval(c, cdesc, 1, &isnull);
		args[1] = PG_GETARG_DATUM(0);
		args[2] = CStringGetTextDatum(to);
		args[3] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
		nulls[3] = PG_ARGISNULL(2) ? 'n' : ' ';
		if (cscp_status_live(to))
			expires_at = cscp_context_touch(TextDatumGetCString(args[0]), expires_at,
											DatumGetIntervalP(SPI_getbinval(c, cdesc, 4, &isnull)));
		args[4] = TimestampTzGetDatum(expires_at);
		cscp_spi_plan(&update_plan,
					  "UPDATE cscp.context x"
					  "   SET status = $3::cscp.context_status, reason = coalesce($4, x.reason),"
					  "       expires_at = $5"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2"
					  " RETURNING *",
					  5, update_types);
		row = cscp_spi_update_one(update_plan, args, nulls, &desc, "move a context");
		if (row == NULL)
			cscp_write_skipped(psprintf("move context %s to %s", id, to));
	}
	else
		row = NULL;
	if (row == NULL)
		context_missing(id);
	/* Live or just retired, never past its TTL and live: as readers see it. */
	PG_RETURN_DATUM(context_result(row, desc, rowdesc, callerctx));
}


/*
 * The context a command or an answer works against, and what they share
 * about it: the advisory lock of an idempotency key or an answered
 * message, the live (else latest) context of a triple locked FOR UPDATE,
 * and the release of the question slots naming a command.  Used by
 * command_api.c, confirm.c, approve.c and answer.c.
 */

/* Run a saved SELECT plan that must succeed; the rows it returns. */
static SPITupleTable *
run_select(SPIPlanPtr plan, Datum *args)
{
	int			rc = SPI_execute_plan(plan, args, NULL, false, 0);

	if (rc != SPI_OK_SELECT)
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
 * *ctx (its CSCP_CONTEXT_COLUMNS) and *desc (valid until SPI_finish).  False when the triple never had
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
				  "SELECT " CSCP_CONTEXT_COLUMNS " FROM cscp.context x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1"
				  "   AND x.context_id OPERATOR(pg_catalog.=) (SELECT l.context_id FROM cscp.context_live l"
				  "                        WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2"
				  "                          AND l.actor_id OPERATOR(pg_catalog.=) $3)"
				  "   AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')"
				  " FOR UPDATE",
				  3, argtypes);
	tt = run_select(live_plan, args);
	if (SPI_processed != 1)
	{
		cscp_spi_plan(&plan,
					  "SELECT " CSCP_CONTEXT_COLUMNS " FROM cscp.context x"
					  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.conversation_id OPERATOR(pg_catalog.=) $2 AND x.actor_id OPERATOR(pg_catalog.=) $3"
					  " ORDER BY x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') DESC,"
					  "          x.created_at DESC, x.version DESC"
					  " LIMIT 1 FOR UPDATE",
					  3, argtypes);
		tt = run_select(plan, args);
	}
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
 * Clear the pending_confirmation and pending_approval slots of the context
 * row ctx (a whole cscp.context row) that name command_id, and bring the
 * context back to active, with reason why when given, once nothing is
 * pending any more.  A use of the context: its TTL slides, the command
 * becomes its last one, and message_id (the actor's answer; NULL: none)
 * its last message.  Expired or closed contexts stay as they are.  The
 * caller is connected to SPI and holds the context's row lock.
 */
void
cscp_context_release(HeapTuple ctx, TupleDesc desc, Datum command_id, text *message_id,
					 const char *why)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[7] = {TEXTOID, UUIDOID, JSONBOID, BOOLOID, TEXTOID, UUIDOID, TEXTOID};
	bool		isnull;
	char	   *status = SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "status"));
	Datum		expires = heap_getattr(ctx, cscp_column(desc, "cscp.context", "expires_at"),
									   desc, &isnull);
	Jsonb	   *slots;
	char	   *id;
	bool		changed = false;
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	if (!cscp_context_usable(status, isnull, DatumGetTimestampTz(expires), cscp_now()))
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
	args[6] = PointerGetDatum(message_id);
	nulls[6] = message_id != NULL ? ' ' : 'n';
	cscp_spi_plan(&plan,
				  "UPDATE cscp.context x"
				  "   SET slots = $3,"
				  "       status = CASE WHEN x.status OPERATOR(pg_catalog.=) 'pending' AND NOT $4"
				  "                     THEN 'active'::cscp.context_status ELSE x.status END,"
				  "       reason = coalesce($5, x.reason),"
				  "       last_command_id = $6,"
				  "       last_message_id = coalesce($7, x.last_message_id),"
				  "       expires_at = cscp.context_touch(x)"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2",
				  7, argtypes);
	cscp_spi_write_one(plan, args, nulls, SPI_OK_UPDATE,
					   psprintf("release the context slots of command %s", id));
}

/*
 * What a confirmation request does beside the command's own transition, once
 * the question it replaces was superseded: the context becomes pending with
 * its pending_confirmation slot naming command_id (key, fingerprint and
 * window, the command's own); the command becomes the context's last, and
 * last_message, when given, its last message; its TTL slides.  The context
 * is context_id of tenant, locked by the caller.  A command born asking has
 * its trigger write this as the owner (owner), from the row in hand, so the
 * context's trigger has no binding of the slot to read back
 * (cscp_owner_writing); a step to confirmation_required is written with the
 * caller's rights, the caller connected to SPI, and judged.
 */
void
cscp_context_ask(Datum tenant, Datum context_id, Datum command_id, text *key, text *fingerprint,
				 TimestampTz window, text *last_message, bool owner)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	static const Oid types[7] = {TEXTOID, UUIDOID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	static const char *const sql =
		"UPDATE cscp.context x"
		"   SET status = CASE WHEN x.status OPERATOR(pg_catalog.=) 'active' THEN 'pending'::cscp.context_status"
		"                     ELSE x.status END,"
		"       slots = x.slots OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('pending_confirmation',"
		"                   pg_catalog.jsonb_build_object('command_id', $3, 'idempotency_key', $4,"
		"                                      'target_fingerprint', $5,"
		"                                      'expires_at', $6)),"
		"       last_command_id = $3,"
		"       last_message_id = coalesce($7, x.last_message_id),"
		"       expires_at = cscp.context_touch(x)"
		" WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2";
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', fingerprint ? ' ' : 'n', ' ', last_message ? ' ' : 'n'};

	args[0] = tenant;
	args[1] = context_id;
	args[2] = command_id;
	args[3] = PointerGetDatum(key);
	args[4] = PointerGetDatum(fingerprint);
	args[5] = CStringGetTextDatum(cscp_utc_iso(window));
	args[6] = PointerGetDatum(last_message);
	if (owner)
	{
		if (cscp_owner_exec("context", &plans[1], sql, 7, types, args, nulls, SPI_OK_UPDATE,
							"record a confirmation request on its context") != 1)
			cscp_write_skipped("record a confirmation request on its context");
		return;
	}
	cscp_spi_plan(&plans[0], sql, 7, types);
	cscp_spi_write_one(plans[0], args, nulls, SPI_OK_UPDATE,
					   "record a confirmation request on its context");
}
