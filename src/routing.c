/*-------------------------------------------------------------------------
 *
 * routing.c
 *	  Routing-ready ids: the first 32 bits of a context or command id are the
 *	  routing hash of its conversation.
 *
 * The routing hash is hashtext(conversation_id), PostgreSQL's own text hash,
 * so a PL/Proxy function can route by RUN ON hashtext(conversation_id) and,
 * for calls that carry only an id, by RUN ON cscp.routing_hash(id), without
 * a lookup.  The remaining 96 bits are random, with the version and variant
 * bits of a version 4 UUID.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "utils/builtins.h"

/* hashtext() of a conversation id (identical for deterministic collations). */
int32
cscp_routing_hash_text(text *conversation_id)
{
	return DatumGetInt32(hash_any((unsigned char *) VARDATA_ANY(conversation_id),
								  VARSIZE_ANY_EXHDR(conversation_id)));
}

/* A new uuid whose first 32 bits are hash, big-endian. */
void
cscp_routing_uuid(int32 hash, pg_uuid_t *uuid)
{
	uint32		h = (uint32) hash;

	if (!pg_strong_random(uuid->data, UUID_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random values")));
	uuid->data[0] = (h >> 24) & 0xFF;
	uuid->data[1] = (h >> 16) & 0xFF;
	uuid->data[2] = (h >> 8) & 0xFF;
	uuid->data[3] = h & 0xFF;
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40;	/* version 4 */
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
}

/* The routing hash an id carries. */
int32
cscp_routing_hash_uuid(const pg_uuid_t *uuid)
{
	uint32		h = ((uint32) uuid->data[0] << 24) | ((uint32) uuid->data[1] << 16) |
		((uint32) uuid->data[2] << 8) | (uint32) uuid->data[3];

	return (int32) h;
}

PG_FUNCTION_INFO_V1(cscp_routing_id);

/* cscp.routing_id(conversation_id text) RETURNS uuid */
Datum
cscp_routing_id(PG_FUNCTION_ARGS)
{
	text	   *conv;
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

	conv = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	cscp_check_id("conversation_id", conv);
	cscp_routing_uuid(cscp_routing_hash_text(conv), uuid);
	PG_RETURN_UUID_P(uuid);
}

PG_FUNCTION_INFO_V1(cscp_routing_hash);

/* cscp.routing_hash(id uuid) RETURNS integer */
Datum
cscp_routing_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(cscp_routing_hash_uuid(PG_GETARG_UUID_P(0)));
}
