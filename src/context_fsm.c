/*-------------------------------------------------------------------------
 *
 * context_fsm.c
 *	  The context lifecycle (RFC-WF-0034): the transition table and the
 *	  BEFORE INSERT OR UPDATE trigger that holds every write to cscp.context
 *	  to it, whether it comes from cscp's functions or from direct SQL.
 *
 * Invariants kept here:
 *	- a context is born active, with a future expires_at, and an id whose
 *	  first 32 bits are the routing hash of its conversation;
 *	- status changes only along the transition table below; expired and
 *	  closed are terminal and such a row never changes again;
 *	- expiry invariant: a live context whose expires_at <= cscp.now() is
 *	  expired whether or not the sweep has run; the only write it accepts
 *	  is the one that records it as expired;
 *	- slots obey the slot rules (slots.c);
 *	- identity columns never change; updated_at and version are maintained.
 *
 * "One live context per (tenant, conversation, actor)" is the partial
 * unique index context_live_key, which also serialises concurrent opens.
 * The trigger takes no locks of its own: the UPDATE holds the row lock.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"

typedef enum ContextStatus
{
	CTX_ACTIVE,
	CTX_PENDING,
	CTX_BLOCKED,
	CTX_EXPIRED,
	CTX_CLOSED,
	CTX_NUM_STATUSES
} ContextStatus;

static const char *const status_names[CTX_NUM_STATUSES] = {
	"active", "pending", "blocked", "expired", "closed"
};

/* allowed[from][to]: DESIGN.md section 4. */
static const bool allowed[CTX_NUM_STATUSES][CTX_NUM_STATUSES] = {
	/* to:         active pending blocked expired closed */
	/* active  */ {false, true, true, true, true},
	/* pending */ {true, false, true, true, true},
	/* blocked */ {true, false, false, true, true},
	/* expired */ {false, false, false, false, false},
	/* closed  */ {false, false, false, false, false},
};

#define IS_LIVE(s) ((s) == CTX_ACTIVE || (s) == CTX_PENDING || (s) == CTX_BLOCKED)

static CscpEnumCache status_cache = {.n = CTX_NUM_STATUSES, .names = status_names};

static ContextStatus
status_of(Oid typoid, Datum d)
{
	return (ContextStatus) cscp_enum_index(&status_cache, typoid, d);
}

/* "pending, blocked, expired, closed", or "none" for a terminal status. */
static char *
allowed_from(ContextStatus from)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int to = 0; to < CTX_NUM_STATUSES; to++)
		if (allowed[from][to])
			appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", status_names[to]);
	if (buf.len == 0)
		appendStringInfoString(&buf, "none (it is terminal)");
	return buf.data;
}

/* Column numbers of cscp.context, looked up by name once per relation. */
typedef struct ContextColumns
{
	Oid			relid;
	int			tenant_id,
				context_id,
				conversation_id,
				actor_id,
				status,
				created_at,
				updated_at,
				expires_at,
				slots,
				version;
} ContextColumns;

static ContextColumns cols = {InvalidOid};

static void
load_columns(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (cols.relid == RelationGetRelid(rel))
		return;
	cols.tenant_id = cscp_column(desc, "cscp.context", "tenant_id");
	cols.context_id = cscp_column(desc, "cscp.context", "context_id");
	cols.conversation_id = cscp_column(desc, "cscp.context", "conversation_id");
	cols.actor_id = cscp_column(desc, "cscp.context", "actor_id");
	cols.status = cscp_column(desc, "cscp.context", "status");
	cols.created_at = cscp_column(desc, "cscp.context", "created_at");
	cols.updated_at = cscp_column(desc, "cscp.context", "updated_at");
	cols.expires_at = cscp_column(desc, "cscp.context", "expires_at");
	cols.slots = cscp_column(desc, "cscp.context", "slots");
	cols.version = cscp_column(desc, "cscp.context", "version");
	cols.relid = RelationGetRelid(rel);
}

static char *
context_id_text(HeapTuple tuple, TupleDesc desc)
{
	char	   *s = SPI_getvalue(tuple, desc, cols.context_id);

	return s ? s : "(new)";
}

/* Raise 55000 unless from -> to is in the transition table. */
static void
check_transition(ContextStatus from, ContextStatus to, const char *context_id)
{
	if (allowed[from][to])
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("invalid context transition from \"%s\" to \"%s\"",
					status_names[from], status_names[to]),
			 errdetail("Context %s is %s; allowed next: %s.",
					   context_id, status_names[from], allowed_from(from)),
			 IS_LIVE(from) ?
			 errhint("Only the transitions of the context lifecycle are allowed.") :
			 errhint("Open a new context with cscp.context_open.")));
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
	bool		isnull,
				convnull,
				tenantnull;
	Datum		conv = heap_getattr(tuple, cols.conversation_id, desc, &convnull);
	Datum		tenant = heap_getattr(tuple, cols.tenant_id, desc, &tenantnull);
	Datum		d;

	/* Routing-ready id. */
	d = heap_getattr(tuple, cols.context_id, desc, &isnull);
	if (!convnull)
	{
		int32		hash = cscp_routing_hash_text(DatumGetTextPP(conv));

		if (isnull)
		{
			pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

			cscp_routing_uuid(hash, uuid);
			values[cols.context_id - 1] = UUIDPGetDatum(uuid);
			repl[cols.context_id - 1] = true;
		}
		else if (cscp_routing_hash_uuid(DatumGetUUIDP(d)) != hash)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("context id %s does not carry the routing hash of its conversation",
							SPI_getvalue(tuple, desc, cols.context_id)),
					 errdetail("The first 32 bits of a context id must be hashtext(conversation_id)."),
					 errhint("Leave context_id null to have one generated, or use cscp.routing_id(conversation_id).")));
	}

	d = heap_getattr(tuple, cols.status, desc, &isnull);
	if (!isnull && status_of(TupleDescAttr(desc, cols.status - 1)->atttypid, d) != CTX_ACTIVE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new context must be active"),
				 errhint("Insert it active, then move it with cscp.context_transition.")));

	d = heap_getattr(tuple, cols.expires_at, desc, &isnull);
	if (!isnull && DatumGetTimestampTz(d) <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expires_at of a new context must be in the future"),
				 errhint("Give a positive ttl.")));

	d = heap_getattr(tuple, cols.slots, desc, &isnull);
	if (!isnull && !tenantnull)
	{
		Jsonb	   *slots = cscp_slots_validate(DatumGetJsonbP(d), NULL,
												TextDatumGetCString(tenant));

		values[cols.slots - 1] = JsonbPGetDatum(slots);
		repl[cols.slots - 1] = true;
	}

	values[cols.created_at - 1] = TimestampTzGetDatum(now);
	repl[cols.created_at - 1] = true;
	values[cols.updated_at - 1] = TimestampTzGetDatum(now);
	repl[cols.updated_at - 1] = true;
	values[cols.version - 1] = Int64GetDatum(1);
	repl[cols.version - 1] = true;

	tuple = heap_modify_tuple(tuple, desc, values, nulls, repl);
	if (!tenantnull)
		cscp_notify_transition(TextDatumGetCString(tenant), "context",
							   SPI_getvalue(tuple, desc, cols.context_id),
							   NULL, status_names[CTX_ACTIVE]);
	return tuple;
}

/* The checks and bookkeeping of UPDATE; returns the tuple to store. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			typoid = TupleDescAttr(desc, cols.status - 1)->atttypid;
	int			natts = desc->natts;
	Datum	   *values = palloc0(natts * sizeof(Datum));
	bool	   *nulls = palloc0(natts * sizeof(bool));
	bool	   *repl = palloc0(natts * sizeof(bool));
	static const char *const fixed[] = {
		"tenant_id", "context_id", "conversation_id", "actor_id", "created_at"
	};
	bool		isnull;
	ContextStatus from,
				to;
	TimestampTz expires_at;
	char	   *id = context_id_text(oldtup, desc);

	for (int i = 0; i < (int) lengthof(fixed); i++)
		if (!cscp_same_value(oldtup, newtup, desc, cscp_column(desc, "cscp.context", fixed[i])))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of a context cannot be changed", fixed[i]),
					 errhint("Open a new context with cscp.context_open.")));

	from = status_of(typoid, heap_getattr(oldtup, cols.status, desc, &isnull));
	to = status_of(typoid, heap_getattr(newtup, cols.status, desc, &isnull));
	expires_at = DatumGetTimestampTz(heap_getattr(oldtup, cols.expires_at, desc, &isnull));

	if (!IS_LIVE(from))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("context %s is %s", id, status_names[from]),
				 errdetail("Expired and closed contexts never change."),
				 errhint("Open a new context with cscp.context_open.")));

	/* Expiry invariant: past expires_at, the one write allowed records it. */
	if (expires_at <= now &&
		(to != CTX_EXPIRED ||
		 !cscp_same_value(oldtup, newtup, desc, cols.slots) ||
		 !cscp_same_value(oldtup, newtup, desc, cols.expires_at)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("context %s has expired", id),
				 errdetail("It expired at %s; its effective status is \"expired\".",
						   timestamptz_to_str(expires_at)),
				 errhint("Open a new context with cscp.context_open and ask the user again.")));

	if (from != to)
	{
		check_transition(from, to, id);
		cscp_notify_transition(SPI_getvalue(oldtup, desc, cols.tenant_id), "context",
							   id, status_names[from], status_names[to]);
	}

	if (!cscp_same_value(oldtup, newtup, desc, cols.slots))
	{
		Datum		d = heap_getattr(newtup, cols.slots, desc, &isnull);

		if (!isnull)
		{
			bool		oldnull;
			Datum		od = heap_getattr(oldtup, cols.slots, desc, &oldnull);
			Jsonb	   *slots;

			slots = cscp_slots_validate(DatumGetJsonbP(d),
										oldnull ? NULL : DatumGetJsonbP(od),
										SPI_getvalue(oldtup, desc, cols.tenant_id));
			values[cols.slots - 1] = JsonbPGetDatum(slots);
			repl[cols.slots - 1] = true;
		}
	}

	values[cols.updated_at - 1] = TimestampTzGetDatum(now);
	repl[cols.updated_at - 1] = true;
	values[cols.version - 1] =
		Int64GetDatum(DatumGetInt64(heap_getattr(oldtup, cols.version, desc, &isnull)) + 1);
	repl[cols.version - 1] = true;

	return heap_modify_tuple(newtup, desc, values, nulls, repl);
}

static CscpRowRules rules = {
	.table = "cscp.context",
	.n = 4,
	.rule = {
		{"tenant_id", CSCP_RULE_TENANT},
		{"conversation_id", CSCP_RULE_NOT_EMPTY},
		{"actor_id", CSCP_RULE_NOT_EMPTY},
		{"ttl", CSCP_RULE_POSITIVE},
	},
};

static const CscpRowGuard guard = {
	.name = "cscp.context_guard()",
	.rules = &rules,
	.load_columns = load_columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_context_guard);

/* Trigger cscp.context_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_context_guard(PG_FUNCTION_ARGS)
{
	return cscp_row_guard(fcinfo, &guard);
}

PG_FUNCTION_INFO_V1(cscp_context_transition_allowed);

/* cscp.context_transition_allowed(from, to) RETURNS boolean */
Datum
cscp_context_transition_allowed(PG_FUNCTION_ARGS)
{
	Oid			typoid = get_fn_expr_argtype(fcinfo->flinfo, 0);

	PG_RETURN_BOOL(allowed[status_of(typoid, PG_GETARG_DATUM(0))]
					   [status_of(typoid, PG_GETARG_DATUM(1))]);
}
