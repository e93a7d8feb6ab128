/*-------------------------------------------------------------------------
 *
 * canonical.c
 *	  Canonical JSON text and SHA-256 hashes: the one serialisation behind
 *	  context frame hashes and evidence hash chains.
 *
 * The canonical form of a jsonb value is independent of how it was typed
 * in and of the database it lives in:
 *	- object keys sorted by their UTF-8 bytes (jsonb itself orders them by
 *	  length first, which is not what other implementations expect);
 *	- no whitespace;
 *	- strings with only the escapes JSON requires (", \, and control
 *	  characters; \b \f \n \r \t in their short forms, others as \u00XX);
 *	  other characters, non-ASCII included, as their UTF-8 bytes;
 *	- numbers in PostgreSQL's numeric form with trailing fractional zeros
 *	  removed, so 1.50 and 1.5 are the same number, and -0 is 0;
 *	- true, false, null.
 * A hash is "sha256:" followed by 64 lowercase hex digits.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

typedef struct KeyValue
{
	char	   *key;
	int			keylen;
	JsonbValue	value;
} KeyValue;

static void canonical_container(StringInfo out, JsonbContainer *container);

static int
compare_keys(const void *a, const void *b)
{
	const KeyValue *ka = (const KeyValue *) a;
	const KeyValue *kb = (const KeyValue *) b;
	int			cmp = memcmp(ka->key, kb->key, Min(ka->keylen, kb->keylen));

	if (cmp != 0)
		return cmp;
	return (ka->keylen > kb->keylen) - (ka->keylen < kb->keylen);
}

/* Append s (len bytes) as a JSON string literal. */
void
cscp_canonical_string(StringInfo out, const char *s, int len)
{
	int			run = 0;		/* start of the pending run of plain bytes */

	/* room for the common case (nothing to escape) at once */
	enlargeStringInfo(out, len + 2);
	appendStringInfoCharMacro(out, '"');
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];
		const char *esc;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;			/* plain: copied with its run */
		appendBinaryStringInfo(out, s + run, i - run);
		run = i + 1;
		switch (c)
		{
			case '"':
				esc = "\\\"";
				break;
			case '\\':
				esc = "\\\\";
				break;
			case '\b':
				esc = "\\b";
				break;
			case '\f':
				esc = "\\f";
				break;
			case '\n':
				esc = "\\n";
				break;
			case '\r':
				esc = "\\r";
				break;
			case '\t':
				esc = "\\t";
				break;
			default:
				appendStringInfo(out, "\\u%04x", c);
				continue;
		}
		appendStringInfoString(out, esc);
	}
	appendBinaryStringInfo(out, s + run, len - run);
	appendStringInfoCharMacro(out, '"');
}

static void
canonical_scalar(StringInfo out, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			appendStringInfoString(out, "null");
			break;
		case jbvBool:
			appendStringInfoString(out, v->val.boolean ? "true" : "false");
			break;
		case jbvString:
			cscp_canonical_string(out, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			{
				char	   *s = numeric_normalize(v->val.numeric);

				/* numeric_normalize keeps the sign of a negative zero. */
				if (strcmp(s, "-0") == 0)
					s = "0";
				appendStringInfoString(out, s);
				break;
			}
		case jbvBinary:
			canonical_container(out, v->val.binary.data);
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

static void
canonical_container(StringInfo out, JsonbContainer *container)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();

	if (JsonContainerIsScalar(container))
	{
		it = JsonbIteratorInit(container);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
			if (tok == WJB_ELEM)
				canonical_scalar(out, &v);
		return;
	}

	if (JsonContainerIsArray(container))
	{
		bool		first = true;

		appendStringInfoCharMacro(out, '[');
		it = JsonbIteratorInit(container);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (!first)
				appendStringInfoCharMacro(out, ',');
			first = false;
			canonical_scalar(out, &v);
		}
		appendStringInfoCharMacro(out, ']');
		return;
	}

	/* An object: collect its pairs, sort the keys bytewise, emit. */
	{
		int			n = JsonContainerSize(container);
		KeyValue   *pairs = palloc(sizeof(KeyValue) * Max(n, 1));
		int			npairs = 0;

		it = JsonbIteratorInit(container);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
			{
				pairs[npairs].key = v.val.string.val;
				pairs[npairs].keylen = v.val.string.len;
			}
			else if (tok == WJB_VALUE)
				pairs[npairs++].value = v;
		}
		qsort(pairs, npairs, sizeof(KeyValue), compare_keys);

		appendStringInfoCharMacro(out, '{');
		for (int i = 0; i < npairs; i++)
		{
			if (i > 0)
				appendStringInfoCharMacro(out, ',');
			cscp_canonical_string(out, pairs[i].key, pairs[i].keylen);
			appendStringInfoCharMacro(out, ':');
			canonical_scalar(out, &pairs[i].value);
		}
		appendStringInfoCharMacro(out, '}');
		pfree(pairs);
	}
}

/* Append the canonical text of a jsonb value. */
void
cscp_canonical_append(StringInfo out, Jsonb *j)
{
	canonical_container(out, &j->root);
}

/* "sha256:" and the lowercase hex SHA-256 of len bytes at data. */
char *
cscp_sha256_hex(const char *data, size_t len)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *result = palloc(7 + PG_SHA256_DIGEST_LENGTH * 2 + 1);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-256 digest: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	memcpy(result, "sha256:", 7);
	hex_encode((const char *) digest, sizeof(digest), result + 7);
	result[7 + PG_SHA256_DIGEST_LENGTH * 2] = '\0';
	return result;
}

/* Write v (0 <= v < 10^width) as width decimal digits, zero padded, at p. */
static char *
put_digits(char *p, int v, int width)
{
	for (int i = width - 1; i >= 0; i--)
	{
		p[i] = (char) ('0' + v % 10);
		v /= 10;
	}
	return p + width;
}

/*
 * A timestamp with time zone as "YYYY-MM-DDTHH:MI:SS.ffffffZ" in UTC,
 * whatever the session's TimeZone, for hashing.
 */
char *
cscp_utc_iso(TimestampTz ts)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (TIMESTAMP_NOT_FINITE(ts))
		return pstrdup(TIMESTAMP_IS_NOBEGIN(ts) ? "-infinity" : "infinity");
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	if (tm.tm_year < 1 || tm.tm_year > 9999)
		return psprintf("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
						tm.tm_year, tm.tm_mon, tm.tm_mday,
						tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
	else
	{
		/* the same text, without psprintf's format parsing (hashed per row) */
		char	   *result = palloc(28);
		char	   *p = result;

		p = put_digits(p, tm.tm_year, 4);
		*p++ = '-';
		p = put_digits(p, tm.tm_mon, 2);
		*p++ = '-';
		p = put_digits(p, tm.tm_mday, 2);
		*p++ = 'T';
		p = put_digits(p, tm.tm_hour, 2);
		*p++ = ':';
		p = put_digits(p, tm.tm_min, 2);
		*p++ = ':';
		p = put_digits(p, tm.tm_sec, 2);
		*p++ = '.';
		p = put_digits(p, (int) fsec, 6);
		*p++ = 'Z';
		*p = '\0';
		return result;
	}
}

PG_FUNCTION_INFO_V1(cscp_canonical_json);

/* cscp.canonical_json(jsonb) RETURNS text */
Datum
cscp_canonical_json(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	cscp_canonical_append(&buf, PG_GETARG_JSONB_P(0));
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

PG_FUNCTION_INFO_V1(cscp_canonical_hash);

/* cscp.canonical_hash(jsonb) RETURNS text: sha256 of the canonical text. */
Datum
cscp_canonical_hash(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	cscp_canonical_append(&buf, PG_GETARG_JSONB_P(0));
	PG_RETURN_TEXT_P(cstring_to_text(cscp_sha256_hex(buf.data, buf.len)));
}

PG_FUNCTION_INFO_V1(cscp_utc_iso_sql);

/* cscp._utc(timestamptz) RETURNS text */
Datum
cscp_utc_iso_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(cscp_utc_iso(PG_GETARG_TIMESTAMPTZ(0))));
}
