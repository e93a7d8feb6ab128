/*-------------------------------------------------------------------------
 *
 * answer.c
 *	  What every answer (cscp.confirm's yes or no, cscp.approve's decision)
 *	  shares: the lock that serialises the deliveries of one message, the
 *	  record kept in cscp.answer and replayed when the message comes again,
 *	  and the evidence of an answer that moved nothing.
 *
 * cscp.answer is written here only, as the owner: application roles read
 * it; the command trigger confirms a command only with its yes recorded
 * (command_fsm.c), so the record is written before the command moves.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "command/command.h"
#include "context/context.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

/*
 * The text of field key of a pending slot (a jsonb object value), as ->>
 * gives it: a string's characters, another value's JSON text, or NULL.
 */
char *
cscp_slot_text(JsonbValue *slot, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(slot->val.binary.data, key, strlen(key), NULL);

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	return cscp_jsonb_value_to_cstring(v);
}

/*
 * The pending question slot (pending_confirmation, pending_approval) of a
 * context row, when it holds an object; NULL otherwise.
 */
JsonbValue *
cscp_answer_slot(HeapTuple ctx, TupleDesc ctxdesc, const char *slot)
{
	bool		isnull;
	Datum		slots = cscp_column_value(ctx, ctxdesc, "cscp.context", "slots", &isnull);
	JsonbValue *v = isnull ? NULL : cscp_jsonb_get(DatumGetJsonbP(slots), slot);

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		return NULL;
	return v;
}

/*
 * Raise 22023 unless the arguments every answer function starts with are
 * well formed: tenant_id, conversation_id, the answerer's id (named
 * answerer), message_id and the boolean decision (named decision).
 */
void
cscp_answer_check_args(FunctionCallInfo fcinfo, const char *answerer, const char *decision)
{
	cscp_check_tenant(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	cscp_check_id("conversation_id", PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	cscp_check_id(answerer, PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2));
	cscp_check_id("message_id", PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3));
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", decision),
				 errhint("Pass true for yes, false for no.")));
}

/*
 * Serialise the answers of kind to message message_id of a conversation:
 * concurrent deliveries of one message wait here, then replay.
 */
void
cscp_answer_lock(text *tenant, const char *kind, text *conversation, text *message_id)
{
	StringInfoData key;

	initStringInfo(&key);
	appendStringInfoString(&key, kind);
	appendStringInfoChar(&key, '\001');
	appendBinaryStringInfo(&key, VARDATA_ANY(conversation), VARSIZE_ANY_EXHDR(conversation));
	appendStringInfoChar(&key, '\001');
	appendBinaryStringInfo(&key, VARDATA_ANY(message_id), VARSIZE_ANY_EXHDR(message_id));
	cscp_key_lock(tenant, key.data, key.len);
}

/* Put answer a's row (outcome, command_id, context_id) in rsinfo's result. */
void
cscp_answer_put(ReturnSetInfo *rsinfo, const CscpAnswer *a)
{
	Datum		values[3];
	bool		nulls[3];

	values[0] = CStringGetTextDatum(a->outcome);
	nulls[0] = false;
	values[1] = a->command_id;
	nulls[1] = !a->has_command;
	values[2] = a->context_id;
	nulls[2] = !a->has_context;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The answer of kind already recorded for the message: true with its row
 * (outcome, command_id, context_id) put in rsinfo's result; false when
 * there is none.  Found by the table's primary key
 * (cscp_spi_execute_keyed).  The caller is connected to SPI.
 */
static bool
answer_replay(text *tenant, text *conversation, const char *kind, text *message_id,
				   ReturnSetInfo *rsinfo)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4] = {PointerGetDatum(tenant), PointerGetDatum(conversation),
	CStringGetTextDatum(kind), PointerGetDatum(message_id)};
	Datum		values[3];
	bool		nulls[3];

	cscp_spi_plan(&plan,
				  "SELECT a.outcome, a.command_id, a.context_id FROM cscp.answer a"
				  " WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.conversation_id OPERATOR(pg_catalog.=) $2 AND a.kind OPERATOR(pg_catalog.=) $3"
				  "   AND a.message_id OPERATOR(pg_catalog.=) $4",
				  4, types);
	if (cscp_spi_execute_keyed(plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the answer of a message");
	if (SPI_processed != 1)
		return false;
	for (int i = 0; i < 3; i++)
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &nulls[i]);
	/* the tuplestore keeps its own copy, in its own memory */
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return true;
}

/*
 * Whether cscp.answer has rules (a DBA's ON INSERT rule): an INSERT with
 * ON CONFLICT is then refused by PostgreSQL (0A000), and cscp_answer_keep
 * looks for the answer first instead.
 */
static bool
answer_has_rules(void)
{
	Oid			relid = cscp_relation_oid("answer", false);
	HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		rules;

	if (!HeapTupleIsValid(tp))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	rules = ((Form_pg_class) GETSTRUCT(tp))->relhasrules;
	ReleaseSysCache(tp);
	return rules;
}

/*
 * Keep answer a, replayed for its message from now on, by an INSERT as
 * the owner; true when kept.  A message that has an answer already
 * (committed before, or while we waited for its lock) is a replay: false,
 * with the answer recorded first put in rsinfo's result, and the caller
 * writes nothing more.  The INSERT finds that answer itself (ON CONFLICT
 * DO NOTHING), so that a first answer reads the answers no more; only
 * while cscp.answer has rules, which such an INSERT cannot have, is the
 * answer looked for first.  The caller holds the message's lock
 * (cscp_answer_lock) and is connected to SPI.
 */
bool
cscp_answer_keep(const CscpAnswer *a, ReturnSetInfo *rsinfo)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	static const char *const sql[2] = {
		"INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id,"
		"                         answered_by, outcome, command_id, context_id, created_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
		" ON CONFLICT (tenant_id, conversation_id, kind, message_id) DO NOTHING",
		"INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id,"
		"                         answered_by, outcome, command_id, context_id, created_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
	};
	static const Oid types[9] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	UUIDOID, UUIDOID, TIMESTAMPTZOID};
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	CscpOwnerScope owner;
	bool		rules = answer_has_rules();
	bool		kept;

	if (rules && answer_replay(a->tenant_id, a->conversation_id, a->kind, a->message_id, rsinfo))
		return false;
	args[0] = PointerGetDatum(a->tenant_id);
	args[1] = PointerGetDatum(a->conversation_id);
	args[2] = CStringGetTextDatum(a->kind);
	args[3] = PointerGetDatum(a->message_id);
	args[4] = PointerGetDatum(a->answered_by);
	args[5] = CStringGetTextDatum(a->outcome);
	args[6] = a->command_id;
	nulls[6] = a->has_command ? ' ' : 'n';
	args[7] = a->context_id;
	nulls[7] = a->has_context ? ' ' : 'n';
	args[8] = TimestampTzGetDatum(cscp_now());
	cscp_owner_enter("answer", &owner);
	cscp_spi_plan(&plans[rules], sql[rules], 9, types);
	cscp_spi_run(plans[rules], args, nulls, SPI_OK_INSERT);
	kept = SPI_processed == 1;
	cscp_owner_leave(&owner);
	if (kept)
		return true;
	/* no row written and none to replay: a trigger, rule or policy suppressed it */
	if (rules || !answer_replay(a->tenant_id, a->conversation_id, a->kind, a->message_id, rsinfo))
		cscp_write_skipped("keep the answer of a message");
	return false;
}

/*
 * Answer a moves the command it is about (cmd, locked) to to_state with
 * reason why and detail (or NULL), the answer's message id appended to the
 * command's, and releases the context's slot naming it.  The command is
 * updated by its UPDATE statement, with the caller's rights, so that
 * row-level security, privileges, rules and every trigger apply as to any
 * UPDATE.
 */
void
cscp_answer_move(const CscpAnswer *a, HeapTuple ctx, TupleDesc ctxdesc, HeapTuple cmd,
				 TupleDesc cmddesc, CommandState to_state, const char *why, Jsonb *detail)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID};
	bool		isnull;
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = cscp_column_value(cmd, cmddesc, "cscp.command", "tenant_id", &isnull);
	args[1] = cscp_column_value(cmd, cmddesc, "cscp.command", "command_id", &isnull);
	args[2] = CStringGetTextDatum(cscp_command_state_names[to_state]);
	args[3] = CStringGetTextDatum(why);
	args[4] = detail != NULL ? JsonbPGetDatum(detail) : (Datum) 0;
	nulls[4] = detail != NULL ? ' ' : 'n';
	args[5] = PointerGetDatum(a->message_id);
	cscp_spi_plan(&plan,
				  "UPDATE cscp.command x"
				  "   SET state = $3::cscp.command_state, reason_code = $4, detail = $5,"
				  "       message_ids = x.message_ids OPERATOR(pg_catalog.||) $6"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2",
				  6, types);
	cscp_spi_write_one(plan, args, nulls, SPI_OK_UPDATE,
					   psprintf("move command %s to %s",
								DatumGetCString(DirectFunctionCall1(uuid_out, args[1])),
								cscp_command_state_names[to_state]));
	/* A yes or no is the actor's message: the context's last (its trace). */
	cscp_context_release(ctx, ctxdesc, args[1],
						 strcmp(a->kind, "confirm") == 0 ? a->message_id : NULL, why);
}

/*
 * The evidence of answer a that moved nothing: an invalid_transition_attempt
 * toward to_state with the outcome as its reason, the answer's message id,
 * detail, and the context it was judged against as every evidence row names
 * one, {context_id, frame_id, context_hash, expires_at}: frame_id null (a
 * refused answer forms no frame), context_hash the hash a frame of the
 * context (ctx, the row as locked) and the message would have; every key
 * null when the answer found no context.
 */
void
cscp_answer_refusal(const CscpAnswer *a, const char *to_state, HeapTuple ctx, TupleDesc ctxdesc,
					Jsonb *detail)
{
	CscpEvidence e = {0};
	Datum		m = PointerGetDatum(a->message_id);

	e.tenant_id = text_to_cstring(a->tenant_id);
	e.conversation_id = text_to_cstring(a->conversation_id);
	e.to_state = to_state;
	e.reason_code = a->outcome;
	e.message_ids = construct_array(&m, 1, TEXTOID, -1, false, TYPALIGN_INT);
	e.detail = detail;
	{
		JsonbParseState *st = NULL;
		bool		isnull = true;
		Datum		expires = (Datum) 0;
		char	   *hash = NULL;
		bool		found = a->has_context && ctx != NULL;

		if (found)
		{
			StringInfoData buf;

			expires = cscp_column_value(ctx, ctxdesc, "cscp.context", "expires_at", &isnull);
			initStringInfo(&buf);
			cscp_canonical_append(&buf, cscp_frame_state(ctx, ctxdesc, e.message_ids));
			hash = cscp_sha256_hex(buf.data, buf.len);
		}
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		cscp_jsonb_push_text(&st, "context_id", found ?
							 DatumGetCString(DirectFunctionCall1(uuid_out, a->context_id)) : NULL);
		cscp_jsonb_push_text(&st, "frame_id", NULL);
		cscp_jsonb_push_text(&st, "context_hash", hash);
		cscp_jsonb_push_text(&st, "expires_at",
							 isnull ? NULL : cscp_utc_iso(DatumGetTimestampTz(expires)));
		e.context_ref = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
	}
	cscp_evidence_refuse(&e, a->command_id, a->has_command);
}

/*
 * The command a context row (with tenant_id and last_command_id) names
 * last, as the caller sees it, or NULL: what an answer names when the
 * context's last question lapsed.  *cmddesc gets its descriptor.
 */
HeapTuple
cscp_answer_last_command(HeapTuple ctx, TupleDesc ctxdesc, TupleDesc *cmddesc)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, UUIDOID};
	bool		isnull;
	Datum		args[2];

	if (ctx == NULL)
		return NULL;
	args[0] = cscp_column_value(ctx, ctxdesc, "cscp.context", "tenant_id", &isnull);
	args[1] = cscp_column_value(ctx, ctxdesc, "cscp.context", "last_command_id", &isnull);
	if (isnull)
		return NULL;
	cscp_spi_plan(&plan, "SELECT * FROM cscp.command x WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2",
				  2, types);
	return cscp_spi_row(plan, args, NULL, SPI_OK_SELECT, cmddesc);
}
