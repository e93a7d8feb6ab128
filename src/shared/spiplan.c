/*-------------------------------------------------------------------------
 *
 * spiplan.c
 *	  Saved SPI plans for the queries cscp's C functions run on every call,
 *	  the OIDs of cscp's tables, looked up once per backend, and the
 *	  per-backend caches of what was read from a table (CscpTableCache),
 *	  dropped when the table is invalidated.
 *
 * Each query is prepared once per backend and kept (SPI_keepplan); the
 * plan cache replans it when a table it reads changes.  Types of cscp's own
 * are named in the text (a cast) rather than passed as parameter OIDs,
 * which would not survive the extension being dropped and created again in
 * the same session.
 *
 * The rule for every SQL text cscp's C code runs (here, cscp_owner_exec,
 * cscp_spi_exists, SPI_execute*, in any file): it resolves in pg_catalog
 * and cscp only, whatever the caller's search_path.  A statement is parsed
 * under the search_path of whoever calls cscp, often a superuser or the
 * extension's owner (a cron's cscp.sweep(), the worker, a trigger), and an
 * object a tenant planted in a schema on that path (public, pg_temp) would
 * otherwise run with their rights: an exact-type operator beats
 * pg_catalog's polymorphic one even when pg_catalog comes first.  So, as
 * PostgreSQL's own ri_triggers.c does, every name is qualified:
 * relations cscp.t; functions pg_catalog.f(...) or cscp.f(...); types in
 * casts ::pg_catalog.text, ::cscp.command_state (int, bigint, boolean,
 * interval are keywords and need nothing); every operator
 * OPERATOR(pg_catalog.=), OPERATOR(pg_catalog.->>), ..., which binds as a
 * generic operator (parenthesise a - b inside a comparison); IN (...)
 * written OPERATOR(pg_catalog.=) ANY ('{a,b}'), IS DISTINCT FROM written
 * with coalesce, CASE x WHEN written CASE WHEN x OPERATOR(pg_catalog.=),
 * collations pg_catalog."C", text search configurations
 * 'pg_catalog.english'.  COALESCE, EXISTS, ORDER BY, DISTINCT, GROUP BY
 * and UNION need nothing (keywords, or the type's default operator class).
 * test/scripts/spi-qualified.py fails `make test` on an unqualified name in
 * a SQL text of src/, and test/pgtap/search_path.sql runs the API with
 * shadowing objects planted.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"

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

/* Run a saved plan (nulls: NULL for none); elog unless it gives result code expected. */
void
cscp_spi_run(SPIPlanPtr plan, Datum *args, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(plan, args, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "cscp internal query failed: %s", SPI_result_code_string(rc));
}

/*
 * Raise 27000: a write cscp needs, of a row it has found and locked, wrote
 * no row.  A BEFORE ROW trigger that returned NULL, a DO INSTEAD rule or
 * a policy hiding the row from UPDATE (a DBA's) skipped it; reporting success then would say that something
 * happened that did not.  27000 (triggered data change violation) rather
 * than 55000, which cscp raises for its own lifecycle refusals: the write
 * was not refused by a rule of cscp but suppressed around it.  what names
 * the write ("confirm command ...").
 */
void
cscp_write_skipped(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
			 errmsg("could not %s: the write was skipped", what),
			 errdetail("The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it."),
			 errhint("A BEFORE ROW trigger on cscp's tables must return the row, and no rule or policy may hide cscp's writes.")));
}

/*
 * Run plan, a write of one row the caller has found (and locked): elog
 * unless it gives result code expected, 27000 (cscp_write_skipped, naming
 * what) when it wrote no row.
 */
void
cscp_spi_write_one(SPIPlanPtr plan, Datum *args, const char *nulls, int expected, const char *what)
{
	cscp_spi_run(plan, args, nulls, expected);
	if (SPI_processed == 0)
		cscp_write_skipped(what);
}

/*
 * Run a saved plan like cscp_spi_run: its one row, in SPI's tuple table,
 * with its descriptor in *desc; NULL when it gave none (or more than one).
 */
HeapTuple
cscp_spi_row(SPIPlanPtr plan, Datum *args, const char *nulls, int expected, TupleDesc *desc)
{
	cscp_spi_run(plan, args, nulls, expected);
	if (SPI_processed != 1)
		return NULL;
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * Whether the query of plan (prepared from sql the first time) finds a row
 * for args, run in a connection to SPI of its own; what names the look-up
 * in the error raised when the query fails.
 */
bool
cscp_spi_exists(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes,
				Datum *args, bool read_only, const char *what)
{
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(plan, sql, nargs, argtypes);
	if (SPI_execute_plan(*plan, args, NULL, read_only, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not %s", what);
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

/*
 * Run plan, a look-up by a unique key, as SPI_execute_plan does, with
 * enable_seqscan off while it runs, so that a plan made (or made again)
 * now takes the key's index whatever the statistics say.  Planned from
 * statistics, a table that was small when last analyzed is read by a
 * sequential scan, every row of every tenant on each call, and it grows
 * until the next ANALYZE; through the index a call reads one row.  The
 * setting is the statement's alone: restored when this returns, and by
 * the (sub)transaction's abort when the statement raises.
 */
int
cscp_spi_execute_keyed(SPIPlanPtr plan, Datum *args, const char *nulls, bool read_only,
					   long count)
{
	int			nestlevel = NewGUCNestLevel();
	int			rc;

	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	rc = SPI_execute_plan(plan, args, nulls, read_only, count);
	AtEOXact_GUC(true, nestlevel);
	return rc;
}

/* Drop the cache arg when an invalidation names its table (or all relations). */
static void
table_cache_inval(Datum arg, Oid relid)
{
	CscpTableCache *cache = (CscpTableCache *) DatumGetPointer(arg);

	if (relid == InvalidOid || relid == cache->relid)
	{
		cache->generation++;
		cache->valid = false;
	}
}

/*
 * Start a read of table relid (InvalidOid when it does not exist) into
 * cache; returns the generation to hand to cscp_table_cache_done.
 */
uint64
cscp_table_cache_begin(CscpTableCache *cache, Oid relid)
{
	if (!cache->registered)
	{
		CacheRegisterRelcacheCallback(table_cache_inval, PointerGetDatum(cache));
		cache->registered = true;
	}
	cache->relid = relid;
	return cache->generation;
}

/*
 * The read begun at generation is over: the cache is valid unless an
 * invalidation arrived meanwhile (then the next use reads again).
 */
void
cscp_table_cache_done(CscpTableCache *cache, uint64 generation)
{
	cache->valid = (generation == cache->generation);
}

/*
 * Run plan, an UPDATE ... RETURNING * of at most one row : the row written, in
 * SPI's tuple table, with its descriptor in *desc; NULL when none was.
 * what names the write in the error for more than one.
 */
HeapTuple
cscp_spi_update_one(SPIPlanPtr plan, Datum *args, const char *nulls, TupleDesc *desc,
					const char *what)
{
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not %s", what);
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("more than one row matched the statement to %s", what),
				 errdetail("A role that row-level security does not bind sees the rows of every tenant."),
				 errhint("Set cscp.tenant_id to the tenant of the row.")));
	if (SPI_processed == 0)
		return NULL;
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}
