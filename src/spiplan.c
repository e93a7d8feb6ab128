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
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
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
 * Scan key i of index idx (cscp.indexname): its column equal to value, a
 * text, uuid or timestamptz.
 */
static void
key_init(ScanKey key, Relation idx, int i, const char *indexname, Datum value)
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
		case TIMESTAMPTZOID:
			eq = F_TIMESTAMPTZ_EQ;
			break;
		default:
			elog(ERROR, "column %d of index cscp.%s is not text, uuid or timestamptz", i + 1,
				 indexname);
	}
	ScanKeyEntryInitialize(key, 0, idx->rd_index->indkey.values[i], BTEqualStrategyNumber,
						   InvalidOid, idx->rd_indcollation[i], eq, value);
}

/*
 * Reads by key without a query, for the hot paths, where the executor's
 * start and end would cost more than the read.
 *
 * The rows of rel whose index cscp.indexname holds the key
 * keys[0..nkeys-1] (its first nkeys columns, each text, uuid or
 * timestamptz), copied into the current memory context.  The caller's
 * SELECT privilege on rel is checked as a query would, and row-level
 * security applied: where it binds the caller, only rows whose tenant_id
 * is the session's cscp.tenant_id are returned, which is every policy of
 * cscp's tables (security.sql).  rel is the caller's, open with at least
 * AccessShareLock; so is RelationGetDescr(rel), which describes the rows.
 *
 * fresh: read as a non-read-only SPI statement would, after a
 * CommandCounterIncrement and with a new snapshot (in READ COMMITTED), so
 * that a row committed while the caller waited for a lock is seen, and so
 * are the caller's own earlier writes.  Otherwise with the active snapshot.
 */
static List *
key_rows(Relation rel, const char *indexname, int nkeys, const Datum *keys, Snapshot snap,
		 bool unique)
{
	ScanKeyData key[INDEX_MAX_KEYS];
	AclResult	acl;
	Relation	idx;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *rows = NIL;
	int			tenantcol = 0;

	acl = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
	{
		/* tenant_id = current_setting('cscp.tenant_id', true): none without one */
		if (cscp_tenant_setting == NULL || cscp_tenant_setting[0] == '\0')
			return NIL;
		tenantcol = cscp_column(RelationGetDescr(rel), RelationGetRelationName(rel), "tenant_id");
	}

	idx = index_open(cscp_relation_oid(indexname, false), AccessShareLock);
	if (idx->rd_index->indrelid != RelationGetRelid(rel) ||
		(unique && !idx->rd_index->indisunique) ||
		nkeys > IndexRelationGetNumberOfKeyAttributes(idx))
		elog(ERROR, "cscp.%s is not a%s index of %d columns on %s", indexname,
			 unique ? " unique" : "n", nkeys, RelationGetRelationName(rel));
	for (int i = 0; i < nkeys; i++)
		key_init(&key[i], idx, i, indexname, keys[i]);

	scan = systable_beginscan_ordered(rel, idx, snap, nkeys, key);
	while (HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		if (tenantcol != 0)
		{
			bool		isnull;
			Datum		t = heap_getattr(tup, tenantcol, RelationGetDescr(rel), &isnull);

			if (isnull || strcmp(TextDatumGetCString(t), cscp_tenant_setting) != 0)
				continue;
		}
		rows = lappend(rows, heap_copytuple(tup));
		/* a unique index holds one key once in a snapshot */
		if (idx->rd_index->indisunique)
			break;
	}
	systable_endscan_ordered(scan);
	index_close(idx, AccessShareLock);
	return rows;
}

/* The snapshot a key read uses (see above), registered. */
static Snapshot
key_snapshot(bool fresh)
{
	if (fresh)
	{
		CommandCounterIncrement();
		return RegisterSnapshot(GetTransactionSnapshot());
	}
	return RegisterSnapshot(GetActiveSnapshot());
}

/* The row of rel whose unique index cscp.indexname holds the key; NULL when there is none. */
HeapTuple
cscp_key_read(Relation rel, const char *indexname, int nkeys, const Datum *keys, bool fresh)
{
	Snapshot	snap = key_snapshot(fresh);
	List	   *rows = key_rows(rel, indexname, nkeys, keys, snap, true);

	UnregisterSnapshot(snap);
	return rows == NIL ? NULL : (HeapTuple) linitial(rows);
}

/* Every row of rel whose index cscp.indexname (unique or not) holds the key. */
List *
cscp_key_rows(Relation rel, const char *indexname, int nkeys, const Datum *keys, bool fresh)
{
	Snapshot	snap = key_snapshot(fresh);
	List	   *rows = key_rows(rel, indexname, nkeys, keys, snap, false);

	UnregisterSnapshot(snap);
	return rows;
}

/*
 * The row of rel whose index cscp.indexname holds the key, locked FOR
 * UPDATE as SELECT ... FOR UPDATE would lock it, and read as cscp_key_read
 * does with fresh; NULL when there is none, or when it was deleted while we
 * waited for its lock.  The index need not be unique, but more than one row
 * holding the key is an error.  The caller's UPDATE privilege is checked
 * too, as FOR UPDATE asks.
 *
 * As in a query: in READ COMMITTED, a row that a transaction we waited
 * for updated is locked and returned in its latest version, which the
 * caller judges again (its key never changes; the rest may have), as the
 * query's recheck would; under REPEATABLE READ or SERIALIZABLE, such an
 * update is a serialization failure.
 */
HeapTuple
cscp_key_lock_row(Relation rel, const char *indexname, int nkeys, const Datum *keys)
{
	AclResult	acl;
	Snapshot	snap;
	List	   *rows;
	ItemPointerData tid;
	TupleTableSlot *slot;
	TM_FailureData tmfd;
	TM_Result	res;
	int			flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
	HeapTuple	tup = NULL;

	acl = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_UPDATE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));

	snap = key_snapshot(true);
	rows = key_rows(rel, indexname, nkeys, keys, snap, false);
	if (rows == NIL)
	{
		UnregisterSnapshot(snap);
		return NULL;
	}
	if (list_length(rows) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("more than one row of table \"%s\" has the key looked for",
						RelationGetRelationName(rel)),
				 errdetail("The key is that of index \"%s\".", indexname)));
	tid = ((HeapTuple) linitial(rows))->t_self;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	slot = table_slot_create(rel, NULL);
	res = table_tuple_lock(rel, &tid, snap, slot, GetCurrentCommandId(true), LockTupleExclusive,
						   LockWaitBlock, flags, &tmfd);
	switch (res)
	{
		case TM_Ok:
			tup = ExecCopySlotHeapTuple(slot);
			break;
		case TM_SelfModified:
			/* changed by the current command: not returned, as in a query */
			break;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			if (res == TM_Updated)
				elog(ERROR, "unexpected table_tuple_lock status: %u", res);
			break;				/* deleted: none */
		default:
			elog(ERROR, "unexpected table_tuple_lock status: %u", res);
	}
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
	return tup;
}

/*
 * Run plan, an UPDATE ... RETURNING * of at most one row (the statement
 * cscp_row_update stands in for where it may not): the row written, in
 * SPI's tuple table, with its descriptor in *desc; NULL when none was.
 * what names the write in the error for more than one.
 */
HeapTuple
cscp_spi_update_one(SPIPlanPtr plan, Datum *args, const char *nulls, TupleDesc *desc,
					const char *what)
{
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_UPDATE_RETURNING ||
		SPI_processed > 1)
		elog(ERROR, "could not %s", what);
	if (SPI_processed == 0)
		return NULL;
	*desc = SPI_tuptable->tupdesc;
	return SPI_tuptable->vals[0];
}

/*
 * Whether a row of rel may be written below the executor at all: a plain
 * table (not a partition) with no rule, which would rewrite the statement.
 */
static bool
plain_table(Relation rel)
{
	return rel->rd_rules == NULL && rel->rd_rel->relkind == RELKIND_RELATION &&
		!rel->rd_rel->relispartition;
}

/*
 * The executor state of one row written below the executor: what an
 * INSERT or UPDATE statement of that row would set up, with rel as its
 * result relation, its indexes open, the row in a slot and the AFTER
 * triggers' query begun.  Everything is allocated in the state's own
 * memory context, which one_row_end frees.
 */
typedef struct OneRow
{
	MemoryContext callerctx;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} OneRow;

/*
 * Begin writing tuple into rel.  An UPDATE has a range table naming rel
 * and the updated columns (for triggers with a column list) and runs under
 * the active snapshot; an INSERT has none: its result relation's index is
 * 0, as for a partition a row is routed to, and a constraint's error shows
 * the failing row only to a role that may read the table.
 */
static void
one_row_begin(OneRow *o, Relation rel, HeapTuple tuple, CmdType cmd, Bitmapset *updatedcols)
{
	EState	   *estate;
	Index		rtindex = 0;

	o->callerctx = CurrentMemoryContext;
	o->estate = estate = CreateExecutorState();
	MemoryContextSwitchTo(estate->es_query_cxt);
	if (cmd == CMD_UPDATE)
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);

		rte->rtekind = RTE_RELATION;
		rte->relid = RelationGetRelid(rel);
		rte->relkind = rel->rd_rel->relkind;
		rte->rellockmode = RowExclusiveLock;
		rte->updatedCols = bms_copy(updatedcols);
		ExecInitRangeTable(estate, list_make1(rte));
		estate->es_snapshot = GetActiveSnapshot();
		rtindex = 1;
	}
	estate->es_output_cid = GetCurrentCommandId(true);
	o->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(o->rri, rel, rtindex, NULL, 0);
	/* where the AFTER triggers' queue finds it (ExecGetTriggerResultRel) */
	estate->es_opened_result_relations = list_make1(o->rri);
	ExecOpenIndices(o->rri, false);
	o->slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsHeapTuple);
	ExecStoreHeapTuple(tuple, o->slot, false);
	AfterTriggerBeginQuery();
}

/* Fire the AFTER triggers queued, free the state, back to the caller's context. */
static void
one_row_end(OneRow *o)
{
	AfterTriggerEndQuery(o->estate);
	ExecCloseResultRelations(o->estate);
	ExecResetTupleTable(o->estate->es_tupleTable, false);
	MemoryContextSwitchTo(o->callerctx);
	FreeExecutorState(o->estate);
}

/*
 * Row-level security on a row written below the executor, as a policy of
 * cscp's binds (see key_rows): where a policy binds the caller, the new
 * row in slot must keep oldtup's tenant_id (an update) or, with no
 * oldtup, carry the session's cscp.tenant_id (an insert), as the
 * policies' WITH CHECK says.
 */
static void
check_row_tenant(Relation rel, TupleTableSlot *slot, HeapTuple oldtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			col;
	bool		isnull;
	Datum		d;
	const char *want;

	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) != RLS_ENABLED)
		return;
	col = cscp_column(desc, RelationGetRelationName(rel), "tenant_id");
	if (oldtup == NULL)
		want = cscp_tenant_setting;
	else
	{
		d = heap_getattr(oldtup, col, desc, &isnull);
		want = isnull ? NULL : TextDatumGetCString(d);
	}
	d = slot_getattr(slot, col, &isnull);
	if (isnull || want == NULL || strcmp(TextDatumGetCString(d), want) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("new row violates row-level security policy for table \"%s\"",
						RelationGetRelationName(rel))));
}

/*
 * Whether cscp_row_update may stand in for an UPDATE statement on rel:
 * not when rel has a rule (the statement would be rewritten), a
 * statement-level UPDATE trigger or a transition table (which belong to a
 * statement), or is not a plain table.  The caller then runs the statement.
 */
bool
cscp_row_update_direct(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (!plain_table(rel))
		return false;
	return td == NULL ||
		!(td->trig_update_before_statement || td->trig_update_after_statement ||
		  td->trig_update_old_table || td->trig_update_new_table);
}

/*
 * Update oldtup, a row of rel that the caller holds locked
 * (cscp_key_lock_row, which checked the caller's privilege and applied
 * row-level security), to newtup, which sets the columns cols (attribute
 * numbers offset by FirstLowInvalidHeapAttributeNumber, as in an UPDATE's
 * SET list), below the executor, as an UPDATE statement of that one row
 * would, and as logical replication's apply does:
 *
 *	- after a CommandCounterIncrement and with a new snapshot, as a
 *	  non-read-only SPI statement;
 *	- BEFORE UPDATE row triggers fire (those with a column list or WHEN
 *	  condition as for the statement); one that returns NULL skips the row,
 *	  and NULL is returned;
 *	- stored generated columns are computed, NOT NULL and CHECK constraints
 *	  checked;
 *	- the heap update and, unless it is HOT, the index entries (a unique
 *	  index raising its 23505);
 *	- AFTER UPDATE row triggers, foreign key checks among them, fire at the
 *	  end of this update, as at the end of the statement.
 *
 * Row-level security: a policy that binds the caller binds tenant_id (see
 * key_rows), so the new row must keep the old row's tenant_id.
 *
 * Only where cscp_row_update_direct(rel).  rel is open with
 * RowExclusiveLock.  Returns the row as stored, after the triggers, copied
 * into the caller's memory context.
 */
HeapTuple
cscp_row_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, Bitmapset *cols)
{
	ItemPointerData tid = oldtup->t_self;
	OneRow		o;
	EPQState	epq;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	HeapTuple	result = NULL;

	Assert(cscp_row_update_direct(rel));
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());

	one_row_begin(&o, rel, newtup, CMD_UPDATE, cols);
	rri = o.rri;
	slot = o.slot;
	EvalPlanQualInit(&epq, o.estate, NULL, NIL, -1);
	if (rri->ri_TrigDesc == NULL || !rri->ri_TrigDesc->trig_update_before_row ||
		ExecBRUpdateTriggers(o.estate, &epq, rri, &tid, NULL, slot, NULL))
	{
		TupleConstr *constr = RelationGetDescr(rel)->constr;
		bool		update_indexes;
		List	   *recheck = NIL;

		if (constr != NULL && constr->has_generated_stored)
			ExecComputeStoredGenerated(rri, o.estate, slot, CMD_UPDATE);
		if (constr != NULL)
			ExecConstraints(rri, slot, o.estate);
		check_row_tenant(rel, slot, oldtup);
		simple_table_tuple_update(rel, &tid, slot, o.estate->es_snapshot, &update_indexes);
		if (rri->ri_NumIndices > 0 && update_indexes)
			recheck = ExecInsertIndexTuples(rri, slot, o.estate, true, false, NULL, NIL);
		ExecARUpdateTriggers(o.estate, rri, NULL, NULL, &tid, NULL, slot, recheck, NULL, false);
		MemoryContextSwitchTo(o.callerctx);
		result = ExecCopySlotHeapTuple(slot);
		MemoryContextSwitchTo(o.estate->es_query_cxt);
	}
	EvalPlanQualEnd(&epq);
	one_row_end(&o);
	PopActiveSnapshot();
	/* visible to what follows, as after an SPI statement */
	CommandCounterIncrement();
	return result;
}

/*
 * Whether cscp_row_insert may stand in for an INSERT of one row into rel:
 * as cscp_row_update_direct, not when rel has a rule, a statement-level
 * INSERT trigger or a transition table, or is not a plain table.
 */
bool
cscp_row_insert_direct(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (!plain_table(rel))
		return false;
	return td == NULL ||
		!(td->trig_insert_before_statement || td->trig_insert_after_statement ||
		  td->trig_insert_new_table);
}

/*
 * Insert tuple, a row of rel formed by the caller with the value of every
 * column (no default is applied), below the executor, as an INSERT
 * statement of that one row would, and as logical replication's apply
 * does:
 *
 *	- BEFORE INSERT row triggers fire; one that returns NULL skips the row,
 *	  and false is returned;
 *	- stored generated columns are computed, NOT NULL and CHECK constraints
 *	  checked;
 *	- the heap insert and its index entries (a unique index raising its
 *	  23505);
 *	- AFTER INSERT row triggers, foreign key checks among them, fire at the
 *	  end of this insert, as at the end of the statement.
 *
 * as_caller: the caller's INSERT privilege is checked, and row-level
 * security as a policy of cscp's binds (see key_rows): where it binds the
 * caller, the row's tenant_id must be the session's cscp.tenant_id.
 * Otherwise the row goes in as its owner would write it, whom row-level
 * security does not bind (the evidence, the lists the triggers keep).
 *
 * Where not cscp_row_insert_direct(rel), the statement's rules and
 * statement triggers would be skipped; the callers run the statement
 * then (but for the evidence, whose own triggers are row triggers).  rel is
 * open with RowExclusiveLock.  Everything the insert allocates lives in an executor
 * state freed before the return: a trigger adding a row for each of many
 * commands (a sweep lapsing a batch) does not grow its caller's memory.
 */
bool
cscp_row_insert(Relation rel, HeapTuple tuple, bool as_caller)
{
	TupleDesc	desc = RelationGetDescr(rel);
	OneRow		o;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	bool		inserted = false;

	if (as_caller)
	{
		AclResult	acl = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_INSERT);

		if (acl != ACLCHECK_OK)
			aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
	}
	CheckCmdReplicaIdentity(rel, CMD_INSERT);

	one_row_begin(&o, rel, tuple, CMD_INSERT, NULL);
	rri = o.rri;
	slot = o.slot;
	if (rri->ri_TrigDesc == NULL || !rri->ri_TrigDesc->trig_insert_before_row ||
		ExecBRInsertTriggers(o.estate, rri, slot))
	{
		TupleConstr *constr = desc->constr;
		List	   *recheck = NIL;

		if (constr != NULL && constr->has_generated_stored)
			ExecComputeStoredGenerated(rri, o.estate, slot, CMD_INSERT);
		if (constr != NULL)
			ExecConstraints(rri, slot, o.estate);
		if (as_caller)
			check_row_tenant(rel, slot, NULL);
		simple_table_tuple_insert(rel, slot);
		if (rri->ri_NumIndices > 0)
			recheck = ExecInsertIndexTuples(rri, slot, o.estate, false, false, NULL, NIL);
		ExecARInsertTriggers(o.estate, rri, slot, recheck, NULL);
		inserted = true;
	}
	one_row_end(&o);
	return inserted;
}

/*
 * Whether cscp_row_delete may stand in for a DELETE on rel: a plain table
 * with no rule and no DELETE trigger of any kind.
 */
bool
cscp_row_delete_direct(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (!plain_table(rel))
		return false;
	return td == NULL ||
		!(td->trig_delete_before_row || td->trig_delete_after_row ||
		  td->trig_delete_instead_row || td->trig_delete_before_statement ||
		  td->trig_delete_after_statement || td->trig_delete_old_table);
}

/* Whether column attnum of row (text or uuid) equals value. */
static bool
column_equals(HeapTuple row, TupleDesc desc, AttrNumber attnum, Datum value)
{
	bool		isnull;
	Datum		d = heap_getattr(row, attnum, desc, &isnull);

	if (isnull)
		return false;
	switch (TupleDescAttr(desc, attnum - 1)->atttypid)
	{
		case TEXTOID:
			{
				text	   *a = DatumGetTextPP(d);
				text	   *b = DatumGetTextPP(value);

				return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
					memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
			}
		case UUIDOID:
			return memcmp(DatumGetUUIDP(d), DatumGetUUIDP(value), UUID_LEN) == 0;
		default:
			elog(ERROR, "column \"%s\" is neither text nor uuid",
				 NameStr(TupleDescAttr(desc, attnum - 1)->attname));
	}
	return false;				/* keep compiler quiet */
}

/*
 * Delete, below the executor and as rel's owner would, the rows of rel
 * whose index cscp.indexname has key as its first column and whose columns
 * cols[0..ncols-1] (text or uuid) equal vals[0..ncols-1]: what
 *
 *	 DELETE FROM rel WHERE <the index's column> = key AND <cols> = <vals>
 *
 * deletes (text compared byte by byte, as under a deterministic
 * collation).  Rows are read as a non-read-only SPI statement reads, after
 * a CommandCounterIncrement and with a new snapshot.  A row that another
 * transaction deleted while we waited for it is gone already in READ
 * COMMITTED, a serialization failure under REPEATABLE READ or
 * SERIALIZABLE; so is one it updated (the statement would have rechecked
 * its new version; cscp's lists are never updated).  Returns the number of
 * rows deleted.
 *
 * Only where cscp_row_delete_direct(rel).  rel is open with
 * RowExclusiveLock.
 */
int
cscp_row_delete(Relation rel, const char *indexname, Datum key, int ncols,
				const AttrNumber *cols, const Datum *vals)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ScanKeyData skey;
	Relation	idx;
	Snapshot	snap;
	SysScanDesc scan;
	HeapTuple	tup;
	int			deleted = 0;

	Assert(cscp_row_delete_direct(rel));
	CheckCmdReplicaIdentity(rel, CMD_DELETE);
	idx = index_open(cscp_relation_oid(indexname, false), AccessShareLock);
	if (idx->rd_index->indrelid != RelationGetRelid(rel))
		elog(ERROR, "cscp.%s is not an index on %s", indexname, RelationGetRelationName(rel));
	key_init(&skey, idx, 0, indexname, key);
	snap = key_snapshot(true);
	scan = systable_beginscan_ordered(rel, idx, snap, 1, &skey);
	while (HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		ItemPointerData tid = tup->t_self;
		TM_FailureData tmfd;
		TM_Result	res;
		bool		match = true;

		for (int i = 0; i < ncols && match; i++)
			match = column_equals(tup, desc, cols[i], vals[i]);
		if (!match)
			continue;
		res = table_tuple_delete(rel, &tid, GetCurrentCommandId(true), snap, InvalidSnapshot,
								 true, &tmfd, false);
		switch (res)
		{
			case TM_Ok:
				deleted++;
				break;
			case TM_SelfModified:
				/* deleted by the current command already: as in a DELETE */
				break;
			case TM_Updated:
			case TM_Deleted:
				if (IsolationUsesXactSnapshot() || res == TM_Updated)
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not serialize access due to concurrent %s",
									res == TM_Updated ? "update" : "delete")));
				break;			/* gone */
			default:
				elog(ERROR, "unexpected table_tuple_delete status: %u", res);
		}
	}
	systable_endscan_ordered(scan);
	index_close(idx, AccessShareLock);
	UnregisterSnapshot(snap);
	return deleted;
}
