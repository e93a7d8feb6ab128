/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  cscp.sweep: lapse passed windows, time out conversations, expire
 *	  contexts, then delete what is past its time (expired checkpoint
 *	  threads and store items included).
 *
 * Correctness never waits for the sweep: readers treat anything past
 * expires_at as expired.  Each action takes at most `batch` rows with FOR
 * UPDATE SKIP LOCKED, so a sweep never blocks on, nor is blocked by, a row
 * an application transaction holds; what it skips, the next sweep takes.
 *
 * Everything runs with the caller's rights: an application role's sweep
 * sees and changes only its tenant's rows (row-level security), and deletes
 * only what it may delete.  The steps that are C (a lapsed question, a
 * conversation's timeout, the contexts' expiry) are called here directly; the deletions are the
 * PL/pgSQL of cscp._sweep_purge, called through the function manager, so
 * that no internal function needs to be executable by the caller.
 *
 * Locks, in order, per lapsed window: the context row, then the command
 * row; per timed-out conversation: its row (then those its close takes).
 *
 * A call does one batch of each action and returns: it never waits.  A
 * count that reached the batch says that more may be due; pacing the calls
 * that work through such a backlog is the caller's (the background worker
 * waits cscp.sweep_backlog_delay between them, worker.c).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"
#include "conversation/conversation.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

/* The largest batch a call may take. */
#define SWEEP_MAX_BATCH 1000000

/* The counts of a sweep, in the order of its result's keys. */
typedef enum SweepCount
{
	SW_EXPIRED,
	SW_DOCS,
	SW_WS,
	SW_PURGED,
	SW_CONFIRMATIONS,
	SW_APPROVALS,
	SW_COMMANDS,
	SW_EVIDENCE,
	SW_TIMEOUTS,
	SW_CONVERSATIONS,
	SW_TURNS,
	SW_EVENTS,
	SW_ANSWERS,
	SW_FRAMES,
	SW_THREADS,
	SW_STORE_ITEMS,
	SW_NUM
} SweepCount;

static const char *const count_keys[SW_NUM] = {
	"contexts_expired", "documents_deleted", "working_set_deleted", "contexts_purged",
	"confirmations_lapsed", "approvals_lapsed", "commands_purged", "evidence_purged",
	"conversations_timed_out", "conversations_purged", "turns_purged", "events_purged",
	"answers_purged", "frames_purged", "checkpoint_threads_deleted", "store_items_deleted"
};

/* An output column of a deletion step and the count it holds. */
typedef struct PurgeColumn
{
	const char *column;
	SweepCount	count;
} PurgeColumn;

/* The output columns of cscp._sweep_purge. */
static const PurgeColumn purge_columns[] = {
	{"n_docs", SW_DOCS}, {"n_ws", SW_WS}, {"n_purged", SW_PURGED},
	{"n_commands", SW_COMMANDS}, {"n_evidence", SW_EVIDENCE},
	{"n_conversations", SW_CONVERSATIONS}, {"n_turns", SW_TURNS}, {"n_events", SW_EVENTS},
	{"n_answers", SW_ANSWERS}, {"n_frames", SW_FRAMES}
};

/* The output columns of cscp._sweep_checkpoints (checkpoint.sql). */
static const PurgeColumn checkpoint_columns[] = {
	{"n_threads", SW_THREADS}, {"n_store_items", SW_STORE_ITEMS}
};

/*
 * Confirmation and approval windows passed at now, found through
 * cscp.command_window: each command still waiting is lapsed (cscp_lapse:
 * rejected, its context's slot cleared, or the context's expiry recorded).
 * The command's context is looked up in the select list of the limited
 * scan: one lookup by primary key per row, never a join the planner could
 * make a scan of the table.
 */
static void
lapse_windows(int32 batch, Datum now, int64 *counts)
{
	static SPIPlanPtr due_plan = NULL;
	static SPIPlanPtr context_plan = NULL;
	static SPIPlanPtr command_plan = NULL;
	static const Oid due_types[2] = {TIMESTAMPTZOID, INT4OID};
	static const Oid key_types[2] = {TEXTOID, UUIDOID};
	static const Oid command_types[3] = {TEXTOID, UUIDOID, TIMESTAMPTZOID};
	Datum		args[3] = {now, Int32GetDatum(batch)};
	SPITupleTable *due;
	uint64		ndue;

	cscp_spi_plan(&due_plan,
				  "SELECT w.tenant_id, w.command_id,"
				  "       (SELECT x.context_id FROM cscp.command x"
				  "         WHERE x.tenant_id OPERATOR(pg_catalog.=) w.tenant_id AND x.command_id OPERATOR(pg_catalog.=) w.command_id) AS context_id"
				  "  FROM cscp.command_window w"
				  " WHERE w.window_expires_at OPERATOR(pg_catalog.<=) $1"
				  " ORDER BY w.window_expires_at"
				  " LIMIT $2",
				  2, due_types);
	cscp_spi_run(due_plan, args, NULL, SPI_OK_SELECT);
	due = SPI_tuptable;
	ndue = SPI_processed;

	for (uint64 i = 0; i < ndue; i++)
	{
		HeapTuple	row = due->vals[i];
		HeapTuple	ctx = NULL;
		TupleDesc	ctxdesc = NULL;
		HeapTuple	cmd;
		TupleDesc	cmddesc;
		SPITupleTable *cmdtab;
		bool		isnull;
		Datum		tenant = SPI_getbinval(row, due->tupdesc, 1, &isnull);
		Datum		command_id = SPI_getbinval(row, due->tupdesc, 2, &isnull);
		Datum		context_id = SPI_getbinval(row, due->tupdesc, 3, &isnull);
		SPITupleTable *ctxtab = NULL;
		char	   *state;

		CHECK_FOR_INTERRUPTS();
		if (!isnull)
		{
			args[0] = tenant;
			args[1] = context_id;
			cscp_spi_plan(&context_plan,
						  "SELECT * FROM cscp.context x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $2"
						  "   FOR UPDATE SKIP LOCKED",
						  2, key_types);
			cscp_spi_run(context_plan, args, NULL, SPI_OK_SELECT);
			ctxtab = SPI_tuptable;
			if (SPI_processed != 1)
			{
				SPI_freetuptable(ctxtab);
				continue;
			}
			ctx = ctxtab->vals[0];
			ctxdesc = ctxtab->tupdesc;
		}
		args[0] = tenant;
		args[1] = command_id;
		args[2] = now;
		cscp_spi_plan(&command_plan,
					  "SELECT * FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2"
					  "   AND x.state OPERATOR(pg_catalog.=) ANY ('{confirmation_required,authz_pending}')"
					  "   AND x.window_expires_at OPERATOR(pg_catalog.<=) $3"
					  "   FOR UPDATE SKIP LOCKED",
					  3, command_types);
		cscp_spi_run(command_plan, args, NULL, SPI_OK_SELECT);
		if (SPI_processed != 1)
		{
			SPI_freetuptable(SPI_tuptable);
			if (ctxtab != NULL)
				SPI_freetuptable(ctxtab);
			continue;
		}
		cmdtab = SPI_tuptable;
		cmd = cmdtab->vals[0];
		cmddesc = cmdtab->tupdesc;
		state = SPI_getvalue(cmd, cmddesc, cscp_column(cmddesc, "cscp.command", "state"));
		if (strcmp(state, "confirmation_required") == 0)
		{
			cscp_lapse(ctx, ctxdesc, cmd, cmddesc, "confirmation_expired");
			counts[SW_CONFIRMATIONS]++;
		}
		else
		{
			cscp_lapse(ctx, ctxdesc, cmd, cmddesc, "approval_expired");
			counts[SW_APPROVALS]++;
		}
		SPI_freetuptable(cmdtab);
		if (ctxtab != NULL)
			SPI_freetuptable(ctxtab);
	}
}

/*
 * Open conversations past their deadline at now are closed: a system turn,
 * a null outcome, their contexts closed (conversation.c).
 */
static void
time_out_conversations(int32 batch, Datum now, int64 *counts)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TIMESTAMPTZOID, INT4OID};
	Datum		args[2] = {now, Int32GetDatum(batch)};
	SPITupleTable *due;
	uint64		ndue;

	cscp_spi_plan(&plan,
				  "SELECT c.tenant_id, c.conversation_id FROM cscp.conversation c"
				  " WHERE c.state OPERATOR(pg_catalog.=) 'open' AND c.deadline OPERATOR(pg_catalog.<=) $1"
				  " ORDER BY c.deadline"
				  " LIMIT $2"
				  "   FOR UPDATE SKIP LOCKED",
				  2, types);
	cscp_spi_run(plan, args, NULL, SPI_OK_SELECT);
	due = SPI_tuptable;
	ndue = SPI_processed;
	for (uint64 i = 0; i < ndue; i++)
	{
		bool		isnull;
		Datum		tenant = SPI_getbinval(due->vals[i], due->tupdesc, 1, &isnull);
		Datum		conversation = SPI_getbinval(due->vals[i], due->tupdesc, 2, &isnull);

		CHECK_FOR_INTERRUPTS();
		if (cscp_conversation_time_out(DatumGetTextPP(tenant), DatumGetTextPP(conversation)))
			counts[SW_TIMEOUTS]++;
	}
}

/*
 * A deletion step (cscp._sweep_purge, cscp._sweep_checkpoints), called
 * directly; the counts of its output columns into counts.  A step missing
 * from cscp's schema counts nothing: the library of a new version runs
 * against the SQL of the old one between the steps of an upgrade
 * (cscp._sweep_checkpoints came with 0.2.0).
 */
static void
purge(const char *fname, const PurgeColumn *columns, int ncolumns,
	  int32 batch, Datum now, int64 *counts)
{
	static const Oid argtypes[2] = {INT4OID, TIMESTAMPTZOID};
	Oid			fn = LookupFuncName(list_make2(makeString("cscp"), makeString(pstrdup(fname))),
									2, argtypes, true);
	FmgrInfo	flinfo;
	Datum		result;
	HeapTupleHeader rec;

	LOCAL_FCINFO(call, 2);

	if (!OidIsValid(fn))
		return;
	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, 2, InvalidOid, NULL, NULL);
	call->args[0].value = Int32GetDatum(batch);
	call->args[0].isnull = false;
	call->args[1].value = now;
	call->args[1].isnull = false;
	result = FunctionCallInvoke(call);
	if (call->isnull)
		elog(ERROR, "cscp.%s returned null", fname);
	rec = DatumGetHeapTupleHeader(result);
	for (int i = 0; i < ncolumns; i++)
	{
		bool		isnull;
		Datum		d = GetAttributeByName(rec, columns[i].column, &isnull);

		counts[columns[i].count] = isnull ? 0 : DatumGetInt64(d);
	}
}

PG_FUNCTION_INFO_V1(cscp_sweep);

/* cscp.sweep(batch int) RETURNS jsonb: the counts of each action. */
Datum
cscp_sweep(PG_FUNCTION_ARGS)
{
	int64		counts[SW_NUM] = {0};
	int32		batch;
	Datum		now;
	JsonbParseState *st = NULL;
	JsonbValue *result;

	if (PG_ARGISNULL(0) || PG_GETARG_INT32(0) < 1 || PG_GETARG_INT32(0) > SWEEP_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be between 1 and %d", SWEEP_MAX_BATCH),
				 PG_ARGISNULL(0) ? errdetail("The batch given is null.") :
				 errdetail("The batch given is %d.", PG_GETARG_INT32(0)),
				 errhint("Call cscp.sweep repeatedly with a moderate batch, such as 10000.")));
	batch = PG_GETARG_INT32(0);
	now = TimestampTzGetDatum(cscp_now());

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	lapse_windows(batch, now, counts);
	time_out_conversations(batch, now, counts);
	counts[SW_EXPIRED] = DatumGetInt64(DirectFunctionCall1(cscp_expire_contexts,
														   Int32GetDatum(batch)));
	SPI_finish();
	purge("_sweep_purge", purge_columns, lengthof(purge_columns), batch, now, counts);
	purge("_sweep_checkpoints", checkpoint_columns, lengthof(checkpoint_columns), batch, now, counts);

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < SW_NUM; i++)
		cscp_jsonb_push_int(&st, count_keys[i], counts[i]);
	result = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	PG_RETURN_JSONB_P(JsonbValueToJsonb(result));
}
