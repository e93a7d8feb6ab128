/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  The identity layer (DESIGN.md section 8): the shape of an identity and
 *	  the BEFORE INSERT OR UPDATE trigger that keeps it immutable.
 *
 * Invariants kept here:
 *	- an identity is a JSON object whose known keys have the right types
 *	  (cscp.identity_check, also the table's CHECK constraint);
 *	- a new identity is version 1, set now, with no history;
 *	- tenant_id, subject_id, version, set_at and history never change by
 *	  hand; identity changes only together with a non-empty reason given in
 *	  the same UPDATE (cscp.identity_replace does that), and then the
 *	  replaced version, its time and the reason are appended to history and
 *	  version goes up by one.
 * The trigger takes no locks of its own: the UPDATE holds the row lock, so
 * concurrent replaces queue and each records the version it replaced.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

/* Keys of an identity whose value must be a string (or null). */
static const char *const string_keys[] = {
	"user_name", "user_id", "authority", "department", "organization"
};

/* Raise 22023 unless identity has the shape DESIGN.md section 8 gives it. */
static void
check_identity(Jsonb *identity)
{
	JsonbValue *v;

	if (identity == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity must not be null"),
				 errhint("Pass an object such as '{\"user_name\": \"Maria\", \"authority\": \"employee\"}'.")));
	if (!JB_ROOT_IS_OBJECT(identity) || JB_ROOT_IS_SCALAR(identity))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("identity must be a JSON object"),
				 errhint("Pass an object such as '{\"user_name\": \"Maria\", \"authority\": \"employee\"}'.")));
	for (int i = 0; i < (int) lengthof(string_keys); i++)
	{
		v = cscp_jsonb_get(identity, string_keys[i]);
		if (v != NULL && v->type != jbvString && v->type != jbvNull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("identity key \"%s\" must be a string", string_keys[i]),
					 errhint("Known keys are user_name, user_id, authority, department, organization (strings) and permissions (an array of strings).")));
	}
	v = cscp_jsonb_get(identity, "permissions");
	if (v != NULL && v->type != jbvNull)
	{
		bool		ok = (v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data));

		if (ok)
		{
			JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
			JsonbValue	e;
			JsonbIteratorToken tok;

			while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
				if (tok == WJB_ELEM && e.type != jbvString)
					ok = false;
		}
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("identity key \"permissions\" must be an array of strings"),
					 errhint("Pass for example '[\"orders.read\", \"orders.cancel\"]'.")));
	}
}

PG_FUNCTION_INFO_V1(cscp_identity_check);

/* cscp.identity_check(identity jsonb) RETURNS jsonb: the identity, checked. */
Datum
cscp_identity_check(PG_FUNCTION_ARGS)
{
	check_identity(PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/* Column numbers of cscp.identity, looked up by name once per relation (rowguard.c). */
typedef enum
{
	I_TENANT_ID,
	I_SUBJECT_ID,
	I_IDENTITY,
	I_VERSION,
	I_SET_AT,
	I_REASON,
	I_HISTORY,
	I_NUM_COLUMNS
} IdentityColumn;

static const char *const column_names[I_NUM_COLUMNS] = {
	"tenant_id",
	"subject_id",
	"identity",
	"version",
	"set_at",
	"reason",
	"history",
};

static CscpColumns columns = {.table = "cscp.identity", .n = I_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.identity. */
#define COL(c) (columns.attnum[c])

/* A new identity: version 1, set now, no history, no reason. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	CscpRowEdit edit;

	cscp_row_edit_init(&edit, RelationGetDescr(rel));
	cscp_row_edit_set(&edit, COL(I_VERSION), Int32GetDatum(1), false);
	cscp_row_edit_set(&edit, COL(I_SET_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(I_REASON), (Datum) 0, true);
	cscp_row_edit_set(&edit, COL(I_HISTORY),
					  DirectFunctionCall1(jsonb_in, CStringGetDatum("[]")), false);
	return cscp_row_edit_apply(&edit, tuple);
}

/* An UPDATE: nothing changes but by a replace with a reason, which is recorded. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	static const char *const fixed[] = {
		"tenant_id", "subject_id", "version", "set_at", "history"
	};
	static CscpColumns fixed_cols = {.table = "cscp.identity", .n = lengthof(fixed), .names = fixed};
	int			changed;
	char	   *subject = SPI_getvalue(oldtup, desc, COL(I_SUBJECT_ID));
	char	   *reason;
	char	   *set_at;
	char	   *replaced_at;
	bool		isnull;
	StringInfoData entry;
	Datum		history;
	CscpRowEdit edit;

	changed = cscp_first_changed(rel, &fixed_cols, oldtup, newtup);
	if (changed >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of an identity cannot be changed", fixed[changed]),
				 errhint("Replace the identity with cscp.identity_replace(tenant_id, subject_id, identity, reason).")));

	if (cscp_same_value(oldtup, newtup, desc, COL(I_IDENTITY)))
	{
		if (!cscp_same_value(oldtup, newtup, desc, COL(I_REASON)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"reason\" of an identity cannot be changed"),
					 errdetail("It says why the current version replaced the one before.")));
		return newtup;
	}

	reason = SPI_getvalue(newtup, desc, COL(I_REASON));
	if (!cscp_column_updated(updatedcols, COL(I_REASON)) || reason == NULL ||
		reason[strspn(reason, " \t\r\n")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("identity of subject \"%s\" is immutable", subject),
				 errdetail("An identity changes only by an explicit replace that says why."),
				 errhint("Use cscp.identity_replace(tenant_id, subject_id, identity, reason), or set reason in the same UPDATE.")));

	/* Append the replaced version to history. */
	initStringInfo(&entry);
	appendStringInfo(&entry, "[{\"version\":%d,\"identity\":",
					 DatumGetInt32(heap_getattr(oldtup, COL(I_VERSION), desc, &isnull)));
	cscp_canonical_append(&entry,
						  DatumGetJsonbP(heap_getattr(oldtup, COL(I_IDENTITY), desc, &isnull)));
	set_at = cscp_utc_iso(DatumGetTimestampTz(heap_getattr(oldtup, COL(I_SET_AT), desc, &isnull)));
	replaced_at = cscp_utc_iso(now);
	appendStringInfoString(&entry, ",\"set_at\":");
	cscp_canonical_string(&entry, set_at, strlen(set_at));
	appendStringInfoString(&entry, ",\"replaced_at\":");
	cscp_canonical_string(&entry, replaced_at, strlen(replaced_at));
	appendStringInfoString(&entry, ",\"reason\":");
	cscp_canonical_string(&entry, reason, strlen(reason));
	appendStringInfoString(&entry, "}]");

	history = DirectFunctionCall2(jsonb_concat,
								  heap_getattr(oldtup, COL(I_HISTORY), desc, &isnull),
								  DirectFunctionCall1(jsonb_in, CStringGetDatum(entry.data)));

	cscp_row_edit_init(&edit, desc);
	cscp_row_edit_set(&edit, COL(I_HISTORY), history, false);
	cscp_row_edit_set(&edit, COL(I_VERSION),
					  Int32GetDatum(DatumGetInt32(heap_getattr(oldtup, COL(I_VERSION), desc,
															   &isnull)) + 1), false);
	cscp_row_edit_set(&edit, COL(I_SET_AT), TimestampTzGetDatum(now), false);
	return cscp_row_edit_apply(&edit, newtup);
}

static const CscpRowGuard guard = {
	.name = "cscp.identity_guard()",
	.columns = &columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_identity_guard);

/* Trigger cscp.identity_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_identity_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &guard);
}
