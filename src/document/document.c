/*-------------------------------------------------------------------------
 *
 * document.c
 *	  TTL'd namespace documents per session (Conversational Context API):
 *	  cscp.doc_put, cscp.doc_get and cscp.doc_delete in C, each a saved SPI
 *	  statement or two, so that row-level security, privileges, triggers,
 *	  rules and ALTER TABLE apply as to any statement.  Absent or expired
 *	  is "not found": readers filter on expires_at, and a put into an
 *	  expired document starts from an empty object, so expired data never
 *	  comes back, sweep or no sweep.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"

/* The argument checks all three share: the tenant, the session, the namespace. */
static void
doc_args(FunctionCallInfo fcinfo)
{
	cscp_check_tenant(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	cscp_check_id("session_id", PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	cscp_check_id("namespace", PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2));
}

/*
 * doc_put's payload (22023 unless an object) and its document's lifetime:
 * ttl_seconds (22023 when null) bounded by the tenant's max_ttl.
 */
static Interval *
doc_put_args(FunctionCallInfo fcinfo, Jsonb *payload)
{
	Interval   *ttl;

	if (payload == NULL || !JB_ROOT_IS_OBJECT(payload) || JB_ROOT_IS_SCALAR(payload))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload must be a JSON object"),
				 errdetail("The payload given is %s.",
						   payload == NULL ? "null" :
						   TextDatumGetCString(DirectFunctionCall1(jsonb_typeof,
																   JsonbPGetDatum(payload)))),
				 errhint("Pass an object; its top-level keys are merged into the document.")));
	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_seconds must not be null"),
				 errhint("Pass the document's lifetime in seconds.")));
	ttl = DatumGetIntervalP(DirectFunctionCall7(make_interval, Int32GetDatum(0), Int32GetDatum(0),
												Int32GetDatum(0), Int32GetDatum(0), Int32GetDatum(0),
												Int32GetDatum(0),
												Float8GetDatum((float8) PG_GETARG_INT32(4))));
	return cscp_lifetime(cscp_policy_get(text_to_cstring(PG_GETARG_TEXT_PP(0))), ttl,
						 "max_ttl", "ttl_seconds");
}

/*
 * Merge the payload into document ($1, $2, $3) of args {tenant, session,
 * namespace, payload, now, expires_at}.
 *
 * Update first: a session's document is written again and again, and an
 * UPDATE of the existing row skips what an INSERT ... ON CONFLICT pays
 * before it finds the conflict (the BEFORE INSERT triggers, among them
 * the tombstone check and its lock).  Only a live document is updated:
 * an expired one is deleted and the put starts a new one (the guard
 * refuses any UPDATE of an expired row, so expired data never comes
 * back).  A new document, one that a concurrent doc_delete removed
 * first, or an expired one falls through to the upsert, which also
 * settles a race between two first puts.
 */
static void
doc_write(Datum *args)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr update_plan = NULL;
	static SPIPlanPtr purge_plan = NULL;
	static const Oid types[6] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&update_plan,
				  "UPDATE cscp.document AS d"
				  "    SET payload = d.payload OPERATOR(pg_catalog.||) $4,"
				  "        updated_at = $5,"
				  "        expires_at = $6"
				  "  WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.session_id OPERATOR(pg_catalog.=) $2 AND d.namespace OPERATOR(pg_catalog.=) $3"
				  "    AND d.expires_at OPERATOR(pg_catalog.>) $5",
				  6, types);
	if (SPI_execute_plan(update_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not write a document");
	if (SPI_processed == 0)
	{
		cscp_spi_plan(&purge_plan,
					  "DELETE FROM cscp.document AS d"
					  "  WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.session_id OPERATOR(pg_catalog.=) $2 AND d.namespace OPERATOR(pg_catalog.=) $3"
					  "    AND d.expires_at OPERATOR(pg_catalog.<=) $5",
					  6, types);
		if (SPI_execute_plan(purge_plan, args, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not write a document");
		cscp_spi_plan(&plan,
					  "INSERT INTO cscp.document AS d (tenant_id, session_id, namespace, payload,"
					  "    created_at, updated_at, expires_at)"
					  " VALUES ($1, $2, $3, $4, $5, $5, $6)"
					  " ON CONFLICT (tenant_id, session_id, namespace) DO UPDATE"
					  "    SET payload = d.payload OPERATOR(pg_catalog.||) excluded.payload,"
					  "        updated_at = $5,"
					  "        expires_at = excluded.expires_at",
					  6, types);
		cscp_spi_write_one(plan, args, NULL, SPI_OK_INSERT, "write a document");
	}
	SPI_finish();
}

PG_FUNCTION_INFO_V1(cscp_doc_put);

/*
 * cscp.doc_put(tenant_id, session_id, namespace, payload jsonb, ttl_seconds int)
 * RETURNS text: merge payload's top-level keys into the document (a fresh
 * one once expired) and reset its TTL; returns 'session_id:namespace'.
 */
Datum
cscp_doc_put(PG_FUNCTION_ARGS)
{
	Jsonb	   *payload = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	TimestampTz now = cscp_now();
	Interval   *ttl;
	Datum		args[6];

	doc_args(fcinfo);
	ttl = doc_put_args(fcinfo, payload);
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_GETARG_DATUM(2);
	args[3] = JsonbPGetDatum(payload);
	args[4] = TimestampTzGetDatum(now);
	args[5] = DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now),
								  IntervalPGetDatum(ttl));
	doc_write(args);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s:%s", text_to_cstring(PG_GETARG_TEXT_PP(1)),
											  text_to_cstring(PG_GETARG_TEXT_PP(2)))));
}

PG_FUNCTION_INFO_V1(cscp_doc_get);

/*
 * cscp.doc_get(tenant_id, session_id, namespace) RETURNS jsonb: NULL when
 * absent or expired.  One saved query, read with the statement's snapshot
 * (the function is STABLE).
 */
Datum
cscp_doc_get(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	MemoryContext callerctx = CurrentMemoryContext;
	Datum		args[4];
	Jsonb	   *result = NULL;

	doc_args(fcinfo);
	for (int i = 0; i < 3; i++)
		args[i] = PG_GETARG_DATUM(i);
	args[3] = TimestampTzGetDatum(cscp_now());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT d.payload FROM cscp.document d"
				  " WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.session_id OPERATOR(pg_catalog.=) $2 AND d.namespace OPERATOR(pg_catalog.=) $3"
				  "   AND d.expires_at OPERATOR(pg_catalog.>) $4",
				  4, types);
	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read a document");
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		payload = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
											&isnull);

		if (!isnull)
		{
			MemoryContext spictx = MemoryContextSwitchTo(callerctx);

			result = DatumGetJsonbPCopy(payload);
			MemoryContextSwitchTo(spictx);
		}
	}
	SPI_finish();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}

PG_FUNCTION_INFO_V1(cscp_doc_delete);

/*
 * cscp.doc_delete(tenant_id, session_id, namespace) RETURNS boolean: true
 * when a live document was deleted, false when absent or already expired.
 */
Datum
cscp_doc_delete(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[4];
	bool		live = false;

	doc_args(fcinfo);
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_GETARG_DATUM(2);
	args[3] = TimestampTzGetDatum(cscp_now());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "DELETE FROM cscp.document d"
				  " WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.session_id OPERATOR(pg_catalog.=) $2 AND d.namespace OPERATOR(pg_catalog.=) $3"
				  " RETURNING d.expires_at OPERATOR(pg_catalog.>) $4",
				  4, types);
	if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not delete a document");
	if (SPI_processed == 1)
	{
		bool		isnull;

		live = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	PG_RETURN_BOOL(live);
}

static CscpColumns document_columns = CSCP_EXPIRING_COLUMNS("cscp.document");

/* A new document: its expiry within its tenant's max_ttl (lifetime.c). */
static HeapTuple
document_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	cscp_check_expiring_row(&document_columns, rel, NULL, tuple, now);
	return tuple;
}

/* A document changed: not past its expiry, and a new expiry within max_ttl. */
static HeapTuple
document_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
				TimestampTz now)
{
	cscp_check_expiring_row(&document_columns, rel, oldtup, newtup, now);
	return newtup;
}

static CscpRowRules document_rules = {
	.table = "cscp.document",
	.n = 4,
	.rule = {
		{"tenant_id", CSCP_RULE_TENANT},
		{"session_id", CSCP_RULE_NOT_EMPTY},
		{"namespace", CSCP_RULE_NOT_EMPTY},
		{"payload", CSCP_RULE_JSON_OBJECT},
	},
};

static const CscpRowGuard document_guard = {
	.name = "cscp.document_guard()",
	.rules = &document_rules,
	.insert = document_insert,
	.update = document_update,
};

PG_FUNCTION_INFO_V1(cscp_document_guard);

/*
 * Trigger cscp.document_guard(): the column rules of cscp.document (what
 * CHECK constraints would say, without their per-statement planning; see
 * rowguard.c), for every write, through doc_put or direct SQL.
 */
Datum
cscp_document_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &document_guard);
}
