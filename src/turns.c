/*-------------------------------------------------------------------------
 *
 * turns.c
 *	  Turns of a conversation (OpenWOP RFC 0005): the ConversationTurn shape,
 *	  and the BEFORE INSERT OR UPDATE trigger that holds every row of
 *	  cscp.turn to the rules, whether it comes from cscp's functions or
 *	  from direct SQL.
 *
 * A ConversationTurn is the JSON object
 *	  {messageId, from, content, ts, role, turnIndex}
 * with from (a non-empty string), content (any JSON value), ts (a number)
 * and role (user, agent or system) required; messageId (a non-empty
 * string) and turnIndex (a non-negative integer) optional; no other field.
 *
 * Invariants kept by the trigger, under the conversation's row lock (taken
 * here with SELECT ... FOR UPDATE, so concurrent appends to one
 * conversation queue and each sees the last one's index):
 *	- the conversation exists, is open and is not past its deadline (only
 *	  the timeout's own system turn is recorded after it);
 *	- turn_index is the conversation's next_turn_index (assigned when
 *	  NULL): 0, 1, 2, ... without a gap or a duplicate, found in O(1) from
 *	  the conversation row, never by reading earlier turns;
 *	- message_id is assigned "conversationId:turnIndex:role" when NULL; the
 *	  unique index (tenant_id, conversation_id, message_id) refuses a second
 *	  turn with one message id;
 *	- content obeys the schema the conversation was started with, and the
 *	  size and depth limits; content_hash and content_size are computed
 *	  here, and under the policy turn_content = reference only they are
 *	  stored (content becomes NULL);
 *	- turns never change (UPDATE is refused; only the sweep deletes them,
 *	  once past retention_turns).
 * Each turn also records its event (events.c), advances the conversation's
 * counters (conversation.c), becomes the last message of its sender's live
 * context, and, for a closing turn, closes the conversation and its
 * contexts (context_link.c).
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* The close the API asked for, while it inserts the closing turn; else NULL. */
CscpCloseIntent *cscp_close_intent = NULL;

static const char *const turn_roles[] = {"user", "agent", "system", NULL};
static const char *const turn_fields[] = {
	"messageId", "from", "content", "ts", "role", "turnIndex",
	"to", "groupId", "speakerId", "agent"
};

/* The role name in turn_roles equal to s (len bytes), or NULL. */
static const char *
known_role(const char *s, int len)
{
	for (int i = 0; turn_roles[i] != NULL; i++)
		if ((int) strlen(turn_roles[i]) == len && memcmp(turn_roles[i], s, len) == 0)
			return turn_roles[i];
	return NULL;
}

/* The JSON type name of a value, for messages. */
static const char *
json_type_name(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvBool:
			return "boolean";
		case jbvNumeric:
			return "number";
		case jbvString:
			return "string";
		default:
			if (v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data))
				return "array";
			return "object";
	}
}

/* Raise 22023: field of the turn argument has the wrong type or value. */
static void
bad_field(const char *argname, const char *field, const char *expected, JsonbValue *v)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("field \"%s\" of %s must be %s", field, argname, expected),
			 v ? errdetail("It is a JSON %s.", json_type_name(v)) : 0,
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
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

		if (!JB_ROOT_IS_OBJECT(turn) || JB_ROOT_IS_SCALAR(turn))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be a JSON object", argname),
					 errhint("It holds a turn's optional fields: to, groupId, speakerId, agent.")));
		it = JsonbIteratorInit(&turn->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			bool		known = false;

			if (tok != WJB_KEY)
				continue;
			for (int i = 0; i < (int) lengthof(optional_fields) && !known; i++)
				known = (int) strlen(optional_fields[i]) == v.val.string.len &&
					memcmp(optional_fields[i], v.val.string.val, v.val.string.len) == 0;
			if (!known)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s has an unknown field \"%s\"", argname, cscp_jsonb_key_cstring(&v)),
						 errhint("It holds a turn's optional fields: to, groupId, speakerId, agent.")));
		}
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
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;

	if (VARSIZE(j) > CSCP_MAX_TURN_CONTENT_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too large", what),
				 errdetail("It takes %zu bytes; the limit is %d bytes.",
						   (size_t) VARSIZE(j), CSCP_MAX_TURN_CONTENT_BYTES),
				 errhint("Store large payloads elsewhere and put their identifier in the turn.")));
	if (JB_ROOT_IS_SCALAR(j))
		return;
	it = JsonbIteratorInit(&j->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
		{
			if (++depth > CSCP_MAX_TURN_CONTENT_DEPTH)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("%s is nested too deeply", what),
						 errdetail("Arrays and objects may be nested at most %d levels deep.",
								   CSCP_MAX_TURN_CONTENT_DEPTH)));
		}
		else if (tok == WJB_END_ARRAY || tok == WJB_END_OBJECT)
			depth--;
	}
}

/*
 * Parse the ConversationTurn turn (the API argument argname) into out;
 * raise 22023 for anything that is not one.
 */
void
cscp_turn_parse(Jsonb *turn, const char *argname, CscpTurn *out)
{
	JsonbIterator *it;
	JsonbValue	v,
				key = {0};
	JsonbIteratorToken tok;
	JsonbValue *f;

	memset(out, 0, sizeof(CscpTurn));
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
	it = JsonbIteratorInit(&turn->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		key = v;
		for (int i = 0; i < (int) lengthof(turn_fields) && !known; i++)
			known = (int) strlen(turn_fields[i]) == key.val.string.len &&
				memcmp(turn_fields[i], key.val.string.val, key.val.string.len) == 0;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has an unknown field \"%s\"", argname,
							cscp_jsonb_key_cstring(&key)),
					 errhint("A ConversationTurn has the fields messageId, from, content, ts, role and turnIndex, and optionally to, groupId, speakerId and agent.")));
	}

	f = cscp_jsonb_get(turn, "from");
	if (f == NULL || f->type != jbvString || f->val.string.len == 0)
		bad_field(argname, "from", "a non-empty string", f);
	if (f->val.string.len > CSCP_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"from\" of %s is too long", argname),
				 errdetail("It is %d bytes long; the limit is %d bytes.",
						   f->val.string.len, CSCP_MAX_ID_BYTES)));
	out->sender = pnstrdup(f->val.string.val, f->val.string.len);

	f = cscp_jsonb_get(turn, "role");
	if (f == NULL || f->type != jbvString ||
		(out->role = known_role(f->val.string.val, f->val.string.len)) == NULL)
		bad_field(argname, "role", "one of \"user\", \"agent\", \"system\"", f);

	f = cscp_jsonb_get(turn, "ts");
	if (f == NULL || f->type != jbvNumeric)
		bad_field(argname, "ts", "a number", f);
	out->ts = NumericGetDatum(f->val.numeric);

	f = cscp_jsonb_get(turn, "content");
	if (f == NULL)
		bad_field(argname, "content", "present (any JSON value, null included)", NULL);
	out->content = cscp_jsonb_value_to_jsonb(f);

	f = cscp_jsonb_get(turn, "turnIndex");
	if (f != NULL && f->type != jbvNull)
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
		out->has_index = true;
		out->turn_index = idx;
	}

	f = cscp_jsonb_get(turn, "messageId");
	if (f != NULL && f->type != jbvNull)
	{
		if (f->type != jbvString || f->val.string.len == 0)
			bad_field(argname, "messageId", "a non-empty string", f);
		if (f->val.string.len > CSCP_MAX_MESSAGE_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("field \"messageId\" of %s is too long", argname),
					 errdetail("It is %d bytes long; the limit is %d bytes.",
							   f->val.string.len, CSCP_MAX_MESSAGE_ID_BYTES)));
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

/* Column numbers of cscp.turn, looked up by name once per relation. */
typedef struct TurnColumns
{
	Oid			relid;
	int			tenant_id,
				conversation_id,
				turn_index,
				message_id,
				role,
				sender,
				content,
				content_hash,
				content_size,
				ts,
				event_id,
				recorded_at,
				extra;
} TurnColumns;

static TurnColumns cols = {InvalidOid};

static void
load_columns(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (cols.relid == RelationGetRelid(rel))
		return;
	cols.tenant_id = cscp_column(desc, "cscp.turn", "tenant_id");
	cols.conversation_id = cscp_column(desc, "cscp.turn", "conversation_id");
	cols.turn_index = cscp_column(desc, "cscp.turn", "turn_index");
	cols.message_id = cscp_column(desc, "cscp.turn", "message_id");
	cols.role = cscp_column(desc, "cscp.turn", "role");
	cols.sender = cscp_column(desc, "cscp.turn", "sender");
	cols.content = cscp_column(desc, "cscp.turn", "content");
	cols.content_hash = cscp_column(desc, "cscp.turn", "content_hash");
	cols.content_size = cscp_column(desc, "cscp.turn", "content_size");
	cols.extra = cscp_column(desc, "cscp.turn", "extra");
	cols.ts = cscp_column(desc, "cscp.turn", "ts");
	cols.event_id = cscp_column(desc, "cscp.turn", "event_id");
	cols.recorded_at = cscp_column(desc, "cscp.turn", "recorded_at");
	cols.relid = RelationGetRelid(rel);
}

/* A text column of tuple as a C string; 22023 naming what when it is NULL. */
static char *
required_text(HeapTuple tuple, TupleDesc desc, int attnum, const char *what)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of a turn must not be null", what)));
	return TextDatumGetCString(d);
}

/* Append "key": string (or null) to a JSON object under construction. */
static void
append_member(StringInfo buf, const char *key, const char *value)
{
	appendStringInfo(buf, "%s\"%s\":", buf->len > 1 ? "," : "", key);
	if (value == NULL)
		appendStringInfoString(buf, "null");
	else
		cscp_canonical_string(buf, value, strlen(value));
}

/* The checks and bookkeeping of INSERT; returns the tuple to store. */
static HeapTuple
guard_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			natts = desc->natts;
	Datum	   *values = palloc0(natts * sizeof(Datum));
	bool	   *nulls = palloc0(natts * sizeof(bool));
	bool	   *repl = palloc0(natts * sizeof(bool));
	char	   *tenant = required_text(tuple, desc, cols.tenant_id, "tenant_id");
	char	   *convid = required_text(tuple, desc, cols.conversation_id, "conversation_id");
	char	   *role = required_text(tuple, desc, cols.role, "role");
	char	   *sender = required_text(tuple, desc, cols.sender, "sender (the turn's \"from\")");
	char	   *message_id;
	CscpConversation conv;
	const CscpConversation *handed;
	CscpCloseKind close = CSCP_CLOSE_NONE;
	Jsonb	   *outcome = NULL;
	Jsonb	   *content;
	Jsonb	   *policy;
	char	   *turn_content;
	char	   *hash;
	int32		size;
	int32		idx;
	int32		seq;
	bool		isnull;
	Datum		d;
	const char *type;
	char	   *causation;
	char	   *event_id;
	StringInfoData payload;

	if (known_role(role, strlen(role)) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("turn role \"%s\" is not one of \"user\", \"agent\", \"system\"", role)));
	if (sender[0] == '\0' || strlen(sender) > CSCP_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the sender of a turn (its \"from\") must be a non-empty id of at most %d bytes",
						CSCP_MAX_ID_BYTES)));
	(void) heap_getattr(tuple, cols.ts, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ts of a turn must not be null"),
				 errhint("Give the time of the turn as a number, such as milliseconds since 1970.")));
	d = heap_getattr(tuple, cols.content, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("content of a turn must not be null"),
				 errhint("A turn without content carries the JSON value null: 'null'::jsonb.")));
	content = DatumGetJsonbP(d);
	cscp_check_json_limits(content, "turn content");
	d = heap_getattr(tuple, cols.extra, desc, &isnull);
	if (!isnull)
		(void) cscp_turn_optional_fields(DatumGetJsonbP(d), "column \"extra\" of a turn", true);

	/* The API's own read of the row it locked, when it is still the row; else lock and read. */
	handed = cscp_turn_conversation;
	cscp_turn_conversation = NULL;
	if (handed != NULL && handed->generation == cscp_conversation_generation &&
		strcmp(handed->tenant_id, tenant) == 0 && strcmp(handed->conversation_id, convid) == 0)
		conv = *handed;
	else
	{
		/* Direct SQL: the content is validated before the lock here too. */
		cscp_turn_validate_early(tenant, convid, content, now);
		if (!cscp_conversation_lock(tenant, convid, &conv))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("conversation \"%s\" does not exist", convid),
					 errhint("Start it with cscp.conversation_start, and check that cscp.tenant_id names its tenant.")));
	}

	if (cscp_close_intent != NULL &&
		strcmp(cscp_close_intent->tenant_id, tenant) == 0 &&
		strcmp(cscp_close_intent->conversation_id, convid) == 0)
	{
		close = cscp_close_intent->kind;
		outcome = cscp_close_intent->outcome;
	}

	if (conv.closed)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("conversation \"%s\" is closed", convid),
			 errdetail("%s turn %d; a closed conversation takes no more turns.",
					   strcmp(conv.close_reason, "timeout") == 0 ?
					   "It timed out, recorded by its final" : "It was closed by its final",
					   conv.next_turn_index - 1),
				 errhint("Start a new conversation with cscp.conversation_start.")));
	if (conv.timeout_ms > 0 && conv.deadline <= now && close != CSCP_CLOSE_BY_TIMEOUT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("conversation \"%s\" has timed out", convid),
				 errdetail("Its deadline was %s.", timestamptz_to_str(conv.deadline)),
				 errhint("cscp.conversation_exchange and cscp.sweep record the timeout; start a new conversation.")));

	d = heap_getattr(tuple, cols.turn_index, desc, &isnull);
	idx = isnull ? conv.next_turn_index : DatumGetInt32(d);
	if (idx < conv.next_turn_index)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("turn index %d of conversation \"%s\" is already taken", idx, convid),
				 errdetail("The next turn index is %d.", conv.next_turn_index),
				 errhint("Omit turnIndex to append at the next index, or resend the original turn with its messageId to replay it.")));
	if (idx > conv.next_turn_index)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("turn index %d of conversation \"%s\" would leave a gap", idx, convid),
				 errdetail("The next turn index is %d.", conv.next_turn_index),
				 errhint("Turn indexes are gapless: omit turnIndex to append at the next index.")));
	if (idx >= PG_INT32_MAX - 1 || conv.next_event_seq >= PG_INT32_MAX - 2)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("conversation \"%s\" has too many turns", convid)));

	if (conv.schema != NULL && close != CSCP_CLOSE_BY_TIMEOUT)
		cscp_turn_check_schema(convid, conv.schema, content);

	d = heap_getattr(tuple, cols.message_id, desc, &isnull);
	if (isnull)
		message_id = psprintf("%s:%d:%s", convid, idx, role);
	else
	{
		message_id = TextDatumGetCString(d);
		if (message_id[0] == '\0' || strlen(message_id) > CSCP_MAX_MESSAGE_ID_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the message id of a turn must be non-empty and at most %d bytes",
							CSCP_MAX_MESSAGE_ID_BYTES)));
	}

	hash = cscp_turn_content_hash(content, &size);
	policy = cscp_policy_get(tenant);
	turn_content = cscp_jsonb_get_cstring(policy, "turn_content");

	/* The event that records the turn, and what it does to the conversation. */
	seq = conv.next_event_seq;
	event_id = cscp_event_id(convid, seq);
	if (idx == 0)
	{
		type = "conversation.opened";
		causation = conv.causation_id;
	}
	else
	{
		type = close != CSCP_CLOSE_NONE ? "conversation.closed" : "conversation.exchanged";
		causation = seq > 0 ? cscp_event_id(convid, seq - 1) : NULL;
	}
	initStringInfo(&payload);
	appendStringInfoChar(&payload, '{');
	append_member(&payload, "messageId", message_id);
	appendStringInfo(&payload, ",\"turnIndex\":%d", idx);
	append_member(&payload, "role", role);
	append_member(&payload, "from", sender);
	append_member(&payload, "contentHash", hash);

	cscp_context_note_message(tenant, convid, sender, message_id, now);
	if (close != CSCP_CLOSE_NONE)
	{
		append_member(&payload, "reason", close == CSCP_CLOSE_BY_TIMEOUT ? "timeout" : "closed");
		appendStringInfoString(&payload, ",\"outcome\":");
		if (outcome != NULL)
			cscp_canonical_append(&payload, outcome);
		else
			appendStringInfoString(&payload, "null");
		appendStringInfoString(&payload, ",\"contexts\":[");
		cscp_contexts_close(tenant, convid, event_id, now, &payload);
		appendStringInfoChar(&payload, ']');
	}
	appendStringInfoChar(&payload, '}');
	cscp_event_append(tenant, convid, seq, type, causation, idx, payload.data, now);
	cscp_conversation_advance(&conv, idx + 1, seq + 1,
							  close == CSCP_CLOSE_NONE ? NULL :
							  close == CSCP_CLOSE_BY_TIMEOUT ? "timeout" : "closed",
							  outcome, now);

	values[cols.turn_index - 1] = Int32GetDatum(idx);
	repl[cols.turn_index - 1] = true;
	values[cols.message_id - 1] = CStringGetTextDatum(message_id);
	repl[cols.message_id - 1] = true;
	if (turn_content != NULL && strcmp(turn_content, "reference") == 0)
	{
		nulls[cols.content - 1] = true;
		repl[cols.content - 1] = true;
	}
	values[cols.content_hash - 1] = CStringGetTextDatum(hash);
	repl[cols.content_hash - 1] = true;
	values[cols.content_size - 1] = Int32GetDatum(size);
	repl[cols.content_size - 1] = true;
	values[cols.event_id - 1] = CStringGetTextDatum(event_id);
	repl[cols.event_id - 1] = true;
	values[cols.recorded_at - 1] = TimestampTzGetDatum(now);
	repl[cols.recorded_at - 1] = true;
	return heap_modify_tuple(tuple, desc, values, nulls, repl);
}

/* UPDATE of a turn: refused, turns never change. */
static HeapTuple
guard_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("turns of a conversation never change"),
			 errdetail("The transcript is append-only: cscp.conversation_turns returns the same turns on every call."),
			 errhint("Record a new turn with cscp.conversation_exchange.")));
	return NULL;
}

static const CscpRowGuard guard = {
	.name = "cscp.turn_guard()",
	.load_columns = load_columns,
	.insert = guard_insert,
	.update = guard_update,
};

PG_FUNCTION_INFO_V1(cscp_turn_guard);

/* Trigger cscp.turn_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_turn_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &guard);
}
