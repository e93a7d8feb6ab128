/*-------------------------------------------------------------------------
 *
 * cscp.c
 *	  Module entry point: settings, and the notifications cscp.notify turns on.
 *
 * cscp.clock pins cscp.now() for tests and replays.  It is PGC_SUSET: an
 * application role that could move the clock could revive an expired
 * context or a lapsed confirmation, so only a superuser may set it.
 *
 * cscp.tenant_id names the tenant a session acts for.  Row-level security
 * on every cscp table compares tenant_id with it; while it is empty, a role
 * bound by row-level security sees and writes nothing.
 *
 * cscp.notify (superuser-only, so an application cannot silence what
 * operators listen for) makes every context and command transition send
 * a small JSON payload on channel cscp_events.  PostgreSQL lets any role
 * that can connect LISTEN on any channel, and send any payload on it with
 * pg_notify, so the payload carries nothing another tenant could use: the
 * tenant's tag (a keyed hash of the tenant, keys.c; a listener learns its
 * own with cscp.notify_tag()) and whether a context or a command changed,
 * no ids, states or names.  It is a hint to re-read through row-level
 * security, never data.
 *
 * cscp.sweep_interval, cscp.sweep_batch, cscp.sweep_backlog_delay and
 * cscp.sweep_database configure the optional
 * background worker (worker.c), registered here when cscp is preloaded.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "commands/async.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

char	   *cscp_clock_setting = NULL;
char	   *cscp_tenant_setting = NULL;
char	   *cscp_authority_setting = NULL;
bool		cscp_notify_setting = false;
int			cscp_sweep_interval = 60000;
int			cscp_sweep_batch = 10000;
int			cscp_sweep_backlog_delay = 6000;
char	   *cscp_sweep_database = NULL;

void		_PG_init(void);

/* Validate cscp.clock: empty, or a timestamp with time zone. */
static bool
check_clock(char **newval, void **extra, GucSource source)
{
	TimestampTz ts;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!cscp_parse_timestamptz(*newval, &ts))
	{
		GUC_check_errdetail("\"%s\" is not a timestamp with time zone.", *newval);
		GUC_check_errhint("Use a value such as '2026-01-01 12:00:00+00', or '' to follow statement_timestamp().");
		return false;
	}
	return true;
}

/* Validate cscp.tenant_id: at most CSCP_MAX_ID_BYTES bytes. */
static bool
check_tenant(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && strlen(*newval) > CSCP_MAX_ID_BYTES)
	{
		GUC_check_errdetail("A tenant id is at most %d bytes long.", CSCP_MAX_ID_BYTES);
		return false;
	}
	return true;
}

void
_PG_init(void)
{
	DefineCustomStringVariable("cscp.clock",
							   "Pins the time cscp.now() returns.",
							   "Empty means statement_timestamp(). Tests and replays set a fixed "
							   "timestamp; only superusers may change it.",
							   &cscp_clock_setting,
							   "",
							   PGC_SUSET,
							   0,
							   check_clock,
							   NULL,
							   NULL);

	DefineCustomStringVariable("cscp.tenant_id",
							   "Names the tenant this session acts for.",
							   "Row-level security on every cscp table shows and accepts only "
							   "this tenant's rows to roles it binds; empty means none.",
							   &cscp_tenant_setting,
							   "",
							   PGC_USERSET,
							   0,
							   check_tenant,
							   NULL,
							   NULL);

	DefineCustomStringVariable("cscp.authority",
							   "Holds this session's fact writes to an authority.",
							   "A fact whose source names an authority ranked above it is refused; "
							   "it only narrows what the role's own binding (cscp.authority_bind) "
							   "allows. The gateway sets it to the API key's authority; empty "
							   "means none.",
							   &cscp_authority_setting,
							   "",
							   PGC_USERSET,
							   0,
							   NULL,
							   NULL,
							   NULL);

	DefineCustomBoolVariable("cscp.notify",
							 "Sends a notification on channel cscp_events for each context and command transition.",
							 "The payload is a JSON object with the tenant's tag (cscp.notify_tag()) "
							 "and kind (context or command); it is delivered when the transaction commits.",
							 &cscp_notify_setting,
							 false,
							 PGC_SUSET,
							 0,
							 NULL,
							 NULL,
							 NULL);

	DefineCustomIntVariable("cscp.sweep_interval",
							"Time between two runs of cscp.sweep() by the background worker.",
							"0 stops the worker from sweeping. The worker runs only when cscp is "
							"in shared_preload_libraries.",
							&cscp_sweep_interval,
							60000,
							0,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL,
							NULL,
							NULL);

	DefineCustomIntVariable("cscp.sweep_batch",
							"Batch of each cscp.sweep() the background worker runs.",
							"Each action of a sweep takes at most this many rows.",
							&cscp_sweep_batch,
							10000,
							1,
							1000000,
							PGC_SIGHUP,
							0,
							NULL,
							NULL,
							NULL);

	DefineCustomIntVariable("cscp.sweep_backlog_delay",
							"Time the background worker waits between two sweeps of a backlog.",
							"After a sweep in which an action reached its batch, the worker "
							"sweeps again after this long (at most cscp.sweep_interval). "
							"0 sweeps a backlog without pause. A call of cscp.sweep() never waits.",
							&cscp_sweep_backlog_delay,
							6000,
							0,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL,
							NULL,
							NULL);

	DefineCustomStringVariable("cscp.sweep_database",
							   "Database in which the background worker runs cscp.sweep().",
							   "The worker connects as the bootstrap superuser; cscp must be "
							   "installed there. On a change the worker restarts in the new database.",
							   &cscp_sweep_database,
							   "postgres",
							   PGC_SIGHUP,
							   0,
							   NULL,
							   NULL,
							   NULL);

	MarkGUCPrefixReserved("cscp");

	cscp_tenancy_register();

	if (process_shared_preload_libraries_in_progress)
		cscp_worker_register();
}

/*
 * With cscp.notify on, queue {"tag", "kind"} on channel cscp_events: the
 * tenant's notification tag and the kind of row that changed.  NOTIFY
 * delivers it at commit, and not at all if the transaction rolls back;
 * identical payloads of one transaction are delivered once.  The callers
 * (the context and command triggers) also pass the id and the states;
 * they are deliberately not sent (see the header).
 */
void
cscp_notify_transition(const char *tenant, const char *kind, const char *id,
					   const char *from, const char *to)
{
	StringInfoData buf;

	if (!cscp_notify_setting)
		return;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"tag\":\"");
	appendStringInfoString(&buf, cscp_notify_tag_of(tenant));
	appendStringInfoString(&buf, "\",\"kind\":");
	cscp_canonical_string(&buf, kind, strlen(kind));
	appendStringInfoChar(&buf, '}');
	Async_Notify(CSCP_NOTIFY_CHANNEL, buf.data);
}
