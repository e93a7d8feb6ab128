/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policy keys, their types, and the effective policy of a tenant.
 *
 * A tenant's effective policy is the defaults held by tenant '*' with the
 * tenant's own keys merged over them (cscp.policy_effective).  Every key a
 * policy may hold is listed in policy_keys below with its type; anything
 * else is refused with 22023, so a typo never silently means "default".
 * Interval keys are bounded where they are set, here
 * (cscp_policy_interval_ok): no negative part, greater than zero, at most
 * 10 years (max_ttl and the lifetimes) or 100 years (retention_*), so that
 * no time computed from them leaves PostgreSQL's timestamp range.
 *
 * This file reads no other part of cscp's rules: lifetime.c computes every
 * expiry from the policy read here, and judges there whether a policy's
 * default lifetimes fit its max_ttl (the trigger cscp.policy_lifetimes).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rls.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

typedef enum PolicyKind
{
	POLICY_INTERVAL,			/* positive interval, as text, bounded (lifetime.c) */
	POLICY_CHOICE,				/* one of a fixed set of strings */
	POLICY_INTEGER,				/* integer within [min, max] */
	POLICY_SHARE,				/* number in (0, 1] */
	POLICY_BOOLEAN,
	POLICY_NAMES,				/* array of non-empty strings */
	POLICY_ROLE,				/* a role name: a string of 1 to 63 bytes */
	POLICY_SLOT_RULES			/* object {slot: stored|derived|forbidden} */
} PolicyKind;

typedef struct PolicyKey
{
	const char *name;
	PolicyKind	kind;
	const char *choices[4];		/* POLICY_CHOICE */
	int64		min;			/* POLICY_INTEGER */
	int64		max;
} PolicyKey;

static const PolicyKey policy_keys[] = {
	{.name = "context_ttl", .kind = POLICY_INTERVAL},
	{.name = "confirmation_ttl", .kind = POLICY_INTERVAL},
	{.name = "approval_ttl", .kind = POLICY_INTERVAL},
	{.name = "context_ttl_mode", .kind = POLICY_CHOICE, .choices = {"sliding", "fixed"}},
	{.name = "max_ttl", .kind = POLICY_INTERVAL},
	{.name = "retention_closed", .kind = POLICY_INTERVAL},
	{.name = "retention_expired", .kind = POLICY_INTERVAL},
	{.name = "retention_turns", .kind = POLICY_INTERVAL},
	{.name = "retention_evidence", .kind = POLICY_INTERVAL},
	{.name = "checkpoint_ttl", .kind = POLICY_INTERVAL},
	{.name = "max_slot_bytes", .kind = POLICY_INTEGER, .min = 1, .max = 1048576},
	{.name = "slot_max_length", .kind = POLICY_INTEGER, .min = 1, .max = 1048576},
	{.name = "slot_refuse_card_numbers", .kind = POLICY_BOOLEAN},
	{.name = "slot_rules", .kind = POLICY_SLOT_RULES},
	{.name = "extension_slots", .kind = POLICY_NAMES},
	{.name = "detail_level", .kind = POLICY_CHOICE, .choices = {"none", "summary", "full"}},
	{.name = "auto_confirm", .kind = POLICY_NAMES},
	{.name = "turn_content", .kind = POLICY_CHOICE, .choices = {"full", "reference"}},
	{.name = "replay_divergence", .kind = POLICY_CHOICE, .choices = {"keep", "error"}},
	{.name = "fact_budget_share", .kind = POLICY_SHARE},
	{.name = "supersede_same_key", .kind = POLICY_BOOLEAN},
	{.name = "undeclared_commands", .kind = POLICY_CHOICE, .choices = {"mutating", "caller", "refuse"}},
	{.name = "admin_role", .kind = POLICY_ROLE},
};

#define NUM_POLICY_KEYS ((int) lengthof(policy_keys))

/*
 * Parse an interval without raising: false when the text is not one.
 * Mirrors interval_in's parsing (including ISO 8601 durations).
 */
bool
cscp_parse_interval(const char *str, Interval *result)
{
	char		workbuf[256];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			dterr;
	struct pg_itm_in tt,
			   *itm_in = &tt;
	char	   *copy;

	if (str == NULL || strlen(str) >= sizeof(workbuf))
		return false;
	dterr = ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype,
						  MAXDATEFIELDS, &nf);
	if (dterr == 0)
		dterr = DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE, &dtype, itm_in);
	if (dterr == DTERR_BAD_FORMAT)
	{
		copy = pstrdup(str);
		dterr = DecodeISO8601Interval(copy, &dtype, itm_in);
	}
	if (dterr != 0 || dtype != DTK_DELTA)
		return false;
	return itmin2interval(itm_in, result) == 0;
}

/* Whether an interval is greater than zero. */
static bool
interval_is_positive(Interval *iv)
{
	Interval	zero = {0};

	return DatumGetBool(DirectFunctionCall2(interval_gt,
											IntervalPGetDatum(iv),
											IntervalPGetDatum(&zero)));
}

/*
 * Whether a policy interval is usable: no negative part (so that it means
 * the same on every date), greater than zero, and at most
 * CSCP_MAX_RETENTION_YEARS (retention) or CSCP_MAX_LIFETIME_YEARS.  With no
 * negative part and a total within the bound (interval_cmp compares in
 * 128-bit arithmetic), each part is within it too: far less than any time
 * arithmetic of lifetime.c refuses to add.
 */
bool
cscp_policy_interval_ok(const Interval *iv, bool retention)
{
	Interval	bound = {0};

	if (iv->month < 0 || iv->day < 0 || iv->time < 0 ||
		(iv->month == 0 && iv->day == 0 && iv->time == 0))
		return false;
	bound.month = (retention ? CSCP_MAX_RETENTION_YEARS : CSCP_MAX_LIFETIME_YEARS) * MONTHS_PER_YEAR;
	return DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum((Interval *) iv),
											 IntervalPGetDatum(&bound))) <= 0;
}

static const PolicyKey *
find_policy_key(const char *name)
{
	for (int i = 0; i < NUM_POLICY_KEYS; i++)
		if (strcmp(policy_keys[i].name, name) == 0)
			return &policy_keys[i];
	return NULL;
}

static void
policy_type_error(const char *key, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for policy key \"%s\"", key),
			 errdetail("Expected %s.", expected),
			 errhint("Correct the value, or pass null to fall back to the default.")));
}

/* Check an interval key: a positive interval as a string, within its bounds. */
static void
check_interval_value(const PolicyKey *k, JsonbValue *v)
{
	Interval	iv;
	char	   *s;
	bool		retention;

	if (v->type != jbvString)
		policy_type_error(k->name, "a positive interval as a string, such as \"30 minutes\"");
	s = pnstrdup(v->val.string.val, v->val.string.len);
	if (!cscp_parse_interval(s, &iv) || !interval_is_positive(&iv))
		policy_type_error(k->name, "a positive interval as a string, such as \"30 minutes\"");
	retention = strncmp(k->name, "retention_", 10) == 0;
	if (!cscp_policy_interval_ok(&iv, retention))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("policy key \"%s\" is out of range", k->name),
				 errdetail("It is \"%s\"; it must be greater than zero with no negative part, and at most %d years.",
						   s, retention ? CSCP_MAX_RETENTION_YEARS : CSCP_MAX_LIFETIME_YEARS),
				 (iv.month < 0 || iv.day < 0 || iv.time < 0) ?
				 errhint("An interval with a negative part, such as \"-1 mon 30 days\", spans a different time on different dates.") :
				 errhint("Lifetimes and \"max_ttl\" are at most %d years, retention periods at most %d years.",
						 CSCP_MAX_LIFETIME_YEARS, CSCP_MAX_RETENTION_YEARS)));
}

/* Check a choice key: one of its strings. */
static void
check_choice_value(const PolicyKey *k, JsonbValue *v)
{
	StringInfoData buf;

	if (v->type == jbvString)
		for (int i = 0; i < (int) lengthof(k->choices) && k->choices[i]; i++)
			if (strlen(k->choices[i]) == (size_t) v->val.string.len &&
				strncmp(k->choices[i], v->val.string.val, v->val.string.len) == 0)
				return;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "one of");
	for (int i = 0; i < (int) lengthof(k->choices) && k->choices[i]; i++)
		appendStringInfo(&buf, "%s \"%s\"", i ? "," : "", k->choices[i]);
	policy_type_error(k->name, buf.data);
}

/* Check an integer key: a whole number within [min, max]. */
static void
check_integer_value(const PolicyKey *k, JsonbValue *v)
{
	float8		f = 0;

	if (v->type == jbvNumeric)
		f = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
											   NumericGetDatum(v->val.numeric)));
	if (v->type != jbvNumeric || f != floor(f) || f < k->min || f > k->max)
		policy_type_error(k->name, psprintf("an integer from " INT64_FORMAT " to " INT64_FORMAT, k->min, k->max));
}

/* Check a share key: a number in (0, 1]. */
static void
check_share_value(const PolicyKey *k, JsonbValue *v)
{
	float8		f;

	if (v->type != jbvNumeric)
		policy_type_error(k->name, "a number greater than 0 and at most 1");
	f = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
										   NumericGetDatum(v->val.numeric)));
	if (!(f > 0.0 && f <= 1.0))
		policy_type_error(k->name, "a number greater than 0 and at most 1");
}

/*
 * Check a names key (an array of non-empty strings) or a slot-rules key (an
 * object mapping non-empty slot names to stored, derived or forbidden).
 */
static void
check_collection_value(const PolicyKey *k, JsonbValue *v)
{
	bool		names = (k->kind == POLICY_NAMES);
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	const char *expected = names ?
		"an array of non-empty strings" :
		"an object mapping slot names to \"stored\", \"derived\" or \"forbidden\"";

	if (v->type != jbvBinary ||
		(names ? !JsonContainerIsArray(v->val.binary.data)
		 : !JsonContainerIsObject(v->val.binary.data)))
		policy_type_error(k->name, expected);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY && e.val.string.len == 0)
			policy_type_error(k->name, expected);
		if (tok == WJB_ELEM &&
			(e.type != jbvString || e.val.string.len == 0))
			policy_type_error(k->name, expected);
		if (tok == WJB_VALUE)
		{
			char	   *s;

			if (e.type != jbvString)
				policy_type_error(k->name, expected);
			s = pnstrdup(e.val.string.val, e.val.string.len);
			if (strcmp(s, "stored") != 0 && strcmp(s, "derived") != 0 &&
				strcmp(s, "forbidden") != 0)
				policy_type_error(k->name, expected);
		}
	}
}

/* Check one key's value against its declared kind. */
static void
check_policy_value(const PolicyKey *k, JsonbValue *v)
{
	switch (k->kind)
	{
		case POLICY_INTERVAL:
			check_interval_value(k, v);
			break;
		case POLICY_CHOICE:
			check_choice_value(k, v);
			break;
		case POLICY_INTEGER:
			check_integer_value(k, v);
			break;
		case POLICY_SHARE:
			check_share_value(k, v);
			break;
		case POLICY_ROLE:
			/* whether the role exists is asked when it is used (registry.c) */
			if (v->type != jbvString || v->val.string.len == 0 ||
				v->val.string.len >= NAMEDATALEN)
				policy_type_error(k->name, psprintf("a role name of 1 to %d bytes", NAMEDATALEN - 1));
			break;
		case POLICY_BOOLEAN:
			if (v->type != jbvBool)
				policy_type_error(k->name, "true or false");
			break;
		case POLICY_NAMES:
		case POLICY_SLOT_RULES:
			check_collection_value(k, v);
			break;
	}
}

PG_FUNCTION_INFO_V1(cscp_policy_validate);

/*
 * cscp.policy_validate(settings jsonb) RETURNS jsonb
 *
 * Raise 22023 unless settings is an object of known keys with values of the
 * right type.  A null value is allowed when allow_null: it removes the key.
 */
Datum
cscp_policy_validate(PG_FUNCTION_ARGS)
{
	Jsonb	   *settings;
	bool		allow_null = PG_GETARG_BOOL(1);
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings must not be null"),
				 errhint("Pass a JSON object such as '{\"context_ttl\": \"15 minutes\"}'.")));
	settings = PG_GETARG_JSONB_P(0);
	if (!JB_ROOT_IS_OBJECT(settings))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings must be a JSON object"),
				 errhint("Pass a JSON object such as '{\"context_ttl\": \"15 minutes\"}'.")));

	it = JsonbIteratorInit(&settings->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = cscp_jsonb_key_cstring(&v);
			if (find_policy_key(key) == NULL)
			{
				StringInfoData buf;

				initStringInfo(&buf);
				for (int i = 0; i < NUM_POLICY_KEYS; i++)
					appendStringInfo(&buf, "%s%s", i ? ", " : "", policy_keys[i].name);
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown policy key \"%s\"", key),
						 errdetail("Known keys are %s.", buf.data),
						 errhint("Check the spelling of the key.")));
			}
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type == jbvNull)
			{
				if (!allow_null)
					policy_type_error(key, "a value; the defaults of tenant \"*\" cannot be removed");
				continue;
			}
			check_policy_value(find_policy_key(key), &v);
		}
	}
	PG_RETURN_JSONB_P(settings);
}

/*
 * The policy cache.  Every cscp call reads its tenant's effective policy,
 * often several times; reading cscp.policy each time dominated the cost of
 * a call.  Each backend keeps the effective policies it has read, keyed by
 * tenant, and drops them all whenever cscp.policy changes: the statement
 * trigger policy_changed sends a relcache invalidation for the table, which
 * reaches this backend at the next command and the others when the change
 * commits.  An invalidation may arrive while the cache is being filled (any
 * catalog access accepts them), so fills are stamped with a generation and
 * discarded when it moved.
 *
 * Row-level security lets a role bound by it read only its own tenant's
 * policy and the defaults; the cache is served only where that is what the
 * role would read anyway (no row-level security, or its own tenant), and
 * other reads go to the table.
 */
typedef struct PolicyCacheEntry
{
	char		tenant[CSCP_MAX_ID_BYTES + 1];
	Jsonb	   *policy;
} PolicyCacheEntry;

static HTAB *policy_cache = NULL;
static MemoryContext policy_cache_cxt = NULL;
static CscpTableCache policy_table_cache;	/* dropped when cscp.policy changes */

static Oid
policy_table(void)
{
	Oid			nsp = get_namespace_oid("cscp", true);

	return OidIsValid(nsp) ? get_relname_relid("policy", nsp) : InvalidOid;
}

/* Read the effective policy from the table, as the caller. */
static Jsonb *
policy_read(const char *tenant_id, MemoryContext cxt)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {TEXTOID};
	Datum		arg = CStringGetTextDatum(tenant_id);
	Jsonb	   *result = NULL;
	bool		isnull;
	Datum		d;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT coalesce((SELECT p.settings FROM cscp.policy p"
				  "                  WHERE p.tenant_id OPERATOR(pg_catalog.=) '*'), '{}'::pg_catalog.jsonb)"
				  "    OPERATOR(pg_catalog.||) coalesce((SELECT p.settings FROM cscp.policy p"
				  "                  WHERE p.tenant_id OPERATOR(pg_catalog.=) $1), '{}'::pg_catalog.jsonb)",
				  1, argtypes);
	if (SPI_execute_plan(plan, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the policy of tenant \"%s\"", tenant_id);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		result = DatumGetJsonbPCopy(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

/*
 * The effective policy of a tenant (defaults merged with its own keys),
 * allocated in the caller's memory context.
 */
Jsonb *
cscp_policy_get(const char *tenant_id)
{
	MemoryContext callerctx = CurrentMemoryContext;
	PolicyCacheEntry *entry;
	uint64		generation;
	Jsonb	   *policy;
	bool		found;

	if (strlen(tenant_id) > CSCP_MAX_ID_BYTES)
		return policy_read(tenant_id, callerctx);

	if (!policy_table_cache.valid || policy_cache == NULL)
	{
		HASHCTL		ctl;

		if (policy_cache_cxt == NULL)
			policy_cache_cxt = AllocSetContextCreate(CacheMemoryContext, "cscp policy cache",
													 ALLOCSET_SMALL_SIZES);
		else
			MemoryContextReset(policy_cache_cxt);
		ctl.keysize = CSCP_MAX_ID_BYTES + 1;
		ctl.entrysize = sizeof(PolicyCacheEntry);
		ctl.hcxt = policy_cache_cxt;
		policy_cache = hash_create("cscp policy cache", 16, &ctl,
								   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
		cscp_table_cache_done(&policy_table_cache,
							  cscp_table_cache_begin(&policy_table_cache, policy_table()));
	}

	/* Serve from the cache only what row-level security would let the caller read. */
	if (OidIsValid(policy_table_cache.relid) &&
		check_enable_rls(policy_table_cache.relid, InvalidOid, true) == RLS_ENABLED &&
		(cscp_tenant_setting == NULL || strcmp(cscp_tenant_setting, tenant_id) != 0))
		return policy_read(tenant_id, callerctx);

	entry = hash_search(policy_cache, tenant_id, HASH_FIND, NULL);
	if (entry != NULL && entry->policy != NULL)
		return DatumGetJsonbPCopy(PointerGetDatum(entry->policy));

	generation = policy_table_cache.generation;
	policy = policy_read(tenant_id, callerctx);
	if (policy != NULL && generation == policy_table_cache.generation)
	{
		MemoryContext old = MemoryContextSwitchTo(policy_cache_cxt);
		Jsonb	   *copy = DatumGetJsonbPCopy(PointerGetDatum(policy));

		MemoryContextSwitchTo(old);
		entry = hash_search(policy_cache, tenant_id, HASH_ENTER, &found);
		entry->policy = copy;
	}
	return policy;
}

PG_FUNCTION_INFO_V1(cscp_policy_effective);

/* cscp.policy_effective(tenant_id text) RETURNS jsonb, through the cache. */
Datum
cscp_policy_effective(PG_FUNCTION_ARGS)
{
	PG_RETURN_JSONB_P(cscp_policy_get(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}

PG_FUNCTION_INFO_V1(cscp_policy_changed);

/*
 * Trigger cscp.policy_changed(): AFTER ... FOR EACH STATEMENT on cscp.policy.
 * Every backend's policy cache is dropped (this one's at the next command,
 * the others' when the change commits).
 */
Datum
cscp_policy_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.policy_changed() must be called as a trigger")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}

/* An integer policy value, or fallback when absent. */
int64
cscp_policy_int(Jsonb *policy, const char *key, int64 fallback)
{
	JsonbValue *v = cscp_jsonb_get(policy, key);

	if (v == NULL || v->type != jbvNumeric)
		return fallback;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
}

/* Whether name is listed in the policy's array under key. */
bool
cscp_policy_lists(Jsonb *policy, const char *key, const char *name)
{
	JsonbValue *arr = cscp_jsonb_get(policy, key);
	JsonbValue	elem;

	if (arr == NULL || arr->type != jbvBinary)
		return false;
	elem.type = jbvString;
	elem.val.string.val = (char *) name;
	elem.val.string.len = strlen(name);
	return findJsonbValueFromContainer(arr->val.binary.data, JB_FARRAY, &elem) != NULL;
}
