/*-------------------------------------------------------------------------
 *
 * jsonutil.c
 *	  Small jsonb helpers shared by policy, slot and (later) hashing code.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "utils/builtins.h"

/* The value under key in a jsonb object, or NULL when absent or not an object. */
JsonbValue *
cscp_jsonb_get(Jsonb *obj, const char *key)
{
	if (obj == NULL || !JB_ROOT_IS_OBJECT(obj))
		return NULL;
	return getKeyJsonValueFromContainer(&obj->root, key, strlen(key), NULL);
}

/* The string under key, or NULL when absent or not a string. */
char *
cscp_jsonb_get_cstring(Jsonb *obj, const char *key)
{
	JsonbValue *v = cscp_jsonb_get(obj, key);

	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* A key (a jbvString) as a palloc'd C string. */
char *
cscp_jsonb_key_cstring(JsonbValue *key)
{
	return pnstrdup(key->val.string.val, key->val.string.len);
}

/* A jsonb value of any kind as a Jsonb datum. */
Jsonb *
cscp_jsonb_value_to_jsonb(JsonbValue *v)
{
	return JsonbValueToJsonb(v);
}

/* A jsonb value of any kind in jsonb's canonical text form. */
char *
cscp_jsonb_value_to_cstring(JsonbValue *v)
{
	Jsonb	   *j = JsonbValueToJsonb(v);

	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

/* The first key of the object obj not among the n names, or NULL when it has none. */
char *
cscp_jsonb_unknown_key(Jsonb *obj, const char *const *names, int n)
{
	JsonbIterator *it = JsonbIteratorInit(&obj->root);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		known = false;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; i < n && !known; i++)
			known = (int) strlen(names[i]) == v.val.string.len &&
				memcmp(names[i], v.val.string.val, v.val.string.len) == 0;
		if (!known)
			return cscp_jsonb_key_cstring(&v);
	}
	return NULL;
}

/*
 * Whether arrays and objects in j are nested more than limit levels deep
 * (the root counts as one level, a scalar's too); stops at the first
 * level too deep.
 */
bool
cscp_jsonb_deeper_than(Jsonb *j, int limit)
{
	JsonbIterator *it = JsonbIteratorInit(&j->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;

	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
		{
			if (++depth > limit)
				return true;
		}
		else if (tok == WJB_END_ARRAY || tok == WJB_END_OBJECT)
			depth--;
	}
	return false;
}

/* The JSON type name of a value ("number" for every number), for messages. */
const char *
cscp_json_type_name(JsonbValue *v)
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
		case jbvArray:
			return "array";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "array" : "object";
		default:
			return "object";
	}
}

/* Whether two jsonb values are equal as jsonb (the = operator). */
bool
cscp_jsonb_values_equal(JsonbValue *a, JsonbValue *b)
{
	Jsonb	   *ja,
			   *jb;

	if (a == NULL || b == NULL)
		return a == b;
	ja = JsonbValueToJsonb(a);
	jb = JsonbValueToJsonb(b);
	return compareJsonbContainers(&ja->root, &jb->root) == 0;
}

/* Push key and its value onto a jsonb object being built with pushJsonbValue. */
static void
push_key(JsonbParseState **st, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(st, WJB_KEY, &k);
}

/* key: a C string, or JSON null when value is NULL. */
void
cscp_jsonb_push_text(JsonbParseState **st, const char *key, const char *value)
{
	JsonbValue	v;

	push_key(st, key);
	if (value == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) value;
		v.val.string.len = strlen(value);
	}
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* key: an integer. */
void
cscp_jsonb_push_int(JsonbParseState **st, const char *key, int64 value)
{
	JsonbValue	v;

	push_key(st, key);
	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(value);
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* key: a boolean, or JSON null when isnull. */
void
cscp_jsonb_push_bool(JsonbParseState **st, const char *key, bool value, bool isnull)
{
	JsonbValue	v;

	push_key(st, key);
	if (isnull)
		v.type = jbvNull;
	else
	{
		v.type = jbvBool;
		v.val.boolean = value;
	}
	pushJsonbValue(st, WJB_VALUE, &v);
}
