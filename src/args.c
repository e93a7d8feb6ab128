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
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/namespace.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

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

PG_FUNCTION_INFO_V1(cscp_arg_id);

/* cscp._id(argname text, value text) RETURNS text: checked id. */
Datum
cscp_arg_id(PG_FUNCTION_ARGS)
{
	char	   *argname = PG_ARGISNULL(0) ? "id" : text_to_cstring(PG_GETARG_TEXT_PP(0));

	cscp_check_id(argname, PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}

PG_FUNCTION_INFO_V1(cscp_arg_tenant);

/* cscp._tenant(tenant_id text) RETURNS text: checked tenant id. */
Datum
cscp_arg_tenant(PG_FUNCTION_ARGS)
{
	cscp_check_tenant(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}
