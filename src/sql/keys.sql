-- keys.sql: the database's secret key, which keys routing hashes and notification tags
-- (src/shared/keys.c).
--
-- One row: 32 to 64 random bytes, made here at CREATE EXTENSION.  Routing hashes (the first 32
-- bits of every context and command id, the partition of every row) are HMAC-SHA256 under it,
-- so an id shows nothing about its conversation id to whoever lacks the key.  In a scale-out
-- deployment every shard and the proxy must hold the same key: a superuser sets it on each with
-- cscp.secret_key_set (cscp_proxy.secret_key_set on the proxy) before any data is written.
-- Only the owner of cscp's tables reads it; pg_dump keeps it, and restoring a dump replaces the
-- key CREATE EXTENSION made (the trigger secret_key_replace keeps one row).

CREATE TABLE cscp.secret_key (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    key        bytea       NOT NULL CHECK (octet_length(key) BETWEEN 32 AND 64),
    set_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE cscp.secret_key IS
  'The secret key of routing hashes and notification tags (one row; readable only by the owner; the same on every shard and the proxy)';

CREATE FUNCTION cscp._secret_key_replace() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM cscp.secret_key;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION cscp._secret_key_replace() IS
  'Internal trigger: a new key replaces the old one (also when a dump is restored)';
CREATE TRIGGER secret_key_replace BEFORE INSERT ON cscp.secret_key
    FOR EACH ROW EXECUTE FUNCTION cscp._secret_key_replace();
-- Every backend caches the key; a change drops the caches (as for cscp.shard).
CREATE TRIGGER secret_key_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.secret_key
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
-- Both also during a restore, which runs with session_replication_role = replica.
ALTER TABLE cscp.secret_key ENABLE ALWAYS TRIGGER secret_key_replace;
ALTER TABLE cscp.secret_key ENABLE ALWAYS TRIGGER secret_key_changed;

-- 244 bits from gen_random_uuid() (pg_strong_random), hashed to 32 bytes.
INSERT INTO cscp.secret_key (key)
SELECT pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::text
                                               || pg_catalog.gen_random_uuid()::text, 'UTF8'));

CREATE FUNCTION cscp.secret_key_set(key bytea, force boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false) THEN
        RAISE EXCEPTION 'permission denied to set cscp''s secret key'
            USING ERRCODE = '42501', DETAIL = 'Only a superuser may set the key of routing hashes and notification tags.';
    END IF;
    IF key IS NULL OR octet_length(key) NOT BETWEEN 32 AND 64 THEN
        RAISE EXCEPTION 'a secret key must be 32 to 64 bytes long'
            USING ERRCODE = '22023',
                  DETAIL = format('The key given is %s bytes long.', coalesce(octet_length(key)::text, 'NULL')),
                  HINT = 'Make one with, for example, openssl rand -hex 32, and pass it as ''\x...''::bytea.';
    END IF;
    IF NOT coalesce(force, false) AND (
           EXISTS (SELECT FROM cscp.context) OR EXISTS (SELECT FROM cscp.command)
           OR EXISTS (SELECT FROM cscp.conversation) OR EXISTS (SELECT FROM cscp.evidence)
           OR EXISTS (SELECT FROM cscp.identity) OR EXISTS (SELECT FROM cscp.fact)
           OR EXISTS (SELECT FROM cscp.document) OR EXISTS (SELECT FROM cscp.working_set)
           OR EXISTS (SELECT FROM cscp.environment)) THEN
        RAISE EXCEPTION 'this node already holds routed rows'
            USING ERRCODE = '55000',
                  DETAIL = 'The ids of its contexts and commands and the partitions of its rows were computed with the current key.',
                  HINT = 'Set the key before writing data; pass force => true only when the rows will be moved to their new partitions.';
    END IF;
    INSERT INTO cscp.secret_key (key) VALUES (key);
    RETURN 'sha256:' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(key), 'hex'), 16);
END
$$;
COMMENT ON FUNCTION cscp.secret_key_set(bytea, boolean) IS
  'Superuser: set the secret key (32 to 64 bytes) of routing hashes and notification tags, the same on every node; returns its fingerprint';

CREATE FUNCTION cscp.notify_tag() RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_notify_tag' LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp.notify_tag() IS
  'The tag that cscp.notify''s notifications carry for the session''s tenant (cscp.tenant_id): a keyed hash of the tenant';

-- pg_dump keeps the key with the rows whose ids and partitions were computed with it.
SELECT pg_catalog.pg_extension_config_dump('cscp.secret_key', '');
