/*-------------------------------------------------------------------------
 *
 * slots.c
 *	  Slot rules of a context (RFC-WF-0034): which names exist, what shape
 *	  the confirmation slots have, and what policy lets a tenant store.
 *
 * A slot name is one of the minimum set, an "x_" name, or a name the
 * tenant registered in its policy key "extension_slots"; other names are
 * refused on write and left out on read.  Policy "slot_rules" marks a slot
 * stored (kept as given), derived (kept only as a SHA-256 digest of its
 * canonical JSON text and its size, so it can be compared but not read
 * back) or forbidden (never written).  "max_slot_bytes" caps the size of
 * one value's JSON text.
 *
 * The pending slots are bound to their commands (cscp_pending_slots_bound):
 * pending_confirmation and pending_approval name only a command of the
 * context's own tenant, conversation, actor and context that waits for
 * that answer, with the window the command has, so that a "yes" given in
 * one conversation can never reach another's command.  The slot a command
 * born asking writes through its own trigger, as the owner, from the row
 * that trigger judged, is not read back (the context trigger's caller
 * checks cscp_owner_writing).
 *
 * Only values that change are checked, so a slot that an earlier policy
 * allowed stays readable to superusers in the table without blocking
 * updates of other slots; readers go through cscp_slots_visible().
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "context/context.h"
#include "pgcompat.h"

#include "catalog/pg_type.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

static const char *const minimum_slots[] = {
	"active_intent", "active_target", "pending_confirmation",
	"pending_approval", "last_result", "work_item_id"
};

/* Lazily fetched policy, for one validation or filtering pass. */
typedef struct SlotPolicy
{
	const char *tenant_id;
	Jsonb	   *policy;
	bool		fetched;
} SlotPolicy;

static Jsonb *
slot_policy(SlotPolicy *sp)
{
	if (!sp->fetched)
	{
		sp->policy = cscp_policy_get(sp->tenant_id);
		sp->fetched = true;
	}
	return sp->policy;
}

static bool
is_minimum_slot(const char *name)
{
	for (int i = 0; i < (int) lengthof(minimum_slots); i++)
		if (strcmp(minimum_slots[i], name) == 0)
			return true;
	return false;
}

/* "x_" followed by one or more letters, digits or underscores. */
static bool
is_x_slot(const char *name)
{
	if (strncmp(name, "x_", 2) != 0 || name[2] == '\0')
		return false;
	for (const char *p = name + 2; *p; p++)
		if (!(isalnum((unsigned char) *p) || *p == '_'))
			return false;
	return true;
}

static bool
slot_name_known(const char *name, SlotPolicy *sp)
{
	if (is_minimum_slot(name) || is_x_slot(name))
		return true;
	return cscp_policy_lists(slot_policy(sp), "extension_slots", name);
}

/* The slot_rules entry for name: "stored" unless the policy says otherwise. */
static const char *
slot_rule(const char *name, SlotPolicy *sp)
{
	JsonbValue *rules = cscp_jsonb_get(slot_policy(sp), "slot_rules");
	JsonbValue *rule;

	if (rules == NULL || rules->type != jbvBinary)
		return "stored";
	rule = getKeyJsonValueFromContainer(rules->val.binary.data, name, strlen(name), NULL);
	if (rule == NULL || rule->type != jbvString)
		return "stored";
	return pnstrdup(rule->val.string.val, rule->val.string.len);
}

/*
 * Minimal data (CSCP G4, XI.A): a context holds identifiers, never message
 * text or card numbers.  Policy "slot_max_length" caps, in characters, the
 * longest string anywhere in a slot's value (object keys and nested
 * strings included) and in a context's text fields; with
 * "slot_refuse_card_numbers" a run of 13 to 19 digits that passes the Luhn
 * check is refused there too, its digits possibly separated by single
 * spaces or dashes ("4111 1111 1111 1111", "4111-1111-1111-1111").  A run
 * counts only as a word of its own, as a card number is written in text:
 * after the start, a space or an opening mark, and before the end, a
 * space, a closing or punctuation mark ("card: 4111 1111 1111 1111." is
 * refused; "order:4111111111111111", "order-4111...", a hex digest's
 * decimal stretch or a UUID's groups are identifiers).  JSON numbers are
 * not checked (epoch milliseconds, 64-bit ids).  One pass over the bytes counts
 * the characters and follows the runs; the value itself is never echoed.
 */
typedef struct MinimalData
{
	const char *tenant_id;
	int64		max_length;
	bool		refuse_cards;
	const char *kind;			/* "slot" or "field" */
	const char *name;			/* the slot or field */
} MinimalData;

/* The minimal-data policy in sp's policy, for the slot or field name. */
static void
minimal_data_of(SlotPolicy *sp, const char *kind, const char *name, MinimalData *md)
{
	Jsonb	   *policy = slot_policy(sp);
	JsonbValue *refuse = cscp_jsonb_get(policy, "slot_refuse_card_numbers");

	md->tenant_id = sp->tenant_id;
	md->max_length = cscp_policy_int(policy, "slot_max_length", 256);
	md->refuse_cards = refuse == NULL || refuse->type != jbvBool || refuse->val.boolean;
	md->kind = kind;
	md->name = name;
}

/* Whether a run of n digits whose Luhn sums from the left are even_sum / odd_sum is a card number. */
static bool
luhn_card(int n, int even_sum, int odd_sum)
{
	/* doubled are the digits at an even distance from the last: i even when n is even */
	return n >= 13 && n <= 19 && ((n % 2 == 0) ? even_sum : odd_sum) % 10 == 0;
}

/* The Luhn contribution of digit d when doubled. */
static int
luhn_doubled(int d)
{
	return d * 2 > 9 ? d * 2 - 9 : d * 2;
}

/* Raise 22023: md's slot or field holds a card number or a string too long. */
static pg_noreturn void
minimal_data_error(const MinimalData *md, bool card, int64 chars)
{
	if (card)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" of a context must not hold a card number", md->kind, md->name),
				 errdetail("It holds a run of 13 to 19 digits that passes the Luhn check; the policy of tenant \"%s\" refuses card numbers in contexts.",
						   md->tenant_id),
				 errhint("Keep a token or an identifier that refers to the card, or set the policy key \"slot_refuse_card_numbers\" to false.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s \"%s\" of a context holds a string longer than " INT64_FORMAT " characters",
					md->kind, md->name, md->max_length),
			 errdetail("A string of " INT64_FORMAT " characters appears in it; the policy of tenant \"%s\" (key \"slot_max_length\") allows at most " INT64_FORMAT ".",
					   chars, md->tenant_id, md->max_length),
			 errhint("Contexts hold identifiers, never message text: keep the text elsewhere and its identifier here.")));
}

/* Whether c is an ASCII letter or digit. */
static inline bool
is_alnum_byte(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether c is an ASCII white-space byte. */
static inline bool
is_space_byte(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/*
 * Raise 22023 unless the string s (len bytes) is within md's length and
 * holds no card number: one pass over the bytes.
 */
static void
check_minimal_string(const MinimalData *md, const char *s, int len)
{
	int64		chars = 0;
	unsigned char prev = '\0';	/* the byte before this one */
	bool		in_run = false;
	bool		run_ok = false; /* nothing glues the run's start to a word */
	unsigned char sep = '\0';	/* the separator that ends the run so far, if any */
	int			n = 0,
				even_sum = 0,
				odd_sum = 0;

	for (int i = 0; i <= len; i++)
	{
		unsigned char c = i < len ? (unsigned char) s[i] : '\0';

		if (i < len && (c & 0xC0) != 0x80)
			chars++;
		if (md->refuse_cards)
		{
			if (c >= '0' && c <= '9')
			{
				int			d = c - '0';

				if (!in_run)
				{
					/* a word of its own: after the start, a space or an opening mark */
					in_run = true;
					run_ok = prev == '\0' || is_space_byte(prev) || strchr("([{<\"'", prev) != NULL;
					n = even_sum = odd_sum = 0;
				}
				sep = '\0';
				even_sum += (n % 2 == 0) ? luhn_doubled(d) : d;
				odd_sum += (n % 2 == 1) ? luhn_doubled(d) : d;
				n++;
			}
			else if (in_run && sep == '\0' && (c == ' ' || c == '-'))
				sep = c;		/* a separator, if a digit follows */
			else if (in_run)
			{
				/*
				 * The run ended at its last digit: it must end its word too
				 * (the end, a space, a closing or punctuation mark; a dash
				 * then a letter or digit goes on with an identifier).
				 */
				bool		end_ok = sep == '\0' ?
					(c == '\0' || is_space_byte(c) || strchr(")]}>\"'.,;:!?", c) != NULL) :
					!(sep == '-' && is_alnum_byte(c));

				if (run_ok && end_ok && luhn_card(n, even_sum, odd_sum))
					minimal_data_error(md, true, 0);
				in_run = false;
			}
		}
		prev = c;
	}
	if (chars > md->max_length)
		minimal_data_error(md, false, chars);
}

/*
 * Raise 22023 unless every string in v (object keys included) keeps md's
 * minimal-data policy.  Numbers are not strings of digits a person typed:
 * epoch milliseconds and 64-bit ids are 13 to 19 digits, a tenth of them
 * passing Luhn.
 */
static void
check_minimal_value(const MinimalData *md, JsonbValue *v)
{
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;

	if (v->type == jbvString)
		check_minimal_string(md, v->val.string.val, v->val.string.len);
	if (v->type != jbvBinary)
		return;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, false)) != WJB_DONE)
		if (tok == WJB_KEY || tok == WJB_VALUE || tok == WJB_ELEM)
			check_minimal_value(md, &e);
}

/*
 * Raise 22023 unless the text field of a context of tenant_id (value,
 * len bytes) keeps the tenant's minimal-data policy (slot_max_length,
 * slot_refuse_card_numbers).
 */
void
cscp_context_field_check(const char *tenant_id, const char *field, const char *value, int len)
{
	SlotPolicy	sp = {tenant_id, NULL, false};
	MinimalData md;

	minimal_data_of(&sp, "field", field, &md);
	check_minimal_string(&md, value, len);
}

/* Whether str is a UUID in its canonical text form. */
bool
cscp_is_uuid_text(const char *str)
{
	if (strlen(str) != 36)
		return false;
	for (int i = 0; i < 36; i++)
	{
		if (i == 8 || i == 13 || i == 18 || i == 23)
		{
			if (str[i] != '-')
				return false;
		}
		else if (!isxdigit((unsigned char) str[i]))
			return false;
	}
	return true;
}

static void
shape_error(const char *slot, const char *detail, const char *shape)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for slot \"%s\"", slot),
			 errdetail("%s", detail),
			 errhint("The slot holds %s.", shape)));
}

/*
 * Check the shape of pending_confirmation or pending_approval:
 * an object with exactly the allowed keys, the required ones present.
 */
static void
check_pending_shape(const char *slot, JsonbValue *v)
{
	bool		confirmation = (strcmp(slot, "pending_confirmation") == 0);
	const char *shape = confirmation ?
		"null or {\"command_id\": uuid, \"idempotency_key\": text, "
		"\"target_fingerprint\": text or null, \"expires_at\": timestamptz}" :
		"null or {\"command_id\": uuid, \"approver_id\": text or null, "
		"\"expires_at\": timestamptz}";
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	bool		has_command = false,
				has_key = false,
				has_expiry = false;

	if (v->type == jbvNull)
		return;
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		shape_error(slot, "The value is not a JSON object.", shape);

	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		char	   *s;

		if (tok == WJB_KEY)
		{
			key = cscp_jsonb_key_cstring(&e);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		s = (e.type == jbvString) ? pnstrdup(e.val.string.val, e.val.string.len) : NULL;
		if (strcmp(key, "command_id") == 0)
		{
			if (s == NULL || !cscp_is_uuid_text(s))
				shape_error(slot, "\"command_id\" is not a UUID.", shape);
			has_command = true;
		}
		else if (strcmp(key, "expires_at") == 0)
		{
			TimestampTz ts;

			if (s == NULL || !cscp_parse_timestamptz(s, &ts))
				shape_error(slot, "\"expires_at\" is not a timestamp with time zone.", shape);
			has_expiry = true;
		}
		else if (confirmation && strcmp(key, "idempotency_key") == 0)
		{
			if (s == NULL || s[0] == '\0')
				shape_error(slot, "\"idempotency_key\" is not a non-empty string.", shape);
			has_key = true;
		}
		else if (confirmation && strcmp(key, "target_fingerprint") == 0)
		{
			if (s == NULL && e.type != jbvNull)
				shape_error(slot, "\"target_fingerprint\" is neither a string nor null.", shape);
		}
		else if (!confirmation && strcmp(key, "approver_id") == 0)
		{
			if (s == NULL && e.type != jbvNull)
				shape_error(slot, "\"approver_id\" is neither a string nor null.", shape);
		}
		else
			shape_error(slot, psprintf("Key \"%s\" is not part of the slot.", key), shape);
	}
	if (!has_command || !has_expiry || (confirmation && !has_key))
		shape_error(slot, confirmation ?
					"\"command_id\", \"idempotency_key\" and \"expires_at\" are required." :
					"\"command_id\" and \"expires_at\" are required.", shape);
}

/* Whether v is already the digest a derived slot stores. */
static bool
is_digest(JsonbValue *v)
{
	Jsonb	   *j;
	char	   *d;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data) ||
		JsonContainerSize(v->val.binary.data) != 2)
		return false;
	j = cscp_jsonb_value_to_jsonb(v);
	d = cscp_jsonb_get_cstring(j, "derived");
	return d != NULL && strncmp(d, "sha256:", 7) == 0 && cscp_jsonb_get(j, "bytes") != NULL;
}

/* {"derived": "sha256:<hex>", "bytes": n} for the value's canonical text. */
static Jsonb *
make_digest(const char *text)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"derived\": \"%s\", \"bytes\": %zu}",
					 cscp_sha256_hex(text, strlen(text)), strlen(text));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/*
 * The rule of slot key whose value changes to v (stored or derived): a
 * known slot (else 22023) that the policy does not forbid (22023), of the
 * right shape when it is a pending one.
 */
static const char *
check_slot_allowed(const char *key, JsonbValue *v, SlotPolicy *sp)
{
	const char *rule;

	if (!slot_name_known(key, sp))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown slot \"%s\"", key),
				 errdetail("Slots are active_intent, active_target, pending_confirmation, "
						   "pending_approval, last_result, work_item_id, names beginning "
						   "with \"x_\", and the tenant's policy key \"extension_slots\"."),
				 errhint("Name a custom slot \"x_%s\", or register it with cscp.policy_set.",
						 key)));
	rule = slot_rule(key, sp);
	if (strcmp(rule, "forbidden") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slot \"%s\" is forbidden by policy", key),
				 errdetail("The policy of tenant \"%s\" marks slot \"%s\" forbidden.",
						   sp->tenant_id, key),
				 errhint("Keep only an identifier that refers to the data, or change the "
						 "policy's \"slot_rules\".")));
	if (strcmp(key, "pending_confirmation") == 0 || strcmp(key, "pending_approval") == 0)
		check_pending_shape(key, v);
	return rule;
}

/*
 * What slot key stores of its new value v under rule: v itself, within
 * max_slot_bytes (else 22023), or for a derived slot its digest, built in
 * *dv (*rewritten set).  A digest written back (e.g. a row copied as it
 * was read) is kept as it is.
 */
static JsonbValue *
slot_stored_value(const char *key, const char *rule, JsonbValue *v, SlotPolicy *sp,
				  JsonbValue *dv, bool *rewritten)
{
	bool		derived = (strcmp(rule, "derived") == 0);
	char	   *text;
	int64		max_bytes;
	size_t		len;
	Jsonb	   *digest;

	if (derived && is_digest(v))
		return v;
	text = cscp_jsonb_value_to_cstring(v);
	len = strlen(text);
	max_bytes = cscp_policy_int(slot_policy(sp), "max_slot_bytes", 4096);
	if ((int64) len > max_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("value of slot \"%s\" is too large", key),
				 errdetail("Its JSON text is %zu bytes; the policy allows at most " INT64_FORMAT " bytes.",
						   len, max_bytes),
				 errhint("Store an identifier that refers to the data instead of the data.")));
	if (!derived || v->type == jbvNull)
		return v;
	digest = make_digest(text);
	dv->type = jbvBinary;
	dv->val.binary.data = &digest->root;
	dv->val.binary.len = VARSIZE(digest) - VARHDRSZ;
	*rewritten = true;
	return dv;
}

/*
 * Check every slot of newslots that differs from oldslots (NULL on insert)
 * and return the slots to store: newslots itself, or a copy in which
 * derived slots are replaced by their digests.  Raises 22023.
 */
Jsonb *
cscp_slots_validate(Jsonb *newslots, Jsonb *oldslots, const char *tenant_id)
{
	SlotPolicy	sp = {tenant_id, NULL, false};
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	JsonbParseState *state = NULL;
	JsonbValue *res = NULL;
	bool		rewritten = false;

	if (!JB_ROOT_IS_OBJECT(newslots) || JB_ROOT_IS_SCALAR(newslots))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("slots must be a JSON object"),
				 errhint("Pass an object such as '{\"active_intent\": \"transfer\"}'.")));

	it = JsonbIteratorInit(&newslots->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue *oldv;
		JsonbValue	dv;

		if (tok == WJB_KEY)
			key = cscp_jsonb_key_cstring(&v);
		if (tok != WJB_VALUE)
		{
			res = pushJsonbValue(&state, tok, tok == WJB_KEY ? &v : NULL);
			continue;
		}
		/* an unchanged slot is kept as it is */
		oldv = oldslots ? cscp_jsonb_get(oldslots, key) : NULL;
		if (oldv != NULL && cscp_jsonb_values_equal(oldv, &v))
		{
			res = pushJsonbValue(&state, tok, &v);
			continue;
		}
		{
			const char *rule = check_slot_allowed(key, &v, &sp);
			MinimalData md;

			minimal_data_of(&sp, "slot", key, &md);
			check_minimal_value(&md, &v);
			res = pushJsonbValue(&state, tok,
								 slot_stored_value(key, rule, &v, &sp, &dv, &rewritten));
		}
	}
	return rewritten ? JsonbValueToJsonb(res) : newslots;
}

/* The string under key of the object v, or NULL (absent, null or not a string). */
static char *
pending_field(JsonbValue *v, const char *key)
{
	JsonbValue *f = getKeyJsonValueFromContainer(v->val.binary.data, key, strlen(key), NULL);

	if (f == NULL || f->type != jbvString)
		return NULL;
	return pnstrdup(f->val.string.val, f->val.string.len);
}

/* Raise 22023: the pending slot does not name a command bound to it. */
static void
unbound_error(const char *slot, const char *detail)
{
	bool		confirmation = (strcmp(slot, "pending_confirmation") == 0);

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("slot \"%s\" does not name a command waiting in this context", slot),
			 errdetail("%s", detail),
			 confirmation ?
			 errhint("Let cscp.command_submit ask for the confirmation; it sets the slot.") :
			 errhint("Ask for an approval with cscp.command_transition(..., 'authz_pending', 'approval_required'); it sets the slot.")));
}

/*
 * Hold one pending slot (pending_confirmation or pending_approval, an
 * object of the right shape) to its command, read as the caller: of the
 * context's tenant, conversation, actor and context, in
 * confirmation_required (authz_pending for an approval), with the window
 * the slot gives; a confirmation's idempotency key and target fingerprint
 * are the command's too.  The caller is connected to SPI.
 */
static void
check_pending_binding(const char *slot, JsonbValue *v, Datum *key)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[5] = {TEXTOID, UUIDOID, TEXTOID, TEXTOID, UUIDOID};
	bool		confirmation = (strcmp(slot, "pending_confirmation") == 0);
	char	   *id = pending_field(v, "command_id");
	char	   *expires = pending_field(v, "expires_at");
	Datum		args[5];
	HeapTuple	row;
	TupleDesc	desc;
	char	   *state;
	bool		isnull;
	Datum		window;
	TimestampTz given;

	if (id == NULL || expires == NULL || !cscp_parse_timestamptz(expires, &given))
		return;					/* check_pending_shape refuses it */
	args[0] = key[0];
	args[1] = DirectFunctionCall1(uuid_in, CStringGetDatum(id));
	args[2] = key[1];
	args[3] = key[2];
	args[4] = key[3];
	cscp_spi_plan(&plan,
				  "SELECT x.state::pg_catalog.text, x.window_expires_at, x.idempotency_key, x.target_fingerprint"
				  "  FROM cscp.command x"
				  " WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.command_id OPERATOR(pg_catalog.=) $2 AND x.conversation_id OPERATOR(pg_catalog.=) $3"
				  "   AND x.actor_id OPERATOR(pg_catalog.=) $4 AND x.context_id OPERATOR(pg_catalog.=) $5",
				  5, argtypes);
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the command of a pending slot");
	if (SPI_processed == 0)
		unbound_error(slot, psprintf("Command %s is not a command of this context's conversation, actor and context.", id));
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	state = SPI_getvalue(row, desc, 1);
	if (strcmp(state, confirmation ? "confirmation_required" : "authz_pending") != 0)
		unbound_error(slot, psprintf("Command %s is %s, not waiting for %s.", id, state,
									 confirmation ? "a confirmation" : "an approval"));
	window = SPI_getbinval(row, desc, 2, &isnull);
	if (isnull || DatumGetTimestampTz(window) != given)
		unbound_error(slot, psprintf("The slot's \"expires_at\" is not the end of the command's window (%s).",
									 isnull ? "none" : cscp_utc_iso(DatumGetTimestampTz(window))));
	if (confirmation)
	{
		char	   *key_given = pending_field(v, "idempotency_key");
		char	   *key_cmd = SPI_getvalue(row, desc, 3);
		char	   *fp_given = pending_field(v, "target_fingerprint");
		char	   *fp_cmd = SPI_getvalue(row, desc, 4);

		if (key_given == NULL || strcmp(key_given, key_cmd) != 0)
			unbound_error(slot, "The slot's \"idempotency_key\" is not the command's.");
		if ((fp_given == NULL) != (fp_cmd == NULL) ||
			(fp_given != NULL && strcmp(fp_given, fp_cmd) != 0))
			unbound_error(slot, "The slot's \"target_fingerprint\" is not the command's.");
	}
}

/*
 * Hold the pending_confirmation and pending_approval slots of a context
 * being written (newslots; oldslots NULL on insert) to their commands:
 * each that changes to an object must name a command bound to it
 * (check_pending_binding).  The context's tenant, id, conversation and
 * actor identify it.  Raises 22023.
 */
void
cscp_pending_slots_bound(Jsonb *newslots, Jsonb *oldslots, Datum tenant, Datum context_id,
						 Datum conversation, Datum actor)
{
	static const char *const keys[2] = {"pending_confirmation", "pending_approval"};
	Datum		key[4] = {tenant, conversation, actor, context_id};
	bool		connected = false;

	if (!JB_ROOT_IS_OBJECT(newslots) || JB_ROOT_IS_SCALAR(newslots))
		return;
	for (int i = 0; i < 2; i++)
	{
		JsonbValue *v = cscp_jsonb_get(newslots, keys[i]);
		JsonbValue *oldv;

		if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
			continue;
		oldv = oldslots ? cscp_jsonb_get(oldslots, keys[i]) : NULL;
		if (oldv != NULL && cscp_jsonb_values_equal(oldv, v))
			continue;
		if (!connected)
		{
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			connected = true;
		}
		check_pending_binding(keys[i], v, key);
	}
	if (connected)
		SPI_finish();
}

/*
 * The slots readers may see: unknown names (left by an earlier policy or
 * written around the rules) are dropped.  Returns slots itself when every
 * name is known.
 */
Jsonb *
cscp_slots_visible(Jsonb *slots, Jsonb *policy)
{
	SlotPolicy	sp = {NULL, policy, true};
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbParseState *state = NULL;
	JsonbValue *res = NULL;
	bool		dropped = false;
	bool		skip = false;

	if (!JB_ROOT_IS_OBJECT(slots) || JB_ROOT_IS_SCALAR(slots))
		return slots;
	it = JsonbIteratorInit(&slots->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			skip = !slot_name_known(cscp_jsonb_key_cstring(&v), &sp);
			dropped |= skip;
			if (!skip)
				res = pushJsonbValue(&state, tok, &v);
		}
		else if (tok == WJB_VALUE)
		{
			if (!skip)
				res = pushJsonbValue(&state, tok, &v);
		}
		else
			res = pushJsonbValue(&state, tok, NULL);
	}
	return dropped ? JsonbValueToJsonb(res) : slots;
}

PG_FUNCTION_INFO_V1(cscp_slots_visible_sql);

/* cscp.slots_visible(tenant_id text, slots jsonb) RETURNS jsonb */
Datum
cscp_slots_visible_sql(PG_FUNCTION_ARGS)
{
	Jsonb	   *slots = PG_GETARG_JSONB_P(1);
	Jsonb	   *policy = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		all_builtin = true;

	/* Fast path: no policy lookup when every name is built in. */
	if (JB_ROOT_IS_OBJECT(slots) && !JB_ROOT_IS_SCALAR(slots))
	{
		it = JsonbIteratorInit(&slots->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *name;

			if (tok != WJB_KEY)
				continue;
			name = cscp_jsonb_key_cstring(&v);
			if (!is_minimum_slot(name) && !is_x_slot(name))
			{
				all_builtin = false;
				break;
			}
		}
	}
	if (all_builtin)
		PG_RETURN_JSONB_P(slots);
	policy = cscp_policy_get(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_JSONB_P(cscp_slots_visible(slots, policy));
}
