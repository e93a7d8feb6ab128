/*-------------------------------------------------------------------------
 *
 * assemble.c
 *	  Context assembly (DESIGN.md section 8): cscp.build_context, and the
 *	  token estimator it budgets with, cscp.token_count.
 *
 * The context is a text in five sections, in this order: identity,
 * environment (the current time from cscp.now() first), constraints, facts,
 * working set.  What it promises:
 *	- only valid facts, read through the partial index on is_valid, so the
 *	  cost does not grow with the superseded facts a subject has;
 *	- never a hypothetical or draft fact; a task fact only for its own
 *	  task_id, a session fact only for its own session;
 *	- constraints before facts; within each, by full-text relevance to query
 *	  (ts_rank of the fact's key and value against the query's words, any
 *	  of them), ties by recency, then by fact id;
 *	- the budget is spent in the StateBench spec's order: the identity
 *	  always, whatever the budget; then the current time (now, current_date,
 *	  and local_time when the environment names a known timezone), also
 *	  always; then the rest of the environment while it fits; then
 *	  constraints and facts within fact_budget_share (policy, default 0.7)
 *	  of what remains; then the working set in what is left.  Only the
 *	  identity and the time can take the text over the budget;
 *	- a line that does not fit is left out (truncated) and the next one
 *	  tried, except that no plain fact goes in while a constraint was left
 *	  out, and constraints always come before facts;
 *	- with a query that has words, only working-set items that share a word
 *	  with it (same full-text match as facts), most relevant first, ties by
 *	  recency; without one, every live item, most recent first;
 *	- a fact flagged needs_review is shown, marked "[needs review]";
 *	- the same rows and the same clock give the same text, byte for byte.
 * It only reads, under the statement's snapshot; it takes no locks beyond
 * those of its SELECTs.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include <math.h>
#include <stdlib.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * Estimated tokens of len bytes of UTF-8 text: every run of letters and
 * digits (any non-ASCII character counts as a letter) is one token per 4
 * characters, at least 1; every other visible character is one token;
 * white space is free.  Counts add up over pieces joined by white space.
 */
static int64
count_tokens(const char *s, int len)
{
	int64		tokens = 0;
	int64		run = 0;

	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			(c >= 'A' && c <= 'Z') || c == '_')
		{
			if ((c & 0xC0) != 0x80) /* not a UTF-8 continuation byte */
				run++;
			continue;
		}
		tokens += (run + 3) / 4;
		run = 0;
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v')
			tokens++;
	}
	return tokens + (run + 3) / 4;
}

PG_FUNCTION_INFO_V1(cscp_token_count);

/* cscp.token_count(txt text) RETURNS int */
Datum
cscp_token_count(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	int64		n = count_tokens(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));

	PG_RETURN_INT32((int32) Min(n, PG_INT32_MAX));
}

/* The sections of a context, in the order of its text. */
typedef enum Section
{
	SEC_IDENTITY,
	SEC_ENVIRONMENT,
	SEC_CONSTRAINTS,
	SEC_FACTS,
	SEC_WORKING_SET,
	NUM_SECTIONS
} Section;

static const char *const section_headers[NUM_SECTIONS] = {
	"## Identity", "## Environment", "## Constraints", "## Facts", "## Working set"
};

/*
 * The context being assembled: each section's lines (its header first,
 * once it has a line), and the tokens all of them use.  Sections are
 * filled in order of priority and joined in the order of their text.
 */
typedef struct Assembly
{
	StringInfoData sections[NUM_SECTIONS];
	int64		used;			/* tokens of all sections */
	int64		budget;			/* -1: no budget */
	bool		truncated;
	/* what the result lists beside the text: JSON strings, comma-separated */
	StringInfoData fact_ids;
	StringInfoData review_ids;	/* the facts shown marked needs_review */
	StringInfoData ws_keys;		/* the working-set items shown */
	int64		fact_budget;	/* the facts' share of the budget; -1: none */
	int64		omitted;		/* facts left out */
} Assembly;

/*
 * Add line to section when the whole context stays within limit tokens
 * (-1: no limit), with the section's header before its first line.
 */
static bool
add_line(Assembly *a, Section section, const char *line, int64 limit)
{
	StringInfo	buf = &a->sections[section];
	const char *header = section_headers[section];
	int64		cost = count_tokens(line, strlen(line));

	if (buf->len == 0)
		cost += count_tokens(header, strlen(header));
	if (limit >= 0 && a->used + cost > limit)
	{
		a->truncated = true;
		return false;
	}
	if (buf->len == 0)
	{
		appendStringInfoString(buf, header);
		appendStringInfoChar(buf, '\n');
	}
	appendStringInfoString(buf, line);
	appendStringInfoChar(buf, '\n');
	a->used += cost;
	return true;
}

/* A JSON value as a line shows it: a string as itself, anything else as JSON. */
static char *
value_text(JsonbValue *v)
{
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	return cscp_jsonb_value_to_cstring(v);
}

/* A jsonb datum as a line shows it (see value_text). */
static char *
jsonb_text(Jsonb *j)
{
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(j) && JsonbExtractScalar(&j->root, &v))
		return value_text(&v);
	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

/* Whether key is one of the NULL-terminated list keys. */
static bool
listed(const char *const *keys, const char *key)
{
	for (int i = 0; keys != NULL && keys[i] != NULL; i++)
		if (strcmp(keys[i], key) == 0)
			return true;
	return false;
}

/*
 * Lines "key: value" of the object obj: first the keys of first that it
 * has, in that order, then its other keys in jsonb's order; nulls and the
 * keys of skip left out.
 */
static void
add_object_lines(Assembly *a, Section section, Jsonb *obj, const char *const *first,
				 const char *const *skip, int64 limit, MemoryContext rowcxt)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	if (obj == NULL || !JB_ROOT_IS_OBJECT(obj))
		return;
	for (int i = 0; first != NULL && first[i] != NULL; i++)
	{
		JsonbValue *fv = cscp_jsonb_get(obj, first[i]);

		if (fv != NULL && fv->type != jbvNull)
		{
			MemoryContext old = MemoryContextSwitchTo(rowcxt);

			add_line(a, section, psprintf("%s: %s", first[i], value_text(fv)), limit);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
	}
	it = JsonbIteratorInit(&obj->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = cscp_jsonb_key_cstring(&v);
		else if (tok == WJB_VALUE && v.type != jbvNull && !listed(first, key) &&
				 !listed(skip, key))
		{
			MemoryContext old = MemoryContextSwitchTo(rowcxt);

			add_line(a, section, psprintf("%s: %s", key, value_text(&v)), limit);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
	}
}

/* Identity keys shown first, in this order. */
static const char *const identity_order[] = {
	"user_name", "user_id", "authority", "department", "organization", "permissions", NULL
};

/*
 * The environment's own time keys are left out: the time is cscp.now(), and
 * current_date and local_time are derived from it.
 */
static const char *const environment_skip[] = {
	"now", "current_time", "current_date", "local_time", NULL
};

/*
 * The zone the environment's "timezone" names, or NULL when it has none or
 * PostgreSQL does not know it (cscp.environment_check refuses that on
 * write; a row written around the check just shows no local time).
 */
static pg_tz *
environment_timezone(Jsonb *environment, char **name)
{
	JsonbValue *v = environment ? cscp_jsonb_get(environment, "timezone") : NULL;

	*name = NULL;
	if (v == NULL || v->type != jbvString || v->val.string.len == 0 ||
		v->val.string.len > 255)
		return NULL;
	*name = pnstrdup(v->val.string.val, v->val.string.len);
	return pg_tzset(*name);
}

/*
 * The time lines of the environment: now (UTC), current_date (in the
 * environment's timezone, else UTC) and local_time with its offset when a
 * timezone is known.  Always told, like the identity.
 */
static void
add_time_lines(Assembly *a, TimestampTz now, const char *now_text, Jsonb *environment)
{
	char	   *tzname;
	pg_tz	   *tz = environment_timezone(environment, &tzname);
	struct pg_tm tm;
	fsec_t		fsec;
	int			offset = 0;

	add_line(a, SEC_ENVIRONMENT, psprintf("now: %s", now_text), -1);
	if (timestamp2tm(now, tz ? &offset : NULL, &tm, &fsec, NULL, tz) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	add_line(a, SEC_ENVIRONMENT,
			 psprintf("current_date: %04d-%02d-%02d", tm.tm_year, tm.tm_mon, tm.tm_mday), -1);
	if (tz != NULL)
	{
		int			east = -offset;

		add_line(a, SEC_ENVIRONMENT,
				 psprintf("local_time: %04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d (%s)",
						  tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
						  east < 0 ? '-' : '+', abs(east) / 3600, (abs(east) % 3600) / 60,
						  tzname), -1);
	}
}

PG_FUNCTION_INFO_V1(cscp_environment_check);

/*
 * cscp.environment_check(environment jsonb) RETURNS jsonb: the environment,
 * checked: an object whose "timezone", when present, is a string naming a
 * time zone PostgreSQL knows (such as "Europe/Lisbon").  Raises 22023.
 */
Datum
cscp_environment_check(PG_FUNCTION_ARGS)
{
	Jsonb	   *env = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);
	JsonbValue *v;
	char	   *name;

	if (env == NULL || !JB_ROOT_IS_OBJECT(env) || JB_ROOT_IS_SCALAR(env))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("environment must be a JSON object"),
				 errhint("Pass an object such as '{\"location\": \"Lisbon\", \"timezone\": \"Europe/Lisbon\"}'.")));
	v = cscp_jsonb_get(env, "timezone");
	if (v != NULL && v->type != jbvNull && environment_timezone(env, &name) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown time zone %s in the environment",
						v->type == jbvString ? psprintf("\"%s\"", pnstrdup(v->val.string.val, v->val.string.len)) :
						"(not a string)"),
				 errdetail("\"timezone\" must name a time zone of the IANA database that PostgreSQL knows."),
				 errhint("Use a name such as \"Europe/Lisbon\" or \"UTC\"; see pg_timezone_names.")));
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

/* Append s to buf as a JSON string. */
static void
append_json_string(StringInfo buf, const char *s)
{
	cscp_canonical_string(buf, s, strlen(s));
}

/* Append the JSON string s to the comma-separated list buf. */
static void
append_json_item(StringInfo buf, const char *s)
{
	appendStringInfoString(buf, buf->len ? "," : "");
	append_json_string(buf, s);
}

/* The first column of a one-row SPI result as jsonb copied into cxt, or NULL. */
static Jsonb *
spi_jsonb(MemoryContext cxt)
{
	bool		isnull;
	Datum		d;
	MemoryContext old;
	Jsonb	   *j;

	if (SPI_processed != 1)
		return NULL;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return NULL;
	old = MemoryContextSwitchTo(cxt);
	j = DatumGetJsonbPCopy(d);
	MemoryContextSwitchTo(old);
	return j;
}

/*
 * The tsquery text matching any word of query ('a' | 'b' | ...), from the
 * lexemes the english configuration makes of it; NULL when it has none.
 */
static char *
query_tsquery(text *query)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {TEXTOID};
	Datum		arg = PointerGetDatum(query);
	bool		isnull;
	Datum		d;
	Datum	   *lexemes;
	bool	   *nulls;
	int			n;
	StringInfoData buf;

	cscp_spi_plan(&plan, "SELECT pg_catalog.tsvector_to_array("
				  "pg_catalog.to_tsvector('pg_catalog.english'::pg_catalog.regconfig, $1))", 1, argtypes);
	if (SPI_execute_plan(plan, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not parse the query");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &lexemes, &nulls, &n);
	if (n == 0)
		return NULL;
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		char	   *lex = TextDatumGetCString(lexemes[i]);

		if (i > 0)
			appendStringInfoString(&buf, " | ");
		appendStringInfoChar(&buf, '\'');
		for (char *p = lex; *p; p++)
		{
			if (*p == '\'' || *p == '\\')
				appendStringInfoChar(&buf, *p == '\'' ? '\'' : '\\');
			appendStringInfoChar(&buf, *p);
		}
		appendStringInfoChar(&buf, '\'');
	}
	return buf.data;
}

/* One working-set item as a line, and its key in the result's "working_set" when it fits. */
static void
add_ws_item(Assembly *a, const char *key, const char *value_text)
{
	if (add_line(a, SEC_WORKING_SET, psprintf("- %s: %s", key, value_text), a->budget))
		append_json_item(&a->ws_keys, key);
}

/*
 * What relevance searches in a working-set item of key k and value v (SQL
 * expressions): the words of the key (weight A) and the value's strings and
 * numbers (weight B), as for facts.
 */
#define WS_VECTOR(k, v) \
	"(pg_catalog.setweight(pg_catalog.to_tsvector('pg_catalog.english'::pg_catalog.regconfig, pg_catalog.translate(" k ", '_-.', '   ')), 'A')" \
	" OPERATOR(pg_catalog.||) pg_catalog.setweight(pg_catalog.jsonb_to_tsvector('pg_catalog.english'::pg_catalog.regconfig, " v ", '[\"string\", \"numeric\"]'), 'B'))"

/*
 * The working-set items of key k and value v that match the tsquery q (all
 * when q is NULL), and the start of their order: most relevant first.
 */
#define WS_MATCH(k, v, q) \
	" AND (" q "::pg_catalog.tsquery IS NULL OR " WS_VECTOR(k, v) " OPERATOR(pg_catalog.@@) " q "::pg_catalog.tsquery)" \
	" ORDER BY coalesce(pg_catalog.ts_rank(" WS_VECTOR(k, v) ", " q "::pg_catalog.tsquery), 0) DESC,"

/* The tsquery text (or NULL) as the argument *arg of a saved plan, its null flag *null. */
static void
tsquery_arg(const char *tsquery, Datum *arg, char *null)
{
	*arg = tsquery ? CStringGetTextDatum(tsquery) : (Datum) 0;
	*null = tsquery ? ' ' : 'n';
}

/* The working-set items (key, value) plan reads, as lines while they fit.  SPI is connected. */
static void
add_ws_rows(Assembly *a, SPIPlanPtr plan, Datum *args, const char *nulls, MemoryContext rowcxt)
{
	if (SPI_execute_plan(plan, args, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the working set");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(rowcxt);

		add_ws_item(a, SPI_getvalue(row, desc, 1),
					jsonb_text(DatumGetJsonbP(SPI_getbinval(row, desc, 2, &isnull))));
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}
}

/* The arguments of build_context, checked. */
typedef struct ContextRequest
{
	text	   *tenant;
	text	   *subject;
	text	   *session;
	text	   *query;			/* NULL: none */
	text	   *task;			/* NULL: none */
	int64		budget;			/* -1: no budget */
} ContextRequest;

/* Read and check build_context's arguments (a negative budget: 22023). */
static void
read_request(FunctionCallInfo fcinfo, ContextRequest *r)
{
	r->tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	r->subject = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	r->session = PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2);
	r->query = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	r->task = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	cscp_check_tenant(r->tenant);
	cscp_check_id("subject_id", r->subject);
	cscp_check_id("session_id", r->session);
	if (r->task != NULL)
		cscp_check_id("task_id", r->task);
	r->budget = -1;
	if (!PG_ARGISNULL(4))
	{
		r->budget = PG_GETARG_INT32(4);
		if (r->budget < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("token_budget must not be negative"),
					 errdetail("The budget given is %d.", PG_GETARG_INT32(4)),
					 errhint("Pass the number of tokens the context may take, or NULL for no limit.")));
	}
}

/* The share of the budget left after the environment that facts may take (policy, 0.7). */
static double
fact_budget_share(text *tenant)
{
	Jsonb	   *policy = cscp_policy_get(text_to_cstring(tenant));
	JsonbValue *sharev = cscp_jsonb_get(policy, "fact_budget_share");

	if (sharev != NULL && sharev->type == jbvNumeric)
		return DatumGetFloat8(DirectFunctionCall1(numeric_float8,
												  NumericGetDatum(sharev->val.numeric)));
	return 0.7;
}

/* An empty assembly within budget tokens (-1: none), in the current context. */
static void
assembly_init(Assembly *a, int64 budget)
{
	for (int i = 0; i < NUM_SECTIONS; i++)
		initStringInfo(&a->sections[i]);
	a->used = 0;
	a->budget = budget;
	a->truncated = false;
	initStringInfo(&a->fact_ids);
	initStringInfo(&a->review_ids);
	initStringInfo(&a->ws_keys);
	a->fact_budget = -1;
	a->omitted = 0;
}

/*
 * The jsonb the saved query sql (one column, parameters tenant and id)
 * finds, copied into cxt, or NULL.  SPI is connected.
 */
static Jsonb *
read_jsonb_row(SPIPlanPtr *plan, const char *sql, text *tenant, text *id, const char *what,
			   MemoryContext cxt)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];

	args[0] = PointerGetDatum(tenant);
	args[1] = PointerGetDatum(id);
	cscp_spi_plan(plan, sql, 2, argtypes);
	if (SPI_execute_plan(*plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the %s", what);
	return spi_jsonb(cxt);
}

/* The facts line of a row of read_facts' result, and whether it needs review. */
static char *
fact_line(HeapTuple row, TupleDesc desc, bool *review)
{
	bool		isnull;
	char	   *type = SPI_getvalue(row, desc, 5);
	StringInfoData line;

	*review = DatumGetBool(SPI_getbinval(row, desc, 6, &isnull));
	initStringInfo(&line);
	appendStringInfo(&line, "- %s: %s", SPI_getvalue(row, desc, 2),
					 jsonb_text(DatumGetJsonbP(SPI_getbinval(row, desc, 3, &isnull))));
	if (type != NULL)
		appendStringInfo(&line, " (%s)", type);
	if (*review)
		appendStringInfoString(&line, " [needs review]");
	return line.data;
}

/*
 * The constraints (or the plain facts) of read_facts' result as lines while
 * they fit within limit; no plain fact goes in once a constraint was left
 * out (*constraints_fit false).
 */
static void
add_fact_rows(Assembly *a, bool constraints, bool *constraints_fit, int64 limit,
			  MemoryContext rowcxt)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old;
		char	   *id;
		char	   *line;
		bool		review;

		if (DatumGetBool(SPI_getbinval(row, desc, 4, &isnull)) != constraints)
			continue;
		old = MemoryContextSwitchTo(rowcxt);
		id = SPI_getvalue(row, desc, 1);
		line = fact_line(row, desc, &review);
		if ((constraints || *constraints_fit) &&
			add_line(a, constraints ? SEC_CONSTRAINTS : SEC_FACTS, line, limit))
		{
			append_json_item(&a->fact_ids, id);
			if (review)
				append_json_item(&a->review_ids, id);
		}
		else
		{
			a->omitted++;
			a->truncated = true;
			if (constraints)
				*constraints_fit = false;
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}
}

/*
 * The valid facts of the subject in scope into SPI_tuptable: constraints
 * first, then by relevance to tsquery (text, or NULL), recency and id.
 */
static void
read_facts(const ContextRequest *r, const char *tsquery)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	cscp_spi_plan(&plan, "SELECT f.fact_id, f.key, f.value, f.is_constraint,"
				  " f.constraint_type, f.needs_review"
				  " FROM cscp.fact f"
				  " WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.subject_id OPERATOR(pg_catalog.=) $2 AND f.is_valid"
				  " AND (f.scope OPERATOR(pg_catalog.=) 'global'"
				  "  OR (f.scope OPERATOR(pg_catalog.=) 'session' AND f.scope_id OPERATOR(pg_catalog.=) $3)"
				  "  OR (f.scope OPERATOR(pg_catalog.=) 'task' AND f.scope_id OPERATOR(pg_catalog.=) $4))"
				  " ORDER BY f.is_constraint DESC,"
				  " coalesce(pg_catalog.ts_rank(f.search, $5::pg_catalog.tsquery), 0) DESC,"
				  " f.created_at DESC, f.fact_id COLLATE pg_catalog.\"C\"",
				  5, argtypes);
	args[0] = PointerGetDatum(r->tenant);
	args[1] = PointerGetDatum(r->subject);
	args[2] = PointerGetDatum(r->session);
	args[3] = r->task ? PointerGetDatum(r->task) : (Datum) 0;
	nulls[3] = r->task ? ' ' : 'n';
	tsquery_arg(tsquery, &args[4], &nulls[4]);
	if (SPI_execute_plan(plan, args, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the facts");
}

/*
 * The facts, within share of what the budget leaves: constraints first,
 * then plain facts.  SPI is connected.
 */
static void
add_facts(Assembly *a, const ContextRequest *r, const char *tsquery, double share,
		  MemoryContext rowcxt)
{
	int64		limit = -1;
	bool		constraints_fit = true;

	if (a->budget >= 0)
	{
		a->fact_budget = (int64) floor((double) Max(a->budget - a->used, 0) * share);
		limit = a->used + a->fact_budget;
	}
	read_facts(r, tsquery);
	add_fact_rows(a, true, &constraints_fit, limit, rowcxt);
	add_fact_rows(a, false, &constraints_fit, limit, rowcxt);
}

/*
 * The working set given as session_state returns it ([[key, value], ...],
 * most recent first): the items that match tsquery (all without one), most
 * relevant first.  SPI is connected.
 */
static void
add_given_working_set(Assembly *a, Jsonb *given_ws, const char *tsquery, MemoryContext rowcxt)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {JSONBOID, TEXTOID};
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	if (given_ws == NULL || !JB_ROOT_IS_ARRAY(given_ws) || JB_ROOT_IS_SCALAR(given_ws))
		return;
	cscp_spi_plan(&plan, "SELECT e.x OPERATOR(pg_catalog.->>) 0, e.x OPERATOR(pg_catalog.->) 1"
				  " FROM pg_catalog.jsonb_array_elements($1) WITH ORDINALITY e(x, n)"
				  " WHERE pg_catalog.jsonb_typeof(e.x) OPERATOR(pg_catalog.=) 'array'"
				  " AND pg_catalog.jsonb_typeof(e.x OPERATOR(pg_catalog.->) 0) OPERATOR(pg_catalog.=) 'string'"
				  " AND e.x OPERATOR(pg_catalog.->) 1 IS NOT NULL"
				  WS_MATCH("(e.x OPERATOR(pg_catalog.->>) 0)", "(e.x OPERATOR(pg_catalog.->) 1)", "$2")
				  " e.n", 2, argtypes);
	args[0] = JsonbPGetDatum(given_ws);
	tsquery_arg(tsquery, &args[1], &nulls[1]);
	add_ws_rows(a, plan, args, nulls, rowcxt);
}

/*
 * The session's live working-set items that match tsquery (all without
 * one), most relevant first, ties most recently put first.  SPI is
 * connected.
 */
static void
add_session_working_set(Assembly *a, const ContextRequest *r, TimestampTz now,
						const char *tsquery, MemoryContext rowcxt)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[4] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	cscp_spi_plan(&plan, "SELECT w.key, w.value FROM cscp.working_set w"
				  " WHERE w.tenant_id OPERATOR(pg_catalog.=) $1 AND w.session_id OPERATOR(pg_catalog.=) $2 AND w.expires_at OPERATOR(pg_catalog.>) $3"
				  WS_MATCH("w.key", "w.value", "$4")
				  " w.updated_at DESC, w.key COLLATE pg_catalog.\"C\"", 4, argtypes);
	args[0] = PointerGetDatum(r->tenant);
	args[1] = PointerGetDatum(r->session);
	args[2] = TimestampTzGetDatum(now);
	tsquery_arg(tsquery, &args[3], &nulls[3]);
	add_ws_rows(a, plan, args, nulls, rowcxt);
}

/*
 * build_context's result, in the current context:
 * {"text", "tokens", "budget", "fact_budget", "fact_ids", "needs_review",
 *  "working_set", "facts_omitted", "truncated", "now"}
 */
static Datum
context_result(Assembly *a, const char *now_text)
{
	StringInfoData text;
	StringInfoData result;

	initStringInfo(&text);
	for (int i = 0; i < NUM_SECTIONS; i++)
		if (a->sections[i].len > 0)
		{
			if (text.len > 0)
				appendStringInfoChar(&text, '\n');
			appendBinaryStringInfo(&text, a->sections[i].data, a->sections[i].len);
		}
	if (text.len > 0)
		text.data[--text.len] = '\0';
	initStringInfo(&result);
	appendStringInfoString(&result, "{\"text\":");
	append_json_string(&result, text.data);
	appendStringInfo(&result, ",\"tokens\":" INT64_FORMAT, count_tokens(text.data, text.len));
	if (a->budget >= 0)
		appendStringInfo(&result, ",\"budget\":" INT64_FORMAT ",\"fact_budget\":" INT64_FORMAT,
						 a->budget, a->fact_budget);
	else
		appendStringInfoString(&result, ",\"budget\":null,\"fact_budget\":null");
	appendStringInfo(&result, ",\"fact_ids\":[%s],\"needs_review\":[%s],\"working_set\":[%s]",
					 a->fact_ids.data, a->review_ids.data, a->ws_keys.data);
	appendStringInfo(&result, ",\"facts_omitted\":" INT64_FORMAT ",\"truncated\":%s,\"now\":",
					 a->omitted, a->truncated ? "true" : "false");
	append_json_string(&result, now_text);
	appendStringInfoChar(&result, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(result.data));
}

/*
 * build_context's body, in the StateBench spec's order: the identity and
 * the time always, then the rest of the environment while it fits, then the
 * facts within their share of what remains, last the working set in what is
 * left.  With given, the session's environment and working set are
 * given_env and given_ws (as cscp.session_state returns them, read on the
 * session's node of a scale-out deployment) instead of read here.
 */
static Datum
assemble_context(FunctionCallInfo fcinfo, bool given, Jsonb *given_env, Jsonb *given_ws)
{
	static SPIPlanPtr identity_plan = NULL;
	static SPIPlanPtr env_plan = NULL;
	MemoryContext callerctx = CurrentMemoryContext;
	MemoryContext rowcxt;
	ContextRequest r;
	Assembly	a;
	TimestampTz now = cscp_now();
	char	   *now_text = cscp_utc_iso(now);
	double		share;
	Jsonb	   *identity;
	Jsonb	   *environment = given_env;
	char	   *tsquery;
	Datum		out;

	read_request(fcinfo, &r);
	share = fact_budget_share(r.tenant);
	assembly_init(&a, r.budget);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "cscp build_context row",
								   ALLOCSET_DEFAULT_SIZES);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* The rows of the subject and of the session. */
	identity = read_jsonb_row(&identity_plan, "SELECT i.identity FROM cscp.identity i"
							  " WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.subject_id OPERATOR(pg_catalog.=) $2",
							  r.tenant, r.subject, "identity", callerctx);
	if (!given)
		environment = read_jsonb_row(&env_plan, "SELECT e.environment FROM cscp.environment e"
									 " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.session_id OPERATOR(pg_catalog.=) $2",
									 r.tenant, r.session, "environment", callerctx);

	/* The sections, in the order the budget is spent. */
	add_object_lines(&a, SEC_IDENTITY, identity, identity_order, NULL, -1, rowcxt);
	add_time_lines(&a, now, now_text, environment);
	add_object_lines(&a, SEC_ENVIRONMENT, environment, NULL, environment_skip, a.budget, rowcxt);
	tsquery = r.query ? query_tsquery(r.query) : NULL;
	add_facts(&a, &r, tsquery, share, rowcxt);
	if (given)
		add_given_working_set(&a, given_ws, tsquery, rowcxt);
	else
		add_session_working_set(&a, &r, now, tsquery, rowcxt);

	/* The result, built in the caller's context. */
	MemoryContextSwitchTo(callerctx);
	out = context_result(&a, now_text);
	SPI_finish();
	MemoryContextDelete(rowcxt);
	PG_RETURN_DATUM(out);
}

PG_FUNCTION_INFO_V1(cscp_build_context);

/*
 * cscp.build_context(tenant_id, subject_id, session_id, query text DEFAULT NULL,
 *                    token_budget int DEFAULT NULL, task_id text DEFAULT NULL) RETURNS jsonb
 */
Datum
cscp_build_context(PG_FUNCTION_ARGS)
{
	return assemble_context(fcinfo, false, NULL, NULL);
}

PG_FUNCTION_INFO_V1(cscp_build_context_given);

/*
 * cscp.build_context_given(tenant_id, subject_id, session_id, query, token_budget, task_id,
 *                           session_state jsonb) RETURNS jsonb
 *
 * build_context on the subject's node of a scale-out deployment, with the session's
 * environment and working set as cscp.session_state read them on the session's node.
 */
Datum
cscp_build_context_given(PG_FUNCTION_ARGS)
{
	Jsonb	   *state = PG_ARGISNULL(6) ? NULL : PG_GETARG_JSONB_P(6);
	JsonbValue *env = state ? cscp_jsonb_get(state, "environment") : NULL;
	JsonbValue *ws = state ? cscp_jsonb_get(state, "working_set") : NULL;

	return assemble_context(fcinfo, true,
							env != NULL && env->type != jbvNull ? cscp_jsonb_value_to_jsonb(env) : NULL,
							ws != NULL && ws->type != jbvNull ? cscp_jsonb_value_to_jsonb(ws) : NULL);
}
