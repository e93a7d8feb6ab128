/*-------------------------------------------------------------------------
 *
 * spiplan.c
 *	  Saved SPI plans for the queries cscp's C functions run on every call,
 *	  and the OIDs of cscp's tables, looked up once per backend.
 *
 * Each query is prepared once per backend and kept (SPI_keepplan); the
 * plan cache replans it when a table it reads changes, so the only rule for
 * the SQL text is the usual one: every name schema-qualified, and types of
 * cscp's own named in the text (a cast) rather than passed as parameter
 * OIDs, which would not survive the extension being dropped and created
 * again in the same session.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * The saved plan in *plan, prepared from sql the first time.  The caller is
 * connected to SPI.
 */
SPIPlanPtr
cscp_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, (Oid *) argtypes);

		if (p == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}

/*
 * The OID of table cscp.relname (InvalidOid when missing_ok and there is
 * none), remembered per backend until a relcache invalidation names it (or
 * all relations): ALTER, DROP EXTENSION, ...  Saves the namespace and
 * relation name lookups on every call of the hot functions.
 */
#define CSCP_MAX_CACHED_RELS 16

typedef struct CachedRel
{
	const char *relname;		/* a string constant of the caller's */
	Oid			relid;
} CachedRel;

static CachedRel cached_rels[CSCP_MAX_CACHED_RELS];
static int	n_cached_rels = 0;
static bool rel_callback_registered = false;

static void
forget_cached_rel(Datum arg, Oid relid)
{
	for (int i = 0; i < n_cached_rels; i++)
		if (relid == InvalidOid || cached_rels[i].relid == relid)
			cached_rels[i].relid = InvalidOid;
}

Oid
cscp_relation_oid(const char *relname, bool missing_ok)
{
	CachedRel  *c = NULL;
	Oid			nsp;

	for (int i = 0; i < n_cached_rels; i++)
		if (strcmp(cached_rels[i].relname, relname) == 0)
		{
			c = &cached_rels[i];
			break;
		}
	if (c != NULL && OidIsValid(c->relid))
		return c->relid;

	if (!rel_callback_registered)
	{
		CacheRegisterRelcacheCallback(forget_cached_rel, (Datum) 0);
		rel_callback_registered = true;
	}
	nsp = get_namespace_oid("cscp", missing_ok);
	if (!OidIsValid(nsp))
		return InvalidOid;
	if (c == NULL && n_cached_rels < CSCP_MAX_CACHED_RELS)
	{
		c = &cached_rels[n_cached_rels++];
		c->relname = relname;
		c->relid = InvalidOid;
	}
	{
		Oid			relid = get_relname_relid(relname, nsp);

		if (!OidIsValid(relid) && !missing_ok)
			elog(ERROR, "table cscp.%s does not exist", relname);
		if (c != NULL)
			c->relid = relid;
		return relid;
	}
}

/*
 * Reads by key without a query, for the hot paths, where the executor's
 * start and end would cost more than the read.
 *
 * The rows of rel whose index cscp.indexname holds the key
 * keys[0..nkeys-1] (its first nkeys columns, each text or uuid), copied
 * into the current memory context.  What a query's row-level security
 * would add is up to the caller: cscp_key_read's keys begin with
 * tenant_id, which every caller has held to the session's cscp.tenant_id
 * (cscp_check_tenant) for every role the policy binds; cscp_key_rows may
 * return other tenants' rows, which its callers use only to choose their
 * own course, never show.  The caller's SELECT privilege on rel is checked
 * as a query would.  rel is the caller's, open with at least
 * AccessShareLock; so is RelationGetDescr(rel), which describes the rows.
 *
 * fresh: read as a non-read-only SPI statement would, after a
 * CommandCounterIncrement and with a new snapshot (in READ COMMITTED), so
 * that a row committed while the caller waited for a lock is seen, and so
 * are the caller's own earlier writes.  Otherwise with the active snapshot.
 */
static List *
key_rows(Relation rel, const char *indexname, int nkeys, const Datum *keys, bool fresh,
		 bool unique)
{
	ScanKeyData key[INDEX_MAX_KEYS];
	AclResult	acl;
	Relation	idx;
	Snapshot	snap;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *rows = NIL;

	acl = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));

	idx = index_open(cscp_relation_oid(indexname, false), AccessShareLock);
	if (idx->rd_index->indrelid != RelationGetRelid(rel) ||
		(unique && !idx->rd_index->indisunique) ||
		nkeys > IndexRelationGetNumberOfKeyAttributes(idx))
		elog(ERROR, "cscp.%s is not a%s index of %d columns on %s", indexname,
			 unique ? " unique" : "n", nkeys, RelationGetRelationName(rel));
	for (int i = 0; i < nkeys; i++)
	{
		RegProcedure eq;

		switch (idx->rd_opcintype[i])
		{
			case TEXTOID:
				eq = F_TEXTEQ;
				break;
			case UUIDOID:
				eq = F_UUID_EQ;
				break;
			default:
				elog(ERROR, "column %d of index cscp.%s is neither text nor uuid", i + 1, indexname);
		}
		ScanKeyEntryInitialize(&key[i], 0, idx->rd_index->indkey.values[i], BTEqualStrategyNumber,
							   InvalidOid, idx->rd_indcollation[i], eq, keys[i]);
	}

	if (fresh)
	{
		CommandCounterIncrement();
		snap = RegisterSnapshot(GetTransactionSnapshot());
	}
	else
		snap = RegisterSnapshot(GetActiveSnapshot());
	scan = systable_beginscan_ordered(rel, idx, snap, nkeys, key);
	while (HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		rows = lappend(rows, heap_copytuple(tup));
		if (unique)
			break;
	}
	systable_endscan_ordered(scan);
	UnregisterSnapshot(snap);
	index_close(idx, AccessShareLock);
	return rows;
}

/* The row of rel whose unique index cscp.indexname holds the key; NULL when there is none. */
HeapTuple
cscp_key_read(Relation rel, const char *indexname, int nkeys, const Datum *keys, bool fresh)
{
	List	   *rows = key_rows(rel, indexname, nkeys, keys, fresh, true);

	return rows == NIL ? NULL : (HeapTuple) linitial(rows);
}

/* Every row of rel whose index cscp.indexname (unique or not) holds the key. */
List *
cscp_key_rows(Relation rel, const char *indexname, int nkeys, const Datum *keys, bool fresh)
{
	return key_rows(rel, indexname, nkeys, keys, fresh, false);
}
