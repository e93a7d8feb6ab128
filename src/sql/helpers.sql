-- helpers.sql: C functions every other part uses (clock, argument checks, routing ids and hashes).

CREATE FUNCTION cscp.now() RETURNS timestamptz
    AS 'MODULE_PATHNAME', 'cscp_now_sql' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.now() IS
  'The clock of every expiry decision: statement_timestamp(), or the superuser-only setting cscp.clock when set';

CREATE FUNCTION cscp._id(argname text, value text) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_arg_id' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp._id(text, text) IS
  'Internal: raise 22023 unless value is a non-empty id of at most 256 bytes';

CREATE FUNCTION cscp._tenant(tenant_id text) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_arg_tenant' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp._tenant(text) IS
  'Internal: raise unless tenant_id is an id the current role may act for (cscp.tenant_id)';

-- The same checks under public names: the argument checks of cscp's PL/pgSQL and SQL API
-- functions, which run with their caller's rights and so may call only public functions.  Each
-- reads nothing and changes nothing; an application may call them to check its input first.
CREATE FUNCTION cscp.check_id(argname text, value text) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_arg_id' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.check_id(text, text) IS
  'value when it is a usable id (non-empty, at most 256 bytes); 22023 naming argname otherwise';

CREATE FUNCTION cscp.check_tenant(tenant_id text) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_arg_tenant' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.check_tenant(text) IS
  'tenant_id when the current role may act for it (22023 for a bad id, 42501 for another tenant than the session''s)';

CREATE FUNCTION cscp.routing_id(conversation_id text) RETURNS uuid
    AS 'MODULE_PATHNAME', 'cscp_routing_id' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp.routing_id(text) IS
  'A new random uuid whose first 32 bits are cscp.routing_conversation_hash(conversation_id), for routing by id';

-- Routing hashes are keyed by the database's secret key (cscp.secret_key, keys.sql): the same
-- on every node that shares the key, unknown to whoever lacks it.
CREATE FUNCTION cscp.routing_conversation_hash(conversation_id text) RETURNS integer
    AS 'MODULE_PATHNAME', 'cscp_routing_conversation_hash' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp.routing_conversation_hash(text) IS
  'The routing hash of a conversation: the first 32 bits of an HMAC-SHA256 of its id under cscp''s secret key';

CREATE FUNCTION cscp.routing_key_hash(tenant_id text, key text) RETURNS integer
    AS 'MODULE_PATHNAME', 'cscp_routing_key_hash' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp.routing_key_hash(text, text) IS
  'The routing hash of a subject or a session of a tenant: the first 32 bits of an HMAC-SHA256 under cscp''s secret key';

CREATE FUNCTION cscp.routing_hash(id uuid) RETURNS integer
    AS 'MODULE_PATHNAME', 'cscp_routing_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.routing_hash(uuid) IS
  'The routing hash a context or command id carries (its first 32 bits): equals cscp.routing_conversation_hash(conversation_id)';

CREATE FUNCTION cscp.canonical_json(value jsonb) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_canonical_json' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.canonical_json(jsonb) IS
  'The canonical JSON text of a value: keys sorted bytewise, no whitespace, numbers normalised';

CREATE FUNCTION cscp.canonical_hash(value jsonb) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_canonical_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.canonical_hash(jsonb) IS
  '''sha256:'' and the hex SHA-256 of cscp.canonical_json(value): the same on every database';

CREATE FUNCTION cscp._utc(ts timestamptz) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_utc_iso_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp._utc(timestamptz) IS
  'Internal: a timestamp as YYYY-MM-DDTHH:MI:SS.ffffffZ in UTC, whatever the session time zone';
