/*-------------------------------------------------------------------------
 *
 * turns.c
 *	  The turn of a conversation (OpenWOP RFC 0005): the ConversationTurn
 *	  shape and its checks, its message id, its content's limits, hash and
 *	  schema.  The trigger that records turns is turn_guard.c.
 *
 * A ConversationTurn is the JSON object
 *	  {messageId, from, content, ts, role, turnIndex}
 * with from (a non-empty string), content (any JSON value), ts (a number)
 * and role (user, agent or system) required; messageId (a non-empty
 * string) and turnIndex (a non-negative integer) optional; the optional
 * fields of OpenWOP's schema (to, groupId, speakerId, agent); no other
 * field.  A turn without a messageId gets "conversationId:turnIndex:role".
 *
 * Content is validated against the conversation's schema before the
 * conversation's row is locked (cscp_turn_validate_early), so that a slow
 * validation never holds the lock other turns wait for.
 *
 *-------------------------------------------------------------------------
 */
#include "conversation/conversation.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

static const char *const turn_roles[] = {"user", "agent", "system", NULL};
static const char *const turn_fields[] = {
	"messageId", "from", "content", "ts", "role", "turnIndex",
	"to", "groupId", "speakerId", "agent"
};

/* The role name in turn_roles equal to s (len bytes), or NULL. */
const char *
cscp_turn_role(const char *s, int len)
{
	for (int i = 0; turn_roles[i] != NULL; i++)
		if ((int) strlen(turn_roles[i]) == len && memcmp(turn_roles[i], s, len) == 0)
			return turn_roles[i];
	return NULL;
}

/* Raise 22023: field of the turn argument has the wrong type or value. */
static void
bad_field(const char *argname, const char *field, const char *expected, JsonbValue *v)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("field \"%s\" of %s must be %s", field, argname, expected),
			 v ? errdetail("It is a JSON %s.", cscp_json_type_name(v)) : 0,
			 errhint("A ConversationTurn is {\"messageId\", \"from\", \"content\", \"ts\", \"role\", \"turnIndex\"}; from, content, ts and role are required.")));
}

/*
 * The optional fields of OpenWOP's conversation-turn.schema.json that cscp
 * keeps as they came, in the column "extra": to and groupId (strings of at
 * most 256 bytes), speakerId (a non-empty string of at most 256 bytes) and
 * agent (an object: agentId a non-empty string, agentSharing one of the
 * schema's values, memoryRef a string).
 */
static const char *const optional_fields[] = {"to", "groupId", "speakerId", "agent"};

/* Raise 22023 unless the optional field name (value v) has the schema's shape. */
static void
check_optional_field(const char *argname, const char *name, JsonbValue *v)
{
	if (strcmp(name, "agent") != 0)
	{
		bool		nonempty = strcmp(name, "speakerId") == 0;

		if (v->type != jbvString || (nonempty && v->val.string.len == 0))
			bad_field(argname, name, nonempty ? "a non-empty string" : "a string", v);
		if (v->val.string.len > 256)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("field \"%s\" of %s is too long", name, argname),
					 errdetail("It is %d bytes long; the limit is 256 bytes.", v->val.string.len)));
		return;
	}
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		bad_field(argname, "agent", "an object (agentId, agentSharing, memoryRef)", v);
	{
		Jsonb	   *agent = JsonbValueToJsonb(v);
		JsonbValue *a = cscp_jsonb_get(agent, "agentId");

		if (a != NULL && (a->type != jbvString || a->val.string.len == 0))
			bad_field(argname, "agent.agentId", "a non-empty string", a);
		a = cscp_jsonb_get(agent, "memoryRef");
		if (a != NULL && a->type != jbvString)
			bad_field(argname, "agent.memoryRef", "a string", a);
		a = cscp_jsonb_get(agent, "agentSharing");
		if (a != NULL && (a->type != jbvString ||
						  !((a->val.string.len == 8 && memcmp(a->val.string.val, "isolated", 8) == 0) ||
							(a->val.string.len == 6 && memcmp(a->val.string.val, "shared", 6) == 0) ||
							(a->val.string.len == 15 && memcmp(a->val.string.val, "shared:%shared%", 15) == 0))))
			bad_field(argname, "agent.agentSharing", "one of \"isolated\", \"shared\", \"shared:%shared%\"", a);
	}
}

/*
 * The optional fields of turn, checked, as one object (NULL when it has
 * none).  With only_optional, turn must hold nothing else (the column
 * "extra" written directly).
 */
Jsonb *
cscp_turn_optional_fields(Jsonb *turn, const char *argname, bool only_optional)
{
	JsonbParseState *st = NULL;
	bool		any = false;

	if (only_optional)
	{
		char	   *unknown;

		if (!JB_ROOT_IS_OBJECT(turn) || JB_ROOT_IS_SCALAR(turn))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be a JSON object", argname),
					 errhint("It holds a turn's optional fields: to, groupId, speakerId, agent.")));
		unknown = cscp_jsonb_unknown_key(turn, optional_fields, lengthof(optional_fields));
		if (unknown != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has an unknown field \"%s\"", argname, unknown),
					 errhint("It holds a turn's optional fields: to, groupId, speakerId, agent.")));
	}
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < (int) lengthof(optional_fields); i++)
	{
		JsonbValue *f = cscp_jsonb_get(turn, optional_fields[i]);
		JsonbValue	k;

		if (f == NULL || f->type == jbvNull)
			continue;
		check_optional_field(argname, optional_fields[i], f);
		k.type = jbvString;
		k.val.string.val = (char *) optional_fields[i];
		k.val.string.len = strlen(optional_fields[i]);
		pushJsonbValue(&st, WJB_KEY, &k);
		pushJsonbValue(&st, WJB_VALUE, f);
		any = true;
	}
	if (!any)
		return NULL;
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/*
 * Raise 22023 unless the JSON value j (what names it: "turn content",
 * "schema") is within the size and nesting limits.
 */
void
cscp_check_json_limits(Jsonb *j, const char *what)
{
	if (VARSIZE(j) > CSCP_MAX_TURN_CONTENT_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too large", what),
				 errdetail("It takes %zu bytes; the limit is %d bytes.",
						   (size_t) VARSIZE(j), CSCP_MAX_TURN_CONTENT_BYTES),
				 errhint("Store large payloads elsewhere and put their identifier in the turn.")));
	if (!JB_ROOT_IS_SCALAR(j) && cscp_jsonb_deeper_than(j, CSCP_MAX_TURN_CONTENT_DEPTH))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is nested too deeply", what),
				 errdetail("Arrays and objects may be nested at most %d levels deep.",
						   CSCP_MAX_TURN_CONTENT_DEPTH)));
}

/* Raise 22023 unless turn is a JSON object with no field outside the ConversationTurn. */
static void
check_turn_object(Jsonb *turn, const char *argname)
{
	char	   *unknown;

	if (turn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", argname),
				 errhint("Pass a ConversationTurn such as '{\"from\": \"maria\", \"role\": \"user\", \"content\": \"hi\", \"ts\": 1767225600000}'.")));
	if (!JB_ROOT_IS_OBJECT(turn) || JB_ROOT_IS_SCALAR(turn))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", argname),
				 errdetail("It is a JSON %s.",
						   JB_ROOT_IS_SCALAR(turn) ? "scalar" : "array"),
				 errhint("Pass a ConversationTurn such as '{\"from\": \"maria\", \"role\": \"user\", \"content\": \"hi\", \"ts\": 1767225600000}'.")));

	/* No field outside the ConversationTurn: a typo must not mean "absent". */
	unknown = cscp_jsonb_unknown_key(turn, turn_fields, lengthof(turn_fields));
	if (unknown != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has an unknown field \"%s\"", argname, unknown),
				 errhint("A ConversationTurn has the fields messageId, from, content, ts, role and turnIndex, and optionally to, groupId, speakerId and agent.")));
}

/* The string field f of the turn argname, at most limit bytes; 22023 otherwise. */
static char *
bounded_string(const char *argname, const char *field, JsonbValue *f, int limit)
{
	if (f == NULL || f->type != jbvString || f->val.string.len == 0)
		bad_field(argname, field, "a non-empty string", f);
	if (f->val.string.len > limit)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"%s\" of %s is too long", field, argname),
				 errdetail("It is %d bytes long; the limit is %d bytes.",
						   f->val.string.len, limit)));
	return pnstrdup(f->val.string.val, f->val.string.len);
}

/*
 * Raise 22023 unless ts (what names it) is what OpenWOP's schema allows a
 * turn's ts: an integer (1.0 is one) from 0, here at most 2^53 - 1, so that
 * every JSON reader of the export holds it exactly.
 */
void
cscp_turn_check_ts(Numeric ts, const char *what)
{
	char	   *shown;

	if (numeric_is_nan(ts) ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(ts),
										  DirectFunctionCall1(numeric_floor,
															  NumericGetDatum(ts)))) != 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(ts),
										  NumericGetDatum(int64_to_numeric(0)))) < 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(ts),
										  NumericGetDatum(int64_to_numeric(CSCP_MAX_TURN_TS)))) > 0)
	{
		shown = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(ts)));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be an integer from 0 to " INT64_FORMAT, what, CSCP_MAX_TURN_TS),
				 errdetail("It is %.40s%s.", shown, strlen(shown) > 40 ? "..." : ""),
				 errhint("A turn's ts is milliseconds since 1970 (OpenWOP's conversation-turn schema).")));
	}
}

/*
 * Raise 22023 unless id (len bytes; what names it) is a message id OpenWOP's
 * schema allows: 1 to CSCP_MAX_MESSAGE_ID_CHARS characters.
 */
void
cscp_turn_check_message_id(const char *id, int len, const char *what)
{
	int			chars = len > 0 ? pg_mbstrlen_with_len(id, len) : 0;

	if (chars == 0 || chars > CSCP_MAX_MESSAGE_ID_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be 1 to %d characters long", what, CSCP_MAX_MESSAGE_ID_CHARS),
				 errdetail("It is %d characters long.", chars),
				 errhint("OpenWOP's conversation-turn schema bounds a messageId so; a turn sent without one gets \"conversationId:turnIndex:role\".")));
}

/* The turnIndex f of the turn argname; 22023 unless a non-negative int4 below the maximum. */
static int32
turn_index_field(const char *argname, JsonbValue *f)
{
	Numeric		n;
	bool		have_error = false;
	int32		idx;

	if (f->type != jbvNumeric)
		bad_field(argname, "turnIndex", "a non-negative integer", f);
	n = f->val.numeric;
	if (numeric_is_nan(n) ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
										  DirectFunctionCall1(numeric_floor,
															  NumericGetDatum(n)))) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"turnIndex\" of %s must be an integer", argname),
				 errdetail("It is %s.", cscp_jsonb_value_to_cstring(f))));
	idx = numeric_int4_opt_error(n, &have_error);
	if (have_error || idx < 0 || idx == PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"turnIndex\" of %s is out of range", argname),
				 errdetail("It is %s; a turn index is between 0 and %d.",
						   cscp_jsonb_value_to_cstring(f), PG_INT32_MAX - 1),
				 errhint("Omit turnIndex to append at the conversation's next index.")));
	return idx;
}

/*
 * Parse the ConversationTurn turn (the API argument argname) into out;
 * raise 22023 for anything that is not one.
 */
void
cscp_turn_parse(Jsonb *turn, const char *argname, CscpTurn *out)
{
	JsonbValue *f;

	memset(out, 0, sizeof(CscpTurn));
	check_turn_object(turn, argname);

	out->sender = bounded_string(argname, "from", cscp_jsonb_get(turn, "from"), CSCP_MAX_ID_BYTES);

	f = cscp_jsonb_get(turn, "role");
	if (f == NULL || f->type != jbvString ||
		(out->role = cscp_turn_role(f->val.string.val, f->val.string.len)) == NULL)
		bad_field(argname, "role", "one of \"user\", \"agent\", \"system\"", f);

	f = cscp_jsonb_get(turn, "ts");
	if (f == NULL || f->type != jbvNumeric)
		bad_field(argname, "ts", "an integer (milliseconds since 1970)", f);
	cscp_turn_check_ts(f->val.numeric, psprintf("field \"ts\" of %s", argname));
	out->ts = NumericGetDatum(f->val.numeric);

	f = cscp_jsonb_get(turn, "content");
	if (f == NULL)
		bad_field(argname, "content", "present (any JSON value, null included)", NULL);
	out->content = cscp_jsonb_value_to_jsonb(f);

	f = cscp_jsonb_get(turn, "turnIndex");
	if (f != NULL && f->type != jbvNull)
	{
		out->has_index = true;
		out->turn_index = turn_index_field(argname, f);
	}

	f = cscp_jsonb_get(turn, "messageId");
	if (f != NULL && f->type != jbvNull)
	{
		if (f->type != jbvString)
			bad_field(argname, "messageId", "a non-empty string", f);
		cscp_turn_check_message_id(f->val.string.val, f->val.string.len,
								   psprintf("field \"messageId\" of %s", argname));
		out->message_id = pnstrdup(f->val.string.val, f->val.string.len);
	}

	out->extra = cscp_turn_optional_fields(turn, argname, false);
	cscp_check_json_limits(out->content, "turn content");
}

/*
 * Raise 22023 unless content obeys schema, the schema of conversation
 * convid.  Called before the conversation is locked (cscp_turn_validate_early)
 * and by the trigger under the lock, where the answer is remembered.
 */
void
cscp_turn_check_schema(const char *convid, Jsonb *schema, Jsonb *content)
{
	char	   *violation = cscp_jsonschema_validate_checked(schema, content);

	if (violation != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("turn content does not match the schema of conversation \"%s\"", convid),
				 errdetail("%s.", violation),
				 errhint("Send content the schema given at cscp.conversation_start accepts.")));
}

/* "sha256:<hex>" of the canonical JSON of content; *size its length in bytes. */
char *
cscp_turn_content_hash(Jsonb *content, int32 *size)
{
	StringInfoData buf;
	char	   *hash;

	initStringInfo(&buf);
	cscp_canonical_append(&buf, content);
	*size = buf.len;
	hash = cscp_sha256_hex(buf.data, buf.len);
	pfree(buf.data);
	return hash;
}

/* The message id assigned to turn turn_index of role when it comes without one. */
char *
cscp_turn_message_id(const char *conversation_id, int32 turn_index, const char *role)
{
	char	   *id = psprintf("%s:%d:%s", conversation_id, turn_index, role);

	cscp_turn_check_message_id(id, strlen(id), "the message id made for a turn sent without one");
	return id;
}

/*
 * The conversations this backend has read, under their row lock, without
 * a schema: their turns need no read before the lock (a read costs about
 * 1% of a message turn).  A conversation's schema never changes while it
 * exists; only one deleted (forgotten, or purged after retention) and
 * started again under the same id with a schema makes an entry wrong, and
 * then for one turn only: that turn is validated under the lock, by the
 * trigger, as every turn was before validation moved ahead of the lock,
 * and the locked read drops the entry.  Never consulted for anything but
 * skipping that read.
 */
#define SCHEMALESS_KEY_BYTES (2 * CSCP_MAX_ID_BYTES + 2)
#define SCHEMALESS_MAX_ENTRIES 4096

typedef struct SchemalessEntry
{
	char		key[SCHEMALESS_KEY_BYTES];	/* tenant_id, a 0x1f byte, conversation_id */
} SchemalessEntry;

static HTAB *schemaless = NULL;

/* The key of a conversation in schemaless, into key; false when the ids are too long. */
static bool
schemaless_key(const char *tenant_id, const char *conversation_id, char *key)
{
	size_t		t = strlen(tenant_id),
				c = strlen(conversation_id);

	if (t + c + 2 > SCHEMALESS_KEY_BYTES)
		return false;
	memset(key, 0, SCHEMALESS_KEY_BYTES);
	memcpy(key, tenant_id, t);
	key[t] = '\x1f';
	memcpy(key + t + 1, conversation_id, c);
	return true;
}

/* Note what the locked read conv says about its schema (for cscp_turn_validate_early). */
void
cscp_turn_note_schema(const CscpConversation *conv)
{
	char		key[SCHEMALESS_KEY_BYTES];

	if (!schemaless_key(conv->tenant_id, conv->conversation_id, key))
		return;
	if (conv->schema != NULL)
	{
		if (schemaless != NULL)
			(void) hash_search(schemaless, key, HASH_REMOVE, NULL);
		return;
	}
	if (schemaless == NULL || hash_get_num_entries(schemaless) >= SCHEMALESS_MAX_ENTRIES)
	{
		HASHCTL		ctl;

		if (schemaless != NULL)
			hash_destroy(schemaless);
		ctl.keysize = SCHEMALESS_KEY_BYTES;
		ctl.entrysize = sizeof(SchemalessEntry);
		ctl.hcxt = TopMemoryContext;
		schemaless = hash_create("cscp conversations without a schema", 64, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	(void) hash_search(schemaless, key, HASH_ENTER, NULL);
}

/* Whether a locked read has shown the conversation without a schema. */
static bool
schemaless_known(const char *tenant_id, const char *conversation_id)
{
	char		key[SCHEMALESS_KEY_BYTES];

	return schemaless != NULL && schemaless_key(tenant_id, conversation_id, key) &&
		hash_search(schemaless, key, HASH_FIND, NULL) != NULL;
}

/*
 * Raise 22023 unless content obeys the schema of the open conversation
 * (cscp_turn_check_schema), before its row is locked: a slow validation
 * never holds the conversation's lock, and content the schema refuses is
 * refused without waiting for it.  A conversation's schema never changes
 * once it is started, so the one read here without a lock is the one the
 * turn trigger checks again under the lock, where jsonschema.c's memo of
 * its last validation gives the answer without the work.  Nothing to do
 * when the conversation is absent, closed, past its deadline or without a
 * schema: the locked path answers those.
 */
void
cscp_turn_validate_early(const char *tenant_id, const char *conversation_id, Jsonb *content,
						 TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[3];
	bool		isnull;
	Datum		d;

	if (schemaless_known(tenant_id, conversation_id))
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT c.schema FROM cscp.conversation c"
				  " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.conversation_id OPERATOR(pg_catalog.=) $2"
				  "   AND c.state OPERATOR(pg_catalog.=) 'open' AND (c.deadline IS NULL OR c.deadline OPERATOR(pg_catalog.>) $3)",
				  3, argtypes);
	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = CStringGetTextDatum(conversation_id);
	args[2] = TimestampTzGetDatum(now);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the schema of conversation \"%s\"", conversation_id);
	if (SPI_processed == 1)
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			cscp_turn_check_schema(conversation_id, DatumGetJsonbP(d), content);
	}
	SPI_finish();
}
