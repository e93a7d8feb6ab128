/*-------------------------------------------------------------------------
 *
 * enums.c
 *	  Mapping between cscp's enum types (context_status, command_state) and
 *	  the C enums of their state machines, by label.
 *
 * The pg_enum oids of a type are looked up once per type oid and kept; a
 * recreated type (DROP and CREATE EXTENSION in one session) has a new oid
 * and is looked up again.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/pg_enum.h"
#include "executor/spi.h"
#include "utils/syscache.h"

static void
load(CscpEnumCache *cache, Oid typoid)
{
	if (cache->typoid == typoid)
		return;
	Assert(cache->n <= CSCP_MAX_ENUM_LABELS);
	for (int i = 0; i < cache->n; i++)
	{
		cache->oids[i] = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
										 ObjectIdGetDatum(typoid),
										 CStringGetDatum(cache->names[i]));
		if (!OidIsValid(cache->oids[i]))
			elog(ERROR, "label \"%s\" is missing from enum type %u",
				 cache->names[i], typoid);
	}
	cache->typoid = typoid;
}

/* The index in cache->names of the label value (of enum type typoid). */
int
cscp_enum_index(CscpEnumCache *cache, Oid typoid, Datum value)
{
	load(cache, typoid);
	for (int i = 0; i < cache->n; i++)
		if (cache->oids[i] == DatumGetObjectId(value))
			return i;
	elog(ERROR, "unknown label %u of enum type %u", DatumGetObjectId(value), typoid);
	return 0;					/* keep compiler quiet */
}

/* The enum datum of cache->names[index]. */
Datum
cscp_enum_datum(CscpEnumCache *cache, Oid typoid, int index)
{
	load(cache, typoid);
	return ObjectIdGetDatum(cache->oids[index]);
}

/* Whether a context status label is live (active, pending or blocked). */
bool
cscp_status_live(const char *status)
{
	return status != NULL &&
		(strcmp(status, "active") == 0 || strcmp(status, "pending") == 0 ||
		 strcmp(status, "blocked") == 0);
}

/*
 * Whether a context is usable at now: a live status and an expiry still
 * ahead (expires_at > now; a NULL expiry is none).  The one judgement of
 * "context usable" in C.
 */
bool
cscp_context_usable(const char *status, bool expires_null, TimestampTz expires_at,
					TimestampTz now)
{
	return cscp_status_live(status) && !expires_null && expires_at > now;
}

/* cscp_context_usable of a row of cscp.context, as a query returns it. */
bool
cscp_context_row_usable(HeapTuple ctx, TupleDesc desc, TimestampTz now)
{
	bool		isnull;
	Datum		expires = cscp_column_value(ctx, desc, "cscp.context", "expires_at", &isnull);

	return cscp_context_usable(SPI_getvalue(ctx, desc, cscp_column(desc, "cscp.context", "status")),
							   isnull, isnull ? 0 : DatumGetTimestampTz(expires), now);
}

