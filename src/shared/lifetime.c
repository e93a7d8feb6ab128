/*-------------------------------------------------------------------------
 *
 * lifetime.c
 *	  Lifetimes, deadlines and the expiry times stored from them.
 *
 * Every expiry cscp stores (a context's expires_at, a document's, a
 * working-set item's, a conversation's deadline, a confirmation or approval
 * window) is start + lifetime, and every one is decided here, by
 * cscp_expiry_status: the lifetime is judged by what it does, not by the
 * signs of its fields.  An interval such as '-1 mon 30 days 1 hour' is
 * "positive" to interval_cmp (it counts a month as 30 days), yet from April
 * 15th (a month back is 31 days back) it lands 23 hours in the past; so
 * start + lifetime is computed and must be later than start, and no later
 * than start + the tenant's max_ttl.  The arithmetic never leaves PostgreSQL's timestamp range (an
 * interval whose parts could carry it out is refused before it is added),
 * so no stored time is one that pg_dump writes and pg_restore refuses.
 *
 * Policy values are bounded where they are set (policy.c, which this file
 * reads and which reads nothing of this one): max_ttl and the lifetimes at
 * most CSCP_MAX_LIFETIME_YEARS, the retention periods at most
 * CSCP_MAX_RETENTION_YEARS, with no negative part, so that a policy value
 * means the same on every date.  Whether a tenant's default lifetimes fit
 * its max_ttl is decided here, by the trigger cscp.policy_lifetimes on
 * cscp.policy.  API arguments are checked here, at the
 * moment they are used, by cscp_lifetime (cscp.check_lifetime in SQL);
 * direct writes of an expiry column are held to the same bound by the
 * tables' guard triggers
 * (cscp_check_stored_expiry; cscp.working_set's guard is here, the others
 * are the tables' own guards).  A document or working-set item past its
 * expiry is never updated (cscp_check_not_expired): only deleted.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

/* The largest magnitude of each part of an interval cscp adds to a time. */
#define PART_YEARS		1000
#define PART_MONTHS		(PART_YEARS * MONTHS_PER_YEAR)
#define PART_DAYS		(PART_YEARS * 366)
#define PART_USECS		((int64) PART_YEARS * 366 * USECS_PER_DAY)

/* interval as text, for messages */
static char *
interval_text(const Interval *iv)
{
	return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv)));
}

/* Whether every part of iv is small enough to be added to a sane time. */
static bool
interval_parts_sane(const Interval *iv)
{
	return iv->month >= -PART_MONTHS && iv->month <= PART_MONTHS &&
		iv->day >= -PART_DAYS && iv->day <= PART_DAYS &&
		iv->time >= -PART_USECS && iv->time <= PART_USECS;
}

/*
 * t + iv into *result, without raising: false when t is not a time far
 * enough inside the timestamp range, or iv has a part too large to add.
 */
static bool
time_plus(TimestampTz t, const Interval *iv, TimestampTz *result)
{
	/* Far enough from both ends that adding any sane interval stays inside. */
	const int64 margin = (INT64CONST(2) * PART_YEARS + 2) * 366 * USECS_PER_DAY;

	if (TIMESTAMP_NOT_FINITE(t) || t < MIN_TIMESTAMP + margin || t > END_TIMESTAMP - margin ||
		!interval_parts_sane(iv))
		return false;
	*result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(t),
													  IntervalPGetDatum((Interval *) iv)));
	return IS_VALID_TIMESTAMP(*result);
}

/*
 * The tenant's max_ttl from its effective policy, into *max; the hard bound
 * CSCP_MAX_LIFETIME_YEARS when the policy has none (or an unusable one).
 */
static void
policy_max_ttl(Jsonb *policy, Interval *max)
{
	/* The last text parsed and its interval: parsing costs more than the rest of a check. */
	static char last_text[64] = "";
	static Interval last_max;
	JsonbValue *v = cscp_jsonb_get(policy, "max_ttl");
	char	   *s;

	if (v != NULL && v->type == jbvString && v->val.string.len < (int) sizeof(last_text) &&
		v->val.string.len > 0 && strncmp(last_text, v->val.string.val, v->val.string.len) == 0 &&
		last_text[v->val.string.len] == '\0')
	{
		*max = last_max;
		return;
	}
	s = v != NULL && v->type == jbvString ? pnstrdup(v->val.string.val, v->val.string.len) : NULL;
	if (s == NULL || !cscp_parse_interval(s, max) || !cscp_policy_interval_ok(max, false))
	{
		memset(max, 0, sizeof(Interval));
		max->month = CSCP_MAX_LIFETIME_YEARS * MONTHS_PER_YEAR;
		return;
	}
	if (strlen(s) < sizeof(last_text))
	{
		strcpy(last_text, s);
		last_max = *max;
	}
}

/*
 * The decision on a lifetime: start + ttl into *expiry, and whether that is
 * a usable expiry under policy (later than start, no later than start +
 * max_ttl, whose text goes to *max_text when asked).
 */
CscpExpiryStatus
cscp_expiry_status(Jsonb *policy, TimestampTz start, const Interval *ttl,
				   TimestampTz *expiry, char **max_text)
{
	Interval	max;
	TimestampTz limit;

	policy_max_ttl(policy, &max);
	if (max_text != NULL)
		*max_text = interval_text(&max);
	if (!time_plus(start, ttl, expiry))
		return ttl->month > 0 || ttl->day > 0 || ttl->time > 0 ?
			CSCP_EXPIRY_TOO_LONG : CSCP_EXPIRY_NOT_POSITIVE;
	if (*expiry <= start)
		return CSCP_EXPIRY_NOT_POSITIVE;
	if (!time_plus(start, &max, &limit) || *expiry > limit)
		return CSCP_EXPIRY_TOO_LONG;
	return CSCP_EXPIRY_OK;
}

/*
 * Raise 22023 unless every default lifetime of a tenant's effective policy
 * (context_ttl, confirmation_ttl, approval_ttl) fits within its max_ttl,
 * both as interval_cmp compares them and as cscp_expiry_status judges them
 * from now: a policy whose context_ttl exceeds its max_ttl would make every
 * context_open that takes the default fail.  tenant names the policy.
 */
static void
check_policy_lifetimes(const char *tenant, Jsonb *policy)
{
	static const char *const keys[] = {"context_ttl", "confirmation_ttl", "approval_ttl"};
	TimestampTz now = cscp_now();
	Interval	max;

	policy_max_ttl(policy, &max);
	for (int i = 0; i < (int) lengthof(keys); i++)
	{
		JsonbValue *v = cscp_jsonb_get(policy, keys[i]);
		Interval	ttl;
		TimestampTz expiry;
		char	   *max_text;

		if (v == NULL || v->type != jbvString ||
			!cscp_parse_interval(pnstrdup(v->val.string.val, v->val.string.len), &ttl))
			continue;			/* a value of the wrong type is policy_validate's */
		if (DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum(&ttl),
											  IntervalPGetDatum(&max))) <= 0 &&
			cscp_expiry_status(policy, now, &ttl, &expiry, &max_text) != CSCP_EXPIRY_TOO_LONG)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("policy key \"%s\" of tenant \"%s\" exceeds its \"max_ttl\"", keys[i], tenant),
				 errdetail("\"%s\" is %s and \"max_ttl\" is %s: every lifetime taken from \"%s\" would be refused.",
						   keys[i], interval_text(&ttl), interval_text(&max), keys[i]),
				 errhint("Raise \"max_ttl\" or lower \"%s\"; cscp.policy_set may set both in one call.",
						 keys[i])));
	}
}

/*
 * start + ttl, refused (22023, naming argname; policy_key is where the
 * default comes from) unless it is later than start and within the
 * policy's max_ttl.
 */
TimestampTz
cscp_expiry(Jsonb *policy, TimestampTz start, const Interval *ttl, const char *policy_key,
			const char *argname)
{
	TimestampTz expiry = 0;
	char	   *max_text;

	switch (cscp_expiry_status(policy, start, ttl, &expiry, &max_text))
	{
		case CSCP_EXPIRY_OK:
			break;
		case CSCP_EXPIRY_NOT_POSITIVE:
			{
				Interval	zero = {0};

				/* One that looks positive field by field is shown where it lands. */
				if (time_plus(start, ttl, &expiry) &&
					DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum((Interval *) ttl),
													  IntervalPGetDatum(&zero))) > 0)
				{
					/* timestamptz_to_str answers in one static buffer */
					char	   *from = pstrdup(timestamptz_to_str(start));
					char	   *to = pstrdup(timestamptz_to_str(expiry));

					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s must be positive", argname),
							 errdetail("The lifetime given is %s; from %s it ends at %s, which is not later.",
									   interval_text(ttl), from, to),
							 errhint("Pass an interval with no negative part, or NULL for the policy's %s.",
									 policy_key)));
				}
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s must be positive", argname),
						 errdetail("The lifetime given is %s.", interval_text(ttl)),
						 errhint("Pass a positive interval, or NULL for the policy's %s.", policy_key)));
			}
			break;
		case CSCP_EXPIRY_TOO_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is too long", argname),
					 errdetail("The lifetime given is %s; the policy allows lifetimes up to %s (policy key \"max_ttl\").",
							   interval_text(ttl), max_text),
					 errhint("Pass a shorter lifetime, or raise \"max_ttl\" with cscp.policy_set.")));
			break;
	}
	return expiry;
}

/*
 * A lifetime: requested, or the policy's policy_key; refused (22023, naming
 * argname) unless, from now, it ends later than now and within the policy's
 * max_ttl (cscp_expiry).
 */
Interval *
cscp_lifetime(Jsonb *policy, Interval *requested, const char *policy_key, const char *argname)
{
	Interval   *ttl = requested;

	if (ttl == NULL)
	{
		char	   *s = cscp_jsonb_get_cstring(policy, policy_key);

		ttl = palloc(sizeof(Interval));
		if (s == NULL || !cscp_parse_interval(s, ttl))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the policy has no interval under key \"%s\"", policy_key),
					 errhint("Pass %s, or set \"%s\" with cscp.policy_set.", argname, policy_key)));
	}
	(void) cscp_expiry(policy, cscp_now(), ttl, policy_key, argname);
	return ttl;
}

/*
 * The end of a window opened now for tenant: cscp.now() plus the lifetime
 * its policy gives under policy_key (confirmation_ttl, approval_ttl).
 */
TimestampTz
cscp_window_end(const char *tenant, const char *policy_key)
{
	Interval   *ttl = cscp_lifetime(cscp_policy_get(tenant), NULL, policy_key, policy_key);

	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(cscp_now()),
												   IntervalPGetDatum(ttl)));
}

/*
 * The latest expiry a write may store at now under policy: now + max_ttl.
 */
TimestampTz
cscp_expiry_limit(Jsonb *policy, TimestampTz now)
{
	Interval	max;
	TimestampTz limit;

	policy_max_ttl(policy, &max);
	if (!time_plus(now, &max, &limit))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("cscp.now() is too close to the end of the timestamp range to compute an expiry"),
				 errhint("Reset cscp.clock.")));
	return limit;
}

/*
 * Raise 22023 unless expires_at, written to column of table by a row of
 * tenant at now, is finite and no later than now + the tenant's max_ttl.
 */
void
cscp_check_stored_expiry(const char *tenant, const char *table, const char *column,
						 TimestampTz expires_at, TimestampTz now)
{
	Jsonb	   *policy = cscp_policy_get(tenant != NULL ? tenant : "*");
	Interval	max;

	if (!TIMESTAMP_NOT_FINITE(expires_at) && expires_at <= cscp_expiry_limit(policy, now))
		return;
	policy_max_ttl(policy, &max);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("column \"%s\" of %s is too far in the future", column, table),
			 errdetail("It is %s; the policy of tenant \"%s\" allows lifetimes up to %s (policy key \"max_ttl\").",
					   timestamptz_to_str(expires_at), tenant ? tenant : "*", interval_text(&max)),
			 errhint("Write a finite time within max_ttl of now, or let cscp's functions compute it.")));
}

/*
 * Raise 55000 when oldtup, a row of table about to be updated, is past its
 * expires_at (column expires_col): an expired document or working-set item
 * can only be deleted (purged), never written again, so that no UPDATE of
 * expires_at brings its data back.  The API starts such a row anew by
 * deleting it first.
 */
void
cscp_check_not_expired(const char *table, HeapTuple oldtup, TupleDesc desc, int expires_col,
					   TimestampTz now)
{
	bool		isnull;
	Datum		d = heap_getattr(oldtup, expires_col, desc, &isnull);

	if (isnull || DatumGetTimestampTz(d) > now)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a row of %s past its expiry cannot be changed", table),
			 errdetail("It expired at %s; expired data never comes back.",
					   timestamptz_to_str(DatumGetTimestampTz(d))),
			 errhint("Delete it and write a new one, as cscp's functions do.")));
}

/* The columns of an expiring row, in the order of CSCP_EXPIRING_COLUMNS. */
const char *const cscp_expiring_column_names[2] = {"tenant_id", "expires_at"};

/*
 * The expiry rules of newtup, a row of the table of cols (declared with
 * CSCP_EXPIRING_COLUMNS) being inserted (oldtup NULL) or updated in rel:
 * an UPDATE of a row past its expiry is refused (cscp_check_not_expired),
 * and a new expiry is held to max_ttl (cscp_check_stored_expiry).  A row
 * without a tenant or an expiry is left to its NOT NULL constraints.
 */
void
cscp_check_expiring_row(CscpColumns *cols, Relation rel, HeapTuple oldtup, HeapTuple newtup,
						TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	const char *table = cols->table;
	int			tenant_col;
	int			expires_col;
	bool		isnull,
				tnull;
	Datum		d;
	Datum		t;

	cscp_columns_load(cols, rel);
	tenant_col = cols->attnum[0];
	expires_col = cols->attnum[1];
	if (oldtup != NULL)
	{
		cscp_check_not_expired(table, oldtup, desc, expires_col, now);
		if (cscp_same_value(oldtup, newtup, desc, expires_col))
			return;
	}
	d = heap_getattr(newtup, expires_col, desc, &isnull);
	t = heap_getattr(newtup, tenant_col, desc, &tnull);
	if (!isnull && !tnull)
		cscp_check_stored_expiry(TextDatumGetCString(t), table, "expires_at",
								 DatumGetTimestampTz(d), now);
}

PG_FUNCTION_INFO_V1(cscp_policy_lifetimes);

/*
 * Trigger cscp.policy_lifetimes(): AFTER INSERT OR UPDATE FOR EACH ROW on
 * cscp.policy.  The effective policy of the row's tenant, or of every
 * tenant when the row is the defaults '*', keeps its default lifetimes
 * within its max_ttl (check_policy_lifetimes, 22023), whichever key
 * was written last.  Read as the caller: a role row-level security binds
 * writes only its own tenant's row, and sees it and the defaults.
 */
Datum
cscp_policy_lifetimes(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {TEXTOID};
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	TupleDesc	desc;
	Datum		tenant;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.policy_lifetimes() must be called as an AFTER ROW trigger")));
	row = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);
	tenant = heap_getattr(row, SPI_fnumber(desc, "tenant_id"), desc, &isnull);
	if (isnull)
		return PointerGetDatum(NULL);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT t.tenant_id, coalesce(d.settings, '{}'::pg_catalog.jsonb) OPERATOR(pg_catalog.||) t.settings"
				  "  FROM cscp.policy t LEFT JOIN cscp.policy d ON d.tenant_id OPERATOR(pg_catalog.=) '*'"
				  " WHERE $1 OPERATOR(pg_catalog.=) '*' OR t.tenant_id OPERATOR(pg_catalog.=) $1",
				  1, argtypes);
	/* not read-only: a fresh snapshot, which sees the row just written */
	if (SPI_execute_plan(plan, &tenant, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the policies a policy change affects");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		Datum		policy = SPI_getbinval(t, SPI_tuptable->tupdesc, 2, &isnull);

		if (!isnull)
			check_policy_lifetimes(SPI_getvalue(t, SPI_tuptable->tupdesc, 1),
										DatumGetJsonbP(policy));
	}
	SPI_finish();
	return PointerGetDatum(NULL);
}

static CscpColumns ws_columns = CSCP_EXPIRING_COLUMNS("cscp.working_set");

static HeapTuple
ws_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	cscp_check_expiring_row(&ws_columns, rel, NULL, tuple, now);
	return tuple;
}

static HeapTuple
ws_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
		  TimestampTz now)
{
	cscp_check_expiring_row(&ws_columns, rel, oldtup, newtup, now);
	return newtup;
}

static const CscpRowGuard ws_guard = {
	.name = "cscp.working_set_guard()",
	.insert = ws_insert,
	.update = ws_update,
};

PG_FUNCTION_INFO_V1(cscp_working_set_guard);

/* Trigger cscp.working_set_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_working_set_guard(PG_FUNCTION_ARGS)
{
	return cscp_row_guard(fcinfo, &ws_guard);
}
