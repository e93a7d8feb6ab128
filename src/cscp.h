/*-------------------------------------------------------------------------
 *
 * cscp.h
 *	  What every concept of cscp shares: settings, the clock, argument
 *	  checks, tenancy, JSON helpers, the canonical form and hashes,
 *	  evidence, the row triggers' machinery, policy and lifetimes, keys and
 *	  routing, erasure, code run as the owner.
 *
 * Each concept has its own header for what its files export to others:
 * context.h (contexts and slots), command.h (commands, frames, answers),
 * conversation.h (conversations and turns).  A C file includes cscp.h and
 * the headers of the concepts it calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_H
#define CSCP_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "access/htup.h"
#include "nodes/bitmapset.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/rel.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"
#include "executor/spi.h"
#include "storage/lock.h"

/* Longest id (tenant, conversation, actor, session, ...) we accept, in bytes. */
#define CSCP_MAX_ID_BYTES 256

/* cscp.c: settings */
extern char *cscp_clock_setting;
extern char *cscp_tenant_setting;
extern char *cscp_authority_setting;
extern bool cscp_notify_setting;
extern int	cscp_sweep_interval;
extern int	cscp_sweep_batch;
extern int	cscp_sweep_backlog_delay;
extern char *cscp_sweep_database;

/* worker.c: the optional sweep worker */
extern void cscp_worker_register(void);

/* Channel of cscp.notify's notifications. */
#define CSCP_NOTIFY_CHANNEL "cscp_events"

extern void cscp_notify_transition(const char *tenant, const char *kind,
								   const char *id, const char *from,
								   const char *to);

/* enums.c: C state machine index <-> SQL enum label */
#define CSCP_MAX_ENUM_LABELS 16
typedef struct CscpEnumCache
{
	int			n;
	const char *const *names;
	Oid			typoid;
	Oid			oids[CSCP_MAX_ENUM_LABELS];
} CscpEnumCache;

extern int	cscp_enum_index(CscpEnumCache *cache, Oid typoid, Datum value);
extern Datum cscp_enum_datum(CscpEnumCache *cache, Oid typoid, int index);
extern bool cscp_status_live(const char *status);
extern bool cscp_context_usable(const char *status, bool expires_null, TimestampTz expires_at,
								TimestampTz now);
extern bool cscp_context_row_usable(HeapTuple ctx, TupleDesc desc, TimestampTz now);

/*
 * rowguard.c: shared by the BEFORE ROW triggers.
 *
 * A guard's column rules are what CHECK constraints would say.  They are
 * checked in C on every row the guard passes, because PostgreSQL reads and
 * plans a table's CHECK expressions afresh in every INSERT or UPDATE
 * statement, which cost the command cycle a fifth of its instructions.
 * A NULL passes every rule (NOT NULL is the column's own).
 */
typedef enum CscpRowRule
{
	CSCP_RULE_NOT_EMPTY,		/* text: not '' */
	CSCP_RULE_TENANT,			/* text: not '' and not '*' (the defaults) */
	CSCP_RULE_POSITIVE,			/* int4, int8 or interval: > 0 */
	CSCP_RULE_NOT_NEGATIVE,		/* int4 or int8: >= 0 */
	CSCP_RULE_JSON_OBJECT,		/* jsonb: an object */
	CSCP_RULE_ONE_OF,			/* text: one of values */
	CSCP_RULE_NULL_WITH			/* NULL exactly when column other is NULL */
} CscpRowRule;

#define CSCP_MAX_ROW_RULES 16

typedef struct CscpRowRules
{
	const char *table;
	int			n;
	struct
	{
		const char *column;
		CscpRowRule rule;
		const char *const *values;	/* ONE_OF: NULL-terminated */
		const char *other;		/* NULL_WITH */
	}			rule[CSCP_MAX_ROW_RULES];
	/* column numbers, looked up once per relation */
	Oid			relid;
	int			attnum[CSCP_MAX_ROW_RULES];
	int			other_attnum[CSCP_MAX_ROW_RULES];
} CscpRowRules;

#define CSCP_MAX_COLUMNS 24

/*
 * Column numbers of a table, looked up by name once per relation (so that
 * ALTER TABLE moving a column is followed): attnum[i] is names[i].
 */
typedef struct CscpColumns
{
	const char *table;
	int			n;
	const char *const *names;
	Oid			relid;
	int			attnum[CSCP_MAX_COLUMNS];
} CscpColumns;

extern void cscp_columns_load(CscpColumns *cols, Relation rel);

extern TriggerData *cscp_row_trigger(FunctionCallInfo fcinfo, const char *name);

typedef struct CscpRowGuard
{
	const char *name;
	CscpRowRules *rules;		/* checked on the row the guard returns */
	CscpColumns *columns;		/* looked up before each row, when given */
	void		(*load_columns) (Relation rel);	/* else this, when given */
	HeapTuple	(*insert) (Relation rel, HeapTuple tuple, TimestampTz now);
	HeapTuple	(*update) (Relation rel, HeapTuple oldtup, HeapTuple newtup,
							   const Bitmapset *updatedcols, TimestampTz now);
} CscpRowGuard;

/* Column values a guard sets in a row: heap_modify_tuple's three arrays. */
typedef struct CscpRowEdit
{
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	bool	   *repl;
} CscpRowEdit;

extern void cscp_row_edit_init(CscpRowEdit *edit, TupleDesc desc);
extern void cscp_row_edit_set(CscpRowEdit *edit, int attnum, Datum value, bool isnull);
extern HeapTuple cscp_row_edit_apply(CscpRowEdit *edit, HeapTuple tuple);

extern int	cscp_column(TupleDesc desc, const char *table, const char *name);
extern Datum cscp_column_value(HeapTuple row, TupleDesc desc, const char *table,
							   const char *name, bool *isnull);
extern bool cscp_same_value(HeapTuple a, HeapTuple b, TupleDesc desc, int attnum);
extern bool cscp_column_true(HeapTuple tuple, TupleDesc desc, int attnum);
extern int	cscp_first_changed(Relation rel, CscpColumns *cols, HeapTuple a, HeapTuple b);
extern Datum cscp_row_guard(FunctionCallInfo fcinfo, const CscpRowGuard *guard);
extern bool cscp_column_updated(const Bitmapset *updatedcols, int attnum);
extern void cscp_row_check(Relation rel, HeapTuple tuple, CscpRowRules *rules);

/* clock.c */
extern TimestampTz cscp_now(void);
extern TimestampTz cscp_now_exact(void);
extern bool cscp_parse_timestamptz(const char *str, TimestampTz *result);

/* args.c */
extern void cscp_check_id(const char *argname, text *value);
extern void cscp_check_tenant(text *tenant_id);
extern HeapTupleHeader cscp_record_arg(FunctionCallInfo fcinfo, int argno, const char *argname);
extern void cscp_record_require(HeapTupleHeader rec, const char *argname,
								const char *const *fields);
extern TupleDesc cscp_record_tuple(HeapTupleHeader rec, HeapTupleData *tuple);
extern bool cscp_is_uuid_text(const char *str);	/* slots.c */

/* tenancy.c: which tenants the current role may use (cscp.tenant_binding) */
typedef enum CscpRoleKind
{
	CSCP_ROLE_APP,				/* cscp.grant_app */
	CSCP_ROLE_OPERATOR			/* cscp.grant_operator */
} CscpRoleKind;

#define CSCP_ROLE_KINDS 2

extern void cscp_tenancy_register(void);
extern bool cscp_tenancy_allows(const char *tenant, int len, CscpRoleKind kind);
extern ArrayType *cscp_tenancy_tenants(CscpRoleKind kind);
extern void cscp_tenancy_refuse(const char *tenant, CscpRoleKind kind);
extern const char *cscp_session_tenant(CscpRoleKind kind);
extern Datum cscp_lookup_tenant(bool *isnull);
extern void cscp_tenancy_check_trigger(FunctionCallInfo fcinfo);

/* jsonutil.c */
extern JsonbValue *cscp_jsonb_get(Jsonb *obj, const char *key);
extern char *cscp_jsonb_get_cstring(Jsonb *obj, const char *key);
extern bool cscp_jsonb_values_equal(JsonbValue *a, JsonbValue *b);
extern char *cscp_jsonb_value_to_cstring(JsonbValue *v);
extern Jsonb *cscp_jsonb_value_to_jsonb(JsonbValue *v);
extern char *cscp_jsonb_key_cstring(JsonbValue *key);
extern char *cscp_jsonb_unknown_key(Jsonb *obj, const char *const *names, int n);
extern const char *cscp_json_type_name(JsonbValue *v);
extern bool cscp_jsonb_deeper_than(Jsonb *j, int limit);
extern void cscp_jsonb_push_text(JsonbParseState **st, const char *key, const char *value);
extern void cscp_jsonb_push_int(JsonbParseState **st, const char *key, int64 value);
extern void cscp_jsonb_push_bool(JsonbParseState **st, const char *key, bool value, bool isnull);

/* canonical.c */
extern void cscp_canonical_string(StringInfo out, const char *s, int len);
extern void cscp_canonical_append(StringInfo out, Jsonb *j);
extern char *cscp_sha256_hex(const char *data, size_t len);
extern char *cscp_utc_iso(TimestampTz ts);

/* evidence.c: one row of cscp.evidence */
typedef struct CscpEvidence
{
	const char *tenant_id;
	const char *conversation_id;
	const char *command_id;		/* uuid text, or NULL */
	int32		seq;			/* set by cscp_evidence_append(_chain) */
	const char *stage;
	const char *event_type;
	const char *from_state;
	const char *to_state;
	ArrayType  *message_ids;
	Jsonb	   *context_ref;
	const char *decision;
	const char *reason_code;
	Jsonb	   *detail;
	TimestampTz created_at;
	char	   *prev_hash;		/* set by cscp_evidence_append(_chain) */
	char	   *hash;			/* set by cscp_evidence_append(_chain) */
} CscpEvidence;

extern char *cscp_evidence_hash(const CscpEvidence *e);
extern void cscp_log_refused_step(const char *kind, const char *tenant, const char *id,
								  const char *from, const char *to, const char *why);
extern void cscp_evidence_append(CscpEvidence *e);
extern void cscp_evidence_append_chain(CscpEvidence *events, int n, bool hint,
									   int32 hint_seq, const char *hint_hash);
extern void cscp_evidence_refuse(CscpEvidence *e, Datum command_id, bool has_command);

/* owner.c: a section of C code run as the owner of cscp's tables */
typedef struct CscpOwnerScope
{
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;
} CscpOwnerScope;

extern void cscp_owner_enter(const char *relname, CscpOwnerScope *scope);
extern void cscp_owner_leave(CscpOwnerScope *scope);
extern bool cscp_owner_writing(Relation rel);
extern uint64 cscp_owner_exec(const char *relname, SPIPlanPtr *plan, const char *sql,
							  int nargs, const Oid *argtypes, Datum *args, const char *nulls,
							  int expect, const char *what);
extern uint64 cscp_owner_exec_latest(const char *relname, SPIPlanPtr *plan, const char *sql,
									 int nargs, const Oid *argtypes, Datum *args,
									 const char *nulls, int expect, const char *what);

/* forget.c: erasure and its tombstones */
extern bool cscp_forgotten(const char *tenant_id, const char *kind, const char *id);
extern char *cscp_forget_hash(const char *tenant_id, const char *kind, const char *id);
extern void cscp_refuse_forgotten(const char *tenant_id, const char *kind, const char *id);

/* spiplan.c */
extern Oid	cscp_relation_oid(const char *relname, bool missing_ok);

/*
 * What a backend read from one of cscp's tables, kept until a relcache
 * invalidation names the table (or all relations).  Static storage only:
 * the callback that drops it is never unregistered.
 */
typedef struct CscpTableCache
{
	Oid			relid;			/* the table read */
	uint64		generation;		/* bumped by each invalidation of it */
	bool		valid;			/* the content read is current */
	bool		registered;		/* the callback is in place */
} CscpTableCache;

extern uint64 cscp_table_cache_begin(CscpTableCache *cache, Oid relid);
extern void cscp_table_cache_done(CscpTableCache *cache, uint64 generation);
extern SPIPlanPtr cscp_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs,
								const Oid *argtypes);
extern void cscp_spi_run(SPIPlanPtr plan, Datum *args, const char *nulls, int expected);
extern HeapTuple cscp_spi_row(SPIPlanPtr plan, Datum *args, const char *nulls, int expected,
							  TupleDesc *desc);
extern bool cscp_spi_exists(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes,
							Datum *args, bool read_only, const char *what);
extern int	cscp_spi_execute_keyed(SPIPlanPtr plan, Datum *args, const char *nulls, bool read_only,
								   long count);
extern HeapTuple cscp_spi_update_one(SPIPlanPtr plan, Datum *args, const char *nulls,
									 TupleDesc *desc, const char *what);
extern void cscp_write_skipped(const char *what);
extern void cscp_spi_write_one(SPIPlanPtr plan, Datum *args, const char *nulls, int expected,
							   const char *what);

/* jsonschema.c */
extern void cscp_jsonschema_check(Jsonb *schema);
extern char *cscp_jsonschema_validate(Jsonb *schema, Jsonb *instance);
extern char *cscp_jsonschema_validate_checked(Jsonb *schema, Jsonb *instance);
extern void cscp_jsonschema_keywords(StringInfo out);

/* policy.c */
extern Jsonb *cscp_policy_get(const char *tenant_id);
extern bool cscp_parse_interval(const char *str, Interval *result);
extern int64 cscp_policy_int(Jsonb *policy, const char *key, int64 fallback);
extern bool cscp_policy_lists(Jsonb *policy, const char *key, const char *name);
#define CSCP_MAX_LIFETIME_YEARS 10		/* max_ttl and the lifetimes */
#define CSCP_MAX_RETENTION_YEARS 100	/* retention_* */
extern bool cscp_policy_interval_ok(const Interval *iv, bool retention);

/* lifetime.c: every expiry cscp computes or stores (it reads policy.c; policy.c reads none of it) */
typedef enum CscpExpiryStatus
{
	CSCP_EXPIRY_OK,
	CSCP_EXPIRY_NOT_POSITIVE,	/* start + ttl is not later than start */
	CSCP_EXPIRY_TOO_LONG		/* beyond start + max_ttl */
} CscpExpiryStatus;
extern CscpExpiryStatus cscp_expiry_status(Jsonb *policy, TimestampTz start, const Interval *ttl,
										   TimestampTz *expiry, char **max_text);
extern TimestampTz cscp_expiry(Jsonb *policy, TimestampTz start, const Interval *ttl,
							   const char *policy_key, const char *argname);
extern TimestampTz cscp_expiry_limit(Jsonb *policy, TimestampTz now);
extern void cscp_check_stored_expiry(const char *tenant, const char *table, const char *column,
									 TimestampTz expires_at, TimestampTz now);
extern void cscp_check_not_expired(const char *table, HeapTuple oldtup, TupleDesc desc,
								  int expires_col, TimestampTz now);
/* The columns cscp_check_expiring_row reads in a row of table (tenant_id, expires_at). */
#define CSCP_EXPIRING_COLUMNS(tbl) \
	{.table = (tbl), .n = 2, .names = cscp_expiring_column_names}
extern const char *const cscp_expiring_column_names[2];
extern void cscp_check_expiring_row(CscpColumns *cols, Relation rel, HeapTuple oldtup,
									HeapTuple newtup, TimestampTz now);
extern Interval *cscp_lifetime(Jsonb *policy, Interval *requested, const char *policy_key,
							   const char *argname);
extern TimestampTz cscp_window_end(const char *tenant, const char *policy_key);

/* evidence.c: ids of evidence and inspection rows */
extern int64 cscp_row_id(void);

/* keys.c: the database's secret key and the keyed hashes made with it */
#define CSCP_KEY_MIN_BYTES 32
#define CSCP_KEY_MAX_BYTES 64
#define CSCP_NOTIFY_TAG_BYTES 16
extern void cscp_sha256(const void *data, size_t len, uint8 *digest);
extern void cscp_keyed_hash(char use, const char *part1, int len1, const char *part2, int len2,
							uint8 *digest);
extern int32 cscp_keyed_hash32(char use, const char *part1, int len1, const char *part2,
							   int len2);
extern char *cscp_notify_tag_of(const char *tenant);
extern LockAcquireResult cscp_hash_lock(uint16 class, const char *data, size_t len, LOCKMODE mode);

/* routing.c */
extern int32 cscp_routing_hash_text(text *conversation_id);
extern int32 cscp_routing_hash_key(text *tenant_id, text *key);
extern void cscp_routing_uuid(int32 hash, pg_uuid_t *uuid);
extern int32 cscp_routing_hash_uuid(const pg_uuid_t *uuid);
extern void cscp_routing_id_fill(HeapTuple tuple, TupleDesc desc, int conv_att, int id_att,
								 const char *kind, const char *hint, CscpRowEdit *edit);

#endif							/* CSCP_H */
