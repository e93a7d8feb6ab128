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
 *						for anywhere in the string (unanchored), C collation
 *	  minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *						numbers; the exclusive ones are numbers too (draft
 *						2019-09 and later), not booleans
 *	  minItems, maxItems	array length
 *	  uniqueItems		no two elements equal as jsonb's = says; only
 *						elements with equal jsonb_hash are compared, so long
 *						arrays are not compared pair by pair
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
 * One validation (or check) runs in its own memory context, deleted at the
 * end; only the message is copied out.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/pg_collation_d.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "regex/regex.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

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

/* The JSON Schema type name of an instance value ("number" for every number). */
static const char *
instance_type(JsonbValue *v)
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
			return is_object(v) ? "object" : "array";
	}
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
static void pg_attribute_noreturn()
malformed(const char *kw, const char *what, const JsonPathStep *path)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("schema keyword \"%s\" must be %s", kw, what),
			 errdetail("It appears at %s.", path_string(path))));
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

	if (!is_array(v))
		return false;
	c = v->val.binary.data;
	n = JsonContainerSize(c);
	if (nonempty && n == 0)
		return false;
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(c, i);

		if (e->type != jbvString || (type_names_only && !is_type_name(e)))
			return false;
		for (int j = 0; j < i; j++)
			if (cscp_jsonb_values_equal(e, getIthJsonbValueFromContainer(c, j)))
				return false;
	}
	return true;
}

/* Whether v is an integral number not below zero. */
static bool
is_count(JsonbValue *v)
{
	return v->type == jbvNumeric && num_is_integral(v->val.numeric) &&
		num_cmp(v->val.numeric, int64_to_numeric(0)) >= 0;
}

/* Raise 22023 unless pattern (the value of "pattern" at path) compiles. */
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
		pg_regfree(&re);
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
						   path_string(path), instance_type(schema))));

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
	return strcmp(name, instance_type(inst)) == 0;
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
						 t->val.string.len, t->val.string.val, instance_type(inst));
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
					 expected.data, instance_type(inst));
}

static char *validate(JsonbValue *schema, JsonbValue *inst, const JsonPathStep *path);

/* NULL if the string inst satisfies minLength, maxLength and pattern of s. */
static char *
validate_string(JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbValue *k;
	const char *str = inst->val.string.val;
	int			len = inst->val.string.len;

	if ((k = keyword(s, "minLength")) != NULL &&
		num_cmp(int64_to_numeric(pg_mbstrlen_with_len(str, len)), k->val.numeric) < 0)
		return violation(path, "string is shorter than %s characters",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "maxLength")) != NULL &&
		num_cmp(int64_to_numeric(pg_mbstrlen_with_len(str, len)), k->val.numeric) > 0)
		return violation(path, "string is longer than %s characters",
						 num_string(k->val.numeric));
	if ((k = keyword(s, "pattern")) != NULL &&
		!RE_compile_and_execute(cstring_to_text_with_len(k->val.string.val,
														 k->val.string.len),
								(char *) str, len, REG_ADVANCED, C_COLLATION_OID,
								0, NULL))
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

/* An array element's jsonb hash and its index, for finding duplicates. */
typedef struct HashedElement
{
	uint32		hash;
	int			index;
} HashedElement;

/* qsort order of HashedElement: by hash, then by index. */
static int
hashed_element_cmp(const void *a, const void *b)
{
	const HashedElement *x = (const HashedElement *) a;
	const HashedElement *y = (const HashedElement *) b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->index - y->index;
}

/*
 * Whether the array a (n elements) has two equal elements; if so, *second
 * is the lowest index equal to an earlier element and *first the lowest
 * such earlier index.  Elements are grouped by jsonb_hash (equal values
 * hash alike), so only elements with equal hashes are compared.
 */
static bool
find_duplicate(JsonbContainer *a, int n, int *first, int *second)
{
	HashedElement *h = palloc(sizeof(HashedElement) * Max(n, 1));
	JsonbValue **elems = palloc(sizeof(JsonbValue *) * Max(n, 1));
	bool		found = false;

	for (int i = 0; i < n; i++)
	{
		elems[i] = getIthJsonbValueFromContainer(a, i);
		h[i].index = i;
		h[i].hash = DatumGetUInt32(DirectFunctionCall1(jsonb_hash,
													   JsonbPGetDatum(cscp_jsonb_value_to_jsonb(elems[i]))));
	}
	qsort(h, n, sizeof(HashedElement), hashed_element_cmp);
	for (int g = 0; g < n;)
	{
		int			end = g + 1;

		CHECK_FOR_INTERRUPTS();
		while (end < n && h[end].hash == h[g].hash)
			end++;
		for (int i = g + 1; i < end; i++)
		{
			int			ii = h[i].index;

			if (found && ii > *second)
				break;
			for (int j = g; j < i; j++)
			{
				if (cscp_jsonb_values_equal(elems[h[j].index], elems[ii]))
				{
					*first = h[j].index;
					*second = ii;
					found = true;
					break;
				}
			}
			if (found && *second == ii)
				break;
		}
		g = end;
	}
	return found;
}

/* NULL if the array inst satisfies minItems, maxItems, uniqueItems and items of s. */
static char *
validate_array(JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
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

		if (find_duplicate(a, n, &first, &second))
			return violation(path, "array items %d and %d are equal", first, second);
	}
	if ((k = keyword(s, "items")) != NULL)
	{
		for (int i = 0; i < n; i++)
		{
			JsonPathStep elem = element_step(path, i);
			char	   *msg = validate(k, getIthJsonbValueFromContainer(a, i), &elem);

			if (msg != NULL)
				return msg;
		}
	}
	return NULL;
}

/* NULL if the object inst satisfies required, properties and additionalProperties of s. */
static char *
validate_object(JsonbContainer *s, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbContainer *o = inst->val.binary.data;
	JsonbValue *k;
	JsonbValue *props;
	JsonbValue *extra;
	JsonbIterator *it;
	JsonbValue	v,
				key = {0};
	JsonbIteratorToken tok;

	if ((k = keyword(s, "required")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);

		for (int i = 0; i < n; i++)
		{
			JsonbValue *name = getIthJsonbValueFromContainer(k->val.binary.data, i);

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
	it = JsonbIteratorInit(o);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue *sub = NULL;
		JsonPathStep member;
		char	   *msg;

		if (tok == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (props != NULL)
			sub = getKeyJsonValueFromContainer(props->val.binary.data,
											   key.val.string.val,
											   key.val.string.len, NULL);
		if (sub == NULL)
		{
			if (extra == NULL)
				continue;
			if (extra->type == jbvBool && !extra->val.boolean)
				return violation(path, "additional property \"%.*s\" is not allowed",
								 key.val.string.len, key.val.string.val);
			sub = extra;
		}
		member = member_step(path, key.val.string.val, key.val.string.len);
		if ((msg = validate(sub, &v, &member)) != NULL)
			return msg;
	}
	return NULL;
}

/*
 * NULL if inst is valid against schema (already checked), else the first
 * violation as "<path>: <reason>".
 */
static char *
validate(JsonbValue *schema, JsonbValue *inst, const JsonPathStep *path)
{
	JsonbContainer *s;
	JsonbValue *k;
	char	   *msg = NULL;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (schema->type == jbvBool)
		return schema->val.boolean ? NULL :
			violation(path, "no value is allowed here (the schema is false)");
	s = schema->val.binary.data;

	if ((k = keyword(s, "type")) != NULL &&
		(msg = validate_type(k, inst, path)) != NULL)
		return msg;
	if ((k = keyword(s, "enum")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);
		bool		found = false;

		for (int i = 0; i < n && !found; i++)
			found = cscp_jsonb_values_equal(inst,
											getIthJsonbValueFromContainer(k->val.binary.data, i));
		if (!found)
			return violation(path, "value is not one of the \"enum\" values");
	}
	if ((k = keyword(s, "const")) != NULL && !cscp_jsonb_values_equal(inst, k))
		return violation(path, "value is not equal to the \"const\" value");

	if (inst->type == jbvString)
		msg = validate_string(s, inst, path);
	else if (inst->type == jbvNumeric)
		msg = validate_number(s, inst, path);
	else if (is_array(inst))
		msg = validate_array(s, inst, path);
	else if (is_object(inst))
		msg = validate_object(s, inst, path);
	if (msg != NULL)
		return msg;

	if ((k = keyword(s, "allOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);

		for (int i = 0; i < n; i++)
			if ((msg = validate(getIthJsonbValueFromContainer(k->val.binary.data, i),
								inst, path)) != NULL)
				return msg;
	}
	if ((k = keyword(s, "anyOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);
		bool		matched = false;

		for (int i = 0; i < n && !matched; i++)
			matched = validate(getIthJsonbValueFromContainer(k->val.binary.data, i),
							   inst, path) == NULL;
		if (!matched)
			return violation(path, "matches none of the anyOf schemas");
	}
	if ((k = keyword(s, "oneOf")) != NULL)
	{
		int			n = JsonContainerSize(k->val.binary.data);
		int			matches = 0;

		for (int i = 0; i < n; i++)
			if (validate(getIthJsonbValueFromContainer(k->val.binary.data, i),
						 inst, path) == NULL)
				matches++;
		if (matches == 0)
			return violation(path, "matches none of the oneOf schemas");
		if (matches > 1)
			return violation(path, "matches %d of the oneOf schemas, expected exactly 1",
							 matches);
	}
	if ((k = keyword(s, "not")) != NULL && validate(k, inst, path) == NULL)
		return violation(path, "matches the \"not\" schema");
	return NULL;
}

/* Raise 22023 unless schema is a usable schema of the supported subset. */
void
cscp_jsonschema_check(Jsonb *schema)
{
	MemoryContext ctx,
				old;
	JsonbValue	sv;

	if (schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema must not be null")));
	ctx = AllocSetContextCreate(CurrentMemoryContext, "cscp jsonschema",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(ctx);
	jsonb_root_value(schema, &sv);
	check_schema(&sv, NULL);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(ctx);
}

/*
 * NULL if instance is valid against schema, else the first violation as a
 * palloc'd "<path>: <reason>".  Raises 22023 if schema is unusable or
 * either argument is NULL.
 */
char *
cscp_jsonschema_validate(Jsonb *schema, Jsonb *instance)
{
	MemoryContext ctx,
				old;
	JsonbValue	sv,
				iv;
	char	   *msg;

	if (schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("schema must not be null")));
	if (instance == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("instance must not be null"),
				 errhint("Pass the JSON value 'null'::jsonb to validate a JSON null.")));
	ctx = AllocSetContextCreate(CurrentMemoryContext, "cscp jsonschema",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(ctx);
	jsonb_root_value(schema, &sv);
	check_schema(&sv, NULL);
	jsonb_root_value(instance, &iv);
	msg = validate(&sv, &iv, NULL);
	MemoryContextSwitchTo(old);
	if (msg != NULL)
		msg = pstrdup(msg);
	MemoryContextDelete(ctx);
	return msg;
}

/*
 * As cscp_jsonschema_validate, for a schema already known to pass
 * cscp_jsonschema_check (one stored after that check): the schema is not
 * checked again, so a conversation's schema costs its check once, at start.
 */
char *
cscp_jsonschema_validate_checked(Jsonb *schema, Jsonb *instance)
{
	MemoryContext ctx,
				old;
	JsonbValue	sv,
				iv;
	char	   *msg;

	Assert(schema != NULL && instance != NULL);
	ctx = AllocSetContextCreate(CurrentMemoryContext, "cscp jsonschema",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(ctx);
	jsonb_root_value(schema, &sv);
	jsonb_root_value(instance, &iv);
	msg = validate(&sv, &iv, NULL);
	MemoryContextSwitchTo(old);
	if (msg != NULL)
		msg = pstrdup(msg);
	MemoryContextDelete(ctx);
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
