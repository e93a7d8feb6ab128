/*-------------------------------------------------------------------------
 *
 * tenancy.c
 *	  Which tenants the current role may use: the one decision behind
 *	  row-level security (cscp.current_tenant()), the API's tenant argument
 *	  check (args.c), the first step of every BEFORE ROW trigger, and the
 *	  operators' reads (inspect.c).
 *
 * cscp.grant_app(role, tenants) and cscp.grant_operator(role, tenants)
 * record a binding in cscp.tenant_binding: NULL tenants for a trusted
 * multi-tenant role that names its tenant in cscp.tenant_id, an array to
 * bind the role to those tenants only.  A role is bound (for one kind,
 * application or operator) when it, or a role whose privileges it has
 * (has_privs_of_role: a login role inheriting a bound group role is bound
 * too), has a binding of that kind with tenants; its tenants are the union
 * of them.  An unbound binding among them makes it unrestricted.  A role
 * with no binding of the kind asked is held to its bindings of the other
 * kind.  Bindings fail closed: once any binding exists, a role with none
 * of its own or inherited may name no tenant (42501), so that a bound role
 * cannot SET ROLE to a DBA's role holding plain grants and read another
 * tenant; a trusted multi-tenant service is made one explicitly, by a
 * binding without tenants.  While no binding exists every role is
 * unrestricted, as before bindings existed (row-level security on
 * cscp.tenant_id still applies to it), and so is a BYPASSRLS role without
 * a binding (row-level security does not bind it).  Superusers and the
 * owner of cscp's tables (and its members) are always unrestricted.
 *
 * Both the bindings and the answer per role are cached per backend: the
 * bindings until a relcache invalidation of cscp.tenant_binding (its
 * statement trigger sends one on every change, which reaches every backend
 * at its next transaction or command), the answers until then or until a
 * role or a role membership changes (syscache callbacks on AUTHOID and
 * AUTHMEMROLEMEM).  The bindings are read once through a plain SELECT as
 * the table's owner (the caller may not read the table); no search_path
 * change is needed for a query that names no operator or function.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/* One row of cscp.tenant_binding. */
typedef struct Binding
{
	Oid			role;
	CscpRoleKind kind;
	int			ntenants;		/* -1: unbound (tenants NULL) */
	char	  **tenants;
} Binding;

/* What one role may do, for each kind. */
typedef struct RoleTenancy
{
	Oid			userid;			/* InvalidOid: empty slot */
	Oid			owner;			/* the owner rls_exempt was computed for */
	bool		rls_exempt;		/* row-level security does not bind it */
	bool		unbound;		/* no binding applies while some exist: no tenant */
	bool		unrestricted[CSCP_ROLE_KINDS];
	int			ntenants[CSCP_ROLE_KINDS];
	char	  **tenants[CSCP_ROLE_KINDS];
} RoleTenancy;

/* A backend sees few roles (its login role, the owner inside cscp's sections). */
#define ROLE_CACHE_SIZE 4

static MemoryContext tenancy_cxt = NULL;	/* the bindings */
static MemoryContext roles_cxt = NULL;	/* the roles' tenant lists */
static bool bindings_valid = false;
static int	nbindings = 0;
static Binding *bindings = NULL;
static Oid	binding_relid = InvalidOid;
static Oid	binding_owner = InvalidOid;
static RoleTenancy role_cache[ROLE_CACHE_SIZE];
static int	role_cache_next = 0;
static uint64 roles_generation = 0;	/* bumped by every forget_roles */

static const char *const kind_names[CSCP_ROLE_KINDS] = {"app", "operator"};

/* Forget every role's answer. */
static void
forget_roles(void)
{
	for (int i = 0; i < ROLE_CACHE_SIZE; i++)
		role_cache[i].userid = InvalidOid;
	roles_generation++;
}

/* Relcache callback: the bindings changed (or every relation was invalidated). */
static void
tenancy_relcache_inval(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == binding_relid || !OidIsValid(binding_relid))
	{
		bindings_valid = false;
		forget_roles();
	}
}

/* Syscache callback: a role or a role membership changed. */
static void
tenancy_syscache_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_roles();
}

/* Register the invalidation callbacks; called once from _PG_init. */
void
cscp_tenancy_register(void)
{
	CacheRegisterRelcacheCallback(tenancy_relcache_inval, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, tenancy_syscache_inval, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, tenancy_syscache_inval, (Datum) 0);
}

/* Read cscp.tenant_binding into the cache, as the table's owner. */
static void
load_bindings(void)
{
	static SPIPlanPtr plan = NULL;
	Oid			relid = cscp_relation_oid("tenant_binding", true);
	HeapTuple	tp;
	Oid			save_userid;
	int			save_sec_context;
	MemoryContext oldcxt;
	uint64		n;

	if (tenancy_cxt == NULL)
	{
		tenancy_cxt = AllocSetContextCreate(TopMemoryContext, "cscp tenancy",
											ALLOCSET_SMALL_SIZES);
		roles_cxt = AllocSetContextCreate(tenancy_cxt, "cscp tenancy of roles",
										  ALLOCSET_SMALL_SIZES);
	}
	else
	{
		MemoryContextReset(roles_cxt);
		MemoryContextResetOnly(tenancy_cxt);
	}
	nbindings = 0;
	bindings = NULL;
	forget_roles();
	binding_relid = relid;
	binding_owner = InvalidOid;

	/*
	 * Valid from now on: an invalidation that arrives while the table is read
	 * clears the flag again, and the next call reads it afresh.
	 */
	bindings_valid = true;
	if (!OidIsValid(relid))
		return;					/* cscp is being created or dropped: no binding */
	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	binding_owner = ((Form_pg_class) GETSTRUCT(tp))->relowner;
	ReleaseSysCache(tp);

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(binding_owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan, "SELECT b.role, b.kind, b.tenants FROM cscp.tenant_binding b", 0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading cscp.tenant_binding failed");
	n = SPI_processed;
	oldcxt = MemoryContextSwitchTo(tenancy_cxt);
	bindings = palloc0(sizeof(Binding) * (n > 0 ? n : 1));
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Binding    *b = &bindings[nbindings];
		bool		isnull;
		Datum		d;
		char	   *kind;

		d = SPI_getbinval(row, desc, 1, &isnull);
		if (isnull)
			continue;
		b->role = DatumGetObjectId(d);
		kind = SPI_getvalue(row, desc, 2);
		if (kind == NULL)
			continue;
		b->kind = strcmp(kind, "operator") == 0 ? CSCP_ROLE_OPERATOR : CSCP_ROLE_APP;
		d = SPI_getbinval(row, desc, 3, &isnull);
		if (isnull)
			b->ntenants = -1;
		else
		{
			Datum	   *elems;
			bool	   *enulls;
			int			nelems;

			deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
							  &elems, &enulls, &nelems);
			b->tenants = palloc(sizeof(char *) * (nelems > 0 ? nelems : 1));
			b->ntenants = 0;
			for (int j = 0; j < nelems; j++)
				if (!enulls[j])
					b->tenants[b->ntenants++] = TextDatumGetCString(elems[j]);
		}
		nbindings++;
	}
	MemoryContextSwitchTo(oldcxt);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/* Whether tenant (len bytes) is one of tenants. */
static bool
listed(char **tenants, int ntenants, const char *tenant, int len)
{
	for (int i = 0; i < ntenants; i++)
		if ((int) strlen(tenants[i]) == len && memcmp(tenants[i], tenant, len) == 0)
			return true;
	return false;
}

/* Work out what userid may do for one kind, from the bindings that apply to it. */
static void
resolve_kind(RoleTenancy *rt, CscpRoleKind kind, const bool *applies)
{
	int			n = 0;
	bool		any = false;
	bool		unbound = false;

	for (int i = 0; i < nbindings; i++)
	{
		if (!applies[i] || bindings[i].kind != kind)
			continue;
		any = true;
		if (bindings[i].ntenants < 0)
			unbound = true;
		else
			n += bindings[i].ntenants;
	}
	rt->ntenants[kind] = 0;
	rt->tenants[kind] = NULL;
	rt->unrestricted[kind] = !any || unbound;
	if (rt->unrestricted[kind])
		return;
	rt->tenants[kind] = MemoryContextAlloc(roles_cxt, sizeof(char *) * (n > 0 ? n : 1));
	for (int i = 0; i < nbindings; i++)
	{
		if (!applies[i] || bindings[i].kind != kind || bindings[i].ntenants < 0)
			continue;
		for (int j = 0; j < bindings[i].ntenants; j++)
		{
			const char *t = bindings[i].tenants[j];

			if (!listed(rt->tenants[kind], rt->ntenants[kind], t, strlen(t)))
				rt->tenants[kind][rt->ntenants[kind]++] = bindings[i].tenants[j];
		}
	}
}

/*
 * What the role userid may do, from the cache or worked out now; owner is
 * the owner of the table row-level security would bind it on.
 */
static RoleTenancy *
role_tenancy(Oid userid, Oid owner)
{
	RoleTenancy *rt = NULL;
	bool	   *applies;
	bool		super;
	uint64		generation;

	if (!bindings_valid)
		load_bindings();
	generation = roles_generation;
	for (int i = 0; i < ROLE_CACHE_SIZE; i++)
		if (role_cache[i].userid == userid)
		{
			rt = &role_cache[i];
			if (rt->owner == owner || !OidIsValid(owner))
				return rt;
			break;
		}
	if (rt == NULL)
	{
		bool		none = true;

		/* no role's answer left: their lists can go */
		for (int i = 0; i < ROLE_CACHE_SIZE; i++)
			if (OidIsValid(role_cache[i].userid))
				none = false;
		if (none)
			MemoryContextReset(roles_cxt);
	}
	if (rt == NULL)
	{
		rt = &role_cache[role_cache_next];
		role_cache_next = (role_cache_next + 1) % ROLE_CACHE_SIZE;
	}
	if (!OidIsValid(owner))
		owner = binding_owner;

	rt->userid = InvalidOid;	/* not valid until filled in */
	super = superuser_arg(userid);
	rt->owner = owner;
	rt->unbound = false;
	rt->rls_exempt = super || has_bypassrls_privilege(userid) ||
		(OidIsValid(owner) && has_privs_of_role(userid, owner));
	if (super || (OidIsValid(binding_owner) && has_privs_of_role(userid, binding_owner)))
	{
		for (int k = 0; k < CSCP_ROLE_KINDS; k++)
		{
			rt->unrestricted[k] = true;
			rt->ntenants[k] = 0;
			rt->tenants[k] = NULL;
		}
		if (generation == roles_generation)
			rt->userid = userid;
		return rt;
	}
	applies = palloc(sizeof(bool) * (nbindings > 0 ? nbindings : 1));
	/* a BYPASSRLS role, which row-level security does not bind, is not held to none */
	rt->unbound = nbindings > 0 && !has_bypassrls_privilege(userid);
	for (int i = 0; i < nbindings; i++)
	{
		applies[i] = has_privs_of_role(userid, bindings[i].role);
		if (applies[i])
			rt->unbound = false;
	}
	if (rt->unbound)
	{
		/* bindings exist, none is this role's: it may name no tenant (fail closed) */
		for (int k = 0; k < CSCP_ROLE_KINDS; k++)
		{
			rt->unrestricted[k] = false;
			rt->ntenants[k] = 0;
			rt->tenants[k] = NULL;
		}
		pfree(applies);
		if (generation == roles_generation)
			rt->userid = userid;
		return rt;
	}
	for (int k = 0; k < CSCP_ROLE_KINDS; k++)
		resolve_kind(rt, (CscpRoleKind) k, applies);
	/* no binding of one kind: held to the other kind's (see the header) */
	for (int k = 0; k < CSCP_ROLE_KINDS; k++)
	{
		int			other = 1 - k;
		bool		has_kind = false;

		for (int i = 0; i < nbindings; i++)
			if (applies[i] && bindings[i].kind == (CscpRoleKind) k)
				has_kind = true;
		if (!has_kind && !rt->unrestricted[other])
		{
			rt->unrestricted[k] = false;
			rt->ntenants[k] = rt->ntenants[other];
			rt->tenants[k] = rt->tenants[other];
		}
	}
	pfree(applies);
	/* an invalidation while it was worked out: good for this call only */
	if (generation == roles_generation)
		rt->userid = userid;
	return rt;
}

/* Whether the current role may use tenant (len bytes) as kind. */
bool
cscp_tenancy_allows(const char *tenant, int len, CscpRoleKind kind)
{
	RoleTenancy *rt = role_tenancy(GetUserId(), InvalidOid);

	return rt->unrestricted[kind] || listed(rt->tenants[kind], rt->ntenants[kind], tenant, len);
}

/*
 * The tenants the current role is bound to as kind, as a text[], or NULL
 * when it is unrestricted.
 */
ArrayType *
cscp_tenancy_tenants(CscpRoleKind kind)
{
	RoleTenancy *rt = role_tenancy(GetUserId(), InvalidOid);
	Datum	   *elems;

	if (rt->unrestricted[kind])
		return NULL;
	elems = palloc(sizeof(Datum) * (rt->ntenants[kind] > 0 ? rt->ntenants[kind] : 1));
	for (int i = 0; i < rt->ntenants[kind]; i++)
		elems[i] = CStringGetTextDatum(rt->tenants[kind][i]);
	return construct_array(elems, rt->ntenants[kind], TEXTOID, -1, false, TYPALIGN_INT);
}

/* Raise 42501: the current role may not use tenant as kind. */
void
cscp_tenancy_refuse(const char *tenant, CscpRoleKind kind)
{
	if (role_tenancy(GetUserId(), InvalidOid)->unbound)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for tenant \"%s\"", tenant),
				 errdetail("Role \"%s\" has no binding of its own or inherited, and bindings exist.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("Bind the role with cscp.%s (without tenants for a trusted multi-tenant service), or act as a role that is bound.",
						 kind == CSCP_ROLE_OPERATOR ? "grant_operator" : "grant_app")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for tenant \"%s\"", tenant),
			 errdetail("Role \"%s\" is bound to other tenants.",
					   GetUserNameFromId(GetUserId(), false)),
			 errhint("Use a tenant the role was granted with cscp.%s.",
					 kind == CSCP_ROLE_OPERATOR ? "grant_operator" : "grant_app")));
}

/*
 * The tenant the session acts for as kind: cscp.tenant_id, or NULL when it
 * is not set; 42501 when the current role is bound and it names a tenant
 * the role may not use.
 */
const char *
cscp_session_tenant(CscpRoleKind kind)
{
	const char *t = cscp_tenant_setting;

	if (t == NULL || t[0] == '\0')
		return NULL;
	if (!cscp_tenancy_allows(t, strlen(t), kind))
		cscp_tenancy_refuse(t, kind);
	return t;
}

/*
 * The tenant a lookup by id alone (cscp.command_transition, command_recover,
 * command_status, slot_set, context_transition) is held to: the tenant the
 * session acts for (cscp_session_tenant), as a text Datum, or *isnull when
 * cscp.tenant_id is not set.  Ids are keyed per tenant, so a role that
 * row-level security does not bind (the owner behind the gateway) must not
 * reach another tenant's row that carries the same id.
 */
Datum
cscp_lookup_tenant(bool *isnull)
{
	const char *t = cscp_session_tenant(CSCP_ROLE_APP);

	*isnull = (t == NULL);
	return t == NULL ? (Datum) 0 : CStringGetTextDatum(t);
}

/* Column number of tenant_id in rel, looked up once per relation. */
static int
tenant_column(Relation rel)
{
	static Oid	relids[32];
	static int	attnums[32];
	Oid			relid = RelationGetRelid(rel);
	int			slot = relid % 32;
	TupleDesc	desc;

	if (relids[slot] == relid && attnums[slot] > 0 &&
		attnums[slot] <= RelationGetDescr(rel)->natts &&
		strcmp(NameStr(TupleDescAttr(RelationGetDescr(rel), attnums[slot] - 1)->attname),
			   "tenant_id") == 0)
		return attnums[slot];
	desc = RelationGetDescr(rel);
	attnums[slot] = 0;
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), "tenant_id") == 0)
			attnums[slot] = i + 1;
	relids[slot] = relid;
	return attnums[slot];
}

/* 42501 unless row's tenant_id is the tenant the session may act for. */
static void
check_row(Relation rel, HeapTuple row, int attnum)
{
	bool		isnull;
	Datum		d;
	text	   *t;
	const char *session;

	if (row == NULL)
		return;
	d = heap_getattr(row, attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		return;					/* NOT NULL is the column's own rule */
	t = DatumGetTextPP(d);
	session = cscp_session_tenant(CSCP_ROLE_APP);
	if (session == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cscp.tenant_id is not set"),
				 errdetail("Role \"%s\" may write rows of table \"%s\" only for the tenant named in cscp.tenant_id.",
						   GetUserNameFromId(GetUserId(), false), RelationGetRelationName(rel)),
				 errtable(rel)));
	if ((int) strlen(session) != (int) VARSIZE_ANY_EXHDR(t) ||
		memcmp(session, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for tenant \"%s\"", text_to_cstring(t)),
				 errdetail("This session acts for tenant \"%s\".", session),
				 errhint("Set cscp.tenant_id to the tenant you mean to act for."),
				 errtable(rel)));
}

/*
 * First step of every BEFORE ROW trigger on cscp's tables: when row-level
 * security binds the current role on the table, the row's tenant_id (old
 * and new) must be the tenant its session may act for, or 42501, before
 * the trigger looks at any other row (which could tell another tenant's
 * data apart).  Anything but a row-level trigger call is left to the
 * trigger's own protocol checks.
 */
void
cscp_tenancy_check_trigger(FunctionCallInfo fcinfo)
{
	TriggerData *trigdata;
	Relation	rel;
	RoleTenancy *rt;
	int			attnum;

	if (!CALLED_AS_TRIGGER(fcinfo))
		return;
	trigdata = (TriggerData *) fcinfo->context;
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		return;
	rel = trigdata->tg_relation;
	if (!rel->rd_rel->relrowsecurity)
		return;
	rt = role_tenancy(GetUserId(), rel->rd_rel->relowner);
	if (rt->rls_exempt)
		return;
	attnum = tenant_column(rel);
	if (attnum <= 0)
		return;
	check_row(rel, trigdata->tg_trigtuple, attnum);
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		check_row(rel, trigdata->tg_newtuple, attnum);
}

PG_FUNCTION_INFO_V1(cscp_current_tenant);

/*
 * cscp.current_tenant() RETURNS text: the tenant row-level security lets
 * the current role see and write (see cscp_session_tenant).
 */
Datum
cscp_current_tenant(PG_FUNCTION_ARGS)
{
	const char *t = cscp_session_tenant(CSCP_ROLE_APP);

	if (t == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(t));
}

PG_FUNCTION_INFO_V1(cscp_bound_tenants);

/*
 * cscp.bound_tenants(kind text) RETURNS text[]: the tenants the current
 * role is bound to as kind ('app' or 'operator'), NULL when unrestricted.
 */
Datum
cscp_bound_tenants(PG_FUNCTION_ARGS)
{
	char	   *kind = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *a;

	if (kind == NULL || (strcmp(kind, kind_names[0]) != 0 && strcmp(kind, kind_names[1]) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kind must be \"app\" or \"operator\"")));
	a = cscp_tenancy_tenants(strcmp(kind, "operator") == 0 ? CSCP_ROLE_OPERATOR : CSCP_ROLE_APP);
	if (a == NULL)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(a);
}
