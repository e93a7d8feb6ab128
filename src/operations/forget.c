/*-------------------------------------------------------------------------
 *
 * forget.c
 *	  Erasure: cscp.forget_conversation and cscp.forget_subject, the
 *	  tombstones they leave, and the trigger that refuses late writes for
 *	  what was forgotten.
 *
 * forget_* deletes every row about a conversation (contexts, frames,
 * commands with their whole evidence chains, answers, turns, events, the
 * conversation, its session's documents, working set and environment, the
 * operators' inspections of it, the LangGraph thread and the agent session
 * of the same id) or a subject (identity, facts, the contexts
 * and commands it was the actor of with their evidence, its answers), as
 * the owner of the tables, after checking as the caller that the tenant is
 * the session's.  It leaves a tombstone in cscp.tombstone keyed by tenant
 * and sha256(kind, tenant, id): the tombstone, which is also the record of
 * the erasure (time, role, counts), holds no personal data.
 *
 * The trigger cscp.forgotten_guard(kind, column [, kind, column]) on every
 * table holding such rows refuses (55000) an INSERT, or an UPDATE moving a
 * row, whose column names a forgotten conversation or subject, whoever
 * writes it and however: a late write never brings the data back.
 *
 * Locking: what is erased is locked, not a stripe shared with other ids
 * or tenants.  The lock of an id is an advisory lock tag of cscp's own
 * class (CSCP_LOCKTAG_FORGET_ID in field4, so that no SQL advisory lock
 * shares it) whose 64-bit key is the first 8 bytes of the SHA-256 of kind,
 * tenant and id: two different (kind, tenant, id) share a lock with
 * probability 2^-64, and nobody can make his id collide with another's
 * without about 2^64 hashes.  forget takes it in ExclusiveLock mode, the
 * trigger in ShareLock mode before it looks for a tombstone, both until
 * commit.  A write that began first commits before forget deletes (and is
 * deleted with the rest); a write that comes later waits for forget's
 * commit and then sees its tombstone (READ COMMITTED takes a new snapshot
 * per statement).  An erasure therefore makes wait only the writes of the
 * id it erases.  The trigger looks up only an id that may have a
 * tombstone: each backend keeps the keys of the tombstones it knows
 * (tombstone_possible), which every change of cscp.tombstone drops, and a
 * write takes the invalidations that arrived once it holds its lock.
 *
 * A lock per id would let a transaction that writes many ids (the sweep
 * closing timed-out conversations, a bulk load) fill the shared lock
 * table.  So a transaction takes at most CSCP_FORGET_ID_LOCKS id locks;
 * past that, a write takes instead the lock of its tenant (class
 * CSCP_LOCKTAG_FORGET_TENANT, key from the SHA-256 of the tenant) in
 * RowExclusiveLock mode, which writers share, and every erasure also takes
 * its tenant's lock in ShareLock mode, which conflicts with it.  Such a
 * bulk writer waits for the running erasures of the tenants it writes, and
 * only of those.
 *
 * The tombstone is written before the first delete, in the same
 * transaction: the evidence trigger lets a row whose conversation or
 * subject has one be deleted before its retention has passed (evidence.c),
 * so an erasure takes whole chains, and nothing tells the trigger who
 * deletes.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "pgcompat.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * Lock tag classes (field4 of an advisory lock tag, pg_locks.objsubid;
 * PostgreSQL's SQL advisory locks use 1 and 2) of an erased id and of its
 * tenant.
 */
#define CSCP_LOCKTAG_FORGET_ID		0x6366	/* "cf" */
#define CSCP_LOCKTAG_FORGET_TENANT	0x6374	/* "ct" */

/*
 * Id locks a transaction takes before its writes fall back to their
 * tenant's lock: the default max_locks_per_transaction.
 */
#define CSCP_FORGET_ID_LOCKS 64

/* Id locks taken by local transaction forget_id_locks_lxid. */
static LocalTransactionId forget_id_locks_lxid = InvalidLocalTransactionId;
static int	forget_id_locks = 0;

/* Kind, tenant and id, NUL-separated: what an id's tombstone key hashes. */
static void
forget_key(StringInfo buf, const char *tenant_id, const char *kind, const char *id)
{
	initStringInfo(buf);
	appendStringInfoString(buf, kind);
	appendStringInfoChar(buf, '\0');
	appendStringInfoString(buf, tenant_id);
	appendStringInfoChar(buf, '\0');
	appendStringInfoString(buf, id);
}

/* The tombstone key of an id: sha256 of kind, tenant and id, NUL-separated. */
char *
cscp_forget_hash(const char *tenant_id, const char *kind, const char *id)
{
	StringInfoData buf;

	forget_key(&buf, tenant_id, kind, id);
	return cscp_sha256_hex(buf.data, buf.len);
}

/*
 * Take the lock of an id: exclusive for its erasure (with its tenant's in
 * ShareLock mode), shared for a write of it; a write in a transaction that
 * already holds CSCP_FORGET_ID_LOCKS id locks takes its tenant's lock
 * instead.  Held until commit.
 */
static void
forget_lock(const char *tenant_id, const char *kind, const char *id, bool exclusive)
{
	StringInfoData buf;

	if (exclusive)
	{
		forget_key(&buf, tenant_id, kind, id);
		(void) cscp_hash_lock(CSCP_LOCKTAG_FORGET_ID, buf.data, buf.len, ExclusiveLock);
		(void) cscp_hash_lock(CSCP_LOCKTAG_FORGET_TENANT, tenant_id, strlen(tenant_id),
							   ShareLock);
		pfree(buf.data);
		return;
	}

	if (forget_id_locks_lxid != cscp_my_lxid())
	{
		forget_id_locks_lxid = cscp_my_lxid();
		forget_id_locks = 0;
	}
	if (forget_id_locks >= CSCP_FORGET_ID_LOCKS)
	{
		(void) cscp_hash_lock(CSCP_LOCKTAG_FORGET_TENANT, tenant_id, strlen(tenant_id),
							   RowExclusiveLock);
		return;
	}
	forget_key(&buf, tenant_id, kind, id);
	if (cscp_hash_lock(CSCP_LOCKTAG_FORGET_ID, buf.data, buf.len, ShareLock) !=
		LOCKACQUIRE_ALREADY_HELD)
		forget_id_locks++;
	pfree(buf.data);
}

/*
 * The tombstones this backend knows of: the first 8 bytes of each id_hash
 * (the SHA-256 of kind, tenant and id), sorted, read as the owner with the
 * latest snapshot and kept until an invalidation of cscp.tombstone (its
 * statement trigger cscp.policy_changed sends one) drops them.  An id whose
 * key is not among them has no tombstone, so the row writes of a database
 * that has forgotten anything (in any tenant) need not look it up; a key
 * among them is looked up, since it may be another id's or a tombstone
 * since rolled back.  Past TOMBSTONE_CACHE_MAX tombstones nothing is kept
 * and every check looks up (tomb_all).
 */
#define TOMBSTONE_CACHE_MAX 100000

static CscpTableCache tomb_cache;
static uint64 *tomb_keys = NULL;
static int	tomb_n = 0;
static bool tomb_all = false;

static int
key_cmp(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* The key of an id_hash ("sha256:" and 64 hex digits): its first 16 digits. */
static uint64
hash_text_key(const char *id_hash)
{
	const char *hex = id_hash + strlen("sha256:");
	uint64		key = 0;

	for (int i = 0; i < 16 && hex[i] != '\0'; i++)
	{
		char		c = hex[i];

		key = (key << 4) | (uint64) (c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
	}
	return key;
}

/* Read the keys of every tombstone into the cache (tomb_keys, tomb_n, tomb_all). */
static void
tombstones_load(void)
{
	static SPIPlanPtr plan = NULL;
	CscpOwnerScope owner;
	uint64		generation;
	uint64	   *keys = NULL;
	int			n = 0;
	bool		all;

	generation = cscp_table_cache_begin(&tomb_cache, cscp_relation_oid("tombstone", false));
	cscp_owner_enter("tombstone", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan, "SELECT t.id_hash FROM cscp.tombstone t", 0, NULL);

	/*
	 * The latest snapshot, as foreign-key checks read: what the cache holds
	 * serves later transactions too, so it must not miss a tombstone that
	 * committed before this read whatever the isolation level of this one.
	 */
	if (SPI_execute_snapshot(plan, NULL, NULL, GetLatestSnapshot(), InvalidSnapshot, true, false,
							 TOMBSTONE_CACHE_MAX + 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read cscp.tombstone");
	all = SPI_processed > TOMBSTONE_CACHE_MAX;
	if (!all && SPI_processed > 0)
	{
		uint64	   *read = palloc(sizeof(uint64) * SPI_processed);

		for (uint64 i = 0; i < SPI_processed; i++)
		{
			char	   *h = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			if (h != NULL)
				read[n++] = hash_text_key(h);
		}
		qsort(read, n, sizeof(uint64), key_cmp);
		/* kept past SPI_finish, which frees what was read */
		keys = MemoryContextAlloc(TopMemoryContext, sizeof(uint64) * Max(n, 1));
		memcpy(keys, read, sizeof(uint64) * n);
	}
	SPI_finish();
	cscp_owner_leave(&owner);
	if (tomb_keys != NULL)
		pfree(tomb_keys);
	tomb_keys = keys;
	tomb_n = n;
	tomb_all = all;
	cscp_table_cache_done(&tomb_cache, generation);
}

/*
 * Whether id (a conversation or subject, kind) of tenant_id may have a
 * tombstone: false when the cache of tombstone keys says it has none.  The
 * invalidations that arrived are taken first: a caller that holds the id's
 * lock (forget_lock) waited for the erasure of it that was running, whose
 * commit sent its invalidation before it let the lock go, so the cache then
 * holds every tombstone of the id that committed.
 */
static bool
tombstone_possible(const char *tenant_id, const char *kind, const char *id)
{
	StringInfoData buf;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint64		key = 0;

	AcceptInvalidationMessages();
	if (!tomb_cache.valid)
		tombstones_load();
	if (tomb_all)
		return true;
	if (tomb_n == 0)
		return false;
	forget_key(&buf, tenant_id, kind, id);
	cscp_sha256(buf.data, buf.len, digest);
	pfree(buf.data);
	for (int i = 0; i < 8; i++)
		key = (key << 8) | digest[i];
	return bsearch(&key, tomb_keys, tomb_n, sizeof(uint64), key_cmp) != NULL;
}

/*
 * Whether id (a conversation or subject, kind) of tenant_id was forgotten,
 * and when (*when): its tombstone, committed or this transaction's.  With
 * lock, takes the shared lock of the id first (forget_lock), so that an
 * erasure of it running now is waited for.
 */
static bool
forgotten_at(const char *tenant_id, const char *kind, const char *id, bool lock,
			 TimestampTz *when)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	CscpOwnerScope owner;
	Datum		args[2];
	bool		found;

	if (lock)
		forget_lock(tenant_id, kind, id, false);
	if (!tombstone_possible(tenant_id, kind, id))
		return false;

	cscp_owner_enter("tombstone", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT t.forgotten_at FROM cscp.tombstone t"
				  " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.id_hash OPERATOR(pg_catalog.=) $2",
				  2, argtypes);
	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(cscp_forget_hash(tenant_id, kind, id));
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up tombstones");
	found = SPI_processed > 0;
	if (found)
	{
		bool		isnull;

		*when = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	cscp_owner_leave(&owner);
	return found;
}

/*
 * Whether id (a conversation or subject, kind) of tenant_id has a tombstone
 * this transaction sees, which an erasure writes before its first delete.
 * Waits for no one: an erasure running elsewhere is not seen.
 */
bool
cscp_forgotten(const char *tenant_id, const char *kind, const char *id)
{
	TimestampTz when;

	return forgotten_at(tenant_id, kind, id, false, &when);
}

/*
 * Raise 55000 when id (a conversation or subject, kind) of tenant_id was
 * forgotten (forgotten_at, which waits for an erasure of it running now).
 */
void
cscp_refuse_forgotten(const char *tenant_id, const char *kind, const char *id)
{
	TimestampTz when = 0;

	if (forgotten_at(tenant_id, kind, id, true, &when))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s \"%s\" of tenant \"%s\" was forgotten", kind, id, tenant_id),
				 errdetail("Its rows were erased by cscp.forget_%s at %s; a tombstone refuses new rows for it.",
						   kind, timestamptz_to_str(when)),
				 errhint("Use a new %s id: a forgotten one is never written again.", kind)));
}

PG_FUNCTION_INFO_V1(cscp_forgotten_guard);

/*
 * Trigger cscp.forgotten_guard(kind, column [, kind, column ...]):
 * BEFORE INSERT OR UPDATE FOR EACH ROW.  Refuses the row when a column
 * names a forgotten id of its kind (conversation or subject) for the row's
 * tenant_id; an UPDATE is checked only for the columns it changes.
 */
Datum
cscp_forgotten_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	HeapTuple	newtup;
	TupleDesc	desc;
	char	   *tenant = NULL;
	int			tenant_att;
	bool		is_update;
	bool		tenant_kept;

	cscp_tenancy_check_trigger(fcinfo);
	(void) cscp_row_trigger(fcinfo, "cscp.forgotten_guard()");
	trigger = trigdata->tg_trigger;
	if (trigger->tgnargs < 2 || trigger->tgnargs % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.forgotten_guard() takes pairs of kind and column")));

	is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	newtup = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);
	tenant_att = cscp_column(desc, "cscp table", "tenant_id");
	if (heap_attisnull(newtup, tenant_att, desc))
		return PointerGetDatum(newtup);
	/* An UPDATE that keeps the tenant and an id needs no look for that id. */
	tenant_kept = is_update && cscp_same_value(trigdata->tg_trigtuple, newtup, desc, tenant_att);

	for (int i = 0; i < trigger->tgnargs; i += 2)
	{
		const char *kind = trigger->tgargs[i];
		int			attnum = cscp_column(desc, "cscp table", trigger->tgargs[i + 1]);

		if (heap_attisnull(newtup, attnum, desc))
			continue;
		if (tenant_kept && cscp_same_value(trigdata->tg_trigtuple, newtup, desc, attnum))
			continue;
		if (tenant == NULL)
			tenant = SPI_getvalue(newtup, desc, tenant_att);
		cscp_refuse_forgotten(tenant, kind, SPI_getvalue(newtup, desc, attnum));
	}
	return PointerGetDatum(newtup);
}

/*
 * One DELETE of an erasure: its count is reported under name.  A step with
 * a since_table is skipped (count 0) while cscp's schema lacks that table:
 * the library of a new version runs against the SQL of the old one between
 * the steps of an upgrade (the checkpoint tables came with 0.2.0).
 */
typedef struct EraseStep
{
	const char *name;
	const char *sql;			/* $1 tenant, $2 id */
	const char *since_table;
} EraseStep;

static const EraseStep conversation_steps[] = {
	{"evidence", "DELETE FROM cscp.evidence e WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"answers", "DELETE FROM cscp.answer a WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"commands", "DELETE FROM cscp.command c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"frames", "DELETE FROM cscp.frame f WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"contexts", "DELETE FROM cscp.context c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"turns", "DELETE FROM cscp.turn t WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"events", "DELETE FROM cscp.event e WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"conversations", "DELETE FROM cscp.conversation c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	{"documents", "DELETE FROM cscp.document d WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.session_id OPERATOR(pg_catalog.=) $2", NULL},
	{"working_set", "DELETE FROM cscp.working_set w WHERE w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.session_id OPERATOR(pg_catalog.=) $2", NULL},
	{"environment", "DELETE FROM cscp.environment e WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.session_id OPERATOR(pg_catalog.=) $2", NULL},
	{"inspections", "DELETE FROM cscp.inspection_log i WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.conversation_id OPERATOR(pg_catalog.=) $2", NULL},
	/* A LangGraph thread and an agent session of the same id: their rows go by cascade. */
	{"checkpoint_threads", "DELETE FROM cscp.checkpoint_thread t WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.thread_id OPERATOR(pg_catalog.=) $2",
	"checkpoint_thread"},
	{"agent_sessions", "DELETE FROM cscp.agent_session s WHERE s.tenant_id OPERATOR(pg_catalog.=) $1 AND s.session_id OPERATOR(pg_catalog.=) $2",
	"agent_session"},
};

static const EraseStep subject_steps[] = {
	/* The chains of its commands, and the standalone rows of its contexts. */
	{"evidence", "DELETE FROM cscp.evidence e WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND ("
		" e.command_id OPERATOR(pg_catalog.=) ANY (SELECT c.command_id FROM cscp.command c"
		"                   WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.actor_id OPERATOR(pg_catalog.=) $2)"
		" OR (e.command_id IS NULL AND (e.context_ref OPERATOR(pg_catalog.->>) 'context_id') OPERATOR(pg_catalog.=) ANY"
		"     (SELECT x.context_id::pg_catalog.text FROM cscp.context x"
		"       WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.actor_id OPERATOR(pg_catalog.=) $2)))", NULL},
	{"answers", "DELETE FROM cscp.answer a WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.answered_by OPERATOR(pg_catalog.=) $2", NULL},
	{"commands", "DELETE FROM cscp.command c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.actor_id OPERATOR(pg_catalog.=) $2", NULL},
	{"frames", "DELETE FROM cscp.frame f WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.context_id OPERATOR(pg_catalog.=) ANY"
		" (SELECT x.context_id FROM cscp.context x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.actor_id OPERATOR(pg_catalog.=) $2)", NULL},
	{"contexts", "DELETE FROM cscp.context c WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.actor_id OPERATOR(pg_catalog.=) $2", NULL},
	{"facts", "DELETE FROM cscp.fact f WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2", NULL},
	{"identity", "DELETE FROM cscp.identity i WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.subject_id OPERATOR(pg_catalog.=) $2", NULL},
};

#define MAX_ERASE_STEPS 16

/*
 * The work of forget_conversation and forget_subject: tombstone, then the
 * deletes, then the counts recorded on the tombstone and returned.
 */
static Jsonb *
forget(text *tenant, text *id, const char *kind, const char *argname,
	   const EraseStep *steps, int nsteps, SPIPlanPtr *plans)
{
	static SPIPlanPtr tomb_plan = NULL;
	static SPIPlanPtr count_plan = NULL;
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	static const Oid tomb_types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	static const Oid count_types[3] = {TEXTOID, TEXTOID, JSONBOID};
	char	   *tenant_s;
	char	   *id_s;
	char	   *hash;
	CscpOwnerScope owner;
	StringInfoData counts;
	Datum		args[4];
	Jsonb	   *result;

	/* As the caller: the tenant must be the session's. */
	cscp_check_tenant(tenant);
	cscp_check_id(argname, id);
	tenant_s = text_to_cstring(tenant);
	id_s = text_to_cstring(id);
	hash = cscp_forget_hash(tenant_s, kind, id_s);
	forget_lock(tenant_s, kind, id_s, true);

	cscp_owner_enter("tombstone", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	cscp_spi_plan(&tomb_plan,
				  "INSERT INTO cscp.tombstone (tenant_id, id_hash, kind, forgotten_at)"
				  " VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, id_hash) DO NOTHING",
				  4, tomb_types);
	args[0] = CStringGetTextDatum(tenant_s);
	args[1] = CStringGetTextDatum(hash);
	args[2] = CStringGetTextDatum(kind);
	args[3] = TimestampTzGetDatum(cscp_now());
	if (SPI_execute_plan(tomb_plan, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the tombstone");

	initStringInfo(&counts);
	appendStringInfoChar(&counts, '{');
	args[1] = PointerGetDatum(id);
	for (int i = 0; i < nsteps; i++)
	{
		uint64		erased = 0;

		if (steps[i].since_table == NULL ||
			OidIsValid(get_relname_relid(steps[i].since_table,
										 get_namespace_oid("cscp", false))))
		{
			cscp_spi_plan(&plans[i], steps[i].sql, 2, argtypes);
			if (SPI_execute_plan(plans[i], args, NULL, false, 0) != SPI_OK_DELETE)
				elog(ERROR, "could not erase %s", steps[i].name);
			erased = SPI_processed;
		}
		appendStringInfo(&counts, "%s\"%s\": " UINT64_FORMAT, i > 0 ? ", " : "",
						 steps[i].name, erased);
	}
	appendStringInfoChar(&counts, '}');

	/* The tombstone keeps the totals of every erasure of this id. */
	cscp_spi_plan(&count_plan,
				  "UPDATE cscp.tombstone t"
				  "   SET counts = (SELECT pg_catalog.jsonb_object_agg(c.key, c.value::bigint"
				  "                        OPERATOR(pg_catalog.+) coalesce((t.counts OPERATOR(pg_catalog.->>) c.key)::bigint, 0))"
				  "                   FROM pg_catalog.jsonb_each_text($3) c)"
				  " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.id_hash OPERATOR(pg_catalog.=) $2",
				  3, count_types);
	args[1] = CStringGetTextDatum(hash);
	args[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(counts.data));
	if (SPI_execute_plan(count_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the erasure");
	result = DatumGetJsonbP(SPI_datumTransfer(args[2], false, -1));
	SPI_finish();
	cscp_owner_leave(&owner);
	return result;
}

PG_FUNCTION_INFO_V1(cscp_forget_conversation);

/*
 * cscp.forget_conversation(tenant_id text, conversation_id text) RETURNS
 * jsonb: erase every row of the conversation (and of its session), leave a
 * tombstone; the number of rows erased per table.
 */
Datum
cscp_forget_conversation(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plans[MAX_ERASE_STEPS];

	StaticAssertStmt(lengthof(conversation_steps) <= MAX_ERASE_STEPS, "too many steps");
	PG_RETURN_JSONB_P(forget(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
							 PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1),
							 "conversation", "conversation_id",
							 conversation_steps, lengthof(conversation_steps), plans));
}

PG_FUNCTION_INFO_V1(cscp_forget_subject);

/*
 * cscp.forget_subject(tenant_id text, subject_id text) RETURNS jsonb: erase
 * the subject's identity and facts, and the contexts, commands (with their
 * evidence) and answers it was the actor of; leave a tombstone; the number
 * of rows erased per table.
 */
Datum
cscp_forget_subject(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plans[MAX_ERASE_STEPS];

	StaticAssertStmt(lengthof(subject_steps) <= MAX_ERASE_STEPS, "too many steps");
	PG_RETURN_JSONB_P(forget(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
							 PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1),
							 "subject", "subject_id",
							 subject_steps, lengthof(subject_steps), plans));
}
