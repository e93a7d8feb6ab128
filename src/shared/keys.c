/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  The database's secret key (cscp.secret_key) and the keyed hashes made
 *	  with it: routing hashes (routing.c, shard.c) and notification tags.
 *
 * The key is 32 to 64 random bytes, made at CREATE EXTENSION and replaced
 * by a superuser with cscp.secret_key_set, so that every shard of a
 * scale-out deployment and its proxy hold the same one.  Only the owner of
 * cscp's tables can read it; this file reads it as the owner (owner.c),
 * through a saved SPI plan, once per backend: the statement trigger on the
 * table (cscp.policy_changed, as for cscp.shard) sends a relcache
 * invalidation for it, which drops the cached copy.
 *
 * Every keyed hash is HMAC-SHA256 (RFC 2104) under that key of a message
 * that starts with a letter naming its use and a NUL, so that no two uses
 * can be made to agree:
 *	"c\0" conversation_id				the routing hash of a conversation
 *	"k\0" tenant_id "\0" key			the routing hash of a subject or session
 *	"n\0" tenant_id						the notification tag of a tenant
 * Ids never contain a NUL, so each message names one input.  The proxy
 * (proxy/local.sql) computes the first two in SQL with sha256(), from the
 * same key padded as RFC 2104 says: keys are at most 64 bytes (one SHA-256
 * block), so no key is hashed first.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"

/* The cached key: valid while key_cache.valid (dropped when cscp.secret_key changes). */
static CscpTableCache key_cache;
static uint8 key_bytes[CSCP_KEY_MAX_BYTES];
static int	key_len = 0;

/* Read cscp.secret_key as the owner of cscp's tables. */
static void
key_load(void)
{
	static SPIPlanPtr plan = NULL;
	CscpOwnerScope owner;
	uint64		generation;
	int			len = 0;

	generation = cscp_table_cache_begin(&key_cache, cscp_relation_oid("secret_key", false));

	cscp_owner_enter("secret_key", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan, "SELECT k.key FROM cscp.secret_key k", 0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, true, 2) != SPI_OK_SELECT)
		elog(ERROR, "could not read cscp.secret_key");
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
		{
			bytea	   *key = DatumGetByteaPP(d);

			len = VARSIZE_ANY_EXHDR(key);
			if (len < CSCP_KEY_MIN_BYTES || len > CSCP_KEY_MAX_BYTES)
				elog(ERROR, "cscp.secret_key holds a key of %d bytes", len);
			memcpy(key_bytes, VARDATA_ANY(key), len);
		}
	}
	SPI_finish();
	cscp_owner_leave(&owner);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cscp has no secret key"),
				 errdetail("Table cscp.secret_key holds no row; routing hashes and notification tags are made with its key."),
				 errhint("A superuser sets one with cscp.secret_key_set(key): the same key on every shard and on the proxy.")));
	key_len = len;
	cscp_table_cache_done(&key_cache, generation);
}

/* The SHA-256 digest of data. */
void
cscp_sha256(const void *data, size_t len, uint8 *digest)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256 digest: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
}

/*
 * HMAC-SHA256 under the database's secret key of use, NUL and the parts
 * (NUL-separated): see the header for the messages.
 */
void
cscp_keyed_hash(char use, const char *part1, int len1, const char *part2, int len2,
				uint8 *digest)
{
	pg_hmac_ctx *ctx;
	const uint8 prefix[2] = {(uint8) use, 0};
	const uint8 nul = 0;

	if (!key_cache.valid)
		key_load();
	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_hmac_init(ctx, key_bytes, key_len) < 0 ||
		pg_hmac_update(ctx, prefix, 2) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) part1, len1) < 0 ||
		(part2 != NULL &&
		 (pg_hmac_update(ctx, &nul, 1) < 0 ||
		  pg_hmac_update(ctx, (const uint8 *) part2, len2) < 0)) ||
		pg_hmac_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute HMAC-SHA256: %s", pg_hmac_error(ctx));
	pg_hmac_free(ctx);
}

/* The first 32 bits of a keyed hash, big-endian, as a signed integer. */
int32
cscp_keyed_hash32(char use, const char *part1, int len1, const char *part2, int len2)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	cscp_keyed_hash(use, part1, len1, part2, len2, digest);
	return (int32) (((uint32) digest[0] << 24) | ((uint32) digest[1] << 16) |
					((uint32) digest[2] << 8) | (uint32) digest[3]);
}

PG_FUNCTION_INFO_V1(cscp_notify_tag);

/*
 * cscp.notify_tag() RETURNS text: the tag notifications of the session's
 * tenant (cscp.tenant_id) carry; 42501 when the session names no tenant or
 * one it may not act for.
 */
Datum
cscp_notify_tag(PG_FUNCTION_ARGS)
{
	if (cscp_tenant_setting == NULL || cscp_tenant_setting[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cscp.tenant_id is not set"),
				 errdetail("A notification tag is that of the tenant the session acts for."),
				 errhint("Run SET cscp.tenant_id to the tenant whose notifications you listen for, then call cscp.notify_tag() again.")));
	cscp_check_tenant(cstring_to_text(cscp_tenant_setting));
	PG_RETURN_TEXT_P(cstring_to_text(cscp_notify_tag_of(cscp_tenant_setting)));
}

/* The notification tag of a tenant: hex of the first 16 bytes of its keyed hash. */
char *
cscp_notify_tag_of(const char *tenant)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *tag = palloc(CSCP_NOTIFY_TAG_BYTES * 2 + 1);

	cscp_keyed_hash('n', tenant, strlen(tenant), NULL, 0, digest);
	hex_encode((const char *) digest, CSCP_NOTIFY_TAG_BYTES, tag);
	tag[CSCP_NOTIFY_TAG_BYTES * 2] = '\0';
	return tag;
}

/*
 * Take, until commit, the advisory lock of class (pg_locks.objsubid; the
 * SQL advisory locks use 1 and 2) whose 64-bit key is the first 8 bytes of
 * data's SHA-256: a lock per id that no two tenants share by chance (2^-64)
 * and nobody can make them share, as a 32-bit or unkeyed hash could.
 */
LockAcquireResult
cscp_hash_lock(uint16 class, const char *data, size_t len, LOCKMODE mode)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	LOCKTAG		tag;

	cscp_sha256(data, len, digest);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
						 ((uint32) digest[0] << 24) | ((uint32) digest[1] << 16) |
						 ((uint32) digest[2] << 8) | (uint32) digest[3],
						 ((uint32) digest[4] << 24) | ((uint32) digest[5] << 16) |
						 ((uint32) digest[6] << 8) | (uint32) digest[7],
						 class);
	return LockAcquire(&tag, mode, false, false);
}
