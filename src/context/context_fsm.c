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
 *	- slots obey the slot rules (slots.c), and the pending slots name only
 *	  commands bound to the context, waiting for that answer (slots.c);
 *	- identity columns never change; updated_at and version are maintained.
 *
 * "One live context per (tenant, conversation, actor)" is the primary key
 * (context_live_key) of cscp.context_live, which also serialises concurrent
 * opens.  The trigger keeps that table as the owner: a row goes in with a
 * new context (refused as a duplicate key when the triple already has a
 * live one), and out when its context expires or closes; the DELETE and
 * TRUNCATE trigger context_unlist takes it out when the context goes.
 * Its expires_at is a lower bound of the context's, less than a minute
 * behind: a use that extends a context into a later minute (LIVE_QUANTUM)
 * raises it, other uses leave the row alone, and an UPDATE that moves a
 * context's expiry earlier lowers it.  So the sweep finds every context due
 * there, and a context in steady use writes that row about once a minute.
 * Neither a use nor an expiry changes a column any index of cscp.context
 * names, and both are HOT updates (given room on the page).  The trigger takes no locks of its own: the UPDATE holds the
 * row lock.
 *
 * A write that ends a context, or moves its expires_at earlier, first
 * lowers the promise each of its commands that could still step forward
 * holds that it is live (cscp.command.context_live_until, which a step
 * believes instead of reading the context: command_fsm.c), by writing
 * those commands (commands_before, commands_follow); so a step and the end
 * wait for each other on the command's row.
 *
 * The sweep expires contexts through cscp._expire_contexts: one UPDATE,
 * whose trigger moves each context retired from cscp.context_live to
 * cscp.context_retired as any other retirement (live_retire).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

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

/* The columns of cscp.context the guards read. */
typedef enum
{
	CX_TENANT_ID,
	CX_CONTEXT_ID,
	CX_CONVERSATION_ID,
	CX_ACTOR_ID,
	CX_STATUS,
	CX_CREATED_AT,
	CX_UPDATED_AT,
	CX_EXPIRES_AT,
	CX_TTL,
	CX_SLOTS,
	CX_VERSION,
	CX_CORRELATION_ID,
	CX_REASON,
	CX_NUM_COLUMNS
} ContextColumn;

static const char *const column_names[CX_NUM_COLUMNS] = {
	"tenant_id",
	"context_id",
	"conversation_id",
	"actor_id",
	"status",
	"created_at",
	"updated_at",
	"expires_at",
	"ttl",
	"slots",
	"version",
	"correlation_id",
	"reason",
};

static CscpColumns columns = {.table = "cscp.context", .n = CX_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.context. */
#define COL(c) (columns.attnum[c])

static char *
context_id_text(HeapTuple tuple, TupleDesc desc)
{
	char	   *s = SPI_getvalue(tuple, desc, COL(CX_CONTEXT_ID));

	return s ? s : "(new)";
}

/* Raise 55000 unless from -> to is in the transition table (logged: evidence.c). */
static void
check_transition(ContextStatus from, ContextStatus to, const char *context_id, const char *tenant)
{
	if (allowed[from][to])
		return;
	cscp_log_refused_step("context", tenant, context_id, status_names[from], status_names[to],
						  "invalid_transition");
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

/*
 * Hold the expiry and the ttl of newtup, a row being inserted (oldtup NULL)
 * or updated, to lifetime.c's bounds where they are new: expires_at finite
 * and within max_ttl of now, now + ttl later than now and within max_ttl.
 * A ttl not greater than zero is left to the column rule (23514).
 */
static void
check_lifetime(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, TimestampTz now)
{
	bool		isnull,
				tnull;
	Datum		tenant = heap_getattr(newtup, COL(CX_TENANT_ID), desc, &tnull);
	Datum		d;

	if (tnull)
		return;
	d = heap_getattr(newtup, COL(CX_EXPIRES_AT), desc, &isnull);
	if (!isnull && (oldtup == NULL || !cscp_same_value(oldtup, newtup, desc, COL(CX_EXPIRES_AT))))
		cscp_check_stored_expiry(TextDatumGetCString(tenant), "cscp.context", "expires_at",
								 DatumGetTimestampTz(d), now);
	d = heap_getattr(newtup, COL(CX_TTL), desc, &isnull);
	if (!isnull && (oldtup == NULL || !cscp_same_value(oldtup, newtup, desc, COL(CX_TTL))))
	{
		Interval	zero = {0};

		if (DatumGetInt32(DirectFunctionCall2(interval_cmp, d, IntervalPGetDatum(&zero))) > 0)
			(void) cscp_expiry(cscp_policy_get(TextDatumGetCString(tenant)), now,
							   DatumGetIntervalP(d), "context_ttl", "ttl");
	}
}

/*
 * Raise 22023 unless the caller's text fields of the context (conversation_id,
 * actor_id, correlation_id, reason) that are new or changed keep the
 * tenant's minimal-data policy (slots.c).  last_message_id is cscp's own
 * copy of a turn's message id, held to the turn's rules.
 */
static void
check_minimal_fields(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, const char *tenant)
{
	static const ContextColumn fields[] = {CX_CONVERSATION_ID, CX_ACTOR_ID, CX_CORRELATION_ID, CX_REASON};

	for (int i = 0; i < (int) lengthof(fields); i++)
	{
		bool		isnull;
		Datum		d = heap_getattr(newtup, COL(fields[i]), desc, &isnull);
		text	   *t;

		if (isnull || (oldtup != NULL && cscp_same_value(oldtup, newtup, desc, COL(fields[i]))))
			continue;
		t = DatumGetTextPP(d);
		cscp_context_field_check(tenant, column_names[fields[i]], VARDATA_ANY(t),
								 VARSIZE_ANY_EXHDR(t));
	}
}

/* The checks and defaults of INSERT; returns the tuple to store. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CscpRowEdit edit;
	bool		isnull,
				convnull,
				tenantnull;
	Datum		conv = heap_getattr(tuple, COL(CX_CONVERSATION_ID), desc, &convnull);
	Datum		tenant = heap_getattr(tuple, COL(CX_TENANT_ID), desc, &tenantnull);
	Datum		d;

	/* Routing-ready id. */
	cscp_row_edit_init(&edit, desc);
	cscp_routing_id_fill(tuple, desc, COL(CX_CONVERSATION_ID), COL(CX_CONTEXT_ID), "context",
						 "Leave context_id null to have one generated, or use cscp.routing_id(conversation_id).",
						 &edit);

	d = heap_getattr(tuple, COL(CX_STATUS), desc, &isnull);
	if (!isnull && status_of(TupleDescAttr(desc, COL(CX_STATUS) - 1)->atttypid, d) != CTX_ACTIVE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new context must be active"),
				 errhint("Insert it active, then move it with cscp.context_transition.")));

	d = heap_getattr(tuple, COL(CX_EXPIRES_AT), desc, &isnull);
	if (!isnull && DatumGetTimestampTz(d) <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expires_at of a new context must be in the future"),
				 errhint("Give a positive ttl.")));
	check_lifetime(NULL, tuple, desc, now);

	if (!tenantnull)
		check_minimal_fields(NULL, tuple, desc, TextDatumGetCString(tenant));
	d = heap_getattr(tuple, COL(CX_SLOTS), desc, &isnull);
	if (!isnull && !tenantnull)
	{
		Jsonb	   *slots = cscp_slots_validate(DatumGetJsonbP(d), NULL,
												TextDatumGetCString(tenant));

		cscp_row_edit_set(&edit, COL(CX_SLOTS), JsonbPGetDatum(slots), false);
	}

	cscp_row_edit_set(&edit, COL(CX_CREATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(CX_UPDATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(CX_VERSION), Int64GetDatum(1), false);

	tuple = cscp_row_edit_apply(&edit, tuple);

	/* The pending slots of the new context name only commands bound to it. */
	d = heap_getattr(tuple, COL(CX_SLOTS), desc, &isnull);
	if (!isnull && !tenantnull && !convnull)
	{
		bool		idnull,
					actornull;
		Datum		id = heap_getattr(tuple, COL(CX_CONTEXT_ID), desc, &idnull);
		Datum		actor = heap_getattr(tuple, COL(CX_ACTOR_ID), desc, &actornull);

		if (!idnull && !actornull)
			cscp_pending_slots_bound(DatumGetJsonbP(d), NULL, tenant, id, conv, actor);
	}
	if (!tenantnull)
		cscp_notify_transition(TextDatumGetCString(tenant), "context",
							   SPI_getvalue(tuple, desc, COL(CX_CONTEXT_ID)),
							   NULL, status_names[CTX_ACTIVE]);
	return tuple;
}

/* The checks and bookkeeping of UPDATE; returns the tuple to store. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			typoid = TupleDescAttr(desc, COL(CX_STATUS) - 1)->atttypid;
	CscpRowEdit edit;
	static const char *const fixed[] = {
		"tenant_id", "context_id", "conversation_id", "actor_id", "created_at"
	};
	static CscpColumns fixed_cols = {.table = "cscp.context", .n = lengthof(fixed), .names = fixed};
	int			changed;
	bool		isnull;
	Datum		d;
	ContextStatus from,
				to;
	TimestampTz expires_at;
	char	   *id = context_id_text(oldtup, desc);

	changed = cscp_first_changed(rel, &fixed_cols, oldtup, newtup);
	if (changed >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of a context cannot be changed", fixed[changed]),
				 errhint("Open a new context with cscp.context_open.")));

	from = status_of(typoid, heap_getattr(oldtup, COL(CX_STATUS), desc, &isnull));
	d = heap_getattr(newtup, COL(CX_STATUS), desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("status of a context must not be null"),
				 errhint("Move a context with cscp.context_transition.")));
	to = status_of(typoid, d);
	expires_at = DatumGetTimestampTz(heap_getattr(oldtup, COL(CX_EXPIRES_AT), desc, &isnull));

	if (!IS_LIVE(from))
	{
		cscp_log_refused_step("context", SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)), id,
							  status_names[from], status_names[to], "context_retired");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("context %s is %s", id, status_names[from]),
				 errdetail("Expired and closed contexts never change."),
				 errhint("Open a new context with cscp.context_open.")));
	}

	/* Expiry invariant: past expires_at, the one write allowed records it. */
	if (expires_at <= now &&
		(to != CTX_EXPIRED ||
		 !cscp_same_value(oldtup, newtup, desc, COL(CX_SLOTS)) ||
		 !cscp_same_value(oldtup, newtup, desc, COL(CX_EXPIRES_AT))))
	{
		cscp_log_refused_step("context", SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)), id,
							  status_names[from], status_names[to], "context_expired");
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("context %s has expired", id),
				 errdetail("It expired at %s; its effective status is \"expired\".",
						   timestamptz_to_str(expires_at)),
				 errhint("Open a new context with cscp.context_open and ask the user again.")));
	}

	check_lifetime(oldtup, newtup, desc, now);

	if (from != to)
	{
		check_transition(from, to, id, SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)));
		cscp_notify_transition(SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)), "context",
							   id, status_names[from], status_names[to]);
	}

	check_minimal_fields(oldtup, newtup, desc, SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)));
	cscp_row_edit_init(&edit, desc);
	if (!cscp_same_value(oldtup, newtup, desc, COL(CX_SLOTS)))
	{
		d = heap_getattr(newtup, COL(CX_SLOTS), desc, &isnull);

		if (!isnull)
		{
			bool		oldnull;
			Datum		od = heap_getattr(oldtup, COL(CX_SLOTS), desc, &oldnull);
			Jsonb	   *slots;

			slots = cscp_slots_validate(DatumGetJsonbP(d),
										oldnull ? NULL : DatumGetJsonbP(od),
										SPI_getvalue(oldtup, desc, COL(CX_TENANT_ID)));
			/*
			 * The pending slots name only commands bound to this context;
			 * cscp's own write as the owner is a command trigger's, which
			 * wrote the slot from the command it judged (ask_context in
			 * command_fsm.c).
			 */
			if (!cscp_owner_writing(rel))
				cscp_pending_slots_bound(DatumGetJsonbP(d), oldnull ? NULL : DatumGetJsonbP(od),
										 heap_getattr(oldtup, COL(CX_TENANT_ID), desc, &isnull),
										 heap_getattr(oldtup, COL(CX_CONTEXT_ID), desc, &isnull),
										 heap_getattr(oldtup, COL(CX_CONVERSATION_ID), desc,
													  &isnull),
										 heap_getattr(oldtup, COL(CX_ACTOR_ID), desc, &isnull));
			cscp_row_edit_set(&edit, COL(CX_SLOTS), JsonbPGetDatum(slots), false);
		}
	}

	/*
	 * When it ends, the time it really ended: a statement's start can be
	 * earlier than the row lock it waited for, and a command's step that
	 * held the context before (command_fsm.c locks it) must read as
	 * earlier than the end.
	 */
	cscp_row_edit_set(&edit, COL(CX_UPDATED_AT),
					  TimestampTzGetDatum(IS_LIVE(to) ? now : cscp_now_exact()), false);
	cscp_row_edit_set(&edit, COL(CX_VERSION),
					  Int64GetDatum(DatumGetInt64(heap_getattr(oldtup, COL(CX_VERSION), desc,
															   &isnull)) + 1), false);
	return cscp_row_edit_apply(&edit, newtup);
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
	.columns = &columns,
	.insert = guard_insert,
	.update = guard_update,
};

/* The key of a context's row in cscp.context_live, and its context_id, into args[0..3]. */
static void
live_key(HeapTuple row, TupleDesc desc, Datum *args, bool *isnull)
{
	args[0] = heap_getattr(row, COL(CX_TENANT_ID), desc, &isnull[0]);
	args[1] = heap_getattr(row, COL(CX_CONVERSATION_ID), desc, &isnull[1]);
	args[2] = heap_getattr(row, COL(CX_ACTOR_ID), desc, &isnull[2]);
	args[3] = heap_getattr(row, COL(CX_CONTEXT_ID), desc, &isnull[3]);
}

/*
 * Run one statement on cscp.context_live (or cscp.context_retired) as its
 * owner; returns the number of rows it processed.
 */
static uint64
live_exec(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes,
		  Datum *args, int expect)
{
	return cscp_owner_exec("context_live", plan, sql, nargs, argtypes, args, NULL, expect,
						   "keep cscp.context_live");
}

/*
 * Take the row of a triple in cscp.context_live for a new context (args as
 * live_key's, and its expires_at in args[4]): a free key, or a row that
 * names a context no longer live, left by writes made with the triggers off
 * (session_replication_role = replica).  A row that names this very id is
 * taken too: the context's primary key then refuses the duplicate id.
 * Waits for a concurrent claim of the triple to commit or roll back;
 * returns false when the triple has another live context.
 */
static bool
live_take(Datum *args)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr stale_plan = NULL;
	static const Oid types[5] = {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID};

	if (live_exec(&plan,
				  "INSERT INTO cscp.context_live"
				  " (tenant_id, conversation_id, actor_id, context_id, expires_at)"
				  " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
				  5, types, args, SPI_OK_INSERT) == 1)
		return true;

	return live_exec(&stale_plan,
					 "UPDATE cscp.context_live l SET context_id = $4, expires_at = $5"
					 " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2 AND l.actor_id OPERATOR(pg_catalog.=) $3"
					 "   AND (l.context_id OPERATOR(pg_catalog.=) $4"
					 "        OR NOT EXISTS (SELECT FROM cscp.context x"
					 "                        WHERE x.tenant_id OPERATOR(pg_catalog.=) l.tenant_id"
					 "                          AND x.context_id OPERATOR(pg_catalog.=) l.context_id"
					 "                          AND x.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')))",
					 5, types, args, SPI_OK_UPDATE) == 1;
}

/*
 * The one claim of "one live context per (tenant, conversation, actor)": a
 * new context takes its triple's row in cscp.context_live (live_take),
 * whoever inserts it, cscp.context_open included.  Raises 23505 (the
 * constraint context_live_key) when the triple has a live context, which
 * cscp.context_open takes as "a concurrent open made it".
 */
static void
live_claim(HeapTuple row, TupleDesc desc)
{
	Datum		args[5];
	bool		isnull[5];
	Relation	live;

	live_key(row, desc, args, isnull);
	args[4] = heap_getattr(row, COL(CX_EXPIRES_AT), desc, &isnull[4]);
	for (int i = 0; i < 5; i++)
		if (isnull[i])
			return;				/* the NOT NULL constraint refuses the row */
	if (live_take(args))
		return;
	/* Released by the abort, like any relation an error leaves open. */
	live = relation_open(cscp_relation_oid("context_live", false), AccessShareLock);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"", "context_live_key"),
			 errdetail("Key (tenant_id, conversation_id, actor_id)=(%s, %s, %s) already exists.",
					   TextDatumGetCString(args[0]), TextDatumGetCString(args[1]),
					   TextDatumGetCString(args[2])),
			 errhint("Use cscp.context_open, which returns the live context of a conversation and actor."),
			 errtableconstraint(live, "context_live_key")));
}

/* A live context deleted: its row in cscp.context_live goes too. */
static void
live_release(HeapTuple row, TupleDesc desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, UUIDOID};
	Datum		args[4];
	bool		isnull[4];

	live_key(row, desc, args, isnull);
	(void) live_exec(&plan,
					 "DELETE FROM cscp.context_live l"
					 " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2 AND l.actor_id OPERATOR(pg_catalog.=) $3"
					 "   AND l.context_id OPERATOR(pg_catalog.=) $4",
					 4, types, args, SPI_OK_DELETE);
}

/*
 * A live context retiring (expired or closed by this UPDATE, newtup the
 * version to be stored): one statement moves it from cscp.context_live to
 * cscp.context_retired, with the new version's status and updated_at.
 */
static void
live_retire(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, ContextStatus to)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[6];
	bool		isnull[6];

	live_key(oldtup, desc, args, isnull);
	args[4] = CStringGetTextDatum(status_names[to]);
	isnull[4] = false;
	args[5] = heap_getattr(newtup, COL(CX_UPDATED_AT), desc, &isnull[5]);
	(void) live_exec(&plan,
					 "WITH gone AS (DELETE FROM cscp.context_live l"
					 "               WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2"
					 "                 AND l.actor_id OPERATOR(pg_catalog.=) $3 AND l.context_id OPERATOR(pg_catalog.=) $4)"
					 " INSERT INTO cscp.context_retired"
					 "  (tenant_id, conversation_id, context_id, status, retired_at)"
					 " VALUES ($1, $2, $4, $5::cscp.context_status, $6)",
					 6, types, args, SPI_OK_INSERT);
}

/*
 * A retired context deleted: its row in cscp.context_retired goes too,
 * found by its status and updated_at (the row's retired_at) through the
 * table's index.
 */
static void
retired_release(HeapTuple row, TupleDesc desc, ContextStatus status)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[4];
	bool		isnull[4];

	args[0] = heap_getattr(row, COL(CX_TENANT_ID), desc, &isnull[0]);
	args[1] = heap_getattr(row, COL(CX_CONTEXT_ID), desc, &isnull[1]);
	args[2] = CStringGetTextDatum(status_names[status]);
	isnull[2] = false;
	args[3] = heap_getattr(row, COL(CX_UPDATED_AT), desc, &isnull[3]);
	for (int i = 0; i < 4; i++)
		if (isnull[i])
			return;				/* written with the triggers off: no row to find */
	(void) live_exec(&plan,
					 "DELETE FROM cscp.context_retired r"
					 " WHERE r.status OPERATOR(pg_catalog.=) $3::cscp.context_status AND r.retired_at OPERATOR(pg_catalog.=) $4"
					 "   AND r.tenant_id OPERATOR(pg_catalog.=) $1 AND r.context_id OPERATOR(pg_catalog.=) $2",
					 4, types, args, SPI_OK_DELETE);
}

/*
 * The states of a command that could still take a step that needs its
 * context live (command_fsm.c): the ones an end of the context writes.
 */
#define STEPPING_STATES "'{canonicalized,confirmation_required,confirmed,authz_pending,authorized}'"

/*
 * Whether cscp.command has context_live_until (not before ALTER EXTENSION
 * UPDATE to 0.2.0: then no command holds a promise).
 */
static bool
commands_promised(void)
{
	Oid			relid = cscp_relation_oid("command", true);

	return OidIsValid(relid) && get_attnum(relid, "context_live_until") != InvalidAttrNumber;
}

/*
 * A context of tenant args[0] and id args[1] ended (args[2] null) or its
 * end brought nearer (args[2] its new expires_at): every command of it that
 * could still take a step forward (canonicalized to authorized) has its
 * promise that the context is live (cscp.command.context_live_until)
 * taken away or lowered, by an UPDATE that names that column alone, which
 * the command trigger lets through as no step.  So a step that needs the
 * context believes the promise only while nothing has ended the context,
 * and a step and an end wait for each other on the command's row.  Its
 * commands are found through the context's frames: a command takes such a
 * step only with a frame of its own context (the snapshot rules of
 * command_fsm.c), but for a cancel recovery, which needs no live context.
 * Every such command is written, whatever its promise: the write is what
 * a concurrent step meets.  Run as the owner of cscp.command, with the
 * latest snapshot (cscp_owner_exec_latest): a command formed by a
 * transaction that held the context until it committed is found.
 */
static void
commands_follow(Datum *args, bool *isnull)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, UUIDOID, TIMESTAMPTZOID};
	char		nulls[3] = {' ', ' ', isnull[2] ? 'n' : ' '};

	if (isnull[0] || isnull[1] || !commands_promised())
		return;					/* the NOT NULL constraints refuse the row */
	(void) cscp_owner_exec_latest("command", &plan,
								  "UPDATE cscp.command m"
								  "   SET context_live_until = CASE WHEN $3 IS NULL OR m.context_live_until IS NULL THEN NULL"
								  "                                 WHEN m.context_live_until OPERATOR(pg_catalog.<) $3"
								  "                                 THEN m.context_live_until ELSE $3 END"
								  "  FROM cscp.frame f"
								  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.context_id OPERATOR(pg_catalog.=) $2"
								  "   AND m.tenant_id OPERATOR(pg_catalog.=) $1 AND m.frame_id OPERATOR(pg_catalog.=) f.frame_id"
								  "   AND m.state OPERATOR(pg_catalog.=) ANY (" STEPPING_STATES ")",
								  3, types, args, nulls, SPI_OK_UPDATE,
								  "take back the promises of a context's commands");
}

/* A context ended: its commands' promises go (commands_follow). */
static void
commands_end(HeapTuple row, TupleDesc desc)
{
	Datum		args[3];
	bool		isnull[3] = {false, false, true};

	args[0] = heap_getattr(row, COL(CX_TENANT_ID), desc, &isnull[0]);
	args[1] = heap_getattr(row, COL(CX_CONTEXT_ID), desc, &isnull[1]);
	args[2] = (Datum) 0;
	commands_follow(args, isnull);
}

/* cscp.context_live's expires_at is kept within this of the context's. */
#define LIVE_QUANTUM	(60 * USECS_PER_SEC)

/*
 * After an UPDATE of a context: retired, it moves from cscp.context_live to
 * cscp.context_retired; still
 * live, its lower bound there follows an earlier expiry, and a later one
 * that moves into another minute.
 */
static void
live_follow(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[5] = {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID};
	Oid			typoid = TupleDescAttr(desc, COL(CX_STATUS) - 1)->atttypid;
	bool		isnull;
	bool		keynull[4];
	Datum		args[5];
	ContextStatus from = status_of(typoid, heap_getattr(oldtup, COL(CX_STATUS), desc, &isnull));
	ContextStatus to = status_of(typoid, heap_getattr(newtup, COL(CX_STATUS), desc, &isnull));
	TimestampTz old_expiry,
				new_expiry;

	if (!IS_LIVE(from))
		return;
	if (!IS_LIVE(to))
	{
		live_retire(oldtup, newtup, desc, to);
		return;
	}
	old_expiry = DatumGetTimestampTz(heap_getattr(oldtup, COL(CX_EXPIRES_AT), desc, &isnull));
	args[4] = heap_getattr(newtup, COL(CX_EXPIRES_AT), desc, &isnull);
	if (isnull)
		return;					/* the NOT NULL constraint refuses the row */
	new_expiry = DatumGetTimestampTz(args[4]);
	if (new_expiry == old_expiry ||
		(new_expiry > old_expiry &&
		 new_expiry / LIVE_QUANTUM == old_expiry / LIVE_QUANTUM))
		return;
	live_key(oldtup, desc, args, keynull);
	(void) live_exec(&plan,
					 "UPDATE cscp.context_live l SET expires_at = $5"
					 " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.conversation_id OPERATOR(pg_catalog.=) $2 AND l.actor_id OPERATOR(pg_catalog.=) $3"
					 "   AND l.context_id OPERATOR(pg_catalog.=) $4 AND coalesce(l.expires_at OPERATOR(pg_catalog.<>) $5, (l.expires_at IS NULL) OPERATOR(pg_catalog.<>) ($5 IS NULL))",
					 5, types, args, SPI_OK_UPDATE);
}

/*
 * Before an UPDATE of a live context (oldtup to newtup, as written) is
 * judged: when it ends the context its commands' promises go, and when it
 * moves expires_at earlier they are lowered to it (commands_follow).  This
 * comes first, so that the time the guard records as the end
 * (cscp_now_exact) is later than every step the end waited for; a write
 * the guard then refuses rolls this back with it.
 */
static void
commands_before(Relation rel, HeapTuple oldtup, HeapTuple newtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			typoid;
	bool		isnull;
	Datum		d;
	Datum		args[3];
	bool		nulls[3] = {false, false, false};

	cscp_columns_load(&columns, rel);
	typoid = TupleDescAttr(desc, COL(CX_STATUS) - 1)->atttypid;
	d = heap_getattr(oldtup, COL(CX_STATUS), desc, &isnull);
	if (isnull || !IS_LIVE(status_of(typoid, d)))
		return;
	d = heap_getattr(newtup, COL(CX_STATUS), desc, &isnull);
	if (isnull)
		return;					/* the NOT NULL constraint refuses the row */
	if (!IS_LIVE(status_of(typoid, d)))
	{
		commands_end(oldtup, desc);
		return;
	}
	args[2] = heap_getattr(newtup, COL(CX_EXPIRES_AT), desc, &nulls[2]);
	d = heap_getattr(oldtup, COL(CX_EXPIRES_AT), desc, &isnull);
	if (nulls[2] || isnull || DatumGetTimestampTz(args[2]) >= DatumGetTimestampTz(d))
		return;
	args[0] = heap_getattr(oldtup, COL(CX_TENANT_ID), desc, &nulls[0]);
	args[1] = heap_getattr(oldtup, COL(CX_CONTEXT_ID), desc, &nulls[1]);
	commands_follow(args, nulls);
}

PG_FUNCTION_INFO_V1(cscp_context_guard);

/* Trigger cscp.context_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_context_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	TupleDesc	desc;

	cscp_tenancy_check_trigger(fcinfo);
	if (CALLED_AS_TRIGGER(fcinfo) && TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) &&
		TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) && TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		commands_before(trigdata->tg_relation, trigdata->tg_trigtuple, trigdata->tg_newtuple);
	row = (HeapTuple) DatumGetPointer(cscp_row_guard(fcinfo, &guard));
	desc = RelationGetDescr(trigdata->tg_relation);
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		live_claim(row, desc);
	else
		live_follow(trigdata->tg_trigtuple, row, desc);
	return PointerGetDatum(row);
}

PG_FUNCTION_INFO_V1(cscp_context_unlist);

/*
 * Trigger cscp.context_unlist(): BEFORE DELETE FOR EACH ROW, a context
 * deleted gives up its row in cscp.context_live (live) or
 * cscp.context_retired (retired); BEFORE TRUNCATE, both are emptied.
 */
Datum
cscp_context_unlist(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	cscp_tenancy_check_trigger(fcinfo);
	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.context_unlist() must be a BEFORE trigger")));
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
	{
		static SPIPlanPtr plan = NULL;
		static SPIPlanPtr commands_plan = NULL;

		(void) live_exec(&plan,
						 "WITH gone AS (DELETE FROM cscp.context_live)"
						 " DELETE FROM cscp.context_retired",
						 0, NULL, NULL, SPI_OK_DELETE);
		/* every context gone: every promise too (commands_follow) */
		if (commands_promised())
			(void) cscp_owner_exec_latest("command", &commands_plan,
										  "UPDATE cscp.command m SET context_live_until = NULL"
										  " WHERE m.context_live_until IS NOT NULL",
										  0, NULL, NULL, NULL, SPI_OK_UPDATE,
										  "take back the promises of the commands");
		return PointerGetDatum(NULL);
	}
	if (!TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.context_unlist() fires BEFORE DELETE FOR EACH ROW or BEFORE TRUNCATE")));
	cscp_columns_load(&columns, trigdata->tg_relation);
	{
		TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
		HeapTuple	row = trigdata->tg_trigtuple;
		bool		isnull;
		Datum		d = heap_getattr(row, COL(CX_STATUS), desc, &isnull);
		ContextStatus status;

		if (isnull)
			return PointerGetDatum(row);
		status = status_of(TupleDescAttr(desc, COL(CX_STATUS) - 1)->atttypid, d);
		if (IS_LIVE(status))
		{
			live_release(row, desc);
			commands_end(row, desc);
		}
		else
			retired_release(row, desc, status);
		return PointerGetDatum(row);
	}
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

PG_FUNCTION_INFO_V1(cscp_expire_contexts);

/*
 * cscp._expire_contexts(batch int) RETURNS bigint: the sweep's expiry.  Up
 * to batch contexts due in cscp.context_live, each still live and past its
 * own expires_at at cscp.now(), locked (those another transaction holds are
 * skipped) and recorded as expired by TTL; the trigger retires each.  Its
 * commands that could still step forward, which the trigger writes
 * (commands_follow), are locked first, and a context one of whose is held
 * by another transaction is skipped too: the sweep never waits.  Returns
 * the number of contexts expired.
 */
Datum
cscp_expire_contexts(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {INT4OID, TIMESTAMPTZOID};
	int32		batch = PG_GETARG_INT32(0);
	Datum		args[2];
	int			ret;
	uint64		n;

	if (batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be positive"),
				 errdetail("The batch given is %d.", batch)));
	args[0] = Int32GetDatum(batch);
	args[1] = TimestampTzGetDatum(cscp_now());

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "UPDATE cscp.context c SET status = 'expired', reason = 'ttl'"
				  " WHERE c.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
				  "           SELECT x.ctid"
				  "             FROM (SELECT y.tenant_id, y.context_id FROM cscp.context_live y"
				  "                    WHERE y.expires_at OPERATOR(pg_catalog.<=) $2"
				  "                    ORDER BY y.expires_at"
				  "                    LIMIT $1) l"
				  "            CROSS JOIN LATERAL ("
				  "                  SELECT z.ctid FROM cscp.context z"
				  "                   WHERE z.tenant_id OPERATOR(pg_catalog.=) l.tenant_id AND z.context_id OPERATOR(pg_catalog.=) l.context_id"
				  "                     AND z.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}')"
				  "                     AND z.expires_at OPERATOR(pg_catalog.<=) $2"
				  "                     AND NOT EXISTS ("
				  "                           SELECT FROM cscp.frame f JOIN cscp.command m"
				  "                               ON m.tenant_id OPERATOR(pg_catalog.=) f.tenant_id AND m.frame_id OPERATOR(pg_catalog.=) f.frame_id"
				  "                            WHERE f.tenant_id OPERATOR(pg_catalog.=) z.tenant_id AND f.context_id OPERATOR(pg_catalog.=) z.context_id"
				  "                              AND m.state OPERATOR(pg_catalog.=) ANY (" STEPPING_STATES ")"
				  "                              AND NOT EXISTS ("
				  "                                    SELECT FROM cscp.command k"
				  "                                     WHERE k.tenant_id OPERATOR(pg_catalog.=) m.tenant_id AND k.command_id OPERATOR(pg_catalog.=) m.command_id"
				  "                                       FOR NO KEY UPDATE SKIP LOCKED))"
				  "                     FOR UPDATE SKIP LOCKED) x))"
				  "   AND c.status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}') AND c.expires_at OPERATOR(pg_catalog.<=) $2",
				  2, types);
	ret = SPI_execute_plan(plan, args, NULL, false, 0);
	n = SPI_processed;
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "could not expire contexts: %s", SPI_result_code_string(ret));
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}
