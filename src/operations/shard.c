/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  The shard guard: a node of a scale-out deployment holds only the rows
 *	  whose routing hash falls in its partitions.
 *
 * A PL/Proxy proxy (proxy/, README "Scale-out") sends each call to partition
 * hash & (partition_count - 1).  The hash of a row is a keyed hash
 * (routing.c, keys.c):
 *	- cscp.routing_conversation_hash(conversation_id) for the rows of a
 *	  conversation (contexts, commands, frames, answers, evidence,
 *	  conversations, turns, events, inspections), the hash its ids carry;
 *	- cscp.routing_key_hash(tenant_id, subject_id) for identities and facts;
 *	- cscp.routing_key_hash(tenant_id, session_id) for documents, the
 *	  working set and environments, and for agent sessions and their items;
 *	- cscp.routing_key_hash(tenant_id, thread_id) for LangGraph threads, their
 *	  checkpoints, blobs and pending writes;
 *	- cscp.routing_key_hash(tenant_id, '') for LangGraph store items: all of a
 *	  tenant's store on one node, where its searches run;
 * the trigger's arguments name the column or the (tenant, key) pair, an
 * empty second argument standing for the empty key.  The
 * single row of cscp.shard says how many partitions there are and which this
 * node holds; with no row (one node, the default) every row is accepted.
 *
 * The BEFORE INSERT OR UPDATE OF <key columns> trigger shard_guard refuses
 * (55000) a row this node does not hold, so a write that bypasses the proxy
 * cannot land on the wrong shard.  Policies and authority ranks are tenant
 * settings every shard keeps a copy of: they are not guarded.
 *
 * Each backend caches the configuration; the statement trigger on
 * cscp.shard sends a relcache invalidation for the table (as for the policy
 * cache, policy.c), which drops it.  Unsharded, the guard costs one cached
 * test per row.  It takes no locks beyond reading cscp.shard once per reload.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

/* Partitions: at most this many (PL/Proxy needs a power of two). */
#define SHARD_MAX_PARTITIONS 65536

static CscpTableCache shard_cache;	/* dropped when cscp.shard changes */
static int	shard_count = 0;		/* 0: not sharded, every row is held */
static bool *shard_held = NULL;		/* shard_held[p]: this node holds p */

/*
 * Read cscp.shard, with a saved query run as the table's owner (an
 * application role need not read it).
 */
static void
shard_load(void)
{
	static SPIPlanPtr plan = NULL;
	Oid			nsp;
	int			count = 0;
	bool	   *held = NULL;
	uint64		generation;

	nsp = get_namespace_oid("cscp", true);
	generation = cscp_table_cache_begin(&shard_cache, OidIsValid(nsp) ?
										get_relname_relid("shard", nsp) : InvalidOid);
	if (OidIsValid(shard_cache.relid))
	{
		CscpOwnerScope owner;

		cscp_owner_enter("shard", &owner);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		cscp_spi_plan(&plan, "SELECT s.partition_count, s.partitions FROM cscp.shard s", 0, NULL);
		if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read cscp.shard");
		for (uint64 row = 0; row < SPI_processed; row++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[row];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		d;
			ArrayType  *arr;
			Datum	   *elems;
			bool	   *nulls;
			int			n;

			d = SPI_getbinval(tuple, desc, 1, &isnull);
			if (isnull)
				continue;
			count = DatumGetInt32(d);
			if (count <= 0 || count > SHARD_MAX_PARTITIONS)
				elog(ERROR, "cscp.shard holds an invalid partition count %d", count);
			if (held != NULL)
				pfree(held);
			held = MemoryContextAllocZero(TopMemoryContext, count * sizeof(bool));
			d = SPI_getbinval(tuple, desc, 2, &isnull);
			if (!isnull)
			{
				arr = DatumGetArrayTypeP(d);
				deconstruct_array(arr, INT4OID, sizeof(int32), true, TYPALIGN_INT,
								  &elems, &nulls, &n);
				for (int i = 0; i < n; i++)
					if (!nulls[i] && DatumGetInt32(elems[i]) >= 0 &&
						DatumGetInt32(elems[i]) < count)
						held[DatumGetInt32(elems[i])] = true;
			}
		}
		SPI_finish();
		cscp_owner_leave(&owner);
	}
	if (shard_held != NULL)
		pfree(shard_held);
	shard_held = held;
	shard_count = count;
	cscp_table_cache_done(&shard_cache, generation);
}

/* The routing hash of conversation a, or of key b of tenant a when b is given. */
static int32
shard_hash(text *a, text *b)
{
	if (b == NULL)
		return cscp_routing_hash_text(a);
	return cscp_routing_hash_key(a, b);
}

PG_FUNCTION_INFO_V1(cscp_shard_guard);

/*
 * Trigger cscp.shard_guard(column [, column]): BEFORE INSERT OR UPDATE OF the
 * key columns, FOR EACH ROW.  One argument: the row's hash is the routing
 * hash of the conversation that column names; two: that of the key the
 * second names for the tenant the first names, or of the empty key (the
 * tenant's own partition) when the second is ''.
 */
Datum
cscp_shard_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	HeapTuple	tuple;
	TupleDesc	desc;
	Datum		d;
	bool		isnull;
	text	   *a;
	text	   *b = NULL;
	int32		hash;
	int			partition;

	cscp_tenancy_check_trigger(fcinfo);
	(void) cscp_row_trigger(fcinfo, "cscp.shard_guard()");
	tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;

	if (!shard_cache.valid)
		shard_load();
	if (shard_count == 0)
		return PointerGetDatum(tuple);

	trigger = trigdata->tg_trigger;
	if (trigger->tgnargs < 1 || trigger->tgnargs > 2)
		elog(ERROR, "cscp.shard_guard() takes one or two column names");
	desc = RelationGetDescr(trigdata->tg_relation);
	d = heap_getattr(tuple, cscp_column(desc, RelationGetRelationName(trigdata->tg_relation),
										trigger->tgargs[0]), desc, &isnull);
	if (isnull)
		return PointerGetDatum(tuple);	/* NOT NULL says what is wrong */
	a = DatumGetTextPP(d);
	if (trigger->tgnargs == 2 && trigger->tgargs[1][0] == '\0')
		b = cstring_to_text("");
	else if (trigger->tgnargs == 2)
	{
		d = heap_getattr(tuple, cscp_column(desc, RelationGetRelationName(trigdata->tg_relation),
											trigger->tgargs[1]), desc, &isnull);
		if (isnull)
			return PointerGetDatum(tuple);
		b = DatumGetTextPP(d);
	}
	hash = shard_hash(a, b);
	partition = (int) ((uint32) hash & (uint32) (shard_count - 1));
	if (!shard_held[partition])
	{
		const char *rel = RelationGetRelationName(trigdata->tg_relation);
		char	   *key;

		if (b == NULL)
			key = psprintf("%s \"%s\"", trigger->tgargs[0], text_to_cstring(a));
		else if (trigger->tgargs[1][0] == '\0')
			key = psprintf("%s \"%s\" (the tenant's own partition)", trigger->tgargs[0],
						   text_to_cstring(a));
		else
			key = psprintf("%s \"%s\" and %s \"%s\"", trigger->tgargs[0], text_to_cstring(a),
						   trigger->tgargs[1], text_to_cstring(b));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this shard does not hold partition %d of %d", partition, shard_count),
				 errdetail("The new row of \"%s\" with %s hashes to %d, partition %d; "
						   "cscp.shard lists the partitions this node holds.",
						   rel, key, hash, partition),
				 errhint("Call cscp through the proxy, which sends each call to the shard holding its partition.")));
	}
	return PointerGetDatum(tuple);
}
