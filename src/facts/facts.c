/*-------------------------------------------------------------------------
 *
 * facts.c
 *	  Persistent facts (DESIGN.md section 8): the triggers that keep
 *	  supersession chains well-formed on cscp.fact, and the chain walkers
 *	  cscp.fact_current and cscp.fact_history.
 *
 * A chain is a list of facts of one subject linked both ways: the newer
 * fact's supersedes names the older one, the older one's superseded_by the
 * newer one.  Invariants kept here, for cscp.fact_write and direct SQL alike:
 *	- a fact is born valid and unsuperseded, with no derived facts; its
 *	  authority and rank are resolved from its source (source.authority,
 *	  else the subject's identity's authority, else guest; an authority
 *	  the tenant does not rank is refused, 22023), its memory type
 *	  classified from source.type when not given (user by default), and
 *	  its created_at is cscp.now();
 *	- authority is checked before every write: no fact is written beside a
 *	  valid fact of the same key (global, or in its own scope) whose
 *	  authority ranks higher (42501); hypothetical and draft facts are
 *	  exempt, being never told; writers of one key queue on an advisory
 *	  lock of (tenant, subject, key) for the check;
 *	- it may supersede only an existing, valid fact of the same subject whose
 *	  authority rank is not above its own (else 42501), which the BEFORE
 *	  trigger locks (FOR UPDATE) so that two writers superseding one fact
 *	  queue and the second finds it superseded (55000);
 *	- AFTER the insert, the superseded fact becomes is_valid = false,
 *	  superseded_by = the new fact; every valid fact derived from it,
 *	  directly or through other derived facts, gets needs_review; the new
 *	  fact is added to the derived_facts of each fact it depends on;
 *	- links are made only at insert, towards an older fact that was the head
 *	  of its chain, so chains never fork (also a unique index), never loop,
 *	  and hold exactly one valid fact, the head;
 *	- no column of a fact changes afterwards except needs_review (free),
 *	  derived_facts (growing by facts that depend on it) and the
 *	  valid -> superseded step that the supersession itself makes;
 *	- the foreign keys on supersedes and superseded_by refuse deleting part
 *	  of a chain.
 * The walkers read a chain with one saved query (a recursive CTE, under
 * the statement's snapshot, with the caller's rights and row-level
 * security) and follow it in memory; a chain that breaks these invariants
 * anyway (triggers disabled) is refused with XX001, never followed round a
 * loop.  The primary key carries is_valid, superseded_by and supersedes
 * (INCLUDE), so a step of the CTE can be an index-only scan where the
 * row's heap page is all-visible.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

typedef enum MemoryType
{
	MEM_USER,
	MEM_CAPABILITY,
	MEM_ORGANIZATIONAL,
	MEM_NUM_TYPES
} MemoryType;

static const char *const memory_type_names[MEM_NUM_TYPES] = {
	"user", "capability", "organizational"
};

static CscpEnumCache memory_type_cache = {.n = MEM_NUM_TYPES, .names = memory_type_names};

/*
 * Memory type of a fact from its source.type, when the writer gives none:
 * the StateBench spec's classification (policy, finance_system, hr_system:
 * organizational; observation, pattern, heuristic: capability; decision,
 * user, preference: user) and cscp's own additions.  Any other source type
 * is user memory, the spec's default.
 */
static const struct
{
	const char *source_type;
	MemoryType	memory_type;
}			source_types[] = {
	{"user", MEM_USER},
	{"decision", MEM_USER},
	{"preference", MEM_USER},
	{"conversation", MEM_USER},
	{"system", MEM_CAPABILITY},
	{"tool", MEM_CAPABILITY},
	{"agent", MEM_CAPABILITY},
	{"assistant", MEM_CAPABILITY},
	{"observation", MEM_CAPABILITY},
	{"pattern", MEM_CAPABILITY},
	{"heuristic", MEM_CAPABILITY},
	{"policy", MEM_ORGANIZATIONAL},
	{"finance_system", MEM_ORGANIZATIONAL},
	{"hr_system", MEM_ORGANIZATIONAL},
	{"organization", MEM_ORGANIZATIONAL},
	{"document", MEM_ORGANIZATIONAL},
	{"admin", MEM_ORGANIZATIONAL},
};

/* The memory type of source type when the writer gives none (user by default). */
static MemoryType
classify_source(const char *source_type)
{
	for (int i = 0; i < (int) lengthof(source_types); i++)
		if (strcmp(source_types[i].source_type, source_type) == 0)
			return source_types[i].memory_type;
	return MEM_USER;
}

/* The authority of a writer who names none and whose identity names no known one. */
#define DEFAULT_AUTHORITY "guest"

/* Column numbers of cscp.fact, looked up by name once per relation (rowguard.c). */
typedef enum
{
	F_TENANT_ID,
	F_SUBJECT_ID,
	F_FACT_ID,
	F_KEY,
	F_VALUE,
	F_SOURCE,
	F_AUTHORITY,
	F_AUTHORITY_RANK,
	F_CREATED_AT,
	F_IS_VALID,
	F_SUPERSEDED_BY,
	F_SUPERSEDES,
	F_MEMORY_TYPE,
	F_SCOPE,
	F_SCOPE_ID,
	F_DEPENDS_ON,
	F_DERIVED_FACTS,
	F_NEEDS_REVIEW,
	F_IS_CONSTRAINT,
	F_CONSTRAINT_TYPE,
	F_NUM_COLUMNS
} FactColumn;

static const char *const column_names[F_NUM_COLUMNS] = {
	"tenant_id",
	"subject_id",
	"fact_id",
	"key",
	"value",
	"source",
	"authority",
	"authority_rank",
	"created_at",
	"is_valid",
	"superseded_by",
	"supersedes",
	"memory_type",
	"scope",
	"scope_id",
	"depends_on",
	"derived_facts",
	"needs_review",
	"is_constraint",
	"constraint_type",
};

static CscpColumns columns = {.table = "cscp.fact", .n = F_NUM_COLUMNS, .names = column_names};

/* The column number of c in cscp.fact. */
#define COL(c) (columns.attnum[c])

/* A text column as a C string, or NULL. */
static char *
text_col(HeapTuple tuple, TupleDesc desc, int attnum)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* The elements of a text[] column (NULL array: none). */
static void
text_array_col(HeapTuple tuple, TupleDesc desc, int attnum, Datum **elems, bool **elemnulls,
			   int *n)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	*n = 0;
	*elems = NULL;
	*elemnulls = NULL;
	if (isnull)
		return;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  elems, elemnulls, n);
}

/* The rank of authority for tenant, or -1 when the tenant does not know it.  SPI is connected. */
static int
authority_rank(Datum tenant, const char *authority)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	bool		isnull;
	Datum		d;

	args[0] = tenant;
	args[1] = CStringGetTextDatum(authority);
	cscp_spi_plan(&plan, "SELECT cscp.authority_rank($1, $2)", 2, argtypes);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up authority \"%s\"", authority);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? -1 : DatumGetInt32(d);
}

/* The authority named in the subject's identity, or NULL.  SPI is connected. */
static char *
identity_authority(Datum tenant, Datum subject)
{
	static SPIPlanPtr plan = NULL;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];

	args[0] = tenant;
	args[1] = subject;
	cscp_spi_plan(&plan, "SELECT i.identity OPERATOR(pg_catalog.->>) 'authority' FROM cscp.identity i"
			  " WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.subject_id OPERATOR(pg_catalog.=) $2", 2, argtypes);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the identity of a subject");
	if (SPI_processed != 1)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * Read one fact of (tenant, subject) by id with SPI: the columns of select
 * (a list starting "SELECT ... FROM cscp.fact f"), optionally FOR UPDATE.
 * False when there is none.  SPI is connected; the row is in SPI_tuptable.
 */
static bool
read_fact(SPIPlanPtr *plan, const char *sql, Datum tenant, Datum subject, const char *fact_id,
		  bool for_update)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];

	args[0] = tenant;
	args[1] = subject;
	args[2] = CStringGetTextDatum(fact_id);
	cscp_spi_plan(plan, sql, 3, argtypes);
	if (SPI_execute_plan(*plan, args, NULL, !for_update, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read fact \"%s\"", fact_id);
	return SPI_processed == 1;
}

/* Column n (1-based) of the row read_fact found, as a C string or NULL. */
static char *
spi_text(int n)
{
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, n);
}

/* Column n of the row read_fact found, as a boolean (NULL: false). */
static bool
spi_bool(int n)
{
	return cscp_column_true(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, n);
}

/* Column n of the row read_fact found, as an integer (NULL: 0). */
static int32
spi_int(int n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, n, &isnull);

	return isnull ? 0 : DatumGetInt32(d);
}

/*
 * Check authority before write (the StateBench spec): a fact may not be
 * written beside a valid fact of the same key that a higher authority
 * wrote, in global scope or in the new fact's own scope (42501).  A
 * hypothetical or draft fact is exempt: it is never told.  The fact being
 * superseded was checked already.  SPI is connected.
 */
static void
check_key_authority(HeapTuple tuple, TupleDesc desc, Datum tenant, Datum subject,
					const char *fact_id, const char *supersedes, const char *authority, int rank)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr lock_plan = NULL;
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char	   *key = text_col(tuple, desc, COL(F_KEY));
	char	   *scope = SPI_getvalue(tuple, desc, COL(F_SCOPE));
	char	   *scope_id = text_col(tuple, desc, COL(F_SCOPE_ID));

	if (key == NULL || scope == NULL ||
		strcmp(scope, "hypothetical") == 0 || strcmp(scope, "draft") == 0)
		return;
	args[0] = tenant;
	args[1] = subject;
	args[2] = CStringGetTextDatum(key);
	args[3] = Int32GetDatum(rank);
	args[4] = CStringGetTextDatum(scope);
	args[5] = scope_id ? CStringGetTextDatum(scope_id) : (Datum) 0;
	nulls[5] = scope_id ? ' ' : 'n';
	args[6] = supersedes ? CStringGetTextDatum(supersedes) : (Datum) 0;
	nulls[6] = supersedes ? ' ' : 'n';

	/*
	 * Writers of one key queue on it (an advisory lock for the transaction),
	 * and the check then reads with a new snapshot (not read-only): a
	 * higher-authority fact committed while we waited is seen.
	 */
	cscp_spi_plan(&lock_plan, "SELECT pg_catalog.pg_advisory_xact_lock(1668506480,"
			  " pg_catalog.hashtext(pg_catalog.concat_ws(pg_catalog.chr(1), 'fact-key', $1, $2, $3)))",
			  3, argtypes);
	if (SPI_execute_plan(lock_plan, args, nulls, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not lock key \"%s\"", key);
	cscp_spi_plan(&plan, "SELECT f.fact_id, f.authority, f.authority_rank FROM cscp.fact f"
			  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.key OPERATOR(pg_catalog.=) $3 AND f.is_valid"
			  " AND f.authority_rank OPERATOR(pg_catalog.>) $4"
			  " AND (f.scope OPERATOR(pg_catalog.=) 'global' OR (f.scope::pg_catalog.text OPERATOR(pg_catalog.=) $5 AND coalesce(f.scope_id OPERATOR(pg_catalog.=) $6, (f.scope_id IS NULL) OPERATOR(pg_catalog.=) ($6 IS NULL))))"
			  " AND coalesce(f.fact_id OPERATOR(pg_catalog.<>) $7, (f.fact_id IS NULL) OPERATOR(pg_catalog.<>) ($7 IS NULL))"
			  " ORDER BY f.authority_rank DESC, f.fact_id COLLATE pg_catalog.\"C\" LIMIT 1", 7, argtypes);
	if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not check the authority of key \"%s\"", key);
	if (SPI_processed == 1)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("authority \"%s\" cannot write key \"%s\" beside a fact of authority \"%s\"",
						authority, key, spi_text(2)),
				 errdetail("Fact \"%s\" holds key \"%s\" with authority \"%s\" (rank %d); fact \"%s\" would be written with authority \"%s\" (rank %d).",
						   spi_text(1), key, spi_text(2), spi_int(3), fact_id, authority, rank),
				 errhint("Only a writer of authority \"%s\" or higher may write this key; use another key, or a hypothetical or draft scope for a proposal.",
						 spi_text(2))));
}

/*
 * Refuse a new fact that is not born valid and unsuperseded, or that comes
 * with derived facts (55000).
 */
static void
check_born_fresh(HeapTuple tuple, TupleDesc desc, const char *fact_id)
{
	bool		isnull;
	Datum		derived;

	if (!cscp_column_true(tuple, desc, COL(F_IS_VALID)) ||
		!heap_attisnull(tuple, COL(F_SUPERSEDED_BY), desc))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new fact must be valid and not superseded"),
				 errdetail("Fact \"%s\" was inserted with is_valid false or superseded_by set.", fact_id),
				 errhint("Insert the newer fact with supersedes naming this one; cscp links the chain.")));
	derived = heap_getattr(tuple, COL(F_DERIVED_FACTS), desc, &isnull);
	if (!isnull && ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(derived)),
								  ARR_DIMS(DatumGetArrayTypeP(derived))) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a new fact has no derived facts"),
				 errhint("Name the facts a fact is derived from in its own depends_on; cscp records derived_facts.")));
}

/*
 * The source's "authority" (NULL when it names none) and its "type", or
 * 22023 when either is not a string.
 */
static JsonbValue *
check_source(Jsonb *source, char **source_type)
{
	JsonbValue *authv = cscp_jsonb_get(source, "authority");

	if (authv != NULL && authv->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source authority must be a string"),
				 errhint("Name an authority registered with cscp.authority_set, such as \"employee\".")));
	*source_type = cscp_jsonb_get_cstring(source, "type");
	if (*source_type == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source must have a string \"type\""),
				 errhint("Pass a source such as '{\"type\": \"user\", \"authority\": \"employee\"}'.")));
	return authv;
}

/*
 * The authority the current writer is held to in tenant, and its *rank;
 * NULL when it is held to none.  A role is held to the highest authority
 * bound (cscp.authority_bind) to it or to a role whose privileges it has;
 * superusers and the owner of cscp's tables are held to none.  The
 * setting cscp.authority (the gateway's API key) holds any writer to at
 * most that authority: it can narrow a binding, never widen one.  A bound
 * authority the tenant no longer ranks holds the writer to nothing at all
 * (rank 0).  With tenant 0, whether the writer is held in any tenant.  SPI
 * is connected.
 */
static char *
writer_authority(Datum tenant, int *rank)
{
	static SPIPlanPtr one_plan = NULL;
	static SPIPlanPtr any_plan = NULL;
	Oid			argtypes[1] = {TEXTOID};
	Oid			userid = GetUserId();
	char	   *authority = NULL;
	CscpOwnerScope owner;

	*rank = -1;
	cscp_owner_enter("fact", &owner);
	/* Not there while the 0.1.0 schema runs this library, before its upgrade: none bound. */
	if (!superuser_arg(userid) && !has_privs_of_role(userid, GetUserId()) &&
		OidIsValid(cscp_relation_oid("authority_binding", true)))
	{
		int			ret;

		if (tenant != (Datum) 0)
		{
			cscp_spi_plan(&one_plan,
						  "SELECT b.role::pg_catalog.oid, b.authority,"
						  "       COALESCE(cscp.authority_rank(b.tenant_id, b.authority), 0)"
						  "  FROM cscp.authority_binding b WHERE b.tenant_id OPERATOR(pg_catalog.=) $1",
						  1, argtypes);
			ret = SPI_execute_plan(one_plan, &tenant, NULL, true, 0);
		}
		else
		{
			cscp_spi_plan(&any_plan,
						  "SELECT b.role::pg_catalog.oid, b.authority, 0"
						  "  FROM cscp.authority_binding b", 0, NULL);
			ret = SPI_execute_plan(any_plan, NULL, NULL, true, 0);
		}
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "could not read cscp.authority_binding");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	row = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Oid			role = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
			int			r = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));

			if (has_privs_of_role(userid, role) && r > *rank)
			{
				*rank = r;
				authority = SPI_getvalue(row, desc, 2);
			}
		}
	}
	cscp_owner_leave(&owner);

	if (cscp_authority_setting != NULL && cscp_authority_setting[0] != '\0')
	{
		int			r = tenant != (Datum) 0 ? authority_rank(tenant, cscp_authority_setting) : 0;

		if (r < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown authority \"%s\" in setting \"cscp.authority\"",
							cscp_authority_setting),
					 errdetail("Tenant \"%s\" has no rank for it, and neither do the defaults.",
							   TextDatumGetCString(tenant)),
					 errhint("Set cscp.authority to an authority registered with cscp.authority_set, or reset it.")));
		if (authority == NULL || r < *rank)
		{
			*rank = r;
			authority = pstrdup(cscp_authority_setting);
		}
	}
	return authority;
}

/*
 * The fact's authority and its *rank: the source's (authv), else the
 * subject's identity's when the tenant ranks it, else guest; an unranked
 * authority named is 22023.  Authority comes from the writer: a writer
 * held to an authority (writer_authority) may not name one ranked above it
 * (42501), and a fact that names none takes at most the writer's.  SPI is
 * connected; the result is in the current context.
 */
static char *
resolve_authority(Datum tenant, Datum subject, JsonbValue *authv, int *rank)
{
	char	   *authority;
	int			writer_rank;
	char	   *writer = writer_authority(tenant, &writer_rank);

	if (authv != NULL)
	{
		authority = pnstrdup(authv->val.string.val, authv->val.string.len);
		*rank = authority_rank(tenant, authority);
		if (*rank < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown authority \"%s\"", authority),
					 errdetail("Tenant \"%s\" has no rank for it, and neither do the defaults.",
							   TextDatumGetCString(tenant)),
					 errhint("Register it with cscp.authority_set(tenant_id, authority, rank).")));
		if (writer != NULL && *rank > writer_rank)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("a writer of authority \"%s\" cannot write a fact of authority \"%s\"",
							writer, authority),
					 errdetail("The fact's source names authority \"%s\" (rank %d); the writer is held to \"%s\" (rank %d) in tenant \"%s\".",
							   authority, *rank, writer, writer_rank, TextDatumGetCString(tenant)),
					 errhint("Authority comes from who writes, not from what the source claims: name \"%s\" or lower, or have a writer of authority \"%s\" write it.",
							 writer, authority)));
		return authority;
	}
	authority = identity_authority(tenant, subject);
	*rank = authority ? authority_rank(tenant, authority) : -1;
	if (authority != NULL && *rank < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown authority \"%s\"", authority),
				 errdetail("The fact's source names no authority, and the identity of subject \"%s\" names \"%s\", which tenant \"%s\" does not rank.",
						   TextDatumGetCString(subject), authority, TextDatumGetCString(tenant)),
				 errhint("Register it with cscp.authority_set(tenant_id, authority, rank), or name the authority in source.")));
	if (*rank < 0)
	{
		authority = DEFAULT_AUTHORITY;
		*rank = authority_rank(tenant, authority);
		if (*rank < 0)
			elog(ERROR, "the default authority \"%s\" has no rank", DEFAULT_AUTHORITY);
	}
	if (writer != NULL && *rank > writer_rank)
	{
		authority = writer;
		*rank = writer_rank;
	}
	return authority;
}

/*
 * Whether a fact of the subject this one depends on is stale (superseded
 * or itself flagged), making this one stale too; an unknown dependency is
 * 22023.  SPI is connected.
 */
static bool
dependency_stale(HeapTuple tuple, TupleDesc desc, Datum tenant, Datum subject,
				 const char *fact_id)
{
	static SPIPlanPtr plan = NULL;
	Datum	   *deps;
	bool	   *depnulls;
	int			ndeps;
	bool		stale = false;

	text_array_col(tuple, desc, COL(F_DEPENDS_ON), &deps, &depnulls, &ndeps);
	for (int i = 0; i < ndeps; i++)
	{
		char	   *dep;

		if (depnulls[i])
			continue;			/* the CHECK constraint refuses it */
		dep = TextDatumGetCString(deps[i]);
		if (strcmp(dep, fact_id) == 0 ||
			!read_fact(&plan, "SELECT f.is_valid, f.needs_review FROM cscp.fact f"
					   " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3",
					   tenant, subject, dep, false))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("fact \"%s\" depends on unknown fact \"%s\"", fact_id, dep),
					 errdetail("Subject \"%s\" has no fact \"%s\".", TextDatumGetCString(subject), dep),
					 errhint("A fact may depend only on facts of its subject written before it.")));
		if (!spi_bool(1) || spi_bool(2))
			stale = true;
	}
	return stale;
}

/*
 * Lock the fact superseded (FOR UPDATE) and check that it exists (22023),
 * is the head of its chain (55000) and does not outrank the writer's
 * authority of rank (42501).  SPI is connected.
 */
static void
check_superseded(Datum tenant, Datum subject, const char *fact_id, const char *supersedes,
				 const char *authority, int rank)
{
	static SPIPlanPtr plan = NULL;
	char	   *successor;
	char	   *old_authority;
	int32		old_rank;

	if (!read_fact(&plan, "SELECT f.is_valid, f.superseded_by, f.authority, f.authority_rank"
				   " FROM cscp.fact f"
				   " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3"
				   " FOR UPDATE",
				   tenant, subject, supersedes, true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fact \"%s\" does not exist", supersedes),
				 errdetail("Fact \"%s\" names it in supersedes, but subject \"%s\" has no such fact.",
						   fact_id, TextDatumGetCString(subject)),
				 errhint("Check the id, and that cscp.tenant_id names the fact's tenant.")));
	successor = spi_text(2);
	if (!spi_bool(1))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fact \"%s\" is already superseded", supersedes),
				 errdetail("Fact \"%s\" superseded it.", successor ? successor : "(unknown)"),
				 errhint("Supersede the current fact of its chain, which cscp.fact_current returns.")));
	old_authority = spi_text(3);
	old_rank = spi_int(4);
	if (rank < old_rank)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("authority \"%s\" cannot supersede a fact of authority \"%s\"",
						authority, old_authority),
				 errdetail("Fact \"%s\" was written with authority \"%s\" (rank %d); the writer's authority \"%s\" ranks %d.",
						   supersedes, old_authority, old_rank, authority, rank),
				 errhint("Only a writer of authority \"%s\" or higher may replace it.",
						 old_authority)));
}

/*
 * The new fact with what cscp sets: authority and rank, created_at now,
 * needs_review, and the memory type of source_type when none is given.
 */
static HeapTuple
fact_defaults(HeapTuple tuple, TupleDesc desc, const char *authority, int rank,
			  TimestampTz now, bool needs_review, const char *source_type)
{
	CscpRowEdit edit;

	cscp_row_edit_init(&edit, desc);
	cscp_row_edit_set(&edit, COL(F_AUTHORITY), CStringGetTextDatum(authority), false);
	cscp_row_edit_set(&edit, COL(F_AUTHORITY_RANK), Int32GetDatum(rank), false);
	cscp_row_edit_set(&edit, COL(F_CREATED_AT), TimestampTzGetDatum(now), false);
	cscp_row_edit_set(&edit, COL(F_NEEDS_REVIEW), BoolGetDatum(needs_review), false);

	if (heap_attisnull(tuple, COL(F_MEMORY_TYPE), desc))
		cscp_row_edit_set(&edit, COL(F_MEMORY_TYPE),
						  cscp_enum_datum(&memory_type_cache,
										  TupleDescAttr(desc, COL(F_MEMORY_TYPE) - 1)->atttypid,
										  classify_source(source_type)), false);
	return cscp_row_edit_apply(&edit, tuple);
}

/*
 * The checks and defaults of INSERT: authority, memory type, dependencies,
 * and the fact superseded (locked, valid, not of a higher authority).
 */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	MemoryContext callerctx = CurrentMemoryContext;
	bool		tnull,
				snull,
				isnull;
	Datum		tenant = heap_getattr(tuple, COL(F_TENANT_ID), desc, &tnull);
	Datum		subject = heap_getattr(tuple, COL(F_SUBJECT_ID), desc, &snull);
	char	   *fact_id = text_col(tuple, desc, COL(F_FACT_ID));
	char	   *supersedes = text_col(tuple, desc, COL(F_SUPERSEDES));
	Datum		srcd = heap_getattr(tuple, COL(F_SOURCE), desc, &isnull);
	Jsonb	   *source = isnull ? NULL : DatumGetJsonbP(srcd);
	JsonbValue *authv;
	char	   *authority;
	char	   *source_type;
	int			rank;
	bool		needs_review = cscp_column_true(tuple, desc, COL(F_NEEDS_REVIEW));

	/* NOT NULL and CHECK constraints speak for missing ids and a bad source. */
	if (tnull || snull || fact_id == NULL || source == NULL || !JB_ROOT_IS_OBJECT(source))
		return tuple;

	/* Another tenant's fact: say so (42501) before looking at its chain. */
	cscp_check_tenant(DatumGetTextPP(tenant));
	check_born_fresh(tuple, desc, fact_id);
	authv = check_source(source, &source_type);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	authority = MemoryContextStrdup(callerctx, resolve_authority(tenant, subject, authv, &rank));
	if (dependency_stale(tuple, desc, tenant, subject, fact_id))
		needs_review = true;
	if (supersedes != NULL)
		check_superseded(tenant, subject, fact_id, supersedes, authority, rank);
	check_key_authority(tuple, desc, tenant, subject, fact_id, supersedes, authority, rank);
	SPI_finish();

	return fact_defaults(tuple, desc, authority, rank, now, needs_review, source_type);
}

/* Refuse an UPDATE of a column a fact never changes (55000). */
static void
check_fixed_columns(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, const char *fact_id)
{
	static const char *const fixed[] = {
		"tenant_id", "subject_id", "fact_id", "key", "value", "source", "authority",
		"authority_rank", "created_at", "supersedes", "memory_type", "scope", "scope_id",
		"depends_on", "is_constraint", "constraint_type"
	};

	for (int i = 0; i < (int) lengthof(fixed); i++)
		if (!cscp_same_value(oldtup, newtup, desc, cscp_column(desc, "cscp.fact", fixed[i])))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of a fact cannot be changed", fixed[i]),
					 errdetail("Facts are replaced, never edited, so that a replaced value cannot come back."),
					 errhint("Write a new fact that supersedes fact \"%s\" with cscp.fact_write.", fact_id)));
}

/*
 * Whether fact successor of the subject names fact_id in its supersedes
 * (read with SPI).
 */
static bool
supersedes_fact(Datum tenant, Datum subject, const char *successor, const char *fact_id)
{
	static SPIPlanPtr plan = NULL;
	char	   *back = NULL;
	bool		ok;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (read_fact(&plan, "SELECT f.supersedes FROM cscp.fact f"
				  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3",
				  tenant, subject, successor, false))
		back = spi_text(1);
	ok = (back != NULL && strcmp(back, fact_id) == 0);
	SPI_finish();
	return ok;
}

/*
 * Refuse a change of is_valid or superseded_by other than the step a
 * supersession makes: valid to superseded, by a fact that names this one
 * in supersedes (55000).
 */
static void
check_validity_step(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, Datum tenant,
					Datum subject, const char *fact_id)
{
	bool		was_valid = cscp_column_true(oldtup, desc, COL(F_IS_VALID));
	bool		is_valid = cscp_column_true(newtup, desc, COL(F_IS_VALID));
	char	   *successor = text_col(newtup, desc, COL(F_SUPERSEDED_BY));

	if (!was_valid)
	{
		if (is_valid || !cscp_same_value(oldtup, newtup, desc, COL(F_SUPERSEDED_BY)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("fact \"%s\" is superseded", fact_id),
					 errdetail("It was superseded by fact \"%s\"; a superseded fact never becomes valid again and keeps its successor.",
							   text_col(oldtup, desc, COL(F_SUPERSEDED_BY))),
					 errhint("Write a new fact that supersedes the current one with cscp.fact_write.")));
	}
	else if (!is_valid || successor != NULL)
	{
		if (is_valid || successor == NULL ||
			!supersedes_fact(tenant, subject, successor, fact_id))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("fact \"%s\" can be superseded only by a fact that names it in supersedes", fact_id),
					 errdetail("is_valid and superseded_by change together, when a newer fact supersedes this one."),
					 errhint("Write the newer fact with cscp.fact_write(..., supersedes => '%s').", fact_id)));
	}
}

/* Whether fact id of the subject names fact_id in its depends_on (read with SPI). */
static bool
depends_on_fact(Datum tenant, Datum subject, const char *id, const char *fact_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4];

	args[0] = tenant;
	args[1] = subject;
	args[2] = CStringGetTextDatum(id);
	args[3] = CStringGetTextDatum(fact_id);
	return cscp_spi_exists(&plan, "SELECT 1 FROM cscp.fact f"
						   " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3"
						   " AND $4 OPERATOR(pg_catalog.=) ANY (f.depends_on)", 4, argtypes, args, true,
						   psprintf("read fact \"%s\"", id));
}

/*
 * Refuse a change of derived_facts other than appending facts of the
 * subject that depend on this one (55000).
 */
static void
check_derived_growth(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc, Datum tenant,
					 Datum subject, const char *fact_id)
{
	Datum	   *olds,
			   *news;
	bool	   *oldnulls,
			   *newnulls;
	int			nold,
				nnew;
	bool		ok = true;

	if (cscp_same_value(oldtup, newtup, desc, COL(F_DERIVED_FACTS)))
		return;
	text_array_col(oldtup, desc, COL(F_DERIVED_FACTS), &olds, &oldnulls, &nold);
	text_array_col(newtup, desc, COL(F_DERIVED_FACTS), &news, &newnulls, &nnew);
	for (int i = 0; i < nnew && ok; i++)
	{
		char	   *id = newnulls[i] ? NULL : TextDatumGetCString(news[i]);

		if (i < nold)
			ok = (id != NULL && !oldnulls[i] && strcmp(id, TextDatumGetCString(olds[i])) == 0);
		else
			ok = (id != NULL && depends_on_fact(tenant, subject, id, fact_id));
	}
	if (!ok || nnew < nold)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("derived_facts of fact \"%s\" only grows by facts that depend on it", fact_id),
				 errhint("Name the facts a fact is derived from in its own depends_on; cscp records derived_facts.")));
}

/*
 * The checks of UPDATE.  Only needs_review changes freely; derived_facts
 * grows by facts that depend on this one; a valid fact becomes superseded
 * only by the fact that names it in supersedes.
 */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		isnull;
	Datum		tenant = heap_getattr(oldtup, COL(F_TENANT_ID), desc, &isnull);
	Datum		subject = heap_getattr(oldtup, COL(F_SUBJECT_ID), desc, &isnull);
	char	   *fact_id = text_col(oldtup, desc, COL(F_FACT_ID));

	check_fixed_columns(oldtup, newtup, desc, fact_id);
	check_validity_step(oldtup, newtup, desc, tenant, subject, fact_id);
	check_derived_growth(oldtup, newtup, desc, tenant, subject, fact_id);
	return newtup;
}

static const CscpRowGuard guard = {
	.name = "cscp.fact_guard()",
	.columns = &columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_fact_guard);

/* Trigger cscp.fact_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_fact_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &guard);
}

PG_FUNCTION_INFO_V1(cscp_authority_guard);

/*
 * Trigger cscp.authority_guard(): BEFORE INSERT OR UPDATE OR DELETE OR
 * TRUNCATE ON cscp.authority FOR EACH STATEMENT.  A writer held to an
 * authority may not rank authorities: re-ranking its own would undo the
 * hold (42501).
 */
Datum
cscp_authority_guard(PG_FUNCTION_ARGS)
{
	int			rank;
	char	   *writer;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "cscp.authority_guard() must be called as a trigger");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	writer = writer_authority((Datum) 0, &rank);
	if (writer != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a writer held to authority \"%s\" cannot rank authorities", writer),
				 errdetail("Role \"%s\" writes facts under an authority binding or the setting cscp.authority.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("Ranks are set by a role that is not held to an authority.")));
	SPI_finish();
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(cscp_fact_link);

/*
 * Trigger cscp.fact_link(): AFTER INSERT FOR EACH ROW.  Marks the fact the
 * new one supersedes as superseded by it, flags every valid fact derived
 * from that one (transitively) for review, and records the new fact among
 * the derived_facts of each fact it depends on.
 */
Datum
cscp_fact_link(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr mark_plan = NULL;
	static SPIPlanPtr repair_plan = NULL;
	static SPIPlanPtr derive_plan = NULL;
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	tuple;
	TupleDesc	desc;
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4];
	bool		isnull;
	Datum	   *deps;
	bool	   *depnulls;
	int			ndeps;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) || !TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.fact_link() must be an AFTER INSERT ROW trigger")));
	cscp_columns_load(&columns, trigdata->tg_relation);
	tuple = trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);

	args[0] = heap_getattr(tuple, COL(F_TENANT_ID), desc, &isnull);
	args[1] = heap_getattr(tuple, COL(F_SUBJECT_ID), desc, &isnull);
	args[2] = heap_getattr(tuple, COL(F_FACT_ID), desc, &isnull);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	args[3] = heap_getattr(tuple, COL(F_SUPERSEDES), desc, &isnull);
	if (!isnull)
	{
		cscp_spi_plan(&mark_plan, "UPDATE cscp.fact f SET is_valid = false, superseded_by = $3"
				  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $4 AND f.is_valid",
				  4, argtypes);
		if (SPI_execute_plan(mark_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not mark a superseded fact");
		if (SPI_processed != 1)
		{
			static SPIPlanPtr valid_plan = NULL;
			Datum		vargs[3] = {args[0], args[1], args[3]};

			/* still valid: the mark was skipped by a trigger or rule */
			if (cscp_spi_exists(&valid_plan, "SELECT 1 FROM cscp.fact f"
								" WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3"
								"   AND f.is_valid", 3, argtypes, vargs, false,
								"read a superseded fact"))
				cscp_write_skipped(psprintf("mark fact \"%s\" superseded",
											TextDatumGetCString(args[3])));
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("fact \"%s\" is already superseded", TextDatumGetCString(args[3])),
					 errhint("Supersede the current fact of its chain, which cscp.fact_current returns.")));
		}

		/* Repair: every fact derived from the superseded one, at any depth. */
		cscp_spi_plan(&repair_plan,
				  "WITH RECURSIVE derived(fact_id) AS ("
				  "  SELECT pg_catalog.unnest(f.derived_facts) FROM cscp.fact f"
				  "   WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $4"
				  "  UNION"
				  "  SELECT pg_catalog.unnest(f.derived_facts) FROM cscp.fact f JOIN derived d"
				  "    ON f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) d.fact_id)"
				  " UPDATE cscp.fact f SET needs_review = true FROM derived d"
				  "  WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) d.fact_id"
				  "    AND f.is_valid AND NOT f.needs_review AND f.fact_id OPERATOR(pg_catalog.<>) $3",
				  4, argtypes);
		if (SPI_execute_plan(repair_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not flag derived facts for review");
	}

	text_array_col(tuple, desc, COL(F_DEPENDS_ON), &deps, &depnulls, &ndeps);
	cscp_spi_plan(&derive_plan, "UPDATE cscp.fact f SET derived_facts = pg_catalog.array_append(f.derived_facts, $3)"
			  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $4"
			  " AND NOT ($3 OPERATOR(pg_catalog.=) ANY (f.derived_facts))", 4, argtypes);
	for (int i = 0; i < ndeps; i++)
	{
		if (depnulls[i])
			continue;
		args[3] = deps[i];
		if (SPI_execute_plan(derive_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record a derived fact");
	}

	SPI_finish();
	return PointerGetDatum(NULL);
}

/*
 * Chain walking.  One saved query reads the facts a walk can reach from its
 * start: a recursive CTE following superseded_by (fact_current, after a
 * plain read of the start, which is most often the head), or both links
 * (fact_history), with UNION, so that a chain corrupted into a loop still
 * ends; it runs under the statement's snapshot, with the caller's rights
 * and row-level security.  The walk itself then follows the links
 * in memory, checking each step as before: a link must be mirrored, a
 * valid fact names no successor and a superseded one does, no fact comes
 * twice, and a fact named must be there.  Each step of the CTE is a
 * LATERAL subquery with a LIMIT, so that it stays one probe of the primary
 * key (a nested loop); joined plainly, the planner hashed all of the
 * subject's facts at every step, 10 times the cost of a walk of 101.
 */
typedef struct ChainFact
{
	char		fact_id[CSCP_MAX_ID_BYTES + 1];
	bool		is_valid;
	char	   *superseded_by;
	char	   *supersedes;
	Datum		row;			/* cscp.fact, or 0 when not read */
} ChainFact;

typedef struct ChainReader
{
	MemoryContext cxt;			/* what the walk allocates */
	HTAB	   *facts;			/* ChainFact by fact_id: what the query read */
	ChainFact  *cur;			/* the current fact */
	HTAB	   *seen;			/* fact ids visited, to refuse a loop */
	const char *start;			/* the fact the walk began with, for messages */
} ChainReader;

typedef struct SeenEntry
{
	char		fact_id[CSCP_MAX_ID_BYTES + 1];
} SeenEntry;

/* Raise XX001 for a broken chain. */
static void
chain_broken(ChainReader *r, const char *fact_id, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("supersession chain of fact \"%s\" is corrupted", r->start),
			 errdetail("At fact \"%s\": %s", fact_id, detail),
			 errhint("The chain was changed with cscp's triggers disabled; repair it by hand.")));
}

/* Remember fact_id as visited; raise XX001 when it was visited before. */
static void
chain_visit(ChainReader *r, const char *fact_id)
{
	bool		found;

	if (strlen(fact_id) > CSCP_MAX_ID_BYTES)
		chain_broken(r, fact_id, "the fact id is too long.");
	hash_search(r->seen, fact_id, HASH_ENTER, &found);
	if (found)
		chain_broken(r, fact_id, "the chain comes back to this fact: it loops.");
}

/* Make fact fact_id current; false when the query did not read it. */
static bool
chain_fetch(ChainReader *r, const char *fact_id)
{
	ChainFact  *f = NULL;

	if (strlen(fact_id) <= CSCP_MAX_ID_BYTES)
		f = hash_search(r->facts, fact_id, HASH_FIND, NULL);
	if (f == NULL)
		return false;
	r->cur = f;
	return true;
}

/* Enter the facts SPI_tuptable holds (see chain_read) into r->facts. */
static void
chain_store(ChainReader *r)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old;
		ChainFact  *f;
		char	   *id;
		bool		isnull;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		d = SPI_getbinval(tup, desc, 1, &isnull);
		id = TextDatumGetCString(d);
		/* an id this long is refused when the walk comes to it (chain_visit) */
		if (strlen(id) > CSCP_MAX_ID_BYTES)
			continue;
		f = hash_search(r->facts, id, HASH_ENTER, NULL);
		old = MemoryContextSwitchTo(r->cxt);
		f->is_valid = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull)) && !isnull;
		d = SPI_getbinval(tup, desc, 3, &isnull);
		f->superseded_by = isnull ? NULL : TextDatumGetCString(d);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		f->supersedes = isnull ? NULL : TextDatumGetCString(d);
		d = SPI_getbinval(tup, desc, 5, &isnull);
		f->row = isnull ? (Datum) 0 : datumCopy(d, false, -1);
		MemoryContextSwitchTo(old);
	}
}

/*
 * The query of a chain walk from fact $3 of subject ($1, $2): a recursive
 * CTE that follows from each fact the links step names (SQL after
 * "f.fact_id"), at most limit a step, then each fact's links and row (SQL:
 * the whole row, or NULL).
 */
#define CHAIN_WALK(step, limit, row) \
	"WITH RECURSIVE walk(fact_id, is_valid, superseded_by, supersedes) AS (" \
	"  SELECT f.fact_id, f.is_valid, f.superseded_by, f.supersedes FROM cscp.fact f" \
	"   WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3" \
	"  UNION" \
	"  SELECT n.fact_id, n.is_valid, n.superseded_by, n.supersedes" \
	"    FROM walk w CROSS JOIN LATERAL (" \
	"         SELECT f.fact_id, f.is_valid, f.superseded_by, f.supersedes" \
	"           FROM cscp.fact f" \
	"          WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2" \
	"            AND f.fact_id " step \
	"          LIMIT " limit ") n)" \
	" SELECT w.fact_id, w.is_valid, w.superseded_by, w.supersedes, " row \
	"   FROM walk w"

/* The whole row of the walk's fact w, in CHAIN_WALK. */
#define CHAIN_ROW \
	"(SELECT h FROM cscp.fact h" \
	"  WHERE h.tenant_id OPERATOR(pg_catalog.=) $1 AND h.subject_id OPERATOR(pg_catalog.=) $2 AND h.fact_id OPERATOR(pg_catalog.=) w.fact_id)"

/*
 * Read the facts reachable from start (forward only, or both ways with
 * both) of (tenant, subject) into r->facts, with the whole row of each
 * (both) or of the head only.  Forward, the start is read first on its
 * own: most often it is the head, and one plain query costs half of what
 * the CTE's setup does.
 */
static void
chain_read(ChainReader *r, text *tenant, text *subject, const char *start, bool both)
{
	static SPIPlanPtr start_plan = NULL;
	static SPIPlanPtr forward_plan = NULL;
	static SPIPlanPtr both_plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	HASHCTL		ctl;

	r->cxt = AllocSetContextCreate(CurrentMemoryContext, "cscp chain walk", ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = CSCP_MAX_ID_BYTES + 1;
	ctl.entrysize = sizeof(ChainFact);
	ctl.hcxt = r->cxt;
	r->facts = hash_create("cscp chain facts", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	ctl.entrysize = sizeof(SeenEntry);
	r->seen = hash_create("cscp chain walk", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	r->cur = NULL;
	r->start = start;

	args[0] = PointerGetDatum(tenant);
	args[1] = PointerGetDatum(subject);
	args[2] = CStringGetTextDatum(start);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!both)
	{
		cscp_spi_plan(&start_plan,
					  "SELECT f.fact_id, f.is_valid, f.superseded_by, f.supersedes,"
					  "       CASE WHEN f.superseded_by IS NULL THEN f END"
					  "  FROM cscp.fact f"
					  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.fact_id OPERATOR(pg_catalog.=) $3",
					  3, types);
		if (SPI_execute_plan(start_plan, args, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read a fact");
		if (SPI_processed == 0 || heap_attisnull(SPI_tuptable->vals[0], 3, SPI_tuptable->tupdesc))
		{
			/* none, or the head: nothing more to read */
			chain_store(r);
			SPI_finish();
			return;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	if (both)
		cscp_spi_plan(&both_plan,
					  CHAIN_WALK("OPERATOR(pg_catalog.=) ANY (ARRAY[w.superseded_by, w.supersedes])", "2", CHAIN_ROW),
					  3, types);
	else
		cscp_spi_plan(&forward_plan,
					  CHAIN_WALK("OPERATOR(pg_catalog.=) w.superseded_by", "1",
								 "CASE WHEN w.superseded_by IS NULL THEN " CHAIN_ROW " END"),
					  3, types);
	if (SPI_execute_plan(both ? both_plan : forward_plan, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read a supersession chain");
	chain_store(r);
	SPI_finish();
}

/* Free what chain_read allocated. */
static void
chain_close(ChainReader *r)
{
	MemoryContextDelete(r->cxt);
}

/*
 * Put the current fact's row (a cscp.fact datum) into out, whose
 * descriptor is the row type's.
 */
static void
chain_emit(ChainReader *r, Tuplestorestate *out)
{
	HeapTupleHeader h;
	HeapTupleData tuple;

	if (r->cur->row == (Datum) 0)
		elog(ERROR, "fact \"%s\" was read without its row", r->cur->fact_id);
	h = DatumGetHeapTupleHeader(r->cur->row);
	tuple.t_len = HeapTupleHeaderGetDatumLength(h);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = h;
	tuplestore_puttuple(out, &tuple);
}

/*
 * Follow the chain from the current fact in one direction (forward:
 * superseded_by, backward: supersedes) to its end, checking that each link
 * is mirrored; with out, every fact passed (the first one included) is put
 * into it.  The fact at the end is left current; its id is returned.
 */
static const char *
chain_follow(ChainReader *r, bool forward, Tuplestorestate *out)
{
	for (;;)
	{
		const char *cur = r->cur->fact_id;
		const char *next;
		const char *back;
		bool		valid = r->cur->is_valid;

		CHECK_FOR_INTERRUPTS();
		if (out != NULL)
			chain_emit(r, out);
		next = forward ? r->cur->superseded_by : r->cur->supersedes;
		if (forward && (valid != (next == NULL)))
			chain_broken(r, cur, valid ? "it is valid but names a successor." :
						 "it is superseded but names no successor.");
		if (next == NULL)
			return cur;
		chain_visit(r, next);
		if (!chain_fetch(r, next))
			chain_broken(r, cur, psprintf("the fact it names, \"%s\", does not exist.", next));
		back = forward ? r->cur->supersedes : r->cur->superseded_by;
		if (back == NULL || strcmp(back, cur) != 0)
			chain_broken(r, next, psprintf("it does not name fact \"%s\" back in %s.", cur,
										   forward ? "supersedes" : "superseded_by"));
	}
}

/*
 * The fact ref names, as supersedes names one (DESIGN.md section 8): the
 * fact with that id, else the one valid fact of the subject with that key
 * (in any scope; two or more: 22023).  With neither, ref itself, which the
 * caller finds missing.  Read with the caller's rights.
 */
static char *
fact_by_id_or_key(text *tenant, text *subject, char *ref)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3] = {PointerGetDatum(tenant), PointerGetDatum(subject), CStringGetTextDatum(ref)};
	MemoryContext callerctx = CurrentMemoryContext;
	char	   *found = ref;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT f.fact_id, f.scope::pg_catalog.text FROM cscp.fact f"
				  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2"
				  "   AND f.fact_id OPERATOR(pg_catalog.=) $3"
				  " UNION ALL"
				  " (SELECT f.fact_id, f.scope::pg_catalog.text FROM cscp.fact f"
				  "   WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2"
				  "     AND f.key OPERATOR(pg_catalog.=) $3 AND f.is_valid"
				  "     AND NOT EXISTS (SELECT 1 FROM cscp.fact x"
				  "                      WHERE x.tenant_id OPERATOR(pg_catalog.=) $1"
				  "                        AND x.subject_id OPERATOR(pg_catalog.=) $2"
				  "                        AND x.fact_id OPERATOR(pg_catalog.=) $3)"
				  "   ORDER BY f.fact_id COLLATE pg_catalog.\"C\" LIMIT 2)",
				  3, types);
	if (SPI_execute_plan(plan, args, NULL, true, 3) != SPI_OK_SELECT)
		elog(ERROR, "could not look up a fact by id or key");
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key \"%s\" names more than one valid fact", ref),
				 errdetail("Subject \"%s\" has valid facts \"%s\" (scope %s) and \"%s\" (scope %s) with that key, and no fact has that id.",
						   text_to_cstring(subject),
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2),
						   SPI_getvalue(SPI_tuptable->vals[1], SPI_tuptable->tupdesc, 1),
						   SPI_getvalue(SPI_tuptable->vals[1], SPI_tuptable->tupdesc, 2)),
				 errhint("Name the fact by its id.")));
	if (SPI_processed == 1)
		found = MemoryContextStrdup(callerctx,
									SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();
	return found;
}

/*
 * Check the arguments of the walkers, read what the walk can reach (both
 * ways with both) and make fact_id current.
 */
static void
chain_start(FunctionCallInfo fcinfo, ChainReader *r, char **fact_id, bool both, bool by_key)
{
	text	   *tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *subject = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	text	   *id = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);

	cscp_check_tenant(tenant);
	cscp_check_id("subject_id", subject);
	cscp_check_id("fact_id", id);
	*fact_id = text_to_cstring(id);
	if (by_key)
		*fact_id = fact_by_id_or_key(tenant, subject, *fact_id);
	chain_read(r, tenant, subject, *fact_id, both);
	if (!chain_fetch(r, *fact_id))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fact \"%s\" does not exist", *fact_id),
				 errdetail("Subject \"%s\" has no such fact.", text_to_cstring(subject)),
				 errhint("Check the id, and that cscp.tenant_id names the fact's tenant.")));
	chain_visit(r, *fact_id);
}

PG_FUNCTION_INFO_V1(cscp_fact_current);

/*
 * cscp.fact_current(tenant_id, subject_id, fact_id) RETURNS cscp.fact: head
 * of the chain of the fact with that id, else of the one valid fact with
 * that key (which is its own head).
 */
Datum
cscp_fact_current(PG_FUNCTION_ARGS)
{
	ChainReader r;
	char	   *fact_id;
	Datum		result;

	chain_start(fcinfo, &r, &fact_id, false, true);
	(void) chain_follow(&r, true, NULL);
	if (r.cur->row == (Datum) 0)
		elog(ERROR, "fact \"%s\" was read without its row", r.cur->fact_id);
	result = datumCopy(r.cur->row, false, -1);
	chain_close(&r);
	PG_RETURN_DATUM(result);
}

PG_FUNCTION_INFO_V1(cscp_fact_history);

/* cscp.fact_history(tenant_id, subject_id, fact_id) RETURNS SETOF cscp.fact, oldest first. */
Datum
cscp_fact_history(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ChainReader r;
	char	   *fact_id;
	const char *root;
	HASH_SEQ_STATUS seq;
	SeenEntry  *entry;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	chain_start(fcinfo, &r, &fact_id, true, false);

	/* Back to the oldest fact, then forward to the head, emitting each. */
	root = chain_follow(&r, false, NULL);
	hash_seq_init(&seq, r.seen);
	while ((entry = hash_seq_search(&seq)) != NULL)
		hash_search(r.seen, entry->fact_id, HASH_REMOVE, NULL);
	chain_visit(&r, root);
	chain_follow(&r, true, rsinfo->setResult);
	chain_close(&r);
	return (Datum) 0;
}
