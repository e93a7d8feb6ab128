/*-------------------------------------------------------------------------
 *
 * clock.c
 *	  cscp.now(): the one clock every expiry decision uses.
 *
 * statement_timestamp(), unless the superuser-only setting cscp.clock holds
 * a timestamp.  The parsed value is cached against the setting's string so
 * that a pinned clock costs one string comparison per call.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "pgcompat.h"

#include "access/xact.h"
#include "fmgr.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

static char *cached_clock_text = NULL;
static TimestampTz cached_clock_value = 0;

/*
 * Parse a timestamp with time zone without raising: false when the text is
 * not one.  Only concrete dates are accepted (not 'now', 'infinity', ...).
 */
bool
cscp_parse_timestamptz(const char *str, TimestampTz *result)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	struct pg_tm tt,
			   *tm = &tt;
	fsec_t		fsec;
	int			tz;

	if (str == NULL || strlen(str) >= MAXDATELEN)
		return false;
	if (ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
					  MAXDATEFIELDS, &nf) != 0)
		return false;
	if (cscp_decode_date_time(field, ftype, nf, &dtype, tm, &fsec, &tz) != 0)
		return false;
	if (dtype != DTK_DATE)
		return false;
	return tm2timestamp(tm, fsec, &tz, result) == 0 && !TIMESTAMP_NOT_FINITE(*result);
}

/* The current time as cscp sees it. */
TimestampTz
cscp_now(void)
{
	if (cscp_clock_setting == NULL || cscp_clock_setting[0] == '\0')
		return GetCurrentStatementStartTimestamp();

	if (cached_clock_text == NULL || strcmp(cached_clock_text, cscp_clock_setting) != 0)
	{
		TimestampTz ts;

		if (!cscp_parse_timestamptz(cscp_clock_setting, &ts))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for parameter \"cscp.clock\": \"%s\"",
							cscp_clock_setting)));
		if (cached_clock_text)
			pfree(cached_clock_text);
		cached_clock_text = MemoryContextStrdup(TopMemoryContext, cscp_clock_setting);
		cached_clock_value = ts;
	}
	return cached_clock_value;
}

/*
 * cscp.clock when it is set, else the current time (clock_timestamp()):
 * for a write that must read as later than what it waited for.
 */
TimestampTz
cscp_now_exact(void)
{
	if (cscp_clock_setting == NULL || cscp_clock_setting[0] == '\0')
		return GetCurrentTimestamp();
	return cscp_now();
}

PG_FUNCTION_INFO_V1(cscp_now_sql);

/* cscp.now() */
Datum
cscp_now_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(cscp_now());
}
