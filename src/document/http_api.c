/*-------------------------------------------------------------------------
 *
 * http_api.c
 *	  The hot path of the HTTPS gateway's SQL functions (src/sql/gateway.sql)
 *	  in C: the bearer key check every endpoint makes (cscp._http_auth), and
 *	  the whole of GET and POST /v1/context/{session_id}/{namespace}
 *	  (cscp.http_doc_get, cscp.http_doc_put), the gateway's most frequent
 *	  calls.
 *
 * They answer exactly what the PL/pgSQL they replace answered: the same
 * statuses, bodies, headers and SQLSTATEs, the error responses built by
 * the same SQL helpers (cscp._http_error, cscp._http_failure), which only
 * the rare failure paths call.  What they save is the interpreter: a
 * regular expression and three statements per key check, a PL/pgSQL frame
 * per call.  A key is found by its SHA-256, in a per-backend cache of the
 * keys checked before (dropped by the relcache invalidation the key
 * table's trigger sends on every change, so a revocation holds from the
 * next request on; expiry is compared on every request), else through a
 * saved plan; its last use is still written at most once a minute, by
 * whichever request gets its row lock first: the others do not wait.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include <errno.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/* cscp.doc_get and cscp.doc_put, called directly (document.c). */
extern Datum cscp_doc_get(PG_FUNCTION_ARGS);
extern Datum cscp_doc_put(PG_FUNCTION_ARGS);

#define AUTH_CHALLENGE "Bearer realm=\"cscp\""

/* Whether c is a whitespace byte as the regular expressions' \s saw it. */
static inline bool
http_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * The bearer token of an Authorization header, as the pattern
 * '^\s*[Bb][Ee][Aa][Rr][Ee][Rr] +([^\s]+)\s*$' captured it: *len bytes at
 * the result, or NULL when the header does not have that shape.
 */
static const char *
bearer_token(const char *s, int n, int *len)
{
	int			i = 0;
	int			start;

	while (i < n && http_space(s[i]))
		i++;
	if (n - i < 7 || pg_strncasecmp(s + i, "bearer", 6) != 0 || s[i + 6] != ' ')
		return NULL;
	i += 6;
	while (i < n && s[i] == ' ')
		i++;
	start = i;
	while (i < n && !http_space(s[i]))
		i++;
	if (i == start)
		return NULL;
	*len = i - start;
	while (i < n && http_space(s[i]))
		i++;
	return i == n ? s + start : NULL;
}

/*
 * The one value a read-only query of the gateway's SQL helpers returns
 * (sql, prepared once into *plan), in the caller's memory context; (Datum)
 * 0 with *isnull when it is NULL.
 */
static Datum
http_sql_value(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *types, Datum *args,
			   const char *nulls, bool *isnull)
{
	Datum		d;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(plan, sql, nargs, types);
	if (SPI_execute_plan(*plan, args, nulls, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not build an HTTP error response");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	d = *isnull ? (Datum) 0 : SPI_datumTransfer(d, false, -1);
	SPI_finish();
	return d;
}

/*
 * cscp._http_error(status, code, message, sqlstate, detail, headers) as a
 * datum of the caller's memory context; challenge is the value of header
 * WWW-Authenticate, or NULL for no header.
 */
static Datum
http_error(int status, const char *code, const char *message, const char *sqlstate,
		   const char *detail, const char *challenge)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[6] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;

	args[0] = Int32GetDatum(status);
	args[1] = CStringGetTextDatum(code);
	args[2] = CStringGetTextDatum(message);
	args[3] = CStringGetTextDatum(sqlstate);
	args[4] = detail != NULL ? CStringGetTextDatum(detail) : (Datum) 0;
	nulls[4] = detail != NULL ? ' ' : 'n';
	args[5] = challenge != NULL ? CStringGetTextDatum(challenge) : (Datum) 0;
	nulls[5] = challenge != NULL ? ' ' : 'n';
	return http_sql_value(&plan,
						  "SELECT cscp._http_error($1, $2, $3, $4, $5,"
						  " CASE WHEN $6 IS NULL THEN '{}'::pg_catalog.jsonb"
						  " ELSE pg_catalog.jsonb_build_object('WWW-Authenticate', $6) END)",
						  6, types, args, nulls, &isnull);
}

/*
 * The bearer key of an Authorization header, its length into *len; NULL
 * with a 401 answer in *failure when there is none.
 */
static const char *
auth_token(text *auth, int *len, Datum *failure)
{
	const char *hint = "Send the header \"Authorization: Bearer <api key>\".";
	const char *s = auth != NULL ? VARDATA_ANY(auth) : NULL;
	int			n = auth != NULL ? VARSIZE_ANY_EXHDR(auth) : 0;
	int			i = 0;
	const char *token;

	while (i < n && http_space(s[i]))
		i++;
	if (i == n)
	{
		*failure = http_error(401, "unauthorized", "no API key given", "28000", hint,
							  AUTH_CHALLENGE);
		return NULL;
	}
	token = bearer_token(s, n, len);
	if (token == NULL)
		*failure = http_error(401, "unauthorized", "the Authorization header is not a bearer key",
							  "28000", hint, AUTH_CHALLENGE);
	return token;
}

/* The SHA-256 of a key's UTF-8 bytes, as a bytea. */
static bytea *
key_hash(const char *token, int len)
{
	char	   *utf8 = pg_server_to_any(token, len, PG_UTF8);
	bytea	   *hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx;

	if (utf8 != token)
		len = strlen(utf8);
	SET_VARSIZE(hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	ctx = pg_cryptohash_create(PG_SHA256);
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) utf8, len) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(hash), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute a SHA-256 hash: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	return hash;
}

/*
 * The keys this backend has checked: key hash -> tenant, label, scopes,
 * expiry, revocation and last use, as cscp.api_key held them.  Kept until
 * a relcache invalidation of cscp.api_key (CscpTableCache): the table's
 * statement trigger (cscp.api_key_changed) sends one on every insert,
 * delete and truncate, and on every update of a column but last_used_at,
 * and it reaches every backend at its next transaction, so a revocation
 * holds from the next request on; expiry is compared with the clock on
 * every request.  Keys not found are not kept (a request with a made-up
 * key still costs a lookup), and the cache is emptied when it holds
 * KEY_CACHE_MAX keys.
 */
#define KEY_CACHE_MAX 1024

typedef struct KeyEntry
{
	uint8		hash[PG_SHA256_DIGEST_LENGTH];	/* the hash key */
	char	   *tenant;
	char	   *label;
	int			nscopes;		/* -1: every scope */
	char	  **scopes;
	char	   *scopes_text;	/* as text[] prints them, for the 403's detail */
	bool		has_expiry;
	TimestampTz expires_at;
	bool		revoked;
	TimestampTz last_used_at;	/* 0: never, as far as this backend knows */
} KeyEntry;

static CscpTableCache key_table_cache;
static MemoryContext key_cxt = NULL;
static HTAB *key_htab = NULL;

/* An empty cache of keys, in its own context under CacheMemoryContext. */
static void
key_cache_reset(void)
{
	HASHCTL		ctl;

	if (key_cxt == NULL)
		key_cxt = AllocSetContextCreate(CacheMemoryContext, "cscp API keys",
										ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(key_cxt);
	ctl.keysize = PG_SHA256_DIGEST_LENGTH;
	ctl.entrysize = sizeof(KeyEntry);
	ctl.hcxt = key_cxt;
	key_htab = hash_create("cscp API keys", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * The key whose SHA-256 is hash, from the cache or else read from
 * cscp.api_key as its owner (so that what is kept does not depend on who
 * asks; only cscp's own SECURITY DEFINER endpoints call this), or NULL
 * when there is no such key.
 */
static KeyEntry *
key_lookup(const uint8 *hash)
{
	static SPIPlanPtr lookup = NULL;
	static const Oid lookup_types[1] = {BYTEAOID};
	uint64		generation;
	KeyEntry   *entry;
	bool		found;
	CscpOwnerScope owner;
	bytea	   *arg;
	Datum		d;
	bool		isnull;
	HeapTuple	row;
	TupleDesc	desc;
	MemoryContext old;

	generation = cscp_table_cache_begin(&key_table_cache, cscp_relation_oid("api_key", false));
	if (key_htab == NULL || !key_table_cache.valid ||
		hash_get_num_entries(key_htab) >= KEY_CACHE_MAX)
		key_cache_reset();
	entry = hash_search(key_htab, hash, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	arg = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	SET_VARSIZE(arg, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	memcpy(VARDATA(arg), hash, PG_SHA256_DIGEST_LENGTH);
	d = PointerGetDatum(arg);
	cscp_owner_enter("api_key", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&lookup,
				  "SELECT a.tenant_id, a.label, a.scopes, a.expires_at, a.revoked_at, a.last_used_at"
				  "  FROM cscp.api_key a WHERE a.key_hash OPERATOR(pg_catalog.=) $1",
				  1, lookup_types);
	if (SPI_execute_plan(lookup, &d, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up an API key");
	if (SPI_processed == 0)
	{
		SPI_finish();
		cscp_owner_leave(&owner);
		return NULL;
	}
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	entry = hash_search(key_htab, hash, HASH_ENTER, &found);
	old = MemoryContextSwitchTo(key_cxt);
	entry->tenant = SPI_getvalue(row, desc, 1);
	entry->label = SPI_getvalue(row, desc, 2);
	entry->nscopes = -1;
	entry->scopes = NULL;
	entry->scopes_text = SPI_getvalue(row, desc, 3);
	d = heap_getattr(row, 3, desc, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *elnulls;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elnulls, &entry->nscopes);
		entry->scopes = palloc0(sizeof(char *) * Max(entry->nscopes, 1));
		for (int i = 0; i < entry->nscopes; i++)
			entry->scopes[i] = elnulls[i] ? NULL : TextDatumGetCString(elems[i]);
	}
	MemoryContextSwitchTo(old);
	d = heap_getattr(row, 4, desc, &isnull);
	entry->has_expiry = !isnull;
	entry->expires_at = isnull ? 0 : DatumGetTimestampTz(d);
	(void) heap_getattr(row, 5, desc, &isnull);
	entry->revoked = !isnull;
	d = heap_getattr(row, 6, desc, &isnull);
	entry->last_used_at = isnull ? 0 : DatumGetTimestampTz(d);
	SPI_finish();
	cscp_owner_leave(&owner);
	cscp_table_cache_done(&key_table_cache, generation);
	return entry;
}

/*
 * Whether key allows scope (NULL: any); else a 403 answer in *failure.
 */
static bool
scope_allows(KeyEntry *key, const char *scope, Datum *failure)
{
	if (key->nscopes < 0 || scope == NULL)
		return true;
	for (int i = 0; i < key->nscopes; i++)
		if (key->scopes[i] != NULL && strcmp(key->scopes[i], scope) == 0)
			return true;
	*failure = http_error(403, "insufficient_scope",
						  psprintf("the API key lacks scope \"%s\"", scope), "42501",
						  psprintf("Its scopes are %s.", key->scopes_text),
						  psprintf(AUTH_CHALLENGE ", error=\"insufficient_scope\", scope=\"%s\"", scope));
	return false;
}

/*
 * Record the use of key at most once a minute.  SKIP LOCKED: requests
 * that find another one recording the use leave it to that one instead of
 * queueing behind its row lock; the row's own last use decides, so a use
 * another backend recorded within the minute is not recorded again.
 */
static void
record_use(KeyEntry *key, TimestampTz now)
{
	static SPIPlanPtr touch = NULL;
	static const Oid touch_types[3] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[3];

	if (key->last_used_at > now - USECS_PER_MINUTE)
		return;
	args[0] = CStringGetTextDatum(key->tenant);
	args[1] = CStringGetTextDatum(key->label);
	args[2] = TimestampTzGetDatum(now);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&touch,
				  "UPDATE cscp.api_key a SET last_used_at = $3"
				  "  FROM (SELECT k.tenant_id, k.label FROM cscp.api_key k"
				  "         WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.label OPERATOR(pg_catalog.=) $2"
				  "           AND (k.last_used_at IS NULL OR k.last_used_at OPERATOR(pg_catalog.<=) ($3 OPERATOR(pg_catalog.-) interval '1 minute'))"
				  "           FOR UPDATE SKIP LOCKED) l"
				  " WHERE a.tenant_id OPERATOR(pg_catalog.=) l.tenant_id AND a.label OPERATOR(pg_catalog.=) l.label",
				  3, touch_types);
	if (SPI_execute_plan(touch, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the use of an API key");
	SPI_finish();
	key->last_used_at = now;
}

/*
 * Check the bearer key of auth (an Authorization header, or NULL) for
 * scope: the key's tenant (palloc'd), or NULL with *failure the 401 or 403
 * response.  Records the key's use at most once a minute.
 */
static char *
http_authenticate(text *auth, const char *scope, Datum *failure)
{
	const char *token;
	int			len;
	bytea	   *hash;
	KeyEntry   *key;
	TimestampTz now = cscp_now();

	token = auth_token(auth, &len, failure);
	if (token == NULL)
		return NULL;
	hash = key_hash(token, len);
	key = key_lookup((const uint8 *) VARDATA(hash));
	if (key == NULL)
	{
		*failure = http_error(401, "unauthorized", "the API key is not valid", "28000", NULL,
							  AUTH_CHALLENGE ", error=\"invalid_token\"");
		return NULL;
	}
	if (key->revoked || (key->has_expiry && key->expires_at <= now))
	{
		*failure = http_error(401, "unauthorized",
							  key->revoked ? "the API key has been revoked" : "the API key has expired",
							  "28000", NULL, AUTH_CHALLENGE ", error=\"invalid_token\"");
		return NULL;
	}
	if (!scope_allows(key, scope, failure))
		return NULL;
	record_use(key, now);
	return pstrdup(key->tenant);
}

PG_FUNCTION_INFO_V1(cscp_http_auth);

/*
 * cscp._http_auth(auth text, scope text, OUT tenant_id text, OUT failure
 * cscp.http_response): the tenant of a live bearer key with the scope, or
 * the 401/403 response.
 */
Datum
cscp_http_auth(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[2] = {0, 0};
	bool		nulls[2] = {true, true};
	char	   *tenant;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tenant = http_authenticate(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
							   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
							   &values[1]);
	if (tenant != NULL)
	{
		values[0] = CStringGetTextDatum(tenant);
		nulls[0] = false;
	}
	else
		nulls[1] = false;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* cscp._http_failure(sqlstate, message, detail): the response, or false when it has none. */
static bool
http_failure(ErrorData *edata, Datum *response)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		isnull;
	Datum		d;

	args[0] = CStringGetTextDatum(unpack_sql_state(edata->sqlerrcode));
	args[1] = CStringGetTextDatum(edata->message != NULL ? edata->message : "");
	if (edata->detail != NULL && edata->detail[0] != '\0')
		args[2] = CStringGetTextDatum(edata->detail);
	else
		nulls[2] = 'n';
	d = http_sql_value(&plan, "SELECT cscp._http_failure($1, $2, $3)", 3, types, args, nulls,
					   &isnull);
	/* NULL: an error that is not the caller's doing. */
	if (!isnull)
		*response = d;
	return !isnull;
}

/* An http_response row: status, headers (JSON text), body. */
static Datum
http_response(FunctionCallInfo fcinfo, int status, const char *headers, Datum body, bool body_null)
{
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, body_null};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum(status);
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(headers));
	values[2] = body;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

/*
 * Call fn (a cscp function, by the function manager) with call in a
 * subtransaction, so that its errors are answered, not raised: true with
 * its result in *result (a jsonb copied into the caller's memory, or
 * (Datum) 0 when null or not jsonb-returning; call->isnull says which);
 * false with the answer http_failure gives for the error in *failure.
 * An error it does not answer is raised again.
 */
static bool
http_guarded(PGFunction fn, FunctionCallInfo call, Datum *result, Datum *failure)
{
	MemoryContext callerctx = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile Datum copied = (Datum) 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(callerctx);
	PG_TRY();
	{
		Datum		d = fn(call);

		if (!call->isnull && fn == cscp_doc_get)
		{
			MemoryContext subctx = MemoryContextSwitchTo(callerctx);

			copied = PointerGetDatum(DatumGetJsonbPCopy(d));
			MemoryContextSwitchTo(subctx);
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(callerctx);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(callerctx);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(callerctx);
		CurrentResourceOwner = owner;
		if (!http_failure(edata, failure))
			ReThrowError(edata);
		return false;
	}
	PG_END_TRY();
	*result = copied;
	return true;
}

/*
 * The tenant of the bearer key in argument 0 of a document endpoint, for
 * scope, bound as cscp.tenant_id (the endpoint's SET clause gives the
 * caller's back when it returns); NULL with *failure the 401 or 403
 * response.
 */
static char *
http_doc_tenant(FunctionCallInfo fcinfo, const char *scope, Datum *failure)
{
	char	   *tenant = http_authenticate(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0), scope,
										   failure);

	if (tenant != NULL)
		(void) set_config_option("cscp.tenant_id", tenant, superuser() ? PGC_SUSET : PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	return tenant;
}

/*
 * Set up call, of nargs arguments, to a cscp.doc_* function of the
 * endpoint fcinfo: the tenant, then the endpoint's session_id and
 * namespace (its arguments 1 and 2); the caller sets the rest.
 */
static void
http_doc_call(FunctionCallInfo call, int nargs, const char *tenant, FunctionCallInfo fcinfo)
{
	InitFunctionCallInfoData(*call, NULL, nargs, InvalidOid, NULL, NULL);
	call->args[0].value = CStringGetTextDatum(tenant);
	call->args[0].isnull = false;
	call->args[1] = fcinfo->args[1];
	call->args[2] = fcinfo->args[2];
}

/*
 * cscp.doc_put with ttlSeconds a numeric (argument 4), cast as (doc ->>
 * 'ttlSeconds')::int casts it: 60.0 passes the body's checks, not the
 * cast, and the cast's error is the answer.
 */
static Datum
doc_put_ttl(PG_FUNCTION_ARGS)
{
	fcinfo->args[4].value =
		DirectFunctionCall1(int4in, DirectFunctionCall1(numeric_out, fcinfo->args[4].value));
	return cscp_doc_put(fcinfo);
}

PG_FUNCTION_INFO_V1(cscp_http_doc_get);

/*
 * cscp.http_doc_get(auth, session_id, namespace) RETURNS cscp.http_response:
 * 200 with the document of the bearer key's tenant, 404 when absent or
 * expired.  Runs SECURITY DEFINER with cscp.tenant_id in its SET clause,
 * so the tenant bound here is the caller's again when it returns.
 */
Datum
cscp_http_doc_get(PG_FUNCTION_ARGS)
{
	Datum		failure;
	char	   *tenant;
	Datum		doc = (Datum) 0;
	bool		found;

	tenant = http_doc_tenant(fcinfo, "documents:read", &failure);
	if (tenant == NULL)
		PG_RETURN_DATUM(failure);

	/* cscp.doc_get in a subtransaction: its errors are answered, not raised. */
	{
		LOCAL_FCINFO(call, 3);

		http_doc_call(call, 3, tenant, fcinfo);
		if (!http_guarded(cscp_doc_get, call, &doc, &failure))
			PG_RETURN_DATUM(failure);
		found = !call->isnull;
	}
	if (!found)
		PG_RETURN_DATUM(http_error(404, "not_found", "no such document", "P0002",
								   "It does not exist or has expired.", NULL));
	PG_RETURN_DATUM(http_response(fcinfo, 200, "{\"Cache-Control\": \"no-store\"}", doc, false));
}

/* Append value to buf percent-encoded as a path segment (cscp._http_segment). */
static void
append_segment(StringInfo buf, const char *value)
{
	char	   *utf8 = pg_server_to_any(value, strlen(value), PG_UTF8);

	for (const unsigned char *c = (const unsigned char *) utf8; *c; c++)
	{
		if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			*c == '-' || *c == '.' || *c == '_' || *c == '~')
			appendStringInfoChar(buf, (char) *c);
		else
			appendStringInfo(buf, "%%%02X", *c);
	}
}

/* Append value to buf with '%' written %25 and ':' %3A (cscp.http_document_key). */
static void
append_key_part(StringInfo buf, const char *value)
{
	for (const char *c = value; *c; c++)
	{
		if (*c == '%')
			appendStringInfoString(buf, "%25");
		else if (*c == ':')
			appendStringInfoString(buf, "%3A");
		else
			appendStringInfoChar(buf, *c);
	}
}

/* Whether a Content-Type is JSON as '^\s*application/json\s*(;.*)?$' (any case) says. */
static bool
json_content_type(text *t)
{
	const char *s = VARDATA_ANY(t);
	int			n = VARSIZE_ANY_EXHDR(t);
	int			i = 0;

	while (i < n && http_space(s[i]))
		i++;
	if (n - i < 16 || pg_strncasecmp(s + i, "application/json", 16) != 0)
		return false;
	i += 16;
	while (i < n && http_space(s[i]))
		i++;
	return i == n || s[i] == ';';
}

/*
 * The request body of a POST of a document as its checks in SQL judge it
 * (cscp._http_body, then cscp._http_field for ttlSeconds and payload, as
 * the PL/pgSQL endpoint did): *doc, or false with *failure the response.
 * The slow path of cscp_http_doc_put, for a body its own checks did not
 * pass, so that every refusal is the one SQL makes.
 */
static bool
doc_put_checks(text *content_type, text *body, const char *hint, Jsonb **doc, Datum *failure)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		isnull;
	Datum		d;
	bool		ok;

	args[0] = PointerGetDatum(content_type);
	nulls[0] = content_type != NULL ? ' ' : 'n';
	args[1] = PointerGetDatum(body);
	nulls[1] = body != NULL ? ' ' : 'n';
	args[2] = CStringGetTextDatum(hint);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT b.doc, CASE WHEN b.doc IS NULL THEN b.failure"
				  "  WHEN NOT b.doc OPERATOR(pg_catalog.?) 'ttlSeconds' THEN cscp._http_field(b.doc, 'ttlSeconds', 'integer', true, $3)"
				  "  WHEN NOT b.doc OPERATOR(pg_catalog.?) 'payload' THEN cscp._http_field(b.doc, 'payload', 'object', true, $3)"
				  "  ELSE cscp._http_field(b.doc, 'ttlSeconds', 'integer', true, $3) END"
				  "  FROM cscp._http_body($1, $2, true, true, $3) b",
				  3, types);
	if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not check a request body");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
	{
		HeapTupleHeader h = DatumGetHeapTupleHeader(d);
		bool		status_null;

		(void) GetAttributeByNum(h, 1, &status_null);
		isnull = status_null;
	}
	ok = isnull;
	if (!ok)
		*failure = SPI_datumTransfer(d, false, -1);
	else
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (isnull)
			elog(ERROR, "a request body without a document or a failure");
		*doc = DatumGetJsonbP(SPI_datumTransfer(d, false, -1));
	}
	SPI_finish();
	return ok;
}

/*
 * The body parsed as jsonb, in a subtransaction: NULL when it does not
 * parse (doc_put_checks then says why, as SQL does).
 */
static Jsonb *
parse_body(text *body)
{
	MemoryContext callerctx = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Jsonb	   *volatile doc = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(callerctx);
	PG_TRY();
	{
		doc = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(body))));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(callerctx);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(callerctx);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(callerctx);
		CurrentResourceOwner = owner;
		doc = NULL;
	}
	PG_END_TRY();
	return doc;
}

/* The int4 value of a JSON number written as a plain integer, or false. */
static bool
plain_int4(JsonbValue *v, int32 *out)
{
	char	   *s;
	char	   *end;
	long		l;

	if (v == NULL || v->type != jbvNumeric)
		return false;
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	if (strspn(s + (s[0] == '-'), "0123456789") != strlen(s + (s[0] == '-')) || strlen(s) > 11)
		return false;
	errno = 0;
	l = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || l < PG_INT32_MIN || l > PG_INT32_MAX)
		return false;
	*out = (int32) l;
	return true;
}

/*
 * The 201 answer of a document POST (session_id, namespace in arguments 1
 * and 2) into values: status, the Location header, and {documentKey,
 * success}; returns the row type's descriptor.
 */
static TupleDesc
put_answer(FunctionCallInfo fcinfo, Datum *values)
{
	StringInfoData key;
	StringInfoData location;
	StringInfoData json;
	TupleDesc	desc;

	initStringInfo(&key);
	append_key_part(&key, text_to_cstring(PG_GETARG_TEXT_PP(1)));
	appendStringInfoChar(&key, ':');
	append_key_part(&key, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	initStringInfo(&location);
	appendStringInfoString(&location, "/v1/context/");
	append_segment(&location, text_to_cstring(PG_GETARG_TEXT_PP(1)));
	appendStringInfoChar(&location, '/');
	append_segment(&location, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum(201);
	initStringInfo(&json);
	appendStringInfoString(&json, "{\"Location\": ");
	escape_json(&json, location.data);
	appendStringInfoChar(&json, '}');
	values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
	resetStringInfo(&json);
	appendStringInfoString(&json, "{\"documentKey\": ");
	escape_json(&json, key.data);
	appendStringInfoString(&json, ", \"success\": true}");
	values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
	return desc;
}

PG_FUNCTION_INFO_V1(cscp_http_doc_put);

/*
 * cscp.http_doc_put(auth, session_id, namespace, content_type, body)
 * RETURNS cscp.http_response: merge-upsert {"ttlSeconds", "payload"} for
 * the bearer key's tenant; 201 with documentKey and Location.  A body its
 * own checks do not pass is judged by the SQL checks (doc_put_checks).
 */
Datum
cscp_http_doc_put(PG_FUNCTION_ARGS)
{
	const char *hint = "Send {\"ttlSeconds\": <seconds>, \"payload\": {...}}.";
	text	   *content_type = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	text	   *body = PG_ARGISNULL(4) ? NULL : PG_GETARG_TEXT_PP(4);
	Datum		failure;
	char	   *tenant;
	Jsonb	   *doc = NULL;
	JsonbValue *ttl_v = NULL;
	JsonbValue *payload_v = NULL;
	JsonbValue	ttl_buf;
	JsonbValue	payload_buf;
	int32		ttl = 0;
	bool		ttl_known;
	int32		plain = 0;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	TupleDesc	desc;

	tenant = http_doc_tenant(fcinfo, "documents:write", &failure);
	if (tenant == NULL)
		PG_RETURN_DATUM(failure);

	/* The body: its own checks, else the SQL ones (which say why, or pass it). */
	if (content_type != NULL && body != NULL && json_content_type(content_type))
		doc = parse_body(body);
	if (doc != NULL && JB_ROOT_IS_OBJECT(doc) && !JB_ROOT_IS_SCALAR(doc))
	{
		ttl_v = getKeyJsonValueFromContainer(&doc->root, "ttlSeconds", 10, &ttl_buf);
		payload_v = getKeyJsonValueFromContainer(&doc->root, "payload", 7, &payload_buf);
	}
	ttl_known = payload_v != NULL && plain_int4(ttl_v, &plain);
	if (ttl_known)
		ttl = plain;
	else
	{
		if (!doc_put_checks(content_type, body, hint, &doc, &failure))
			PG_RETURN_DATUM(failure);
		ttl_v = getKeyJsonValueFromContainer(&doc->root, "ttlSeconds", 10, &ttl_buf);
		payload_v = getKeyJsonValueFromContainer(&doc->root, "payload", 7, &payload_buf);
		if (payload_v == NULL || ttl_v == NULL || ttl_v->type != jbvNumeric)
			elog(ERROR, "a request body passed its checks without its fields");
	}

	/* The answer, made before the write (see http_doc_put in gateway.sql). */
	desc = put_answer(fcinfo, values);

	/* cscp.doc_put in a subtransaction: its errors are answered, not raised. */
	{
		LOCAL_FCINFO(call, 5);
		Datum		ignored;

		http_doc_call(call, 5, tenant, fcinfo);
		call->args[3].value = JsonbPGetDatum(JsonbValueToJsonb(payload_v));
		call->args[3].isnull = false;
		/* ttlSeconds as it came: an int4, or a numeric that doc_put_ttl casts */
		call->args[4].value = ttl_known ? Int32GetDatum(ttl) : NumericGetDatum(ttl_v->val.numeric);
		call->args[4].isnull = false;
		if (!http_guarded(ttl_known ? cscp_doc_put : doc_put_ttl, call, &ignored, &failure))
			PG_RETURN_DATUM(failure);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
