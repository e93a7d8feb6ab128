/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Checks every API function makes on its arguments before touching data.
 *
 * Ids (tenant, conversation, actor, session, ...) are non-empty text of at
 * most CSCP_MAX_ID_BYTES bytes.  A tenant argument must be one the current
 * role may use (tenancy.c: a role bound to tenants may use only those), and
 * also the session's cscp.tenant_id whenever the caller is bound by
 * row-level security on cscp's tables: row-level security alone would only
 * hide the other tenant's rows, and the caller deserves to be told why.
 * SQL reaches the checks as cscp.check_id, cscp.check_tenant and
 * cscp.check_lifetime: public, because cscp's PL/pgSQL API runs with its
 * caller's rights and may call no internal function (cscp._id and
 * cscp._tenant remain for the functions that run as the owner).
 *
 * Functions that take a row of one of cscp's tables (cscp.command,
 * cscp.context, ...) take it from a caller that may have built it by hand:
 * cscp_record_arg and cscp_record_require refuse a null row, or a row whose
 * fields the function reads are null, before any of them is read.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/namespace.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

/* Raise 22023 unless value is a usable id. */
void
cscp_check_id(const char *argname, text *value)
{
	int			len;

	if (value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", argname),
				 errhint("Pass a non-empty identifier.")));
	len = VARSIZE_ANY_EXHDR(value);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname),
				 errhint("Pass a non-empty identifier.")));
	if (len > CSCP_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", argname),
				 errdetail("It is %d bytes long; the limit is %d bytes.", len, CSCP_MAX_ID_BYTES),
				 errhint("Use a shorter identifier, such as a hash of the long one.")));
}

/* Raise unless tenant_id is an id the current role may act for. */
void
cscp_check_tenant(text *tenant_id)
{
	Oid			relid;
	char	   *tenant;
	const char *session;

	cscp_check_id("tenant_id", tenant_id);
	tenant = text_to_cstring(tenant_id);
	if (strcmp(tenant, "*") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tenant \"*\" is reserved"),
				 errdetail("Tenant \"*\" holds the policy defaults of all tenants."),
				 errhint("Use cscp.policy_set('*', ...) as a superuser to change defaults.")));

	if (!cscp_tenancy_allows(tenant, strlen(tenant), CSCP_ROLE_APP))
		cscp_tenancy_refuse(tenant, CSCP_ROLE_APP);

	relid = cscp_relation_oid("context", true);
	if (!OidIsValid(relid) || check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
		return;

	session = cscp_session_tenant(CSCP_ROLE_APP);
	if (session == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cscp.tenant_id is not set"),
				 errdetail("Role \"%s\" may act only for the tenant named in cscp.tenant_id.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("Run SET cscp.tenant_id = '%s' first.", tenant)));
	if (strcmp(session, tenant) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for tenant \"%s\"", tenant),
				 errdetail("This session acts for tenant \"%s\".", session),
				 errhint("Set cscp.tenant_id to the tenant you mean to act for.")));
}

/* Argument argno of fcinfo, a row of a table (named argname); 22004 when null. */
HeapTupleHeader
cscp_record_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname),
				 errhint("Pass a row of %s.",
						 format_type_be(get_fn_expr_argtype(fcinfo->flinfo, argno)))));
	return PG_GETARG_HEAPTUPLEHEADER(argno);
}

/*
 * Raise 22004 unless every field named in fields (a NULL-terminated list)
 * of rec, a row passed as argument argname, is set.
 */
void
cscp_record_require(HeapTupleHeader rec, const char *argname, const char *const *fields)
{
	for (int i = 0; fields[i] != NULL; i++)
	{
		bool		isnull;

		(void) GetAttributeByName(rec, fields[i], &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("field \"%s\" of argument \"%s\" must not be null", fields[i], argname),
					 errhint("Pass a row read from %s.",
							 format_type_be(HeapTupleHeaderGetTypeId(rec)))));
	}
}

PG_FUNCTION_INFO_V1(cscp_arg_lifetime);

/*
 * cscp.check_lifetime(policy jsonb, requested interval, policy_key text,
 * argname text) RETURNS interval: cscp_lifetime for PL/pgSQL callers.
 */
Datum
cscp_arg_lifetime(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(2) ? "policy_key" : "argname"),
				 errhint("Name the policy key of the default lifetime, such as \"context_ttl\", and the argument checked.")));
	PG_RETURN_INTERVAL_P(cscp_lifetime(PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0),
									   PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1),
									   text_to_cstring(PG_GETARG_TEXT_PP(2)),
									   text_to_cstring(PG_GETARG_TEXT_PP(3))));
}

PG_FUNCTION_INFO_V1(cscp_arg_id);

/* cscp.check_id(argname text, value text) RETURNS text, and cscp._id: checked id. */
Datum
cscp_arg_id(PG_FUNCTION_ARGS)
{
	char	   *argname = PG_ARGISNULL(0) ? "id" : text_to_cstring(PG_GETARG_TEXT_PP(0));

	cscp_check_id(argname, PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}

PG_FUNCTION_INFO_V1(cscp_arg_tenant);

/* cscp.check_tenant(tenant_id text) RETURNS text, and cscp._tenant: checked tenant id. */
Datum
cscp_arg_tenant(PG_FUNCTION_ARGS)
{
	cscp_check_tenant(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/*
 * The composite value rec as a tuple (*tuple, which points into rec), and
 * its row type's descriptor, pinned: release it with ReleaseTupleDesc.
 */
TupleDesc
cscp_record_tuple(HeapTupleHeader rec, HeapTupleData *tuple)
{
	tuple->t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;
	tuple->t_data = rec;
	return lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(rec), HeapTupleHeaderGetTypMod(rec));
}
