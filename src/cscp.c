/*-------------------------------------------------------------------------
 *
 * cscp.c
 *	  Module entry point: settings only.
 *
 * cscp.clock pins cscp.now() for tests and replays.  It is PGC_SUSET: an
 * application role that could move the clock could revive an expired
 * context or a lapsed confirmation, so only a superuser may set it.
 *
 * cscp.tenant_id names the tenant a session acts for.  Row-level security
 * on every cscp table compares tenant_id with it; while it is empty, a role
 * bound by row-level security sees and writes nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "fmgr.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

char	   *cscp_clock_setting = NULL;
char	   *cscp_tenant_setting = NULL;

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

	MarkGUCPrefixReserved("cscp");
}
