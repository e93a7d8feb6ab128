/*-------------------------------------------------------------------------
 *
 * message_turn.c
 *	  cscp.message_turn: the hot loop of a bot in one call.  An inbound
 *	  message is recorded as a turn, the sender's context is opened (or
 *	  reused) with the slots the bot understood from it, and the command the
 *	  message asks for is submitted, bound to the turn's message id.
 *
 *	  It does exactly what cscp.conversation_exchange, cscp.context_open and
 *	  cscp.command_submit do, in that order, in one transaction and one
 *	  round trip; every rule and every trigger applies as it does to them.
 *	  A turn that finds its conversation timed out stops there (no context,
 *	  no command); a re-delivered message replays its turn, and its command
 *	  replays by idempotency key.
 *
 *-------------------------------------------------------------------------
 */
#include "conversation.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

/* The fields a command object of message_turn may have. */
static const char *const command_fields[] = {
	"idempotency_key", "name", "mutating", "payload", "target_fingerprint", NULL
};

/* 22023 about field of the command object. */
static void
bad_command(const char *field, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("command.%s %s", field, what),
			 errhint("Pass {\"idempotency_key\": ..., \"name\": ..., \"mutating\": false, \"payload\": {...}, \"target_fingerprint\": ...}, or NULL for no command.")));
}

/* The string field of the command object, as text; NULL when absent (or JSON null). */
static text *
command_string(Jsonb *command, const char *field, bool required)
{
	JsonbValue *v = cscp_jsonb_get(command, field);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			bad_command(field, "is missing");
		return NULL;
	}
	if (v->type != jbvString)
		bad_command(field, "must be a string");
	return cstring_to_text_with_len(v->val.string.val, v->val.string.len);
}

/* Refuse a command object with a field message_turn does not know. */
static void
check_command_fields(Jsonb *command)
{
	JsonbIterator *it = JsonbIteratorInit(&command->root);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; command_fields[i] != NULL; i++)
			if ((int) strlen(command_fields[i]) == v.val.string.len &&
				memcmp(command_fields[i], v.val.string.val, v.val.string.len) == 0)
				known = true;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command has an unknown field \"%s\"",
							pnstrdup(v.val.string.val, v.val.string.len)),
					 errhint("A command has idempotency_key, name, mutating, payload and target_fingerprint.")));
	}
}

PG_FUNCTION_INFO_V1(cscp_message_turn);

/*
 * cscp.message_turn(tenant_id text, conversation_id text, actor_id text,
 *                   turn jsonb, slots jsonb DEFAULT '{}', command jsonb DEFAULT NULL)
 * RETURNS jsonb: {event_id, turn_index, message_id, outcome, context_id,
 *                 command_id, state, replayed}
 */
Datum
cscp_message_turn(PG_FUNCTION_ARGS)
{
	text	   *tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *conversation = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	text	   *actor = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	Jsonb	   *turn = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	Jsonb	   *slots = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);
	Jsonb	   *command = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	text	   *key = NULL,
			   *name = NULL,
			   *fingerprint = NULL;
	bool		mutating = false;
	Jsonb	   *payload = NULL;
	CscpTurnResult tr = {0};
	CscpSubmitted sub = {0};
	char	   *context_id = NULL;
	JsonbParseState *st = NULL;
	JsonbValue *result;
	bool		go_on;

	/* Every argument is checked before anything is written. */
	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", conversation);
	cscp_check_id("actor_id", actor);
	if (slots != NULL && !JB_ROOT_IS_OBJECT(slots))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be a JSON object"),
				 errhint("Pass an object such as '{\"active_intent\": \"transfer\"}', or '{}'.")));
	if (command != NULL)
	{
		JsonbValue *v;

		if (!JB_ROOT_IS_OBJECT(command) || JB_ROOT_IS_SCALAR(command))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command must be a JSON object"),
					 errhint("Pass {\"idempotency_key\": ..., \"name\": ..., \"mutating\": false, \"payload\": {...}}, or NULL for no command.")));
		check_command_fields(command);
		key = command_string(command, "idempotency_key", true);
		name = command_string(command, "name", true);
		fingerprint = command_string(command, "target_fingerprint", false);
		v = cscp_jsonb_get(command, "mutating");
		if (v != NULL && v->type != jbvNull)
		{
			if (v->type != jbvBool)
				bad_command("mutating", "must be a boolean");
			mutating = v->val.boolean;
		}
		v = cscp_jsonb_get(command, "payload");
		if (v != NULL && v->type != jbvNull)
		{
			payload = cscp_jsonb_value_to_jsonb(v);
			if (!JB_ROOT_IS_OBJECT(payload) || JB_ROOT_IS_SCALAR(payload))
				bad_command("payload", "must be a JSON object");
		}
		else
		{
			JsonbParseState *pst = NULL;

			pushJsonbValue(&pst, WJB_BEGIN_OBJECT, NULL);
			payload = JsonbValueToJsonb(pushJsonbValue(&pst, WJB_END_OBJECT, NULL));
		}
		cscp_check_id("command.idempotency_key", key);
		cscp_check_id("command.name", name);
		if (fingerprint != NULL)
			cscp_check_id("command.target_fingerprint", fingerprint);
	}

	/* 1. the turn */
	cscp_exchange_turn(tenant, conversation, turn, &tr);
	go_on = strcmp(tr.outcome, "timed_out") != 0 && strcmp(tr.outcome, "aborted") != 0;

	/* 2. the sender's context, with the slots */
	if (go_on)
	{
		MemoryContext callerctx = CurrentMemoryContext;
		TupleDesc	desc;
		HeapTuple	row;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		row = cscp_context_open_row(tenant, conversation, actor, slots, NULL, NULL, &desc);
		context_id = MemoryContextStrdup(callerctx,
										 SPI_getvalue(row, desc,
													  cscp_column(desc, "cscp.context", "context_id")));
		SPI_finish();
	}

	/* 3. the command the message asks for, bound to its message id */
	if (go_on && command != NULL)
	{
		Datum		msg = CStringGetTextDatum(tr.message_id);

		cscp_submit_command(tenant, conversation, actor, key, name, mutating,
							construct_array(&msg, 1, TEXTOID, -1, false, TYPALIGN_INT),
							payload, fingerprint, &sub);
	}

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cscp_jsonb_push_text(&st, "event_id", tr.event_id);
	cscp_jsonb_push_int(&st, "turn_index", tr.turn_index);
	cscp_jsonb_push_text(&st, "message_id", tr.message_id);
	cscp_jsonb_push_text(&st, "outcome", tr.outcome);
	cscp_jsonb_push_text(&st, "context_id", context_id);
	if (go_on && command != NULL)
	{
		cscp_jsonb_push_text(&st, "command_id",
				 DatumGetCString(DirectFunctionCall1(uuid_out, sub.command_id)));
		cscp_jsonb_push_text(&st, "state", cscp_command_state_names[sub.state]);
		cscp_jsonb_push_bool(&st, "replayed", sub.replayed, false);
	}
	else
	{
		cscp_jsonb_push_text(&st, "command_id", NULL);
		cscp_jsonb_push_text(&st, "state", NULL);
		cscp_jsonb_push_bool(&st, "replayed", false, true);
	}
	result = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	PG_RETURN_JSONB_P(JsonbValueToJsonb(result));
}
