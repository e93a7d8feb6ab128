/*-------------------------------------------------------------------------
 *
 * jsonschema.c
 *	  JSON Schema validation of jsonb values, for a documented subset.
 *
 * A schema is a JSON object or a boolean (true accepts every value, false
 * none), anywhere a schema may appear.  The supported keywords are exactly:
 *
 *	  type				a type name or a non-empty array of distinct type
 *						names: null, boolean, object, array, number, string,
 *						integer (a number with no fractional part, so 1.0 is
 *						an integer)
 *	  enum, const		the value equals one of the array's elements / the
 *						value, as jsonb's = operator says (1 equals 1.0)
 *	  minLength, maxLength	string length in characters, not bytes
 *	  pattern			a PostgreSQL advanced regular expression, searched
 *						for anywhere in the string (unanchored), C collation;
 *						one that needs backtracking is refused (below)
 *	  minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *						numbers; the exclusive ones are numbers too (draft
 *						2019-09 and later), not booleans
 *	  minItems, maxItems	array length
 *	  uniqueItems		no two elements equal as jsonb's = says; the
 *						elements are merge-sorted by a total order whose ties
 *						are exactly jsonb's equality and neighbours compared,
 *						O(n log n) comparisons whatever the elements (no hash
 *						that crafted elements could make collide)
 *	  items				one schema, applied to every element (the array form
 *						of older drafts is refused)
 *	  required			an array of distinct property names
 *	  properties		an object of schemas, by property name
 *	  additionalProperties	a schema for the properties "properties" does
 *						not name (false: no other property is allowed)
 *	  allOf, anyOf, oneOf	non-empty arrays of schemas
 *	  not				a schema
 *
 * The annotations "$schema", "$id", "title", "description", "$comment",
 * "default" and "examples" are accepted and ignored.  Every other keyword
 * ("$ref", "format", "patternProperties", "if", ...) is refused, as is a
 * keyword whose value is malformed: a schema is checked whole, before any
 * validation, and refusals raise 22023 with the JSON path of the schema
 * object where the problem is.  Keywords that concern another type than the
 * instance's (minLength on a number, say) do not apply to it.
 *
 * Validation reports only the first violation, as "<path>: <reason>", the
 * path in the form $.a.b[2] (a member name that is not a plain identifier
 * is written $."a b", with " and \ escaped by \).  Keywords are tried in
 * this order: type, enum, const; then for strings minLength, maxLength,
 * pattern; for numbers minimum, exclusiveMinimum, maximum,
 * exclusiveMaximum; for arrays minItems, maxItems, uniqueItems, items (in
 * element order); for objects required (in array order), then each member
 * in jsonb's key order (shorter names first, then bytewise) against
 * "properties" or "additionalProperties"; finally allOf (its first failing
 * schema's reason), anyOf, oneOf, not.
 *
 * Bounded work for hostile input.  A turn's content comes from an end user,
 * so validating it must cost at most about (schema size) x (content size),
 * whatever the content:
 *	- uniqueItems sorts (above), never compares pair by pair;
 *	- a pattern is matched by PostgreSQL's regex engine, whose DFA runs in
 *	  time linear in the string for a fixed pattern, except where the
 *	  pattern forces it to backtrack: back-references (\1) are matched by
 *	  trying every split of the string (exponential: ^((.+)\2)+$ takes
 *	  seconds on 100 characters), lookahead and lookbehind constraints
 *	  run a sub-match at every position (quadratic and worse when nested).
 *	  Both are refused when the schema is checked, with 22023 and the path
 *	  of the keyword, as is a pattern whose automaton has more than
 *	  MAX_PATTERN_STATES states (each step of the DFA can cost that much);
 *	- a schema is at most MAX_SCHEMA_BYTES and MAX_SCHEMA_DEPTH deep, and
 *	  has no references ($ref is refused), so each schema object applies
 *	  at most once to each value of the content;
 *	- each pattern is compiled once per validation, whatever the number of
 *	  patterns (PostgreSQL's own cache holds 32 compiled expressions: a
 *	  schema with more compiled each again for every string, seconds per
 *	  100 kB); an enum's elements are sorted once per validation and
 *	  searched by bisection;
 *	- and whatever the schema, a validation has a work budget that grows
 *	  with the size of the instance (WORK_FLOOR and WORK_PER_BYTE below):
 *	  every schema object applied to a value, every character a pattern
 *	  scans (times its automaton's states), every byte compared or counted
 *	  spends from it, and a validation that would spend more raises 54000
 *	  (program_limit_exceeded) instead: a schema whose combinators apply
 *	  hundreds of schemas to every value of a large instance costs its
 *	  budget, not minutes.  Units count work, not time, so the same schema
 *	  and instance always get the same answer;
 *	- memory: the loops over elements and members reset a scratch memory
 *	  context per value, and the alternatives of anyOf, oneOf and not are
 *	  tried without formatting the messages nobody reads.
 *
 * One validation (or check) runs in its own memory context, deleted at the
 * end; only the message is copied out.  The last validation's inputs and
 * answer are remembered (cscp_jsonschema_validate_checked), so that the
 * turn trigger, validating the content the API validated before it locked
 * the conversation, gets the answer without doing the work again under
 * the lock: a cache of a pure function keyed by its whole input, not a
 * verdict handed from one to the other.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "pgcompat.h"

#include "catalog/pg_collation_d.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "regex/regex.h"
#include "regex/regexport.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

/* Largest schema, in bytes of its jsonb form, and deepest nesting of it. */
#define MAX_SCHEMA_BYTES (64 * 1024)
#define MAX_SCHEMA_DEPTH 32

/* Most states a pattern's automaton may have (pg_reg_getnumstates). */
#define MAX_PATTERN_STATES 300

/*
 * The work budget of one validation (see the file header), in units of
 * about a nanosecond of the slowest work each unit stands for: a
 * validation may spend WORK_FLOOR plus WORK_PER_BYTE for each byte of the
 * instance (jsonb form), so a 1 MB instance gets about a third of a second
 * of the worst work, 1 kB about 50 ms.
 * What each step costs: WORK_VISIT for a schema object applied to a value;
 * WORK_PATTERN_STATE per character and state of a pattern's automaton (a
 * step of the DFA, when its cache of state sets misses, costs that many
 * states) and WORK_PATTERN_CALL per string matched (the matcher's setup);
 * WORK_PER_COMPARED_BYTE per byte of a value compared (enum,
 * const, uniqueItems), counted characters (minLength, maxLength) or looked
 * up (required).
 */
#define WORK_FLOOR INT64CONST(50000000)
#define WORK_PER_BYTE 300
#define WORK_VISIT 500
#define WORK_PATTERN_STATE 25
#define WORK_PATTERN_CALL 200
#define WORK_PER_COMPARED_BYTE 2

/*
 * What a schema keyword needs compiled or sorted once per validation,
 * keyed by where its value lies in the schema (the schema's bytes stay put
 * for the whole validation): a pattern's regular expression and its number
 * of states, an enum's elements sorted by values_cmp.
 */
typedef struct KeywordCache
{
	const void *key;			/* hash key: the value's address in the schema */
	bool		compiled;		/* re holds a compiled pattern (to free) */
	regex_t		re;
	int			nstates;
	JsonbValue *sorted;			/* an enum's elements, sorted */
	int			nsorted;
} KeywordCache;

/*
 * One validation: its memory context, what its keywords compiled, and the
 * work it may still do.
 */
typedef struct ValidationRun
{
	MemoryContext cxt;
	HTAB	   *cache;
	int64		budget;
	int64		allowed;
	int			instance_bytes;
} ValidationRun;

/* Keywords that validate, and annotations accepted and ignored. */
static const char *const supported_keywords[] = {
	"type", "enum", "const", "minLength", "maxLength", "pattern",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"minItems", "maxItems", "uniqueItems", "items", "required",
	"properties", "additionalProperties", "allOf", "anyOf", "oneOf", "not"
};
static const char *const annotation_keywords[] = {
	"$schema", "$id", "title", "description", "$comment", "default", "examples"
};
static const char *const type_names[] = {
	"null", "boolean", "object", "array", "number", "string", "integer"
};

/*
 * One step of a JSON path, linked to its parent; NULL is the root "$".
 * A member step has key set; an element step has key NULL and index.
 */
typedef struct JsonPathStep
{
	const struct JsonPathStep *parent;
	const char *key;
	int			keylen;
	int			index;
} JsonPathStep;

/* Append the path ending at step to buf, in the form $.a."b c"[2]. */
static void
append_path(StringInfo buf, const JsonPathStep *step)
{
	bool		plain;

	if (step == NULL)
	{
		appendStringInfoChar(buf, '$');
		return;
	}
	append_path(buf, step->parent);
	if (step->key == NULL)
	{
		appendStringInfo(buf, "[%d]", step->index);
		return;
	}
	plain = step->keylen > 0 &&
		(isalpha((unsigned char) step->key[0]) || step->key[0] == '_');
	for (int i = 1; plain && i < step->keylen; i++)
		plain = isalnum((unsigned char) step->key[i]) || step->key[i] == '_';
	appendStringInfoChar(buf, '.');
	if (plain)
	{
		appendBinaryStringInfo(buf, step->key, step->keylen);
		return;
	}
	appendStringInfoChar(buf, '"');
	for (int i = 0; i < step->keylen; i++)
	{
		if (step->key[i] == '"' || step->key[i] == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, step->key[i]);
	}
	appendStringInfoChar(buf, '"');
}

/* The path ending at step as a palloc'd string. */
static char *
path_string(const JsonPathStep *step)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_path(&buf, step);
	return buf.data;
}

/* A member step under parent. */
static JsonPathStep
member_step(const JsonPathStep *parent, const char *key, int keylen)
{
	JsonPathStep s = {parent, key, keylen, 0};

	return s;
}

/* An element step under parent. */
static JsonPathStep
element_step(const JsonPathStep *parent, int index)
{
	JsonPathStep s = {parent, NULL, 0, index};

	return s;
}

/* The root of a jsonb datum as a JsonbValue: a scalar, or a container. */
static void
jsonb_root_value(Jsonb *j, JsonbValue *v)
{
	if (JB_ROOT_IS_SCALAR(j))
	{
		if (!JsonbExtractScalar(&j->root, v))
			elog(ERROR, "could not extract the scalar of a jsonb value");
		return;
	}
	v->type = jbvBinary;
	v->val.binary.data = &j->root;
	v->val.binary.len = VARSIZE(j) - VARHDRSZ;
}

/* Whether v is a JSON object. */
static bool
is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

/* Whether v is a JSON array. */
static bool
is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

/* numeric_cmp of two numerics: negative, zero or positive. */
static int
num_cmp(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
											 NumericGetDatum(a),
											 NumericGetDatum(b)));
}

/* Whether a numeric has no fractional part. */
static bool
num_is_integral(Numeric n)
{
	Numeric		f = DatumGetNumeric(DirectFunctionCall1(numeric_floor,
														NumericGetDatum(n)));

	return num_cmp(n, f) == 0;
}

/* A numeric in its text form. */
static char *
num_string(Numeric n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n)));
}

/* The value of keyword in the schema object s, or NULL when absent. */
static JsonbValue *
keyword(JsonbContainer *s, const char *name)
{
	return getKeyJsonValueFromContainer(s, name, strlen(name), NULL);
}

/* Whether name is one of the strings in list. */
static bool
in_list(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* "The supported keywords are a, b and c; the annotations ... are ignored." */
static char *
supported_hint(void)
{
	StringInfoData buf;
	int			n = lengthof(supported_keywords);
	int			m = lengthof(annotation_keywords);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "The supported keywords are ");
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i == 0 ? "" : (i == n - 1 ? " and " : ", "),
						 supported_keywords[i]);
	appendStringInfoString(&buf, "; the annotations ");
	for (int i = 0; i < m; i++)
		appendStringInfo(&buf, "%s%s", i == 0 ? "" : (i == m - 1 ? " and " : ", "),
						 annotation_keywords[i]);
	appendStringInfoString(&buf, " are accepted and ignored.");
	return buf.data;
}

/* Raise 22023: keyword's value at path is not what it must be. */
static pg_noreturn void
malformed(const char *kw, const char *what, const JsonPathStep *path)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("schema keyword \"%s\" must be %s", kw, what),
			 errdetail("It appears at %s.", path_string(path))));
}

/* The rank of a value's JSON type, ordering values of different types. */
static int
type_rank(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return 0;
		case jbvBool:
			return 1;
		case jbvNumeric:
			return 2;
		case jbvString:
			return 3;
		default:
			return JsonContainerIsArray(v->val.binary.data) ? 4 : 5;
	}
}

/*
 * A total order on jsonb values (scalars or containers) whose ties are
 * exactly the values jsonb's = calls equal (1 and 1.0 tie), without copying
 * them: by type, then numbers by value, strings by length and bytes (the
 * database's collation is deterministic, so equal strings are equal
 * bytes), containers by compareJsonbContainers, jsonb's btree order.  Each
 * comparison costs at most the size of the smaller value.
 */
static int
values_cmp(const JsonbValue *a, const JsonbValue *b)
{
	int			ra = type_rank(a),
				rb = type_rank(b);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	switch (a->type)
	{
		case jbvNull:
			return 0;
		case jbvBool:
			return (int) a->val.boolean - (int) b->val.boolean;
		case jbvNumeric:
			return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
													 NumericGetDatum(a->val.numeric),
													 NumericGetDatum(b->val.numeric)));
		case jbvString:
			if (a->val.string.len != b->val.string.len)
				return a->val.string.len < b->val.string.len ? -1 : 1;
			return memcmp(a->val.string.val, b->val.string.val, a->val.string.len);
		default:
			return compareJsonbContainers(a->val.binary.data, b->val.binary.data);
	}
}

/*
 * Sort order[0..n-1], indexes into values, by values_cmp, stably (equal
 * values keep their index order): a bottom-up merge sort, O(n log n)
 * comparisons for every input, where a quicksort can be driven quadratic.
 */
static void
sort_values(const JsonbValue *values, int *order, int n)
{
	int		   *tmp = palloc(sizeof(int) * Max(n, 1));
	int		   *from = order,
			   *to = tmp;

	for (int width = 1; width < n; width *= 2)
	{
		CHECK_FOR_INTERRUPTS();
		for (int lo = 0; lo < n; lo += 2 * width)
		{
			int			mid = Min(lo + width, n),
						hi = Min(lo + 2 * width, n),
						i = lo,
						j = mid,
						k = lo;

			while (i < mid && j < hi)
				to[k++] = values_cmp(&values[from[j]], &values[from[i]]) < 0 ? from[j++] : from[i++];
			while (i < mid)
				to[k++] = from[i++];
			while (j < hi)
				to[k++] = from[j++];
		}
		/* swap the roles of the two arrays */
		{
			int		   *t = from;

			from = to;
			to = t;
		}
	}
	if (from != order)
		memcpy(order, from, sizeof(int) * n);
	pfree(tmp);
}

/* Whether v is a JSON string naming one of the seven types. */
static bool
is_type_name(JsonbValue *v)
{
	char	   *name;

	if (v->type != jbvString)
		return false;
	name = pnstrdup(v->val.string.val, v->val.string.len);
	return in_list(name, type_names, lengthof(type_names));
}

/*
 * Whether v is an array of distinct strings, each a type name when
 * type_names_only, and not empty when nonempty.
 */
static bool
is_string_set(JsonbValue *v, bool type_names_only, bool nonempty)
{
	JsonbContainer *c;
	int			n;
	JsonbValue *elems;
	int		   *order;

	if (!is_array(v))
		return false;
	c = v->val.binary.data;
	n = JsonContainerSize(c);
	if (nonempty && n == 0)
		return false;
	elems = palloc(sizeof(JsonbValue) * Max(n, 1));
	order = palloc(sizeof(int) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(c, i);

		if (e->type != jbvString || (type_names_only && !is_type_name(e)))
			return false;
		elems[i] = *e;
		order[i] = i;
	}
	/* Distinct: no two neighbours equal once sorted (O(n log n), not pair by pair). */
	sort_values(elems, order, n);
	for (int i = 1; i < n; i++)
		if (values_cmp(&elems[order[i - 1]], &elems[order[i]]) == 0)
			return false;
	return true;
}

/* Whether v is an integral number not below zero. */
static bool
is_count(JsonbValue *v)
{
	return v->type == jbvNumeric && num_is_integral(v->val.numeric) &&
		num_cmp(v->val.numeric, int64_to_numeric(0)) >= 0;
}

/* Raise 22023: the pattern at path would make matching backtrack or crawl. */
static pg_noreturn void
slow_pattern(JsonbValue *pattern, const JsonPathStep *path, const char *what, const char *why)
{
	JsonPathStep here = member_step(path, "pattern", strlen("pattern"));

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("schema keyword \"pattern\" %s", what),
			 errdetail("It appears at %s: \"%.*s\".", path_string(&here),
					   pattern->val.string.len, pattern->val.string.val),
			 errhint("%s", why)));
}

/*
 * Raise 22023 unless pattern (the value of "pattern" in the schema object
 * at path) compiles, and into one the regex engine matches without
 * backtracking, in time linear in the string (see the file header).
 */
static void
check_pattern(JsonbValue *pattern, const JsonPathStep *path)
{
	regex_t		re;
	pg_wchar   *wide;
	int			wlen;
	int			rc;
	char		errbuf[100];

	wide = palloc((pattern->val.string.len + 1) * sizeof(pg_wchar));
	wlen = pg_mb2wchar_with_len(pattern->val.string.val, wide, pattern->val.string.len);
	rc = pg_regcomp(&re, wide, wlen, REG_ADVANCED, C_COLLATION_OID);
	if (rc == REG_OKAY)
	{
		long		info = re.re_info;
		int			nstates = pg_reg_getnumstates(&re);

		pg_regfree(&re);
		if (info & REG_UBACKREF)
			slow_pattern(pattern, path, "must not use back-references",
						 "A back-reference such as \\1 makes the regular expression engine backtrack, "
						 "which can take exponential time; match the text without it.");
		if (info & REG_ULOOKAROUND)
			slow_pattern(pattern, path, "must not use lookahead or lookbehind constraints",
						 "A constraint such as (?=...) or (?<=...) is matched again at every position "
						 "of the string; match the text without it.");
		if (nstates > MAX_PATTERN_STATES)
			slow_pattern(pattern, path, "is too complex",
						 psprintf("Its automaton has %d states; the limit is %d. Use smaller repetition counts.",
								  nstates, MAX_PATTERN_STATES));
		return;
	}
	/* An interrupt makes the regex library give up: not the pattern's fault. */
	CHECK_FOR_INTERRUPTS();
	pg_regerror(rc, &re, errbuf, sizeof(errbuf));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("schema keyword \"pattern\" is not a valid regular expression"),
			 errdetail("It appears at %s: %s.", path_string(path), errbuf)));
}

static void check_schema(JsonbValue *schema, const JsonPathStep *path);

/* Check the array of schemas under kw (allOf, anyOf, oneOf). */
static void
check_schema_array(const char *kw, JsonbValue *v, const JsonPathStep *here,
				   const JsonPathStep *path)
{
	int			n;

	if (!is_array(v) || (n = JsonContainerSize(v->val.binary.data)) == 0)
		malformed(kw, "a non-empty array of schemas", path);
	for (int i = 0; i < n; i++)
	{
		JsonPathStep elem = element_step(here, i);

		check_schema(getIthJsonbValueFromContainer(v->val.binary.data, i), &elem);
	}
}

/* Check one keyword of the schema object at path; raise 22023 if unusable. */
static void
check_keyword(const char *kw, JsonbValue *v, const JsonPathStep *path)
{
	JsonPathStep here = member_step(path, kw, strlen(kw));

	if (strcmp(kw, "type") == 0)
	{
		if (!is_type_name(v) && !is_string_set(v, true, true))
			malformed(kw, "a type name or a non-empty array of distinct type names "
					  "(null, boolean, object, array, number, string, integer)", path);
	}
	else if (strcmp(kw, "enum") == 0)
	{
		if (!is_array(v))
			malformed(kw, "an array", path);
	}
	else if (strcmp(kw, "const") == 0)
	{
		/* any value */
	}
	else if (strcmp(kw, "minLength") == 0 || strcmp(kw, "maxLength") == 0 ||
			 strcmp(kw, "minItems") == 0 || strcmp(kw, "maxItems") == 0)
	{
		if (!is_count(v))
			malformed(kw, "a non-negative integer", path);
	}
	else if (strcmp(kw, "minimum") == 0 || strcmp(kw, "maximum") == 0 ||
			 strcmp(kw, "exclusiveMinimum") == 0 || strcmp(kw, "exclusiveMaximum") == 0)
	{
		if (v->type != jbvNumeric)
			malformed(kw, "a number", path);
	}
	else if (strcmp(kw, "uniqueItems") == 0)
	{
		if (v->type != jbvBool)
			malformed(kw, "a boolean", path);
	}
	else if (strcmp(kw, "pattern") == 0)
	{
		if (v->type != jbvString)
			malformed(kw, "a string", path);
		check_pattern(v, path);
	}
	else if (strcmp(kw, "required") == 0)
	{
		if (!is_string_set(v, false, false))
			malformed(kw, "an array of distinct strings", path);
	}
	else if (strcmp(kw, "properties") == 0)
	{
		JsonbIterator *it;
		JsonbValue	e,
					name = {0};
		JsonbIteratorToken tok;

		if (!is_object(v))
			malformed(kw, "an object whose values are schemas", path);
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				name = e;
			else if (tok == WJB_VALUE)
			{
				JsonPathStep prop = member_step(&here, name.val.string.val,
												name.val.string.len);

				check_schema(&e, &prop);
			}
		}
	}
	else if (strcmp(kw, "items") == 0 || strcmp(kw, "additionalProperties") == 0 ||
			 strcmp(kw, "not") == 0)
		check_schema(v, &here);
	else if (strcmp(kw, "allOf") == 0 || strcmp(kw, "anyOf") == 0 ||
			 strcmp(kw, "oneOf") == 0)
		check_schema_array(kw, v, &here, path);
	else if (!in_list(kw, annotation_keywords, lengthof(annotation_keywords)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema keyword \"%s\" is not supported", kw),
				 errdetail("It appears at %s.", path_string(path)),
				 errhint("%s", supported_hint())));
}

/* Check a schema (object or boolean) at path, recursively; raise 22023 if unusable. */
static void
check_schema(JsonbValue *schema, const JsonPathStep *path)
{
	JsonbIterator *it;
	JsonbValue	v,
				key = {0};
	JsonbIteratorToken tok;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (schema->type == jbvBool)
		return;
	if (!is_object(schema))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema must be a JSON object or a boolean"),
				 errdetail("The value at %s is of type %s.",
						   path_string(path), cscp_json_type_name(schema))));

	it = JsonbIteratorInit(schema->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = v;
		else if (tok == WJB_VALUE)
			check_keyword(cscp_jsonb_key_cstring(&key), &v, path);
	}
}

/* "<path>: <reason>" as a palloc'd string. */
static char *
violation(const JsonPathStep *path, const char *fmt,...)
pg_attribute_printf(2, 3);

static char *
violation(const JsonPathStep *path, const char *fmt,...)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_path(&buf, path);
	appendStringInfoString(&buf, ": ");
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	return buf.data;
}

/* Whether inst has the type named by the string value t. */
static bool
type_matches(JsonbValue *t, JsonbValue *inst)
{
	char	   *name = pnstrdup(t->val.string.val, t->val.string.len);

	if (strcmp(name, "integer") == 0)
		return inst->type == jbvNumeric && num_is_integral(inst->val.numeric);
	return strcmp(name, cscp_json_type_name(inst)) == 0;
}

/* NULL if inst has one of the types of "type" (a string or array), else the violation. */
static char *
validate_type(JsonbValue *t, JsonbValue *inst, const JsonPathStep *path)
{
	StringInfoData expected;
	int			n;

	if (t->type == jbvString)
	{
		if (type_matches(t, inst))
			return NULL;
		return violation(path, "expected type \"%.*s\", got \"%s\"",
						 t->val.string.len, t->val.string.val, cscp_json_type_name(inst));
	}
	initStringInfo(&expected);
	n = JsonContainerSize(t->val.binary.data);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(t->val.binary.data, i);

		if (type_matches(e, inst))
			return NULL;
		appendStringInfo(&expected, "%s\"%.*s\"", i > 0 ? " or " : "",
						 e->val.string.len, e->val.string.val);
	}
	return violation(path, "expected type %s, got \"%s\"",
					 expected.data, cscp_json_type_name(inst));
}

/*
 * Spend units of the validation's work budget; raise 54000 when it is
 * spent, whatever the instance's validity (the same bytes always give the
 * same answer: units count work, not time).
 */
static void
spend_work(ValidationRun *run, int64 units)
{
	run->budget -= units;
	if (run->budget < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("validating the value against the schema takes too much work"),
				 errdetail("A value of %d bytes may take %lld units of work; this schema needs more for it.",
						   run->instance_bytes, (long long) run->allowed),
				 errhint("Make the schema cheaper for large values: fewer schemas applying to the same "
						 "value (allOf, anyOf, oneOf), simpler patterns on long strings.")));
}

/* Bytes of a value that a comparison or scan of it may read. */
static int
value_bytes(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			return v->val.string.len;
		case jbvNumeric:
			return VARSIZE_ANY(v->val.numeric);
		case jbvBinary:
			return v->val.binary.len;
		default:
			return 1;
	}
}

/* The cache entry of the keyword value at key, created empty on first use. */
static KeywordCache *
keyword_cache(ValidationRun *run, const void *key)
{
	bool		found;
	KeywordCache *e;

	if (run->cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(const void *);
		ctl.entrysize = sizeof(KeywordCache);
		ctl.hcxt = run->cxt;
		run->cache = hash_create("cscp jsonschema keywords", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(run->cache, &key, HASH_ENTER, &found);
	if (!found)
	{
		e->compiled = false;
		e->nstates = 0;
		e->sorted = NULL;
		e->nsorted = 0;
	}
	return e;
}

/* Free the regular expressions a validation compiled (the regex library mallocs them). */
static void
free_keyword_cache(ValidationRun *run)
{
	HASH_SEQ_STATUS seq;
	KeywordCache *e;

	if (run->cache == NULL)
		return;
	hash_seq_init(&seq, run->cache);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->compiled)
		{
			pg_regfree(&e->re);
			e->compiled = false;
		}
}

/*
 * Whether the string str (len bytes) matches the pattern k, compiled once
 * per validation whatever the number of patterns (PostgreSQL's own cache
 * of compiled expressions holds 32, and a schema with more would compile
 * each again for every string).
 */
static bool
pattern_matches(ValidationRun *run, JsonbValue *k, const char *str, int len)
{
	KeywordCache *e = keyword_cache(run, k->val.string.val);
	pg_wchar   *wide;
	int			wlen;
	int			rc;
	char		errbuf[100];

	if (!e->compiled)
	{
		MemoryContext old = MemoryContextSwitchTo(run->cxt);

		wide = palloc((k->val.string.len + 1) * sizeof(pg_wchar));
		wlen = pg_mb2wchar_with_len(k->val.string.val, wide, k->val.string.len);
		rc = pg_regcomp(&e->re, wide, wlen, REG_ADVANCED, C_COLLATION_OID);
		MemoryContextSwitchTo(old);
		pfree(wide);
		if (rc != REG_OKAY)
		{
			CHECK_FOR_INTERRUPTS();
			pg_regerror(rc, &e->re, errbuf, sizeof(errbuf));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_REGULAR_EXPRESSION),
					 errmsg("could not compile the schema's pattern: %s", errbuf)));
		}
		e->compiled = true;
		e->nstates = pg_reg_getnumstates(&e->re);
	}
	wide = palloc((len + 1) * sizeof(pg_wchar));
	wlen = pg_mb2wchar_with_len(str, wide, len);
	spend_work(run, WORK_PATTERN_CALL + (int64) wlen * (e->nstates + 1) * WORK_PATTERN_STATE);
	rc = pg_regexec(&e->re, wide, wlen, 0, NULL, 0, NULL, 0);
	pfree(wide);
	if (rc == REG_OKAY)
		return true;
	if (rc == REG_NOMATCH)
		return false;
	CHECK_FOR_INTERRUPTS();
	pg_regerror(rc, &e->re, errbuf, sizeof(errbuf));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_REGULAR_EXPRESSION),
			 errmsg("regular expression failed: %s", errbuf)));
}

/*
 * Whether inst equals an element of the enum array k: a binary search in
 * its elements, sorted once per validation, so a long enum costs its
 * logarithm per value.
 */
static bool
enum_contains(ValidationRun *run, JsonbValue *k, JsonbValue *inst)
{
	KeywordCache *e = keyword_cache(run, k->val.binary.data);
	int			lo = 0,
				hi;

	if (e->sorted == NULL)
	{
		JsonbContainer *c = k->val.binary.data;
		int			n = JsonContainerSize(c);
		JsonbValue *elems = MemoryContextAlloc(run->cxt, sizeof(JsonbValue) * Max(n, 1));
		int		   *order = palloc(sizeof(int) * Max(n, 1));
		JsonbValue *sorted = MemoryContextAlloc(run->cxt, sizeof(JsonbValue) * Max(n, 1));

		for (int i = 0; i < n; i++)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(c, i);

			elems[i] = *v;
			order[i] = i;
		}
		sort_values(elems, order, n);
		for (int i = 0; i < n; i++)
			sorted[i] = elems[order[i]];
		pfree(order);
		e->sorted = sorted;
		e->nsorted = n;
	}
	hi = e->nsorted;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			c;

		spend_work(run, (int64) (value_bytes(inst) + 16) * WORK_PER_COMPARED_BYTE);
		c = values_cmp(inst, &e->sorted[mid]);
		if (c == 0)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

static char *validate(ValidationRun *run, JsonbValue *schema, JsonbValue *inst, const JsonPathStep *path);

/* NULL if the string inst satisfies minLength, maxLength and pattern of s. */
static char *
validate_string(ValidationRun *run, JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbValue *k;
	const char *str = inst->val.string.val;
	int			len = inst->val.string.len;

	if (keyword(s, "minLength") != NULL || keyword(s, "maxLength") != NULL)
		spend_work(run, (int64) len * WORK_PER_COMPARED_BYTE);
	if ((k = keyword(s, "minLength")) != NULL &&
		num_cmp(int64_to_numeric(pg_mbstrlen_with_len(str, len)), k->val.numeric) < 0)
		return violation(path, "string is shorter than %s characters",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "maxLength")) != NULL &&
		num_cmp(int64_to_numeric(pg_mbstrlen_with_len(str, len)), k->val.numeric) > 0)
		return violation(path, "string is longer than %s characters",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "pattern")) != NULL && !pattern_matches(run, k, str, len))
		return violation(path, "does not match pattern \"%.*s\"",
						 k->val.string.len, k->val.string.val);
	return NULL;
}

/* NULL if the number inst satisfies the bounds of s. */
static char *
validate_number(JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbValue *k;
	Numeric		n = inst->val.numeric;

	if ((k = keyword(s, "minimum")) != NULL && num_cmp(n, k->val.numeric) < 0)
		return violation(path, "number is less than the minimum %s",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "exclusiveMinimum")) != NULL && num_cmp(n, k->val.numeric) <= 0)
		return violation(path, "number is not greater than the exclusive minimum %s",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "maximum")) != NULL && num_cmp(n, k->val.numeric) > 0)
		return violation(path, "number is greater than the maximum %s",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "exclusiveMaximum")) != NULL && num_cmp(n, k->val.numeric) >= 0)
		return violation(path, "number is not less than the exclusive maximum %s",
						 num_string(k->val.numeric));
	return NULL;
}

/*
 * Whether the array a (n elements) has two equal elements; if so, *second
 * is the lowest index equal to an earlier element and *first the lowest
 * such earlier index.  The elements are sorted (sort_values, stable: equal
 * elements in index order) and neighbours compared: O(n log n)
 * comparisons, each no dearer than the smaller element.
 */
static bool
find_duplicate(JsonbContainer *a, int n, int *first, int *second)
{
	JsonbValue *elems = palloc(sizeof(JsonbValue) * Max(n, 1));
	int		   *order = palloc(sizeof(int) * Max(n, 1));
	JsonbIterator *it = JsonbIteratorInit(a);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			count = 0;
	bool		found = false;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_ELEM && count < n)
		{
			order[count] = count;
			elems[count++] = v;
		}
	Assert(count == n);
	sort_values(elems, order, count);
	/* Each run of equal elements: its first two are its lowest indexes. */
	for (int g = 0; g < count;)
	{
		int			end = g + 1;

		while (end < count && values_cmp(&elems[order[g]], &elems[order[end]]) == 0)
			end++;
		if (end - g >= 2 && (!found || order[g + 1] < *second))
		{
			*first = order[g];
			*second = order[g + 1];
			found = true;
		}
		g = end;
	}
	pfree(elems);
	pfree(order);
	return found;
}

/* A memory context for validating one value after another, reset in between. */
static MemoryContext
scratch_context(void)
{
	return AllocSetContextCreate(CurrentMemoryContext, "cscp jsonschema value",
								 ALLOCSET_SMALL_SIZES);
}

/*
 * validate() in scratch, reset afterwards: the violation copied into the
 * caller's context, or NULL.  A loop over many values so needs the memory
 * of one.
 */
static char *
validate_in(ValidationRun *run, MemoryContext scratch, JsonbValue *schema, JsonbValue *inst,
			const JsonPathStep *path)
{
	MemoryContext outer = MemoryContextSwitchTo(scratch);
	char	   *msg = validate(run, schema, inst, path);

	MemoryContextSwitchTo(outer);
	if (msg != NULL)
		msg = pstrdup(msg);
	MemoryContextReset(scratch);
	return msg;
}

/* NULL if the array inst satisfies minItems, maxItems, uniqueItems and items of s. */
static char *
validate_array(ValidationRun *run, JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbContainer *a = inst->val.binary.data;
	int			n = JsonContainerSize(a);
	JsonbValue *k;

	if ((k = keyword(s, "minItems")) != NULL &&
		num_cmp(int64_to_numeric(n), k->val.numeric) < 0)
		return violation(path, "array has fewer than %s items",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "maxItems")) != NULL &&
		num_cmp(int64_to_numeric(n), k->val.numeric) > 0)
		return violation(path, "array has more than %s items",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "uniqueItems")) != NULL && k->val.boolean)
	{
		int			first = 0,
					second = 0;
		int			rounds = 1;

		/* about log2(n) rounds of merging, each comparing at most every byte */
		for (int m = n; m > 1; m /= 2)
			rounds++;
		spend_work(run, (int64) rounds * ((int64) value_bytes(inst) + 16 * (int64) n) *
			   WORK_PER_COMPARED_BYTE);
		if (find_duplicate(a, n, &first, &second))
			return violation(path, "array items %d and %d are equal", first, second);
	}
	if ((k = keyword(s, "items")) != NULL)
	{
		MemoryContext scratch = scratch_context();
		JsonbIterator *it = JsonbIteratorInit(a);
		JsonbValue	e;
		JsonbIteratorToken tok;
		int			i = 0;
		char	   *msg = NULL;

		while (msg == NULL && (tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
		{
			JsonPathStep elem;

			if (tok != WJB_ELEM)
				continue;
			elem = element_step(path, i++);
			msg = validate_in(run, scratch, k, &e, &elem);
		}
		MemoryContextDelete(scratch);
		return msg;
	}
	return NULL;
}

/* NULL if the object inst satisfies required, properties and additionalProperties of s. */
static char *
validate_object(ValidationRun *run, JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbContainer *o = inst->val.binary.data;
	JsonbValue *k;
	JsonbValue *props;
	JsonbValue *extra;
	JsonbIterator *it;
	JsonbValue	v,
				key = {0};
	JsonbIteratorToken tok;
	MemoryContext scratch;
	char	   *msg = NULL;

	if ((k = keyword(s, "required")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);

		for (int i = 0; i < n; i++)
		{
			JsonbValue *name = getIthJsonbValueFromContainer(k->val.binary.data, i);

			spend_work(run, (int64) (name->val.string.len + 64) * WORK_PER_COMPARED_BYTE);

			if (getKeyJsonValueFromContainer(o, name->val.string.val,
											 name->val.string.len, NULL) == NULL)
				return violation(path, "missing required property \"%.*s\"",
								 name->val.string.len, name->val.string.val);
		}
	}

	props = keyword(s, "properties");
	extra = keyword(s, "additionalProperties");
	if (props == NULL && extra == NULL)
		return NULL;
	scratch = scratch_context();
	it = JsonbIteratorInit(o);
	while (msg == NULL && (tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue	found;
		JsonbValue *sub = NULL;
		JsonPathStep member;

		if (tok == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		spend_work(run, (int64) (key.val.string.len + 64) * WORK_PER_COMPARED_BYTE);
		if (props != NULL)
			sub = getKeyJsonValueFromContainer(props->val.binary.data,
											   key.val.string.val,
											   key.val.string.len, &found);
		if (sub == NULL)
		{
			if (extra == NULL)
				continue;
			if (extra->type == jbvBool && !extra->val.boolean)
			{
				msg = violation(path, "additional property \"%.*s\" is not allowed",
								key.val.string.len, key.val.string.val);
				break;
			}
			sub = extra;
		}
		member = member_step(path, key.val.string.val, key.val.string.len);
		msg = validate_in(run, scratch, sub, &v, &member);
	}
	MemoryContextDelete(scratch);
	return msg;
}

/*
 * NULL if inst is valid against schema (already checked), else the first
 * violation as "<path>: <reason>".
 */
static char *
validate(ValidationRun *run, JsonbValue *schema, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbContainer *s;
	JsonbValue *k;
	char	   *msg = NULL;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	spend_work(run, WORK_VISIT);

	if (schema->type == jbvBool)
		return schema->val.boolean ? NULL :
			violation(path, "no value is allowed here (the schema is false)");
	s = schema->val.binary.data;

	if ((k = keyword(s, "type")) != NULL &&
		(msg = validate_type(k, inst, path)) != NULL)
		return msg;
	if ((k = keyword(s, "enum")) != NULL && !enum_contains(run, k, inst))
		return violation(path, "value is not one of the \"enum\" values");
	if ((k = keyword(s, "const")) != NULL)
	{
		spend_work(run, (int64) (value_bytes(inst) + 16) * WORK_PER_COMPARED_BYTE);
		if (values_cmp(inst, k) != 0)
			return violation(path, "value is not equal to the \"const\" value");
	}

	if (inst->type == jbvString)
		msg = validate_string(run, s, inst, path);
	else if (inst->type == jbvNumeric)
		msg = validate_number(s, inst, path);
	else if (is_array(inst))
		msg = validate_array(run, s, inst, path);
	else if (is_object(inst))
		msg = validate_object(run, s, inst, path);
	if (msg != NULL)
		return msg;

	if ((k = keyword(s, "allOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);

		for (int i = 0; i < n; i++)
			if ((msg = validate(run, getIthJsonbValueFromContainer(k->val.binary.data, i),
								inst, path)) != NULL)
				return msg;
	}
	if ((k = keyword(s, "anyOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);
		bool		matched = false;

		for (int i = 0; i < n && !matched; i++)
			matched = validate(run, getIthJsonbValueFromContainer(k->val.binary.data, i),
							   inst, path) == NULL;
		if (!matched)
			return violation(path, "matches none of the anyOf schemas");
	}
	if ((k = keyword(s, "oneOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);
		int			matches = 0;

		for (int i = 0; i < n; i++)
			if (validate(run, getIthJsonbValueFromContainer(k->val.binary.data, i),
						 inst, path) == NULL)
				matches++;
		if (matches == 0)
			return violation(path, "matches none of the oneOf schemas");
		if (matches > 1)
			return violation(path, "matches %d of the oneOf schemas, expected exactly 1",
							 matches);
	}
	if ((k = keyword(s, "not")) != NULL && validate(run, k, inst, path) == NULL)
		return violation(path, "matches the \"not\" schema");
	return NULL;
}

/* Raise 22023 unless the schema is within MAX_SCHEMA_BYTES and MAX_SCHEMA_DEPTH. */
static void
check_schema_size(Jsonb *schema)
{
	if (VARSIZE(schema) > MAX_SCHEMA_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema is too large"),
				 errdetail("It takes %zu bytes; the limit is %d bytes.",
						   (size_t) VARSIZE(schema), MAX_SCHEMA_BYTES)));
	if (cscp_jsonb_deeper_than(schema, MAX_SCHEMA_DEPTH))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema is nested too deeply"),
				 errdetail("Arrays and objects may be nested at most %d levels deep in a schema.",
						   MAX_SCHEMA_DEPTH)));
}

/* Raise 22023 for a null schema. */
static void
require_schema(Jsonb *schema)
{
	if (schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema must not be null")));
}

/*
 * validate() of the instance iv (instance_bytes in its jsonb form) against
 * the checked schema sv, as one validation: a work budget by the size of
 * the instance, what its keywords compile in cxt, freed on the way out
 * however it goes.
 */
static char *
validate_root(MemoryContext cxt, JsonbValue *sv, JsonbValue *iv, int instance_bytes)
{
	ValidationRun *run = MemoryContextAllocZero(cxt, sizeof(ValidationRun));
	char	   *volatile msg = NULL;

	run->cxt = cxt;
	run->instance_bytes = instance_bytes;
	run->allowed = WORK_FLOOR + (int64) WORK_PER_BYTE * instance_bytes;
	run->budget = run->allowed;
	PG_TRY();
	{
		msg = validate(run, sv, iv, NULL);
	}
	PG_CATCH();
	{
		free_keyword_cache(run);
		PG_RE_THROW();
	}
	PG_END_TRY();
	free_keyword_cache(run);
	return msg;
}

/*
 * The first violation of instance against schema as "<path>: <reason>" in
 * the caller's context, NULL when it is valid (or not given); with
 * check_it, the schema is checked first (22023).  The work is done in a
 * memory context of its own.
 */
static char *
run_schema(Jsonb *schema, Jsonb *instance, bool check_it)
{
	MemoryContext ctx = AllocSetContextCreate(CurrentMemoryContext, "cscp jsonschema",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(ctx);
	JsonbValue	sv,
				iv;
	char	   *msg = NULL;

	if (check_it)
		check_schema_size(schema);
	jsonb_root_value(schema, &sv);
	if (check_it)
		check_schema(&sv, NULL);
	if (instance != NULL)
	{
		jsonb_root_value(instance, &iv);
		msg = validate_root(ctx, &sv, &iv, VARSIZE(instance));
	}
	MemoryContextSwitchTo(old);
	if (msg != NULL)
		msg = pstrdup(msg);
	MemoryContextDelete(ctx);
	return msg;
}

/* Raise 22023 unless schema is a usable schema of the supported subset. */
void
cscp_jsonschema_check(Jsonb *schema)
{
	require_schema(schema);
	run_schema(schema, NULL, true);
}

/*
 * NULL if instance is valid against schema, else the first violation as a
 * palloc'd "<path>: <reason>".  Raises 22023 if schema is unusable or
 * either argument is NULL.
 */
char *
cscp_jsonschema_validate(Jsonb *schema, Jsonb *instance)
{
	require_schema(schema);
	if (instance == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("instance must not be null"),
				 errhint("Pass the JSON value 'null'::jsonb to validate a JSON null.")));
	return run_schema(schema, instance, true);
}

/*
 * The last validation of cscp_jsonschema_validate_checked: its schema and
 * instance (copies, byte for byte) and its answer, in their own memory
 * context.  Validation is a pure function of the two, so the answer
 * stands for as long as the bytes are the same.
 */
static struct
{
	MemoryContext cxt;
	Jsonb	   *schema;
	Jsonb	   *instance;
	char	   *violation;
}			memo;

/* Whether the memo holds the validation of instance against schema. */
static bool
memo_holds(Jsonb *schema, Jsonb *instance)
{
	return memo.schema != NULL &&
		VARSIZE(memo.schema) == VARSIZE(schema) &&
		VARSIZE(memo.instance) == VARSIZE(instance) &&
		memcmp(memo.schema, schema, VARSIZE(schema)) == 0 &&
		memcmp(memo.instance, instance, VARSIZE(instance)) == 0;
}

/* Remember the answer violation for instance against schema. */
static void
memo_keep(Jsonb *schema, Jsonb *instance, const char *violation)
{
	MemoryContext old;

	if (memo.cxt == NULL)
		memo.cxt = AllocSetContextCreate(TopMemoryContext, "cscp jsonschema memo",
										 ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(memo.cxt);
	memo.schema = NULL;
	old = MemoryContextSwitchTo(memo.cxt);
	memo.instance = palloc(VARSIZE(instance));
	memcpy(memo.instance, instance, VARSIZE(instance));
	memo.violation = violation ? pstrdup(violation) : NULL;
	memo.schema = palloc(VARSIZE(schema));
	memcpy(memo.schema, schema, VARSIZE(schema));
	MemoryContextSwitchTo(old);
}

/*
 * As cscp_jsonschema_validate, for a schema already known to pass
 * cscp_jsonschema_check (one stored after that check): the schema is not
 * checked again, so a conversation's schema costs its check once, at start.
 */
char *
cscp_jsonschema_validate_checked(Jsonb *schema, Jsonb *instance)
{
	char	   *msg;

	Assert(schema != NULL && instance != NULL);
	if (memo_holds(schema, instance))
		return memo.violation ? pstrdup(memo.violation) : NULL;
	msg = run_schema(schema, instance, false);
	memo_keep(schema, instance, msg);
	return msg;
}

/* Append the supported keywords to out as a JSON array of strings. */
void
cscp_jsonschema_keywords(StringInfo out)
{
	appendStringInfoChar(out, '[');
	for (int i = 0; i < (int) lengthof(supported_keywords); i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		cscp_canonical_string(out, supported_keywords[i], strlen(supported_keywords[i]));
	}
	appendStringInfoChar(out, ']');
}

PG_FUNCTION_INFO_V1(cscp_jsonschema_check_sql);

/* cscp.jsonschema_check(schema jsonb) RETURNS jsonb */
Datum
cscp_jsonschema_check_sql(PG_FUNCTION_ARGS)
{
	Jsonb	   *schema = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);

	cscp_jsonschema_check(schema);
	PG_RETURN_JSONB_P(schema);
}

PG_FUNCTION_INFO_V1(cscp_jsonschema_validate_sql);

/* cscp.jsonschema_validate(schema jsonb, instance jsonb) RETURNS text */
Datum
cscp_jsonschema_validate_sql(PG_FUNCTION_ARGS)
{
	Jsonb	   *schema = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);
	Jsonb	   *instance = PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1);
	char	   *msg = cscp_jsonschema_validate(schema, instance);

	if (msg == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(msg));
}
