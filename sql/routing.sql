\i sql/include/helpers.sql
-- Routing-ready ids: the first 32 bits of a context id are the keyed routing hash of its
-- conversation id (HMAC-SHA256 under cscp.secret_key; setup.sql fixed the key).
SET cscp.clock = '2026-03-01 09:00:00+00';
SELECT conv, cscp.routing_hash((cscp.context_open('t', conv, 'a')).context_id) = cscp.routing_conversation_hash(conv) AS carries_hash
  FROM unnest(ARRAY['c-1', 'whatsapp:+15550001', 'a much longer conversation identifier', 'ü-ñ']) conv;

SELECT cscp.routing_hash(cscp.routing_id('c-1')) = cscp.routing_conversation_hash('c-1') AS routing_id_carries_hash;
SELECT cscp.routing_id('c-1') <> cscp.routing_id('c-1') AS ids_are_unique;
SELECT substr(cscp.routing_id('c-1')::text, 15, 1) AS uuid_version;

-- A direct INSERT gets a routed id when it gives none, and is refused with a wrong one.
INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('t', 'direct-1', 'a', cscp.now() + interval '1 hour', interval '1 hour');
SELECT cscp.routing_hash(context_id) = cscp.routing_conversation_hash(conversation_id) AS routed
  FROM cscp.context WHERE conversation_id = 'direct-1';
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('t', '00000000-0000-4000-8000-000000000000', 'direct-2', 'a',
                     cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT count(*) FROM cscp.context WHERE conversation_id = 'direct-2';
-- The same rule for a command's id.
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
VALUES ('t', 'direct-1:1', 'direct-1', 'a', 'direct_cmd', true);
SELECT cscp.routing_hash(command_id) = cscp.routing_conversation_hash(conversation_id) AS routed
  FROM cscp.command WHERE idempotency_key = 'direct-1:1';
SELECT try($$INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                                      command_name, mutating)
             VALUES ('t', '00000000-0000-4000-8000-000000000000', 'direct-2:1', 'direct-2', 'a',
                     'direct_cmd', true)$$);
SELECT try($$SELECT cscp.routing_id(NULL)$$);
SELECT try($$SELECT cscp.routing_id('')$$);

-- The hash is keyed: it is not PostgreSQL's hashtext, and it is the first 32 bits of
-- HMAC-SHA256(key, 'c' NUL conversation_id) (and of 'k' NUL tenant NUL key for subjects and
-- sessions), computed here with sha256() alone from the key setup.sql set.
CREATE FUNCTION pg_temp.hmac32(msg bytea) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k bytea := sha256('cscp regression key 25');
    ipad bytea := '';
    opad bytea := '';
BEGIN
    FOR i IN 0..63 LOOP
        ipad := ipad || set_byte('\x00'::bytea, 0, CASE WHEN i < 32 THEN get_byte(k, i) ELSE 0 END # 54);
        opad := opad || set_byte('\x00'::bytea, 0, CASE WHEN i < 32 THEN get_byte(k, i) ELSE 0 END # 92);
    END LOOP;
    RETURN ('x' || encode(substr(sha256(opad || sha256(ipad || msg)), 1, 4), 'hex'))::bit(32)::integer;
END
$$;
SELECT cscp.routing_conversation_hash('wa:+15550001') = pg_temp.hmac32('\x6300'::bytea || 'wa:+15550001'::bytea) AS conversation_hmac,
       cscp.routing_conversation_hash('wa:+15550001') <> hashtext('wa:+15550001') AS not_hashtext,
       cscp.routing_key_hash('t', 's-1') = pg_temp.hmac32('\x6b00'::bytea || 't'::bytea || '\x00'::bytea || 's-1'::bytea) AS key_hmac;

-- The key: one row, readable only by its owner; set only by a superuser, 32 to 64 bytes, and
-- not once the node holds routed rows (unless forced); every backend sees a new key at once.
SELECT count(*) AS key_rows FROM cscp.secret_key;
SELECT try($$SELECT cscp.secret_key_set(sha256('another'))$$) AS populated;
SELECT try($$SELECT cscp.secret_key_set('\x00'::bytea, true)$$) AS too_short;
SELECT try($$SELECT cscp.secret_key_set(NULL, true)$$) AS null_key;
SELECT try($$SELECT cscp.secret_key_set(sha512('a') || '\x00'::bytea, true)$$) AS too_long;
BEGIN;
SELECT cscp.routing_conversation_hash('c-1') AS before \gset
SELECT cscp.secret_key_set(sha256('another'), force => true) AS fingerprint;
SELECT cscp.routing_conversation_hash('c-1') <> :before AS new_key_used;
SELECT count(*) AS key_rows FROM cscp.secret_key;
ROLLBACK;
SELECT cscp.routing_conversation_hash('c-1') = :before AS old_key_back;
-- A dump's row replaces the key CREATE EXTENSION made (the trigger keeps one row).
BEGIN;
INSERT INTO cscp.secret_key (key) VALUES (sha256('restored'));
SELECT count(*) AS key_rows, bool_and(key = sha256('restored')) AS restored FROM cscp.secret_key;
ROLLBACK;

-- As an application role: the hashes, but not the key.
CREATE ROLE routing_app;
SELECT cscp.grant_app('routing_app');
SET ROLE routing_app;
SET cscp.tenant_id = 't';
SELECT cscp.routing_conversation_hash('c-1') = :before AS app_same_hash;
SELECT cscp.routing_hash((cscp.context_open('t', 'app-conv', 'a')).context_id)
       = cscp.routing_conversation_hash('app-conv') AS app_id_routed;
-- Direct SQL as the application role is held to the same rule, for contexts and commands.
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('t', '00000000-0000-4000-8000-000000000000', 'app-direct', 'a',
                     cscp.now() + interval '1 hour', interval '1 hour')$$) AS app_context_id;
SELECT try($$INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                                      command_name, mutating)
             VALUES ('t', '00000000-0000-4000-8000-000000000000', 'app-direct:1', 'app-direct', 'a',
                     'direct_cmd', true)$$) AS app_command_id;
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
VALUES ('t', 'app-direct:2', 'app-direct', 'a', 'direct_cmd', true);
SELECT cscp.routing_hash(command_id) = cscp.routing_conversation_hash('app-direct') AS app_command_routed
  FROM cscp.command WHERE idempotency_key = 'app-direct:2';
SELECT try($$SELECT * FROM cscp.secret_key$$) AS app_reads_key;
SELECT try($$SELECT cscp.secret_key_set(sha256('mine'), true)$$) AS app_sets_key;
SELECT try($$INSERT INTO cscp.secret_key (key) VALUES (sha256('mine'))$$) AS app_inserts_key;
RESET cscp.tenant_id;
RESET ROLE;
SELECT key = sha256('cscp regression key 25') AS key_unchanged FROM cscp.secret_key;
DROP OWNED BY routing_app;
DROP ROLE routing_app;
