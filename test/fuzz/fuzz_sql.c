/*-------------------------------------------------------------------------
 *
 * fuzz_sql.c
 *	  Hostile input for every SQL function of schema cscp (test/scripts/fuzz.sh).
 *
 * Usage: fuzz_sql SEED CALLS APP_ROLE TENANT FAIL_FILE GATEWAY_ROLE BYSTANDER
 *				   KEY_VALID KEY_OTHER KEY_REVOKED
 *	  Connects three times through the environment (PGHOST, ...): as the
 *	  superuser (PGUSER), as APP_ROLE (bound to TENANT by cscp.grant_app)
 *	  and as GATEWAY_ROLE (cscp.grant_gateway).  BYSTANDER is a tenant
 *	  neither role is bound to nor holds a valid key of; KEY_VALID is an API
 *	  key of TENANT, KEY_OTHER one of a third tenant, KEY_REVOKED a revoked
 *	  key of BYSTANDER.
 *
 * The functions are read from pg_proc (every function of schema cscp but
 * trigger functions), so a function added later is fuzzed without a change
 * here.  Each call picks a function, how many of its defaulted arguments to
 * pass, and for each argument a value from a generator chosen by the
 * argument's type and name: mostly plausible values (the tenant, ids of
 * rows that exist, ConversationTurns, JSON Schemas, policy settings, slot
 * names) with one part mutated, or adversarial ones (deep and huge JSON,
 * wrong JSON types, \u0000 and lone surrogates, RTL and combining marks,
 * invalid UTF-8, very long ids, 1e308, -0, huge integers, SQL
 * metacharacters, NULL).  An argument of a table's row type (cscp.context,
 * cscp.command, cscp.evidence) is a row that exists, with fields set to
 * NULL at random, others replaced by a value of the wrong shape (a JSON
 * string for an object, an array holding NULL), or broken as text.  Values
 * travel as text parameters of a statement whose text comes from the
 * catalog only.  Every function is called both as APP_ROLE and as the
 * superuser: a quarter of the calls of a function APP_ROLE may execute run
 * as the superuser, and a third of the calls of one it may not (the
 * internal functions, administration) run as APP_ROLE, where they must be
 * refused with 42501 and nothing else.  A call as APP_ROLE names TENANT in
 * cscp.tenant_id mostly, and now and then no tenant, or BYSTANDER.  The
 * gateway's endpoints (cscp.http_*) are called as GATEWAY_ROLE too, with
 * the Authorization header holding the valid key, the other tenant's, the
 * revoked one, a mangled one or garbage; a few calls as GATEWAY_ROLE go to
 * the functions it may not execute, and must be refused with 42501.
 *
 * It fails (exit 1, the call written to FAIL_FILE as SQL one can paste) on:
 *	- a lost connection (the server crashed, or the backend died);
 *	- SQLSTATE class XX (internal error, data corrupted) or 58 (system error);
 *	- a statement timeout (57014): hostile input must not hang a call;
 *	- a call as APP_ROLE of a function it may not execute that is not
 *	  refused with 42501 (unless an argument is not even valid input of
 *	  its type);
 *	- a refused call (one that raised, or an endpoint that answered 4xx or
 *	  5xx) after which any row of any table of schema cscp differs: the
 *	  fingerprint (row count and sum of row hashes per table) taken after
 *	  every call must equal the one before;
 *	- a call as APP_ROLE or GATEWAY_ROLE, refused or not, after which a row
 *	  of BYSTANDER differs (same fingerprint, over the rows of that tenant);
 *	- a call as APP_ROLE or GATEWAY_ROLE whose result or error holds the
 *	  word BYSTANDER_WORD, which only BYSTANDER's rows hold (fuzz.sh);
 *	- at the end, cscp.check_invariants() returning a row.
 * It prints the seed, the calls made and the SQLSTATEs seen per function.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libpq-fe.h"

#define MAX_FUNCS 256
#define BYSTANDER_WORD "zqsecret"	/* in the bystander's rows only (fuzz.sh) */
#define MAX_ARGS 16
#define POOL 64
#define STATES 64

typedef struct Func
{
	char	   *name;			/* quoted, schema-qualified */
	char	   *label;			/* plain name */
	char	   *oid;			/* pg_proc oid, as text */
	int			strict;
	int			nargs;
	int			ndefaults;
	char	   *argtype[MAX_ARGS];	/* format_type() of each IN argument */
	char	   *argname[MAX_ARGS];
	int			app_may_execute;
	int			gw_may_execute;
	int			is_endpoint;	/* cscp.http_*, SECURITY DEFINER */
	long		calls;
	double		seconds;		/* spent in its calls */
	int			nstates;
	char		state[STATES][6];
	long		state_count[STATES];
} Func;

typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} Buf;

static Func funcs[MAX_FUNCS];
static int	nfuncs;
static PGconn *admin;
static PGconn *app;
static PGconn *gw;
static const char *gw_role;
static const char *bystander;
static const char *key_valid,
		   *key_other,
		   *key_revoked;
static const char *app_tenant_now;	/* what cscp.tenant_id holds on app */
static const char *tenant;
static char *tenant_literal;	/* tenant as an SQL literal */
static const char *app_role;
static const char *fail_file;
static char *fingerprint_sql;
static char *bystander_sql;
static uint64_t rng;
static int	plausible;			/* this argument: plausible values only */

/* pools of values that exist in the database, refreshed as the run goes */
static char *pool_context_id[POOL],
		   *pool_command_id[POOL],
		   *pool_context_row[POOL],
		   *pool_command_row[POOL],
		   *pool_evidence_row[POOL],
		   *pool_context_json[POOL],
		   *pool_command_json[POOL],
		   *pool_evidence_json[POOL],
		   *pool_fact_id[POOL];
static int	n_context_id,
			n_command_id,
			n_context_row,
			n_command_row,
			n_evidence_row,
			n_context_json,
			n_command_json,
			n_evidence_json,
			n_fact_id;

static void
die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "fuzz_sql: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* xorshift64*: the whole run follows from the seed */
static uint64_t
next_random(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

static int
rnd(int n)
{
	return (int) (next_random() % (uint64_t) n);
}

static int
chance(int percent)
{
	return rnd(100) < percent;
}

#define PICK(arr) ((arr)[rnd((int) (sizeof(arr) / sizeof((arr)[0])))])

static void
buf_grow(Buf *b, size_t more)
{
	if (b->len + more + 1 > b->cap)
	{
		b->cap = (b->len + more + 1) * 2;
		b->data = realloc(b->data, b->cap);
		if (!b->data)
			die("out of memory");
	}
}

static void
put(Buf *b, const char *s)
{
	size_t		n = strlen(s);

	buf_grow(b, n);
	memcpy(b->data + b->len, s, n + 1);
	b->len += n;
}

static void
putf(Buf *b, const char *fmt,...)
{
	va_list		ap;
	char		tmp[512];

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	put(b, tmp);
}

static char *
take(Buf *b)
{
	char	   *s = b->data ? b->data : strdup("");

	b->data = NULL;
	b->len = b->cap = 0;
	return s;
}

static PGresult *
query(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
		die("%s: %s", sql, PQerrorMessage(c));
	return r;
}

/* ---------------------------------------------------------------- values */

/* Strings that are hostile to something: quoting, encodings, lengths. */
static const char *const nasty_strings[] = {
	"", " ", "'", "''", "\"", "\\", "\\\\'", "'; DROP TABLE cscp.context; --",
	"%s%s%s%n", "$1", "$$", "E'\\x00'", "NULL", "null", "*", "%", "_", "..", "../../etc/passwd",
	"\t\n\r", "\x01\x02\x7f", "\xe2\x80\xae" "RTL override", "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
	"e\xcc\x81\xcc\x81\xcc\x81", "\xef\xbb\xbf" "bom", "\xe2\x80\x8b", "\xf0\x9f\x98\x80",
	"\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xc3\x28", "\xed\xa0\x80", "\xff\xfe", "\xe2\x82",
	"x_", "x_ok", "active_intent", "pending_confirmation", "sha256:", "1e308", "-0", "NaN",
	"Infinity", "-1", "00000000-0000-0000-0000-000000000000", "{}", "[]", "{\"a\":1}",
};

static void
long_string(Buf *b, size_t n)
{
	static const char *const pieces[] = {"a", "\xc3\xa9", "\xf0\x9f\x98\x80", "'", "\\", "e\xcc\x81"};
	const char *piece = PICK(pieces);

	while (b->len < n)
		put(b, piece);
}

static char *
gen_nasty_text(void)
{
	Buf			b = {0};

	switch (rnd(6))
	{
		case 0:
			long_string(&b, chance(10) ? 1000000 : (size_t) (64 + rnd(20000)));
			break;
		case 1:
			for (int i = rnd(8); i >= 0; i--)
				put(&b, PICK(nasty_strings));
			break;
		default:
			put(&b, PICK(nasty_strings));
	}
	return take(&b);
}

static const char *const conversations[] = {"c1", "c2", "c3", "fuzz-conv"};
static const char *const actors[] = {"user-1", "user-2", "agent", "approver"};
static const char *const slot_names[] = {
	"active_intent", "active_target", "pending_confirmation", "pending_approval",
	"last_result", "work_item_id", "x_note", "x_", "x_a_1", "unknown", "X_BIG"
};
static const char *const command_states[] = {
	"received", "canonicalized", "confirmation_required", "confirmed", "authz_pending",
	"authorized", "rejected", "started", "executed", "failed", "canceled", "compensated"
};
static const char *const context_states[] = {"active", "pending", "blocked", "closed", "expired"};
static const char *const recover_kinds[] = {"retry", "cancel", "reprocess", "compensate"};
static const char *const scopes[] = {"global", "task", "hypothetical", "draft", "session"};
static const char *const memory_types[] = {"user", "capability", "organizational"};
static const char *const authorities[] = {"policy", "manager", "employee", "guest", "cfo", "intern"};
static const char *const fact_keys[] = {"address", "travel_budget", "name", "diet", "m-1"};

/* A plausible text for an argument, by its name. */
static char *
gen_plausible_text(const char *name)
{
	char		tmp[128];

	if (strcmp(name, "tenant_id") == 0)
		return strdup(chance(90) ? tenant : PICK(((const char *const[]) {"other", "*", "", "bystander"})));
	if (strstr(name, "conversation_id") || strcmp(name, "session_id") == 0 || strcmp(name, "scope_id") == 0)
	{
		if (chance(50))
			return strdup(PICK(conversations));
		snprintf(tmp, sizeof(tmp), "conv-%d", rnd(60));
		return strdup(tmp);
	}
	if (strstr(name, "actor") || strstr(name, "approver") || strstr(name, "subject") ||
		strcmp(name, "who") == 0 || strcmp(name, "agent_id") == 0)
		return strdup(PICK(actors));
	if (strcmp(name, "slot") == 0)
		return strdup(PICK(slot_names));
	if (strcmp(name, "kind") == 0)
		return strdup(PICK(recover_kinds));
	if (strcmp(name, "scope") == 0)
		return strdup(PICK(scopes));
	if (strcmp(name, "memory_type") == 0)
		return strdup(PICK(memory_types));
	if (strcmp(name, "authority") == 0)
		return strdup(PICK(authorities));
	if (strcmp(name, "key") == 0 || strcmp(name, "supersedes") == 0 || strcmp(name, "fact_id") == 0)
	{
		if (n_fact_id && chance(50))
			return strdup(pool_fact_id[rnd(n_fact_id)]);
		return strdup(PICK(fact_keys));
	}
	if (strstr(name, "state") || strcmp(name, "to_status") == 0)
		return strdup(PICK(command_states));
	/* the ids of the LangGraph checkpoints, store and sessions fuzz.sh wrote, of both tenants */
	if (strcmp(name, "thread_id") == 0)
		return strdup(PICK(((const char *const[]) {"th-1", "th-1", "th-2"})));
	if (strcmp(name, "checkpoint_id") == 0 || strcmp(name, "parent_checkpoint_id") == 0)
		return strdup(PICK(((const char *const[]) {"c-1", "c-2", "c-3"})));
	if (strcmp(name, "checkpoint_ns") == 0)
		return strdup(chance(80) ? "" : "inner");
	if (strcmp(name, "task_id") == 0)
		return strdup("task-a");
	if (strcmp(name, "detail_level") == 0)
		return strdup(PICK(((const char *const[]) {"none", "summary", "full"})));
	snprintf(tmp, sizeof(tmp), "%s-%d", name, rnd(50));
	return strdup(tmp);
}

/* A random JSON number literal, extreme ones often. */
static void
gen_number(Buf *b)
{
	static const char *const extremes[] = {
		"0", "-0", "1", "-1", "0.5", "1e308", "-1e308", "1e-308", "1.7976931348623157e308",
		"123456789012345678901234567890123456789", "-9223372036854775809", "9223372036854775808",
		"2147483648", "-2147483649", "1.50", "1E+2", "1e1000", "1e-1000", "0.0000000000000000001"
	};

	if (chance(60))
		put(b, PICK(extremes));
	else
		putf(b, "%d", rnd(2000) - 1000);
}

/* A JSON string literal, hostile escapes included. */
static void
gen_json_string(Buf *b)
{
	static const char *const escapes[] = {
		"\\u0000", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u202e", "\\u0301", "\\ufeff",
		"\\\"", "\\\\", "\\n", "\\u001f", "\\/", "\\uFFFF", "\\uDBFF\\uDFFF"
	};
	const char *plain = PICK(((const char *const[]) {
		"hello", "", "user", "agent", "system", "x_note", "sha256:abc", "\xe2\x80\xae" "abc",
		"e\xcc\x81", "\xf0\x9f\x98\x80", "'; DROP TABLE cscp.turn; --", "1e308", "type"
	}));

	put(b, "\"");
	if (chance(15))
		put(b, PICK(escapes));
	put(b, plain);
	if (chance(2))
		long_string(b, b->len + 100000);
	put(b, "\"");
}

static void gen_json(Buf *b, int depth);

static void
gen_json_object(Buf *b, int depth)
{
	int			n = rnd(5);

	put(b, "{");
	for (int i = 0; i < n; i++)
	{
		if (i)
			put(b, ",");
		if (chance(70))
			putf(b, "\"%s\"", PICK(((const char *const[]) {
				"messageId", "from", "content", "ts", "role", "turnIndex", "type", "text", "a",
				"properties", "required", "items", "x_note", "active_intent", "user_id", ""
			})));
		else
			gen_json_string(b);
		put(b, ":");
		gen_json(b, depth + 1);
	}
	put(b, "}");
}

/* A random JSON value, at most a few levels deep. */
static void
gen_json(Buf *b, int depth)
{
	switch (depth > 4 ? rnd(4) : rnd(6))
	{
		case 0:
			put(b, PICK(((const char *const[]) {"null", "true", "false"})));
			break;
		case 1:
			gen_number(b);
			break;
		case 2:
		case 3:
			gen_json_string(b);
			break;
		case 4:
			{
				int			n = rnd(5);

				put(b, "[");
				for (int i = 0; i < n; i++)
				{
					if (i)
						put(b, ",");
					gen_json(b, depth + 1);
				}
				put(b, "]");
				break;
			}
		default:
			gen_json_object(b, depth);
	}
}

/* JSON that is hostile by its size or depth. */
static void
gen_json_monster(Buf *b)
{
	int			n;

	switch (rnd(5))
	{
		case 0:					/* deep arrays */
			n = PICK(((const int[]) {63, 64, 65, 100, 1000, 5000}));
			for (int i = 0; i < n; i++)
				put(b, "[");
			for (int i = 0; i < n; i++)
				put(b, "]");
			break;
		case 1:					/* deep objects */
			n = PICK(((const int[]) {63, 64, 65, 200, 2000}));
			for (int i = 0; i < n; i++)
				put(b, "{\"a\":");
			put(b, "1");
			for (int i = 0; i < n; i++)
				put(b, "}");
			break;
		case 2:					/* wide array */
			n = PICK(((const int[]) {1000, 20000, 100000}));
			put(b, "[");
			for (int i = 0; i < n; i++)
				put(b, i ? ",1" : "1");
			put(b, "]");
			break;
		case 3:					/* wide object */
			n = PICK(((const int[]) {1000, 20000}));
			put(b, "{");
			for (int i = 0; i < n; i++)
				putf(b, "%s\"k%d\":%d", i ? "," : "", i, i);
			put(b, "}");
			break;
		default:				/* one huge string */
			put(b, "{\"content\":\"");
			long_string(b, chance(30) ? 1100000 : 200000);
			put(b, "\"}");
	}
}

/* A ConversationTurn, often with one field wrong. */
static void
gen_turn(Buf *b)
{
	int			wrong = chance(plausible ? 25 : 60) ? rnd(8) : -1;

	put(b, "{");
	if (wrong != 0)
		putf(b, "\"messageId\":\"m-%d\",", rnd(200));
	put(b, "\"from\":");
	if (wrong == 1)
		gen_json(b, 3);
	else
		putf(b, "\"%s\"", PICK(actors));
	put(b, ",\"content\":");
	if (wrong == 2)
		gen_json_monster(b);
	else
		gen_json(b, 2);
	put(b, ",\"ts\":");
	if (wrong == 3)
		gen_json(b, 3);
	else
		putf(b, "%d", 1700000000 + rnd(1000));
	put(b, ",\"role\":");
	if (wrong == 4)
		gen_json(b, 3);
	else
		putf(b, "\"%s\"", PICK(((const char *const[]) {"user", "agent", "system"})));
	if (wrong == 5 || chance(30))
	{
		put(b, ",\"turnIndex\":");
		if (wrong == 5)
			gen_number(b);
		else
			putf(b, "%d", rnd(6));
	}
	if (wrong == 6)
		put(b, ",\"turnindex\":1");
	if (wrong == 7)
		put(b, ",\"messageId\":null");
	put(b, "}");
}

/* A JSON Schema of cscp's subset, often malformed, with hostile patterns. */
static void
gen_schema(Buf *b, int depth)
{
	static const char *const keywords[] = {
		"type", "enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum",
		"exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "items",
		"required", "properties", "additionalProperties", "allOf", "anyOf", "oneOf", "not",
		"$ref", "format", "$schema", "title", "default", "patternProperties"
	};
	int			n = 1 + rnd(3);

	put(b, "{");
	for (int i = 0; i < n; i++)
	{
		const char *kw = PICK(keywords);

		putf(b, "%s\"%s\":", i ? "," : "", kw);
		if (chance(15))
			gen_json(b, 3);
		else if (strcmp(kw, "type") == 0)
			putf(b, "\"%s\"", PICK(((const char *const[]) {"object", "string", "integer", "number", "array", "null", "boolean", "float"})));
		else if (strcmp(kw, "pattern") == 0)
			put(b, PICK(((const char *const[]) {
				"\"^a+$\"", "\"(a+)+$\"", "\"((a*)*)*b\"", "\"[\"", "\"\\\\\"", "\"(?<n>a)\"",
				"\"\\\\p{L}\"", "\"a{1,100000}\"", "\"(\"", "\"\\u0000\"", "\"^(\\\\d+)\\\\1$\""
			})));
		else if (strcmp(kw, "properties") == 0 && depth < 3)
		{
			put(b, "{\"text\":");
			gen_schema(b, depth + 1);
			put(b, "}");
		}
		else if ((strcmp(kw, "items") == 0 || strcmp(kw, "not") == 0 ||
				  strcmp(kw, "additionalProperties") == 0) && depth < 3)
			gen_schema(b, depth + 1);
		else if ((strcmp(kw, "allOf") == 0 || strcmp(kw, "anyOf") == 0 || strcmp(kw, "oneOf") == 0) && depth < 3)
		{
			put(b, "[");
			gen_schema(b, depth + 1);
			put(b, ",");
			gen_schema(b, depth + 1);
			put(b, "]");
		}
		else if (strcmp(kw, "required") == 0 || strcmp(kw, "enum") == 0)
			put(b, PICK(((const char *const[]) {"[\"text\"]", "[]", "[\"a\",\"a\"]", "[1,{\"a\":[1]}]", "\"text\""})));
		else
			gen_number(b);
	}
	put(b, "}");
}

/* Policy settings: known keys with right or wrong values. */
static void
gen_settings(Buf *b)
{
	static const char *const keys[] = {
		"context_ttl", "confirmation_ttl", "approval_ttl", "context_ttl_mode", "max_ttl",
		"retention_closed", "retention_expired", "retention_turns", "retention_evidence",
		"max_slot_bytes", "slot_rules", "extension_slots", "detail_level", "auto_confirm",
		"turn_content", "replay_divergence", "fact_budget_share", "supersede_same_key", "unknown"
	};
	static const char *const values[] = {
		"\"10 minutes\"", "\"-1 day\"", "\"0\"", "\"178000000 years\"", "\"fixed\"", "\"sliding\"",
		"4096", "0", "-1", "1e308", "{\"x_note\":\"derived\"}", "{\"active_target\":\"forbidden\"}",
		"[\"x_note\"]", "\"full\"", "\"reference\"", "\"error\"", "0.5", "0", "1.0000001", "true",
		"[\"cancel_order\"]", "null", "\"garbage\""
	};
	int			n = 1 + rnd(3);

	put(b, "{");
	for (int i = 0; i < n; i++)
		putf(b, "%s\"%s\":%s", i ? "," : "", PICK(keys), chance(10) ? "{}" : PICK(values));
	put(b, "}");
}

/* A plausible JSON value for an argument, by its name. */
static char *
gen_plausible_json(const char *name)
{
	Buf			b = {0};

	if (strcmp(name, "turn") == 0 || strcmp(name, "initial_turn") == 0 || strcmp(name, "instance") == 0)
		gen_turn(&b);
	else if (strcmp(name, "schema") == 0)
		gen_schema(&b, 0);
	else if (strcmp(name, "settings") == 0 || strcmp(name, "policy") == 0)
		gen_settings(&b);
	else if (strcmp(name, "slots") == 0)
		putf(&b, "{\"%s\":%s}", PICK(slot_names), chance(50) ? "\"v\"" : "{\"command_id\":null}");
	else if (strcmp(name, "identity") == 0)
		putf(&b, "{\"user_name\":\"%s\",\"user_id\":\"%s\",\"authority\":\"%s\",\"permissions\":%s}",
			 PICK(actors), PICK(actors), PICK(authorities), chance(80) ? "[\"read\"]" : "\"read\"");
	else if (strcmp(name, "source") == 0)
		putf(&b, "{\"type\":\"%s\",\"authority\":\"%s\",\"turn_index\":%d}",
			 PICK(((const char *const[]) {"conversation", "policy", "manager", "tool", "x"})),
			 PICK(authorities), rnd(5));
	else
		gen_json_object(&b, 1);
	return take(&b);
}

static char *
gen_jsonb(const char *name)
{
	Buf			b = {0};

	if (chance(65))
		return gen_plausible_json(name);
	switch (rnd(4))
	{
		case 0:
			gen_json_monster(&b);
			break;
		case 1:
			put(&b, PICK(((const char *const[]) {"not json", "{", "{\"a\":}", "[1,]", "'", "", "{\"a\":1}x"})));
			break;
		default:
			gen_json(&b, 0);
	}
	return take(&b);
}

static char *
gen_uuid(const char *name)
{
	char		tmp[64];

	if (strstr(name, "command") && n_command_id && chance(70))
		return strdup(pool_command_id[rnd(n_command_id)]);
	if (strstr(name, "context") && n_context_id && chance(70))
		return strdup(pool_context_id[rnd(n_context_id)]);
	if (chance(30) && n_command_id)
		return strdup(pool_command_id[rnd(n_command_id)]);
	switch (rnd(4))
	{
		case 0:
			return strdup(PICK(((const char *const[]) {
				"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
				"not-a-uuid", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", ""
			})));
		default:
			snprintf(tmp, sizeof(tmp), "%08x-%04x-4%03x-8%03x-%012llx", (unsigned) next_random(),
					 rnd(65536), rnd(4096), rnd(4096), (unsigned long long) (next_random() & 0xffffffffffffULL));
			return strdup(tmp);
	}
}

static char *
gen_integer(const char *type)
{
	static const char *const ints[] = {
		"0", "-1", "1", "2", "10", "100", "2147483647", "-2147483648", "2147483648",
		"9223372036854775807", "-9223372036854775808", "99999999999999999999", "1e308", "-0", "1.5", "x"
	};
	char		tmp[32];

	if (chance(50))
		return strdup(PICK(ints));
	snprintf(tmp, sizeof(tmp), "%d", strcmp(type, "bigint") == 0 ? rnd(100000) : rnd(200) - 20);
	return strdup(tmp);
}

static char *
gen_interval(void)
{
	return strdup(PICK(((const char *const[]) {
		"15 minutes", "1 second", "0", "-1 day", "1 microsecond", "30 days", "31 days",
		"178000000 years", "-178000000 years", "1 century", "P1D", "garbage", "1e308 seconds"
	})));
}

static char *
gen_text_array(void)
{
	Buf			b = {0};
	int			n;

	switch (rnd(5))
	{
		case 0:
			put(&b, PICK(((const char *const[]) {"{}", "{\"\"}", "{NULL}", "{{a},{b}}", "{", "not an array", "{a,NULL,b}"})));
			break;
		case 1:
			n = PICK(((const int[]) {100, 10000}));
			put(&b, "{");
			for (int i = 0; i < n; i++)
				putf(&b, "%sm%d", i ? "," : "", i);
			put(&b, "}");
			break;
		default:
			n = 1 + rnd(3);
			put(&b, "{");
			for (int i = 0; i < n; i++)
			{
				putf(&b, "%s\"", i ? "," : "");
				if (chance(20))
				{
					char	   *s = gen_nasty_text();

					/* inside the quotes, without what would end them */
					for (char *p = s; *p; p++)
						if (*p == '"' || *p == '\\')
							*p = '_';
					put(&b, s);
					free(s);
				}
				else
					putf(&b, "m-%d", rnd(200));
				put(&b, "\"");
			}
			put(&b, "}");
	}
	return take(&b);
}

static char *
gen_row(char **pool, int n)
{
	char	   *s;

	if (n == 0 || chance(20))
		return strdup(PICK(((const char *const[]) {"()", "(,,,)", "garbage", "(x)"})));
	s = strdup(pool[rnd(n)]);
	if (chance(40))
	{
		/* overwrite one stretch with junk: a field of the wrong type, or a broken literal */
		size_t		len = strlen(s);
		size_t		at = len ? (size_t) rnd((int) len) : 0;

		for (size_t i = at; i < len && i < at + 1 + (size_t) rnd(8); i++)
			s[i] = PICK(((const char[]) {'x', ',', '"', '(', '1', '\\'}));
	}
	return s;
}

/*
 * A row of type (a table's row type) as text: one of the pool (as JSON) with
 * each field, at random, kept, set to NULL, or given a value of the wrong
 * shape (a JSON string for an object, an array holding one NULL for an
 * array); built by the server (jsonb_populate_record) from a mask drawn here,
 * so that the run still follows from the seed.  Now and then the row of
 * gen_row instead: all NULL, or broken as text.
 */
static char *
gen_row_fields(const char *type, char **pool, int n, char **textpool, int ntext)
{
	char		mask[128];
	char		sql[512];
	const char *params[2];
	PGresult   *r;
	char	   *s;
	int			nulls = PICK(((const int[]) {5, 20, 50, 100}));

	if (n == 0 || chance(15))
		return gen_row(textpool, ntext);
	for (size_t i = 0; i < sizeof(mask) - 1; i++)
		mask[i] = chance(nulls) ? '1' : (chance(10) ? '2' : '0');
	mask[sizeof(mask) - 1] = '\0';
	snprintf(sql, sizeof(sql),
			 "SELECT jsonb_populate_record(NULL::%s, (SELECT jsonb_object_agg(e.key, CASE substr($2::text, e.i::int, 1)"
			 " WHEN '1' THEN 'null'::jsonb"
			 " WHEN '2' THEN CASE jsonb_typeof(e.value) WHEN 'object' THEN '\"x\"'::jsonb"
			 "               WHEN 'array' THEN '[null]'::jsonb ELSE e.value END"
			 " ELSE e.value END) FROM jsonb_each($1::jsonb) WITH ORDINALITY e(key, value, i)))::text",
			 type);
	params[0] = pool[rnd(n)];
	params[1] = mask;
	r = PQexecParams(admin, sql, 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQgetisnull(r, 0, 0))
	{
		PQclear(r);
		return gen_row(textpool, ntext);
	}
	s = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return s;
}

/* An Authorization header: a key of each kind, mangled now and then, or garbage. */
static char *
gen_auth(void)
{
	Buf			b = {0};
	const char *key;
	int			k = rnd(100);

	if (k < 10)
		return gen_nasty_text();
	key = k < 60 ? key_valid : k < 75 ? key_other : key_revoked;
	put(&b, chance(90) ? "Bearer " : PICK(((const char *const[]) {"bearer  ", "Basic ", "", "Bearer\t"})));
	put(&b, key);
	if (chance(8))
	{
		/* one character changed: a key that names a tenant but is not valid */
		size_t		at = 5 + (size_t) rnd((int) (b.len - 5));

		b.data[at] = b.data[at] == 'A' ? 'B' : 'A';
	}
	if (chance(3))
		put(&b, PICK(((const char *const[]) {" ", "x", "\n", ".x"})));
	return take(&b);
}

/* A request body: JSON text, mostly, as the gateway passes it. */
static char *
gen_body(void)
{
	Buf			b = {0};

	switch (rnd(6))
	{
		case 0:
			gen_turn(&b);
			break;
		case 1:
			putf(&b, "{\"value\":\"%s\"}", PICK(actors));
			break;
		case 2:
			putf(&b, "{\"slots\":{\"%s\":\"v\"},\"command\":\"cancel_order\",\"idempotency_key\":\"k-%d\","
				 "\"source_message_ids\":[\"m-%d\"],\"to\":\"%s\",\"message_id\":\"m-%d\",\"accept\":%s}",
				 PICK(slot_names), rnd(50), rnd(50), PICK(command_states), rnd(50), chance(50) ? "true" : "false");
			break;
		case 3:
			return gen_jsonb("body");
		default:
			gen_json_object(&b, 1);
	}
	return take(&b);
}

/* One argument's value as text, or NULL for SQL NULL. */
static char *
gen_arg(const char *type, const char *name)
{
	if (strcmp(type, "text") == 0 && strcmp(name, "auth") == 0)
		return chance(2) ? NULL : gen_auth();
	if (strcmp(type, "text") == 0 && strcmp(name, "content_type") == 0 && chance(85))
		return strdup(PICK(((const char *const[]) {"application/json", "application/json; charset=utf-8"})));
	if (strcmp(type, "text") == 0 && strcmp(name, "body") == 0 && chance(85))
		return gen_body();
	if (plausible)
	{
		if (strcmp(type, "jsonb") == 0)
			return gen_plausible_json(name);
		if (strcmp(type, "text") == 0)
			return gen_plausible_text(name);
		if (strcmp(type, "integer") == 0 || strcmp(type, "bigint") == 0)
			return strdup(PICK(((const char *const[]) {"1", "5", "60", "600", "1000"})));
		if (strcmp(type, "interval") == 0)
			return strdup(PICK(((const char *const[]) {"15 minutes", "1 hour", "1 day"})));
	}
	else if (chance(4))
		return NULL;
	if (strcmp(type, "jsonb") == 0)
		return gen_jsonb(name);
	if (strcmp(type, "uuid") == 0)
		return gen_uuid(name);
	if (strcmp(type, "boolean") == 0)
		return strdup(chance(95) ? PICK(((const char *const[]) {"t", "f"})) : "maybe");
	if (strcmp(type, "integer") == 0 || strcmp(type, "bigint") == 0)
		return gen_integer(type);
	if (strcmp(type, "interval") == 0)
		return gen_interval();
	if (strcmp(type, "bytea[]") == 0 && chance(80))
		return strdup(PICK(((const char *const[]) {"{\"\\\\x01\"}", "{}", "{\"\\\\x\"}", "{NULL}", "{\"\\\\x7b7d\",\"\\\\x00\"}"})));
	if (strcmp(type, "integer[]") == 0 && chance(80))
		return strdup(PICK(((const char *const[]) {"{0}", "{}", "{-1}", "{0,1}", "{2147483647}", "{NULL}"})));
	if (strcmp(type, "text[]") == 0 && strcmp(name, "namespace") == 0 && chance(50))
		return strdup(PICK(((const char *const[]) {"{users,u-1,memories}", "{users}", "{}", "{users,u-1}"})));
	if (strcmp(type, "text[]") == 0)
		return gen_text_array();
	if (strcmp(type, "cscp.command_state") == 0)
		return strdup(chance(90) ? PICK(command_states) : "Started");
	if (strcmp(type, "cscp.context_status") == 0)
		return strdup(chance(90) ? PICK(context_states) : "open");
	if (strcmp(type, "timestamp with time zone") == 0)
		return strdup(PICK(((const char *const[]) {"now", "infinity", "-infinity", "4713-01-01 BC", "294276-12-31", "2026-02-30", "epoch"})));
	/*
	 * Not the application role itself: grant_app(role, tenants) and revoke_app
	 * would bind it elsewhere or take its privileges, and every later call
	 * as the application would only be refused.
	 */
	if (strcmp(type, "name") == 0)
		return strdup(chance(70) ? PICK(((const char *const[]) {"fuzz_bystander", "postgres", "pg_monitor", "public"})) : gen_nasty_text());
	if (strcmp(type, "cscp.context") == 0)
		return gen_row_fields(type, pool_context_json, n_context_json, pool_context_row, n_context_row);
	if (strcmp(type, "cscp.command") == 0)
		return gen_row_fields(type, pool_command_json, n_command_json, pool_command_row, n_command_row);
	if (strcmp(type, "cscp.evidence") == 0)
		return gen_row_fields(type, pool_evidence_json, n_evidence_json, pool_evidence_row, n_evidence_row);
	/* text, and anything else as text */
	return chance(65) ? gen_plausible_text(name) : gen_nasty_text();
}

/* ---------------------------------------------------------------- catalog */

static void
load_functions(void)
{
	PGresult   *r;
	const char *params[2] = {app_role, gw_role};

	/* IN arguments only, in order, with their names (OUT and TABLE columns left out) */
	r = PQexecParams(admin,
					 "SELECT format('%I.%I', n.nspname, p.proname), p.proname, p.pronargdefaults, "
					 "       has_function_privilege($1, p.oid, 'EXECUTE'), "
					 "       array_to_string(ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) WITH ORDINALITY a(t, i) ORDER BY i), '|'), "
					 "       array_to_string(ARRAY(SELECT coalesce(nm, '') FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), "
					 "                                  coalesce(p.proargnames, array_fill(''::text, ARRAY[p.pronargs])), "
					 "                                  coalesce(p.proargmodes, array_fill('i'::\"char\", ARRAY[p.pronargs]))) "
					 "                             WITH ORDINALITY a(t, nm, m, i) WHERE m IN ('i', 'b', 'v') ORDER BY i), '|'), "
					 "       p.oid, p.proisstrict, has_function_privilege($2, p.oid, 'EXECUTE'), "
					 "       p.proname LIKE 'http\\_%' AND p.prosecdef "
					 "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
					 " WHERE n.nspname = 'cscp' AND p.prokind = 'f' AND p.prorettype <> 'trigger'::regtype "
					 " ORDER BY p.oid",
					 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("reading pg_proc: %s", PQerrorMessage(admin));
	for (int i = 0; i < PQntuples(r) && nfuncs < MAX_FUNCS; i++)
	{
		Func	   *f = &funcs[nfuncs++];
		char	   *types = strdup(PQgetvalue(r, i, 4));
		char	   *names = strdup(PQgetvalue(r, i, 5));
		char	   *tsave,
				   *t,
				   *nm;

		f->name = strdup(PQgetvalue(r, i, 0));
		f->label = strdup(PQgetvalue(r, i, 1));
		f->ndefaults = atoi(PQgetvalue(r, i, 2));
		f->app_may_execute = strcmp(PQgetvalue(r, i, 3), "t") == 0;
		f->oid = strdup(PQgetvalue(r, i, 6));
		f->strict = strcmp(PQgetvalue(r, i, 7), "t") == 0;
		f->gw_may_execute = strcmp(PQgetvalue(r, i, 8), "t") == 0;
		f->is_endpoint = strcmp(PQgetvalue(r, i, 9), "t") == 0;
		/* "|" splits; empty names are kept as empty strings */
		t = types[0] ? strtok_r(types, "|", &tsave) : NULL;
		nm = names;
		while (t && f->nargs < MAX_ARGS)
		{
			char	   *bar = strchr(nm, '|');

			if (bar)
				*bar = '\0';
			f->argtype[f->nargs] = strdup(t);
			f->argname[f->nargs] = strdup(nm);
			f->nargs++;
			nm = bar ? bar + 1 : nm + strlen(nm);
			t = strtok_r(NULL, "|", &tsave);
		}
		free(types);
		free(names);
	}
	PQclear(r);
}

static PGresult *query_prepared(const char *name);

/*
 * One query giving a fingerprint of every table of schema cscp.  An API key's
 * last_used_at is left out: the gateway records a key's use (at most once a
 * minute) on every request it authenticates, whatever the answer.
 */
static void
build_fingerprint_sql(void)
{
	PGresult   *r = query(admin,
						  "SELECT string_agg(format('SELECT %L || '':'' || count(*) || '':'' || coalesce(sum(hashtext(%s)::bigint), 0) FROM %I.%I t', "
						  "                          c.relname, CASE c.relname WHEN 'api_key' THEN '(to_jsonb(t) - ''last_used_at'')::text' ELSE 't::text' END, "
						  "                          n.nspname, c.relname), ' UNION ALL ' ORDER BY c.relname) "
						  "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
						  " WHERE n.nspname = 'cscp' AND c.relkind IN ('r', 'p')");
	Buf			b = {0};

	put(&b, "SELECT string_agg(f, ' ') FROM (");
	put(&b, PQgetvalue(r, 0, 0));
	put(&b, ") s(f)");
	fingerprint_sql = take(&b);
	PQclear(r);

	/* the same over BYSTANDER's rows, of every table with a column tenant_id */
	{
		const char *params[1] = {bystander};

		r = PQexecParams(admin,
						 "SELECT string_agg(format('SELECT %L || '':'' || count(*) || '':'' || coalesce(sum(hashtext(%s)::bigint), 0) "
						 "                           FROM %I.%I t WHERE t.tenant_id = %L', "
						 "                          c.relname, CASE c.relname WHEN 'api_key' THEN '(to_jsonb(t) - ''last_used_at'')::text' ELSE 't::text' END, "
						 "                          n.nspname, c.relname, $1::text), ' UNION ALL ' ORDER BY c.relname) "
						 "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
						 " WHERE n.nspname = 'cscp' AND c.relkind IN ('r', 'p') "
						 "   AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' "
						 "                  AND a.atttypid = 'text'::regtype AND NOT a.attisdropped)",
						 1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			die("building the bystander's fingerprint: %s", PQerrorMessage(admin));
		put(&b, "SELECT string_agg(f, ' ') FROM (");
		put(&b, PQgetvalue(r, 0, 0));
		put(&b, ") s(f)");
		bystander_sql = take(&b);
		PQclear(r);
	}
}

static char *
bystander_fingerprint(void)
{
	PGresult   *r = query_prepared("bystander_fingerprint");
	char	   *s = strdup(PQgetvalue(r, 0, 0));

	PQclear(r);
	return s;
}

/* Both fingerprints' statements, prepared: they run after every call. */
static void
prepare_fingerprints(void)
{
	PGresult   *r = PQprepare(admin, "fingerprint", fingerprint_sql, 0, NULL);

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("preparing the fingerprint: %s", PQerrorMessage(admin));
	PQclear(r);
	r = PQprepare(admin, "bystander_fingerprint", bystander_sql, 0, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("preparing the bystander's fingerprint: %s", PQerrorMessage(admin));
	PQclear(r);
}

static PGresult *
query_prepared(const char *name)
{
	PGresult   *r = PQexecPrepared(admin, name, 0, NULL, NULL, NULL, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("%s: %s", name, PQerrorMessage(admin));
	return r;
}

static char *
fingerprint(void)
{
	PGresult   *r = query_prepared("fingerprint");
	char	   *s = strdup(PQgetvalue(r, 0, 0));

	PQclear(r);
	return s;
}

static void
fill_pool(char **pool, int *n, const char *sql)
{
	PGresult   *r = query(admin, sql);

	for (int i = 0; i < *n; i++)
		free(pool[i]);
	*n = 0;
	for (int i = 0; i < PQntuples(r) && *n < POOL; i++)
		pool[(*n)++] = strdup(PQgetvalue(r, i, 0));
	PQclear(r);
}

/*
 * New contexts and commands of the tenant, made by the superuser through the
 * API: its own calls (a sweep far in the future, an erasure) may have
 * removed the rows the pools draw from.
 */
static void
replenish(void)
{
	static int	round = 0;
	char		sql[1024];

	round++;
	snprintf(sql, sizeof(sql),
			 "SELECT cscp.context_open(%s, 'r%d', a || '-%d', '{\"active_intent\": \"cancel_order\"}')"
			 "  FROM unnest(ARRAY['user-1', 'user-2']) a;"
			 "SELECT cscp.command_submit(%s, 'r%d', 'user-1-%d', 'rk-%d', 'cancel_order', true, '{m-r%d}',"
			 "                           '{\"order_id\": %d}', 'order:%d');"
			 "SELECT cscp.command_submit(%s, 'r%d', 'user-2-%d', 'rl-%d', 'lookup_order', false, '{m-s%d}')",
			 tenant_literal, round, round, tenant_literal, round, round, round, round, round, round,
			 tenant_literal, round, round, round, round);
	PQclear(PQexec(admin, sql));	/* what fails (a policy the run set) is left out */
}

static void
refresh_pools(void)
{
	PGresult   *r = query(admin, "SELECT count(*) < 4 FROM cscp.command");

	if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
		replenish();
	PQclear(r);
	fill_pool(pool_context_id, &n_context_id,
			  "SELECT context_id FROM cscp.context ORDER BY updated_at DESC LIMIT 32");
	fill_pool(pool_command_id, &n_command_id,
			  "SELECT command_id FROM cscp.command ORDER BY updated_at DESC LIMIT 32");
	fill_pool(pool_context_row, &n_context_row,
			  "SELECT c::text FROM cscp.context c ORDER BY updated_at DESC LIMIT 16");
	fill_pool(pool_command_row, &n_command_row,
			  "SELECT c::text FROM cscp.command c ORDER BY updated_at DESC LIMIT 16");
	fill_pool(pool_evidence_row, &n_evidence_row,
			  "SELECT e::text FROM cscp.evidence e ORDER BY evidence_id DESC LIMIT 16");
	fill_pool(pool_context_json, &n_context_json,
			  "SELECT to_jsonb(c)::text FROM cscp.context c ORDER BY updated_at DESC LIMIT 16");
	fill_pool(pool_command_json, &n_command_json,
			  "SELECT to_jsonb(c)::text FROM cscp.command c ORDER BY updated_at DESC LIMIT 16");
	fill_pool(pool_evidence_json, &n_evidence_json,
			  "SELECT to_jsonb(e)::text FROM cscp.evidence e ORDER BY evidence_id DESC LIMIT 16");
	fill_pool(pool_fact_id, &n_fact_id,
			  "SELECT fact_id FROM cscp.fact ORDER BY created_at DESC LIMIT 16");
}

/* ---------------------------------------------------------------- calls */

static void
write_failure(const char *why, Func *f, int n, char **values, const char *as_role, const char *error)
{
	FILE	   *out = fopen(fail_file, "w");

	if (!out)
		out = stderr;
	fprintf(out, "-- fuzz failure: %s\n-- %s\n-- as %s\nSELECT * FROM %s(", why, error ? error : "", as_role, f->name);
	for (int i = 0; i < n; i++)
	{
		char	   *lit = values[i] ? PQescapeLiteral(admin, values[i], strlen(values[i])) : NULL;

		fprintf(out, "%s%s::%s", i ? ", " : "", lit ? lit : (values[i] ? "<not valid UTF-8>" : "NULL"), f->argtype[i]);
		if (lit)
			PQfreemem(lit);
	}
	fprintf(out, ");\n");
	if (out != stderr)
		fclose(out);
	fprintf(stderr, "fuzz_sql: FAILED: %s in %s (as %s)%s%s; the call is in %s\n", why, f->label, as_role,
			error ? ": " : "", error ? error : "", fail_file);
	exit(1);
}

/*
 * Whether APP_ROLE may execute f now: a superuser call (cscp.grant_operator
 * of that role, ...) can have changed it since the catalog was read.
 */
static int
may_execute_now(Func *f, const char *role)
{
	const char *params[2] = {role, f->oid};
	PGresult   *r = PQexecParams(admin, "SELECT has_function_privilege($1, $2::oid, 'EXECUTE')",
								 2, NULL, params, NULL, NULL, 0);
	int			may;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("has_function_privilege: %s", PQerrorMessage(admin));
	may = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	if (role == app_role)
		f->app_may_execute = may;
	else
		f->gw_may_execute = may;
	PQclear(r);
	return may;
}

/*
 * The tenant the application's session names for the next call: mostly
 * TENANT, now and then none, or BYSTANDER (which its binding must refuse).
 */
static void
set_app_tenant(void)
{
	const char *want = chance(84) ? tenant : chance(50) ? "" : bystander;
	const char *params[1] = {want};
	PGresult   *r;

	if (app_tenant_now && strcmp(app_tenant_now, want) == 0)
		return;
	r = PQexecParams(app, "SELECT pg_catalog.set_config('cscp.tenant_id', $1, false)",
					 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("setting cscp.tenant_id to \"%s\": %s", want, PQerrorMessage(app));
	PQclear(r);
	app_tenant_now = want;
}

/* Whether r (its rows, or its error) shows BYSTANDER_WORD. */
static int
shows_bystander(PGresult *r)
{
	const char *e = PQresultErrorMessage(r);

	if (e && strstr(e, BYSTANDER_WORD))
		return 1;
	for (int i = 0; i < PQntuples(r); i++)
		for (int j = 0; j < PQnfields(r); j++)
			if (!PQgetisnull(r, i, j) && strstr(PQgetvalue(r, i, j), BYSTANDER_WORD))
				return 1;
	return 0;
}

/* Whether one of values is NULL. */
static int
has_null(int n, char **values)
{
	for (int i = 0; i < n; i++)
		if (values[i] == NULL)
			return 1;
	return 0;
}

/*
 * Whether values are valid input of f's argument types (cast by the
 * superuser): when one is not, a call fails converting it, before any
 * privilege is checked.
 */
static int
args_valid(Func *f, int n, char **values)
{
	Buf			sql = {0};
	PGresult   *r;
	int			ok;

	put(&sql, "SELECT 1");
	for (int i = 0; i < n; i++)
		putf(&sql, ", $%d::%s", i + 1, f->argtype[i]);
	r = PQexecParams(admin, sql.data, n, NULL, (const char *const *) values, NULL, NULL, 0);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	free(sql.data);
	return ok;
}

/* Notices (a word too long to index, ...) are not findings. */
static void
ignore_notice(void *arg, const char *message)
{
	(void) arg;
	(void) message;
}

static void
count_state(Func *f, const char *state)
{
	for (int i = 0; i < f->nstates; i++)
		if (strcmp(f->state[i], state) == 0)
		{
			f->state_count[i]++;
			return;
		}
	if (f->nstates < STATES)
	{
		snprintf(f->state[f->nstates], sizeof(f->state[0]), "%s", state);
		f->state_count[f->nstates++] = 1;
	}
}

int
main(int argc, char **argv)
{
	unsigned long long seed;
	long		ncalls;
	char	   *before,
			   *bystander_before;
	long		refused = 0,
				accepted = 0,
				calls_as[3] = {0, 0, 0};
	char		conninfo[256];

	if (argc != 11)
	{
		fprintf(stderr, "usage: fuzz_sql SEED CALLS APP_ROLE TENANT FAIL_FILE GATEWAY_ROLE BYSTANDER "
				"KEY_VALID KEY_OTHER KEY_REVOKED\n");
		return 2;
	}
	seed = strtoull(argv[1], NULL, 10);
	ncalls = atol(argv[2]);
	app_role = argv[3];
	tenant = argv[4];
	fail_file = argv[5];
	gw_role = argv[6];
	bystander = argv[7];
	key_valid = argv[8];
	key_other = argv[9];
	key_revoked = argv[10];
	rng = seed ? seed : 1;

	admin = PQconnectdb("");
	if (PQstatus(admin) != CONNECTION_OK)
		die("cannot connect: %s", PQerrorMessage(admin));
	snprintf(conninfo, sizeof(conninfo), "user=%s options='-c cscp.tenant_id=%s'", app_role, tenant);
	app = PQconnectdb(conninfo);
	if (PQstatus(app) != CONNECTION_OK)
		die("cannot connect as %s: %s", app_role, PQerrorMessage(app));
	app_tenant_now = tenant;
	snprintf(conninfo, sizeof(conninfo), "user=%s", gw_role);
	gw = PQconnectdb(conninfo);
	if (PQstatus(gw) != CONNECTION_OK)
		die("cannot connect as %s: %s", gw_role, PQerrorMessage(gw));
	PQsetNoticeProcessor(admin, ignore_notice, NULL);
	PQsetNoticeProcessor(app, ignore_notice, NULL);
	PQsetNoticeProcessor(gw, ignore_notice, NULL);
	PQclear(query(admin, "SET statement_timeout = '10s'"));
	PQclear(query(app, "SET statement_timeout = '10s'"));
	PQclear(query(gw, "SET statement_timeout = '10s'"));

	tenant_literal = PQescapeLiteral(admin, tenant, strlen(tenant));
	load_functions();
	build_fingerprint_sql();
	prepare_fingerprints();
	refresh_pools();
	printf("fuzz_sql: seed %llu, %ld calls over %d functions of schema cscp\n", seed, ncalls, nfuncs);
	before = fingerprint();
	bystander_before = bystander_fingerprint();

	for (long call = 0; call < ncalls; call++)
	{
		Func	   *f = &funcs[rnd(nfuncs)];
		int			n = f->nargs - (f->ndefaults ? rnd(f->ndefaults + 1) : 0);
		char	   *values[MAX_ARGS];

		/*
		 * Who calls: the gateway's role takes 40% of the calls of an
		 * endpoint, and 4% of the others (to be refused); of the rest, the
		 * application a quarter of the calls of a function it may execute,
		 * two thirds of one it may not, and the superuser the others.
		 */
		int			who = (f->gw_may_execute || f->is_endpoint) ? (chance(40) ? 2 : -1) : (chance(4) ? 2 : -1);
		int			as_admin;
		PGconn	   *c;
		const char *as_role;
		int			may_execute;
		int			answered_error = 0;
		Buf			sql = {0};
		PGresult   *r;
		ExecStatusType st;
		char	   *after;
		struct timespec t0,
					t1;

		if (who < 0)
			who = (f->app_may_execute ? chance(25) : !chance(33)) ? 0 : 1;
		as_admin = who == 0;
		c = who == 0 ? admin : who == 1 ? app : gw;
		as_role = who == 0 ? "superuser" : who == 1 ? app_role : gw_role;
		may_execute = who == 0 || (who == 1 ? f->app_may_execute : f->gw_may_execute);
		calls_as[who]++;
		if (who == 1)
			set_app_tenant();

		/*
		 * Half the calls pass plausible values for every argument but
		 * perhaps one, so that they get past the first check; the others
		 * pass anything.
		 */
		int			plausible_call = chance(50);
		int			odd_one = chance(40) ? rnd(n ? n : 1) : -1;

		putf(&sql, "SELECT * FROM %s(", f->name);
		for (int i = 0; i < n; i++)
		{
			plausible = plausible_call && i != odd_one;
			values[i] = gen_arg(f->argtype[i], f->argname[i]);
			putf(&sql, "%s$%d::%s", i ? ", " : "", i + 1, f->argtype[i]);
		}
		put(&sql, ")");
		f->calls++;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = PQexecParams(c, sql.data, n, NULL, (const char *const *) values, NULL, NULL, 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		st = PQresultStatus(r);
		f->seconds += (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (PQstatus(c) != CONNECTION_OK)
			write_failure("connection lost (server or backend crashed)", f, n, values, as_role,
						  PQerrorMessage(c));
		/* (a strict function given a NULL is not run: the planner folds the call to NULL) */
		if (!as_admin && shows_bystander(r))
			write_failure("a role not bound to the bystander tenant was shown its rows", f, n, values, as_role,
						  PQresultErrorMessage(r));
		if ((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) && !as_admin && !may_execute &&
			!(f->strict && has_null(n, values)) && !may_execute_now(f, as_role))
			write_failure("a function the role may not execute ran", f, n, values, as_role, NULL);
		if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		{
			accepted++;
			/* an endpoint answers an error as a response: 4xx and 5xx change nothing either */
			if (f->is_endpoint && PQntuples(r) == 1 && PQnfields(r) == 3 && !PQgetisnull(r, 0, 0) &&
				atoi(PQgetvalue(r, 0, 0)) >= 400)
			{
				char		state[8];

				answered_error = 1;
				snprintf(state, sizeof(state), "h%.3s", PQgetvalue(r, 0, 0));
				count_state(f, state);
				if (atoi(PQgetvalue(r, 0, 0)) >= 500)
					write_failure("an endpoint answered 5xx", f, n, values, as_role,
								  PQgetisnull(r, 0, 2) ? "" : PQgetvalue(r, 0, 2));
			}
			else
				count_state(f, "ok");
		}
		else
		{
			const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

			refused++;
			count_state(f, state ? state : "?");
			if (getenv("FUZZ_TRACE") && strcmp(getenv("FUZZ_TRACE"), f->label) == 0)
				printf("  %s: %s %.200s\n", f->label, state ? state : "?",
					   PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
			if (!state || strncmp(state, "XX", 2) == 0 || strncmp(state, "58", 2) == 0 ||
				strcmp(state, "57014") == 0)
				write_failure(state ? state : "no SQLSTATE", f, n, values, as_role,
							  PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
			if (!as_admin && !may_execute && strcmp(state, "42501") != 0 &&
				args_valid(f, n, values) && !may_execute_now(f, as_role))
				write_failure("a function the role may not execute was not refused with 42501",
							  f, n, values, as_role, PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
		}
		PQclear(r);

		after = fingerprint();
		if ((answered_error || (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)) && strcmp(before, after) != 0)
		{
			Buf			diff = {0};

			put(&diff, "before: ");
			put(&diff, before);
			put(&diff, "; after: ");
			put(&diff, after);
			write_failure("a refused call changed rows", f, n, values, as_role, diff.data);
		}
		free(before);
		before = after;
		if (who != 0)
		{
			char	   *bystander_after = bystander_fingerprint();

			if (strcmp(bystander_before, bystander_after) != 0)
				write_failure("a call as a role not bound to the bystander tenant changed its rows",
							  f, n, values, who == 1 && app_tenant_now[0] == '\0' ? "app role, no tenant" :
							  who == 1 && app_tenant_now != tenant ? "app role, tenant_id set to the bystander" :
							  as_role, bystander_after);
			free(bystander_after);
		}
		for (int i = 0; i < n; i++)
			free(values[i]);
		free(sql.data);
		if (call % 50 == 49)
		{
			/* (refresh_pools may add rows: the next fingerprint starts after it) */
			refresh_pools();
			free(before);
			before = fingerprint();
		}
		/* the superuser may change the bystander's rows (a sweep): compare from here */
		if (who == 0 || call % 50 == 49)
		{
			free(bystander_before);
			bystander_before = bystander_fingerprint();
		}
	}

	/* hostile input must not have broken an invariant */
	{
		PGresult   *r = query(admin, "SELECT kind || ': ' || coalesce(object_id, '') || ' ' || coalesce(detail, '') FROM cscp.check_invariants()");

		for (int i = 0; i < PQntuples(r); i++)
			fprintf(stderr, "fuzz_sql: invariant broken: %s\n", PQgetvalue(r, i, 0));
		if (PQntuples(r) > 0)
			die("check_invariants() returned %d rows after the run", PQntuples(r));
		PQclear(r);
	}

	for (int i = 0; i < nfuncs; i++)
	{
		Func	   *f = &funcs[i];

		printf("  %-28s %5ld calls %6.2f s:", f->label, f->calls, f->seconds);
		for (int j = 0; j < f->nstates; j++)
			printf(" %s %ld", f->state[j], f->state_count[j]);
		printf("\n");
	}
	printf("fuzz_sql: seed %llu: %ld calls (%ld returned, %ld refused; %ld as the superuser, %ld as %s, "
		   "%ld as %s), no crash, no internal error, no row changed by a refused call, "
		   "no row of tenant %s changed by %s or %s or shown to them, check_invariants() empty\n",
		   seed, ncalls, accepted, refused, calls_as[0], calls_as[1], app_role, calls_as[2], gw_role,
		   bystander, app_role, gw_role);
	PQfinish(gw);
	PQfinish(app);
	PQfinish(admin);
	return 0;
}
