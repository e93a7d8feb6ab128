/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The optional background worker that runs cscp.sweep() on a timer.
 *
 * Started only when cscp is in shared_preload_libraries.  It connects to
 * cscp.sweep_database as the bootstrap superuser (and restarts when that
 * setting changes) and, every
 * cscp.sweep_interval (0: never; the settings are re-read on SIGHUP), runs
 * cscp.sweep(cscp.sweep_batch) in a transaction of its own, when the
 * extension is installed there.  A sweep that leaves work behind (one of the
 * counts it returns reached the batch) is followed by the next one after
 * cscp.sweep_backlog_delay instead, until the backlog is gone: a backlog is
 * worked through at a bounded pace, in short transactions with pauses
 * between them (this loop's waits, holding no snapshot and no lock), never
 * in one long burst.  cscp.sweep() itself never waits: a session that calls
 * it paces its own calls.  Nothing's correctness depends on the worker:
 * readers treat anything past its time as expired, and the sweep only
 * records and tidies.  An error in a sweep is logged and the worker waits
 * for the next interval.  Its session's search_path is pinned to
 * pg_catalog, pg_temp at start, over any setting of the database or role.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

PGDLLEXPORT void cscp_sweep_worker_main(Datum arg);

/* The database the worker connected to. */
static char connected_database[NAMEDATALEN];

/* Register the worker; called from _PG_init while preloading. */
void
cscp_worker_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "cscp");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "cscp_sweep_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "cscp sweep");
	snprintf(worker.bgw_type, BGW_MAXLEN, "cscp sweep");
	RegisterBackgroundWorker(&worker);
}

/*
 * One sweep in a transaction of its own; false when cscp is not installed.
 * *backlog is set when a count the sweep returned reached its batch, so
 * that more may be waiting.  (A count can reach the batch with nothing left
 * behind, the evidence purged with its commands; that costs one more sweep,
 * which finds no backlog.)
 */
static bool
sweep_once(bool *backlog)
{
	bool		installed;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "SELECT cscp.sweep()");

	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'cscp'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up extension cscp");
	installed = SPI_processed == 1;
	*backlog = false;
	if (installed)
	{
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1] = {Int32GetDatum(cscp_sweep_batch)};
		bool		isnull;

		if (SPI_execute_with_args("SELECT s::pg_catalog.text, EXISTS (SELECT FROM pg_catalog.jsonb_each_text(s) e"
								  "                         WHERE e.value::bigint OPERATOR(pg_catalog.>=) $1)"
								  "  FROM cscp.sweep($1) s",
								  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "cscp.sweep() returned no row");
		*backlog = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											  &isnull));
		elog(DEBUG1, "cscp sweep: %s%s",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
			 *backlog ? " (more to do)" : "");
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return installed;
}

/*
 * Entry point of the worker: sweep, wait cscp.sweep_interval (or
 * cscp.sweep_backlog_delay while a backlog remains), again.
 */
void
cscp_sweep_worker_main(Datum arg)
{
	MemoryContext loopctx;
	volatile bool warned = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(cscp_sweep_database, NULL, 0);
	strlcpy(connected_database, cscp_sweep_database, sizeof(connected_database));
	pgstat_report_appname("cscp sweep");

	/*
	 * The worker is a superuser: whatever search_path the database's or the
	 * role's settings gave it (ALTER DATABASE ... SET, which the database's
	 * owner may run), its queries resolve names in pg_catalog only, and
	 * pg_temp last.  cscp's statements are schema-qualified anyway
	 * (spiplan.c); this pins the session's path as well.
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	ereport(LOG,
			(errmsg("cscp sweep worker started in database \"%s\", every %d ms",
					cscp_sweep_database, cscp_sweep_interval)));

	loopctx = AllocSetContextCreate(TopMemoryContext, "cscp sweep worker",
									ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		int			rc;
		bool		backlog = false;
		long		timeout;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (strcmp(cscp_sweep_database, connected_database) != 0)
			{
				/* The postmaster starts it again, in the new database. */
				ereport(LOG,
						(errmsg("cscp sweep worker restarting: cscp.sweep_database is now \"%s\"",
								cscp_sweep_database)));
				proc_exit(1);
			}
		}

		if (cscp_sweep_interval > 0)
		{
			MemoryContextSwitchTo(loopctx);
			PG_TRY();
			{
				if (!sweep_once(&backlog) && !warned)
				{
					ereport(LOG,
							(errmsg("cscp sweep worker: extension cscp is not installed in database \"%s\"",
									cscp_sweep_database),
							 errhint("Run CREATE EXTENSION cscp there, or set cscp.sweep_database.")));
					warned = true;
				}
			}
			PG_CATCH();
			{
				/* Log it, roll back, and try again at the next interval. */
				MemoryContextSwitchTo(loopctx);
				EmitErrorReport();
				FlushErrorState();
				AbortCurrentTransaction();
				pgstat_report_activity(STATE_IDLE, NULL);
				backlog = false;
			}
			PG_END_TRY();
			MemoryContextSwitchTo(TopMemoryContext);
			MemoryContextReset(loopctx);
		}

		timeout = cscp_sweep_interval;
		if (backlog && cscp_sweep_backlog_delay < timeout)
			timeout = cscp_sweep_backlog_delay;
		rc = WaitLatch(MyLatch,
					   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
					   (cscp_sweep_interval > 0 ? WL_TIMEOUT : 0),
					   cscp_sweep_interval > 0 ? timeout : -1L,
					   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
}
