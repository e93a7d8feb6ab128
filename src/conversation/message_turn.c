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
#include "command/command.h"
#include "context/context.h"
#include "conversation/conversation.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

/* The fields a command object of message_turn may have. */
static const char *const command_fields[] = {
	"idempotency_key", "name", "mutating", "payload", "target_fingerprint"
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
	char	   *unknown = cscp_jsonb_unknown_key(command, command_fields, lengthof(command_fields));

	if (unknown != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command has an unknown field \"%s\"", unknown),
				 errhint("A command has idempotency_key, name, mutating, payload and target_fingerprint.")));
}

/* The command message_turn submits, from its argument "command". */
typedef struct CommandArgs
{
	text	   *key;
	text	   *name;
	text	   *fingerprint;	/* NULL: none */
	bool		mutating;
	Jsonb	   *payload;
} CommandArgs;

/* Check the command object and read it into *out; 22023 for anything wrong. */
static void
read_command(Jsonb *command, CommandArgs *out)
{
	JsonbValue *v;

	if (!JB_ROOT_IS_OBJECT(command) || JB_ROOT_IS_SCALAR(command))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("command must be a JSON object"),
				 errhint("Pass {\"idempotency_key\": ..., \"name\": ..., \"mutating\": false, \"payload\": {...}}, or NULL for no command.")));
	check_command_fields(command);
	out->key = command_string(command, "idempotency_key", true);
	out->name = command_string(command, "name", true);
	out->fingerprint = command_string(command, "target_fingerprint", false);
	out->mutating = false;
	v = cscp_jsonb_get(command, "mutating");
	if (v != NULL && v->type != jbvNull)
	{
		if (v->type != jbvBool)
			bad_command("mutating", "must be a boolean");
		out->mutating = v->val.boolean;
	}
	v = cscp_jsonb_get(command, "payload");
	if (v != NULL && v->type != jbvNull)
	{
		out->payload = cscp_jsonb_value_to_jsonb(v);
		if (!JB_ROOT_IS_OBJECT(out->payload) || JB_ROOT_IS_SCALAR(out->payload))
			bad_command("payload", "must be a JSON object");
	}
	else
	{
		JsonbParseState *pst = NULL;

		pushJsonbValue(&pst, WJB_BEGIN_OBJECT, NULL);
		out->payload = JsonbValueToJsonb(pushJsonbValue(&pst, WJB_END_OBJECT, NULL));
	}
	cscp_check_id("command.idempotency_key", out->key);
	cscp_check_id("command.name", out->name);
	if (out->fingerprint != NULL)
		cscp_check_id("command.target_fingerprint", out->fingerprint);
}

/*
 * Open (or reuse) the sender's context with slots; returns its id as text.
 * With use (the command formed next), *used says whether the context was
 * made to name it as its last already (cscp_context_open_row).
 */
static char *
open_context(text *tenant, text *conversation, text *actor, Jsonb *slots,
			 const CscpContextUse *use, bool *used)
{
	MemoryContext callerctx = CurrentMemoryContext;
	TupleDesc	desc;
	HeapTuple	row;
	char	   *context_id;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	row = cscp_context_open_row(tenant, conversation, actor, slots, NULL, NULL, use, &desc);
	context_id = MemoryContextStrdup(callerctx,
									 SPI_getvalue(row, desc,
												  cscp_column(desc, "cscp.context", "context_id")));
	if (use != NULL)
	{
		bool		isnull;
		Datum		last = heap_getattr(row, cscp_column(desc, "cscp.context", "last_command_id"),
										desc, &isnull);

		*used = !isnull && DatumGetBool(DirectFunctionCall2(uuid_eq, last, use->command_id));
	}
	SPI_finish();
	return context_id;
}

/* The answer of message_turn; sub is NULL when no command was submitted. */
static Jsonb *
answer(const CscpTurnResult *tr, const char *context_id, const CscpSubmitted *sub)
{
	JsonbParseState *st = NULL;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cscp_jsonb_push_text(&st, "event_id", tr->event_id);
	cscp_jsonb_push_int(&st, "turn_index", tr->turn_index);
	cscp_jsonb_push_text(&st, "message_id", tr->message_id);
	cscp_jsonb_push_text(&st, "outcome", tr->outcome);
	cscp_jsonb_push_text(&st, "context_id", context_id);
	if (sub != NULL)
	{
		cscp_jsonb_push_text(&st, "command_id",
							 DatumGetCString(DirectFunctionCall1(uuid_out, sub->command_id)));
		cscp_jsonb_push_text(&st, "state", cscp_command_state_names[sub->state]);
		cscp_jsonb_push_bool(&st, "replayed", sub->replayed, false);
	}
	else
	{
		cscp_jsonb_push_text(&st, "command_id", NULL);
		cscp_jsonb_push_text(&st, "state", NULL);
		cscp_jsonb_push_bool(&st, "replayed", false, true);
	}
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
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
	CommandArgs cmd = {0};
	CscpTurnResult tr = {0};
	CscpSubmitted sub = {0};
	CscpSubmitPrepared prep = {0};
	CscpContextUse use = {0};
	pg_uuid_t	command_id;
	char	   *context_id;
	Datum		msg;

	/* Every argument is checked before anything is written. */
	cscp_context_check_open_args(tenant, conversation, actor, slots);
	if (command != NULL)
		read_command(command, &cmd);

	/* 1. the turn; one that timed out or aborted its replay goes no further */
	cscp_exchange_turn(tenant, conversation, turn, &tr);
	if (strcmp(tr.outcome, "timed_out") == 0 || strcmp(tr.outcome, "aborted") == 0)
		PG_RETURN_JSONB_P(answer(&tr, NULL, NULL));

	/* 2. the sender's context, with the slots */
	if (command == NULL)
	{
		context_id = open_context(tenant, conversation, actor, slots, NULL, NULL);
		PG_RETURN_JSONB_P(answer(&tr, context_id, NULL));
	}

	/*
	 * With a command, the key's lock comes first (the order every submit
	 * takes), and the open's UPDATE makes the command its context's last
	 * when forming it would (open_use in context_api.c), so that forming it
	 * does not write the context again.
	 */
	msg = CStringGetTextDatum(tr.message_id);
	cscp_key_lock(tenant, VARDATA_ANY(cmd.key), VARSIZE_ANY_EXHDR(cmd.key));
	cscp_routing_uuid(cscp_routing_hash_text(conversation), &command_id);
	prep.command_id = UUIDPGetDatum(&command_id);
	use.command_id = prep.command_id;
	use.key = cmd.key;
	use.message_id = DatumGetTextPP(msg);
	context_id = open_context(tenant, conversation, actor, slots, &use, &prep.context_used);

	/* 3. the command the message asks for, bound to its message id */
	cscp_submit_command(tenant, conversation, actor, cmd.key, cmd.name, cmd.mutating,
						construct_array(&msg, 1, TEXTOID, -1, false, TYPALIGN_INT),
						cmd.payload, cmd.fingerprint, &prep, &sub);
	PG_RETURN_JSONB_P(answer(&tr, context_id, &sub));
}
