/*-------------------------------------------------------------------------
 *
 * routing.c
 *	  Routing hashes, and routing-ready ids: the first 32 bits of a context
 *	  or command id are the routing hash of its conversation.
 *
 * The routing hash of a conversation is a keyed hash of its id (the first
 * 32 bits of an HMAC-SHA256 under the database's secret key, keys.c), and
 * that of a subject or session one of its tenant and id, so that a PL/Proxy
 * function can route by RUN ON cscp.routing_conversation_hash(conversation_id)
 * and, for calls that carry only an id, by RUN ON cscp.routing_hash(id),
 * without a lookup.  Keyed, the 32 bits an id shows say nothing about its
 * conversation id to whoever lacks the key: with PostgreSQL's unkeyed
 * hashtext, every phone number could be tried offline against an id in
 * well under a second.  The remaining 96 bits are random, with the version
 * and variant bits of a version 4 UUID.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

/* The routing hash of a conversation id. */
int32
cscp_routing_hash_text(text *conversation_id)
{
	return cscp_keyed_hash32('c', VARDATA_ANY(conversation_id),
							 VARSIZE_ANY_EXHDR(conversation_id), NULL, 0);
}

/* The routing hash of a subject or session key of a tenant. */
int32
cscp_routing_hash_key(text *tenant_id, text *key)
{
	return cscp_keyed_hash32('k', VARDATA_ANY(tenant_id), VARSIZE_ANY_EXHDR(tenant_id),
							 VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
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

/*
 * The routing-ready id of a new row of a kind ("context", "command"): with
 * a conversation (column conv_att), a null id (column id_att) is generated
 * from its routing hash into edit, and a given one must carry that hash
 * (22023, with hint).
 */
void
cscp_routing_id_fill(HeapTuple tuple, TupleDesc desc, int conv_att, int id_att,
					 const char *kind, const char *hint, CscpRowEdit *edit)
{
	bool		convnull;
	bool		idnull;
	Datum		conv = heap_getattr(tuple, conv_att, desc, &convnull);
	Datum		id = heap_getattr(tuple, id_att, desc, &idnull);
	int32		hash;

	if (convnull)
		return;
	hash = cscp_routing_hash_text(DatumGetTextPP(conv));
	if (idnull)
	{
		pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));

		cscp_routing_uuid(hash, uuid);
		cscp_row_edit_set(edit, id_att, UUIDPGetDatum(uuid), false);
	}
	else if (cscp_routing_hash_uuid(DatumGetUUIDP(id)) != hash)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s id %s does not carry the routing hash of its conversation",
						kind, SPI_getvalue(tuple, desc, id_att)),
				 errdetail("The first 32 bits of a %s id must be cscp.routing_conversation_hash(conversation_id).",
						   kind),
				 errhint("%s", hint)));
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

PG_FUNCTION_INFO_V1(cscp_routing_conversation_hash);

/* cscp.routing_conversation_hash(conversation_id text) RETURNS integer */
Datum
cscp_routing_conversation_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(cscp_routing_hash_text(PG_GETARG_TEXT_PP(0)));
}

PG_FUNCTION_INFO_V1(cscp_routing_key_hash);

/* cscp.routing_key_hash(tenant_id text, key text) RETURNS integer */
Datum
cscp_routing_key_hash(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(cscp_routing_hash_key(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}
