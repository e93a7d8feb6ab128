/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The command registry (whether a command mutates) and the governance
 *	  of a tenant: who may change its policy, authority ranks and registry,
 *	  and the record of every such change.
 *
 * Whether a command mutates is decided by cscp_registry_mutating alone:
 * the tenant's declaration in cscp.command_registry (else the defaults of
 * tenant '*'), and for a command declared nowhere the policy key
 * undeclared_commands (mutating, the default: whatever the caller says;
 * caller: the caller's flag; refuse: 22023).  command_submit asks it with
 * the caller's argument (a contradiction is 22023); the command trigger
 * asks it for every new row, so that a direct INSERT cannot file a
 * mutating command as read-only.  A command declared needs_approval starts
 * only once an answer of cscp.approve approved it (cscp_registry_unapproved,
 * asked by the transition rules at started).
 *
 * Risk drives recovery (SMCL VIII.A).  A command's class is its
 * declaration: it needs an approval when declared needs_approval or of
 * risk critical; it is gated when it needs one or is of risk high.  A
 * recovery (cancel, compensate) of a gated command is itself confirmed by
 * the user (it must be mutating) and needs an approval when its target
 * needs one, as a forward command of that class would; a gated command
 * that has started is canceled only by such a recovery once it has
 * started itself.  The rules ask cscp_registry_unapproved,
 * cscp_registry_recovery_gated and cscp_registry_cancel_unapproved; the
 * class is decided in the SQL fragments below, and for a forward command's
 * own declaration in cscp_registry_unapproved from registry_lookup's flags.
 *
 * Declarations are read once per backend (registry_lookup): a cache of
 * what each (tenant, command name) read answered, dropped at once when
 * cscp.command_registry changes (its trigger command_registry_changed
 * sends a relcache invalidation), served only where row-level security
 * would show the caller the same rows.
 *
 * cscp_governance_record is the AFTER ROW trigger on cscp.policy,
 * cscp.authority and cscp.command_registry.  When the tenant's policy names
 * an admin_role, only a member of that role (or a superuser, or the owner
 * of cscp's tables) may change them: anyone else gets 42501 and the
 * statement changes nothing.  Every change is then appended to
 * cscp.governance_log as the owner of the tables (no application role may
 * write it), naming the role that made it: GetUserId() of the statement,
 * since the trigger is not SECURITY DEFINER and the API functions that
 * write these tables run with their caller's rights.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

/* The policy's string under key, or NULL. */
static char *
policy_string(Jsonb *policy, const char *key)
{
	JsonbValue *v = cscp_jsonb_get(policy, key);

	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * The declaration of command name for tenant (its own, else tenant '*'s):
 * false when there is none; its mutating and needs_approval flags, and
 * whether its risk is critical.  Read with the caller's rights (row-level
 * security shows a tenant its own rows and the defaults).
 */
static bool
registry_read(text *tenant, text *name, bool *mutating, bool *needs_approval, bool *critical)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2] = {PointerGetDatum(tenant), PointerGetDatum(name)};
	bool		found = false;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT r.mutating, r.needs_approval, r.risk OPERATOR(pg_catalog.=) 'critical'"
				  "  FROM cscp.command_registry r"
				  " WHERE r.tenant_id OPERATOR(pg_catalog.=) ANY (ARRAY[$1, '*']) AND r.command_name OPERATOR(pg_catalog.=) $2"
				  " ORDER BY r.tenant_id OPERATOR(pg_catalog.=) '*' LIMIT 1",
				  2, argtypes);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the command registry");
	if (SPI_processed == 1)
	{
		found = true;
		*mutating = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		*needs_approval = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		*critical = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
		if (isnull)
			*critical = false;
	}
	SPI_finish();
	return found;
}

/*
 * The declarations read, per backend: (tenant, command name) -> what
 * registry_read answered, declared or not.  The whole cache is dropped when
 * cscp.command_registry changes (its statement trigger
 * command_registry_changed sends a relcache invalidation, as the policy's
 * does: this backend's at its next command, the others' when the change
 * commits), and, as the policy cache (policy.c), it is served only where
 * row-level security would show the caller the rows it was read from: no
 * row-level security, or the caller's own tenant.  Ids longer than an id
 * may be are read from the table.
 */
#define REGISTRY_KEY_BYTES (2 * (CSCP_MAX_ID_BYTES + 1))
#define REGISTRY_CACHE_MAX_ENTRIES 4096

typedef struct RegistryCacheEntry
{
	char		key[REGISTRY_KEY_BYTES];	/* tenant, NUL, name, NULs */
	bool		found;
	bool		mutating;
	bool		needs_approval;
	bool		critical;
} RegistryCacheEntry;

static HTAB *registry_cache = NULL;
static CscpTableCache registry_table_cache; /* dropped when cscp.command_registry changes */

static bool
registry_lookup(text *tenant, text *name, bool *mutating, bool *needs_approval, bool *critical)
{
	char		key[REGISTRY_KEY_BYTES];
	int			tlen = VARSIZE_ANY_EXHDR(tenant);
	int			nlen = VARSIZE_ANY_EXHDR(name);
	RegistryCacheEntry *entry;
	uint64		generation;
	Oid			relid;
	bool		found;

	*mutating = *needs_approval = *critical = false;
	relid = cscp_relation_oid("command_registry", true);
	if (tlen > CSCP_MAX_ID_BYTES || nlen > CSCP_MAX_ID_BYTES || !OidIsValid(relid) ||
		(check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED &&
		 (cscp_tenant_setting == NULL || strlen(cscp_tenant_setting) != (size_t) tlen ||
		  memcmp(cscp_tenant_setting, VARDATA_ANY(tenant), tlen) != 0)))
		return registry_read(tenant, name, mutating, needs_approval, critical);

	if (!registry_table_cache.valid || registry_cache == NULL ||
		registry_table_cache.relid != relid ||
		hash_get_num_entries(registry_cache) >= REGISTRY_CACHE_MAX_ENTRIES)
	{
		HASHCTL		ctl;

		if (registry_cache != NULL)
			hash_destroy(registry_cache);
		ctl.keysize = REGISTRY_KEY_BYTES;
		ctl.entrysize = sizeof(RegistryCacheEntry);
		ctl.hcxt = CacheMemoryContext;
		registry_cache = hash_create("cscp command registry cache", 64, &ctl,
									 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		cscp_table_cache_done(&registry_table_cache,
							  cscp_table_cache_begin(&registry_table_cache, relid));
	}

	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(tenant), tlen);
	memcpy(key + CSCP_MAX_ID_BYTES + 1, VARDATA_ANY(name), nlen);
	entry = hash_search(registry_cache, key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		*mutating = entry->mutating;
		*needs_approval = entry->needs_approval;
		*critical = entry->critical;
		return entry->found;
	}

	generation = registry_table_cache.generation;
	found = registry_read(tenant, name, mutating, needs_approval, critical);
	if (generation == registry_table_cache.generation && registry_table_cache.valid)
	{
		entry = hash_search(registry_cache, key, HASH_ENTER, NULL);
		entry->found = found;
		entry->mutating = *mutating;
		entry->needs_approval = *needs_approval;
		entry->critical = *critical;
	}
	return found;
}

/*
 * Whether command name of tenant mutates, given what the writer says
 * (given).  CSCP_REGISTRY_ARGUMENT (command_submit): the registry's flag,
 * 22023 when given contradicts it.  CSCP_REGISTRY_RECOVERY (a retry,
 * reprocess or compensate cscp forms): the registry's flag, given never
 * refused.  CSCP_REGISTRY_ROW and CSCP_REGISTRY_RECOVERY_ROW (a new row of
 * cscp.command): given, 22023 when it says read-only what the registry or
 * the policy makes mutating.  A command declared nowhere follows the
 * policy key undeclared_commands: mutating (the default), caller, or
 * refuse (22023, but for a recovery of a command already accepted).
 */
bool
cscp_registry_mutating(text *tenant, text *name, bool given, CscpRegistryMode mode)
{
	bool		row = (mode == CSCP_REGISTRY_ROW || mode == CSCP_REGISTRY_RECOVERY_ROW);
	bool		recovery = (mode == CSCP_REGISTRY_RECOVERY || mode == CSCP_REGISTRY_RECOVERY_ROW);
	bool		declared_mutating = false;
	bool		needs_approval = false;
	bool		critical = false;
	char	   *tenant_c = text_to_cstring(tenant);
	char	   *name_c = text_to_cstring(name);
	char	   *undeclared = policy_string(cscp_policy_get(tenant_c), "undeclared_commands");

	/*
	 * A row that says mutating says at least what the registry would; only
	 * refuse can still turn it away (the policy is cached, the registry is a
	 * query).
	 */
	if (row && given && (recovery || undeclared == NULL || strcmp(undeclared, "refuse") != 0))
		return true;

	if (registry_lookup(tenant, name, &declared_mutating, &needs_approval, &critical))
	{
		if (mode == CSCP_REGISTRY_ARGUMENT && given != declared_mutating)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command \"%s\" is declared %s", name_c,
							declared_mutating ? "mutating" : "read-only"),
					 errdetail("The command registry of tenant \"%s\" says mutating = %s; the call says %s.",
							   tenant_c, declared_mutating ? "true" : "false", given ? "true" : "false"),
					 errhint("Pass mutating => %s, or change the declaration with cscp.command_declare.",
							 declared_mutating ? "true" : "false")));
		if (row && declared_mutating && !given)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command \"%s\" is declared mutating", name_c),
					 errdetail("The command registry of tenant \"%s\" says mutating = true; the row says false.",
							   tenant_c),
					 errhint("Write the command with mutating = true, or change the declaration with cscp.command_declare.")));
		return row ? given : declared_mutating;
	}

	if (undeclared != NULL && strcmp(undeclared, "caller") == 0)
		return given;
	if (undeclared != NULL && strcmp(undeclared, "refuse") == 0)
	{
		if (recovery)
			return given;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command \"%s\" is not declared", name_c),
				 errdetail("The policy of tenant \"%s\" refuses commands its command registry does not declare.",
						   tenant_c),
				 errhint("Declare it with cscp.command_declare, or set the policy key undeclared_commands to \"mutating\" or \"caller\".")));
	}
	/* "mutating", the default */
	if (row && !given)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("undeclared command \"%s\" must be mutating", name_c),
				 errdetail("The policy of tenant \"%s\" treats every command its command registry does not declare as mutating.",
						   tenant_c),
				 errhint("Declare the command read-only with cscp.command_declare, or write it with mutating = true.")));
	return row ? given : true;
}

/*
 * The class of the command named by the text expression NAME of tenant
 * expression TENANT, as an SQL expression over the declaration r (its own,
 * else tenant '*'s; false when declared nowhere): APPROVAL, whether it
 * needs an approval; GATED, whether its recoveries are confirmed too.
 */
#define CLASS_OF(what, tenant, name) \
	"coalesce((SELECT " what " FROM cscp.command_registry r" \
	"           WHERE r.tenant_id OPERATOR(pg_catalog.=) ANY (ARRAY[" tenant ", '*'])" \
	"             AND r.command_name OPERATOR(pg_catalog.=) " name \
	"           ORDER BY r.tenant_id OPERATOR(pg_catalog.=) '*' LIMIT 1), false)"
#define APPROVAL "(r.needs_approval OR r.risk OPERATOR(pg_catalog.=) 'critical')"
#define GATED "(r.needs_approval OR r.risk OPERATOR(pg_catalog.=) ANY (ARRAY['high', 'critical']))"

/*
 * Whether command command_id of tenant needs an approval (now) and has
 * none: no answer of cscp.approve approved it.  It needs one when its
 * declaration says so, or when it is a cancel or compensate recovery of a
 * command whose declaration says so.  Read with the caller's rights, as
 * the transition it judges.  name, when given for a command that is no
 * cancel or compensate recovery (recovery false), lets a command whose
 * declaration needs no approval be answered by the lookup of its
 * declaration (registry_lookup, cached per backend), without the statement
 * that reads its answers.
 */
bool
cscp_registry_unapproved(Datum tenant, Datum command_id, text *name, bool recovery)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {tenant, command_id};

	if (name != NULL && !recovery)
	{
		bool		mutating,
					needs_approval,
					critical;

		/* APPROVAL of its declaration, read through the cache */
		if (!registry_lookup(DatumGetTextPP(tenant), name, &mutating, &needs_approval, &critical) ||
			!(needs_approval || critical))
			return false;
	}
	return cscp_spi_exists(&plan,
						   "SELECT 1 FROM cscp.command c"
						   "  LEFT JOIN cscp.command t"
						   "    ON c.recovery_kind OPERATOR(pg_catalog.=) ANY (ARRAY['cancel', 'compensate'])"
						   "   AND t.tenant_id OPERATOR(pg_catalog.=) c.tenant_id"
						   "   AND t.command_id OPERATOR(pg_catalog.=) c.target_command_id"
						   " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2"
						   "   AND (" CLASS_OF(APPROVAL, "c.tenant_id", "c.command_name")
						   "        OR (t.command_id IS NOT NULL AND " CLASS_OF(APPROVAL, "t.tenant_id", "t.command_name") "))"
						   "   AND NOT EXISTS (SELECT 1 FROM cscp.answer a"
						   "                    WHERE a.tenant_id OPERATOR(pg_catalog.=) c.tenant_id"
						   "                      AND a.kind OPERATOR(pg_catalog.=) 'approve'"
						   "                      AND a.command_id OPERATOR(pg_catalog.=) c.command_id"
						   "                      AND a.outcome OPERATOR(pg_catalog.=) 'approved')",
						   2, argtypes, args, true, "read the command registry");
}

/*
 * Whether command target_id of tenant is gated (declared needs_approval,
 * or of risk high or critical): its cancel and compensate recoveries are
 * then confirmed by the user.  Read with the caller's rights.
 */
bool
cscp_registry_recovery_gated(Datum tenant, Datum target_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {tenant, target_id};

	return cscp_spi_exists(&plan,
						   "SELECT 1 FROM cscp.command t"
						   " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.command_id OPERATOR(pg_catalog.=) $2"
						   "   AND " CLASS_OF(GATED, "t.tenant_id", "t.command_name"),
						   2, argtypes, args, true, "read the command registry");
}

/*
 * Whether command command_id of tenant is gated and no cancel recovery
 * aimed at it has started (been confirmed, approved when its class needs
 * it, and authorized): a started gated command is canceled only by one.
 */
bool
cscp_registry_cancel_unapproved(Datum tenant, Datum command_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, UUIDOID};
	Datum		args[2] = {tenant, command_id};

	return cscp_spi_exists(&plan,
						   "SELECT 1 FROM cscp.command t"
						   " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.command_id OPERATOR(pg_catalog.=) $2"
						   "   AND " CLASS_OF(GATED, "t.tenant_id", "t.command_name")
						   "   AND NOT EXISTS (SELECT 1 FROM cscp.command x"
						   "                    WHERE x.tenant_id OPERATOR(pg_catalog.=) t.tenant_id"
						   "                      AND x.target_command_id OPERATOR(pg_catalog.=) t.command_id"
						   "                      AND x.recovery_kind OPERATOR(pg_catalog.=) 'cancel'"
						   "                      AND x.state::pg_catalog.text OPERATOR(pg_catalog.=) 'started')",
						   2, argtypes, args, true, "read the command registry");
}

/*
 * The admin role of a change to a governance row of tenant (NULL: none).
 * For a policy row, the one in force before the change: the old row's
 * admin_role, else the defaults'; for the other tables, the tenant's
 * effective policy.
 */
static char *
admin_role_of(Relation rel, const char *tenant, HeapTuple oldtup)
{
	if (strcmp(RelationGetRelationName(rel), "policy") == 0)
	{
		char	   *role = NULL;

		if (oldtup != NULL)
		{
			bool		isnull;
			Datum		d = heap_getattr(oldtup, cscp_column(RelationGetDescr(rel), "cscp.policy", "settings"),
										 RelationGetDescr(rel), &isnull);

			if (!isnull)
				role = policy_string(DatumGetJsonbP(d), "admin_role");
		}
		return role != NULL ? role : policy_string(cscp_policy_get("*"), "admin_role");
	}
	return policy_string(cscp_policy_get(tenant), "admin_role");
}

/*
 * The policy a policy row (NULL: none) holds for key: its settings when
 * they name key, else the defaults of tenant '*', as the effective policy
 * would read it.
 */
static Jsonb *
policy_for_key(Relation rel, HeapTuple tup, const char *key)
{
	if (tup != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, cscp_column(RelationGetDescr(rel), "cscp.policy", "settings"),
									 RelationGetDescr(rel), &isnull);

		if (!isnull && cscp_jsonb_get(DatumGetJsonbP(d), key) != NULL)
			return DatumGetJsonbP(d);
	}
	return cscp_policy_get("*");
}

/*
 * A command the change of a policy row (oldtup to newtup, either NULL) adds
 * to its tenant's auto_confirm list, or NULL when it adds none: a command
 * the new list names and the old one does not.
 */
static char *
auto_confirm_widened(Relation rel, HeapTuple oldtup, HeapTuple newtup)
{
	Jsonb	   *before = policy_for_key(rel, oldtup, "auto_confirm");
	Jsonb	   *after = policy_for_key(rel, newtup, "auto_confirm");
	JsonbValue *list = cscp_jsonb_get(after, "auto_confirm");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (list == NULL || list->type != jbvBinary)
		return NULL;
	it = JsonbIteratorInit(list->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *name;

		if (tok != WJB_ELEM || v.type != jbvString)
			continue;
		name = pnstrdup(v.val.string.val, v.val.string.len);
		if (!cscp_policy_lists(before, "auto_confirm", name))
			return name;
	}
	return NULL;
}

/*
 * 42501 unless the current role may change the governance rows of tenant.
 * With no admin_role every role that may write the rows may change them,
 * but for one thing: adding a command to the policy's auto_confirm, which
 * lets it skip the user's confirmation, is the owner's (or a superuser's).
 */
static void
check_admin(Relation rel, const char *tenant, HeapTuple oldtup, HeapTuple newtup)
{
	char	   *admin = admin_role_of(rel, tenant, oldtup);
	Oid			admin_oid;
	Oid			userid = GetUserId();
	char	   *widened;

	if (superuser() || has_privs_of_role(userid, rel->rd_rel->relowner))
		return;
	if (admin == NULL && strcmp(RelationGetRelationName(rel), "policy") == 0 &&
		(widened = auto_confirm_widened(rel, oldtup, newtup)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to add \"%s\" to auto_confirm of tenant \"%s\"",
						widened, tenant),
				 errdetail("A command listed in auto_confirm skips the user's confirmation; with no admin_role in the policy only the owner of cscp's tables may add one."),
				 errhint("Have the owner add it, or name an admin_role in the policy and make the change as its member.")));
	if (admin == NULL)
		return;
	admin_oid = get_role_oid(admin, true);
	if (OidIsValid(admin_oid) && has_privs_of_role(userid, admin_oid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to change %s of tenant \"%s\"",
					strcmp(RelationGetRelationName(rel), "policy") == 0 ? "the policy" :
					strcmp(RelationGetRelationName(rel), "authority") == 0 ? "the authority ranks" :
					"the command registry", tenant),
			 errdetail("The policy of tenant \"%s\" lets only members of role \"%s\" change its policy, authority ranks and command registry.",
					   tenant, admin),
			 errhint("Make the change as a member of role \"%s\".", admin)));
}

/* The whole row as jsonb. */
static Datum
row_json(HeapTuple tuple, TupleDesc desc)
{
	Datum		json = DirectFunctionCall1(row_to_json, heap_copy_tuple_as_datum(tuple, desc));

	return DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(DatumGetTextPP(json))));
}

/* The key of a governance row within its tenant: NULL for a policy. */
static Datum
row_key(Relation rel, HeapTuple tuple, bool *isnull)
{
	const char *name = RelationGetRelationName(rel);
	const char *column = strcmp(name, "authority") == 0 ? "authority" :
		strcmp(name, "command_registry") == 0 ? "command_name" : NULL;

	*isnull = column == NULL;
	if (column == NULL)
		return (Datum) 0;
	return heap_getattr(tuple, cscp_column(RelationGetDescr(rel), name, column),
						RelationGetDescr(rel), isnull);
}

PG_FUNCTION_INFO_V1(cscp_governance_record);

/*
 * Trigger cscp.governance_record(), AFTER INSERT OR UPDATE OR DELETE FOR
 * EACH ROW on cscp.policy, cscp.authority and cscp.command_registry: the
 * admin role check, then one row of cscp.governance_log.
 */
Datum
cscp_governance_record(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[8] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID,
	NAMEOID, TIMESTAMPTZOID};
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	HeapTuple	oldtup = NULL,
				newtup = NULL,
				row;
	const char *action;
	char	   *tenant;
	Datum		args[8];
	char		nulls[] = "        ";
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.governance_record() must be called as an AFTER ROW trigger")));
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		newtup = trigdata->tg_trigtuple;
		action = "insert";
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		oldtup = trigdata->tg_trigtuple;
		newtup = trigdata->tg_newtuple;
		action = "update";
	}
	else
	{
		oldtup = trigdata->tg_trigtuple;
		action = "delete";
	}
	row = newtup != NULL ? newtup : oldtup;
	tenant = SPI_getvalue(row, desc, cscp_column(desc, RelationGetRelationName(rel), "tenant_id"));

	check_admin(rel, tenant, oldtup, newtup);

	args[0] = CStringGetTextDatum(tenant);
	args[1] = CStringGetTextDatum(RelationGetRelationName(rel));
	args[2] = row_key(rel, row, &isnull);
	if (isnull)
		nulls[2] = 'n';
	args[3] = CStringGetTextDatum(action);
	if (oldtup != NULL)
		args[4] = row_json(oldtup, desc);
	else
		nulls[4] = 'n';
	if (newtup != NULL)
		args[5] = row_json(newtup, desc);
	else
		nulls[5] = 'n';
	args[6] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	args[7] = TimestampTzGetDatum(cscp_now());

	(void) cscp_owner_exec("governance_log", &plan,
						   "INSERT INTO cscp.governance_log (tenant_id, object, object_key, action,"
						   "    old_value, new_value, changed_by, changed_at)"
						   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
						   8, argtypes, args, nulls, SPI_OK_INSERT, "record a governance change");
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(cscp_operator_tenant_visible);

/*
 * cscp.operator_tenant_visible(tenant_id text) RETURNS boolean: whether the
 * current role may see tenant as an operator (row-level security of
 * cscp.governance_log).
 */
Datum
cscp_operator_tenant_visible(PG_FUNCTION_ARGS)
{
	text	   *tenant = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BOOL(cscp_tenancy_allows(VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant),
									   CSCP_ROLE_OPERATOR));
}
