-- gateway.sql: API keys, and what each endpoint of the HTTPS gateway (gateway/) means.
--
-- The gateway maps each (method, path) to one call of a cscp.http_* function and sends back
-- the status, headers and body that call returns; the meaning of every endpoint lives here, so
-- that pg_regress tests it without a network and a proxy routes it like any other call (each
-- takes the session, conversation or subject it acts on, or a routed command id, and a key
-- names its tenant: cscp.http_key_tenant).  The gateway's own role (cscp.grant_gateway) may
-- call these functions and nothing else: it holds no tenant's rights.  In order below: keys,
-- documents, the shared request helpers, contexts with confirmations and approvals, commands,
-- conversations, facts, the grant.
--
-- Each cscp.http_* function is SECURITY DEFINER.  It looks the bearer key up by its SHA-256
-- (the key itself is never stored), binds cscp.tenant_id to the key's tenant for that call
-- only (the function's own SET clause restores the caller's value when it returns), and calls
-- the API function for that tenant, whose rules hold as for any caller.  A key of another
-- tenant finds nothing: another tenant's document, context, command or fact answers 404, as
-- an absent one does.  As the owner is not bound by row-level security, a call that takes a
-- bare id (a command's) first checks that the id is the key's tenant's.
-- Errors are answered, not raised: {"error": {"code", "message", "sqlstate"}} with the HTTP
-- status of the table in cscp._http_failure; an error it does not know is raised, and the
-- gateway answers 500.  The steps every endpoint shares are helpers: cscp._http_tenant (the
-- key and the binding), cscp._http_request (the same, and the body with its fields) and
-- cscp._http_caught (an error answered or raised again); an endpoint states its scope, its
-- fields, its call and its answer.

-- The scopes a key can be limited to; a key without scopes has them all.
CREATE FUNCTION cscp.api_scopes() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['documents:read', 'documents:write', 'contexts:read', 'contexts:write',
                 'confirmations:write', 'approvals:write', 'commands:read', 'commands:write',
                 'facts:read', 'facts:write', 'conversations:read', 'conversations:write']::pg_catalog.text[]
$$;
COMMENT ON FUNCTION cscp.api_scopes() IS
  'The scopes an API key can be limited to: documents:read, documents:write, contexts:read, contexts:write, confirmations:write, approvals:write, commands:read, commands:write, facts:read, facts:write, conversations:read, conversations:write';

CREATE TABLE cscp.api_key (
    tenant_id    text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    label        text        NOT NULL CHECK (label <> '' AND octet_length(label) <= 256),
    -- SHA-256 of the key's text; the key is shown once, by cscp.api_key_create.
    key_hash     bytea       NOT NULL CHECK (octet_length(key_hash) = 32),
    -- NULL: every scope.
    scopes       text[]      CHECK (cardinality(scopes) > 0 AND scopes <@ cscp.api_scopes()),
    created_at   timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    -- Written at most once a minute per key (cscp._http_auth).
    last_used_at timestamptz,
    -- The highest authority the key's fact writes may name (as cscp.authority_bind for a role);
    -- NULL: the key is trusted with the authority its facts name.
    authority    text        CHECK (authority <> '' AND octet_length(authority) <= 256),
    PRIMARY KEY (tenant_id, label)
);
COMMENT ON TABLE cscp.api_key IS
  'API keys of the HTTPS gateway: a SHA-256 of each key, bound to one tenant, with scopes, expiry and revocation';
-- A request names its key, not its tenant: keys are found by their hash.
CREATE UNIQUE INDEX api_key_hash_idx ON cscp.api_key (key_hash);

ALTER TABLE cscp.api_key ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.api_key
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));
SELECT pg_catalog.pg_extension_config_dump('cscp.api_key', '');
-- Each backend keeps the keys it has checked (src/document/http_api.c) until a relcache invalidation of
-- the table, which this trigger sends on every change but a key's last use: a revocation holds
-- from the next request on, in every backend.
CREATE TRIGGER api_key_changed
    AFTER INSERT OR UPDATE OF tenant_id, label, key_hash, scopes, created_at, expires_at, revoked_at
          OR DELETE OR TRUNCATE ON cscp.api_key
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();

-- Bytes as unpadded base64url (RFC 4648, section 5).
CREATE FUNCTION cscp._base64url(value bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.translate(pg_catalog.rtrim(pg_catalog.replace(pg_catalog.encode($1, 'base64'), E'\n', ''),
                                                 '='), '+/', '-_')
$$;
COMMENT ON FUNCTION cscp._base64url(bytea) IS 'Internal: bytes as unpadded base64url';

-- The tenant an API key names, read from an Authorization header without a lookup, for routing
-- only: NULL when it names none.  Whether the key is valid is cscp._http_auth's to say.
CREATE FUNCTION cscp.http_key_tenant(auth text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    t text := pg_catalog.substring(auth, '^\s*[Bb][Ee][Aa][Rr][Ee][Rr] +cscp_([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+\s*$');
BEGIN
    IF t IS NULL OR pg_catalog.length(t) % 4 = 1 THEN
        RETURN NULL;
    END IF;
    RETURN pg_catalog.convert_from(pg_catalog.decode(pg_catalog.translate(t, '-_', '+/')
                                                     || pg_catalog.repeat('=', (4 - pg_catalog.length(t) % 4) % 4),
                                                     'base64'), 'UTF8');
EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION cscp.http_key_tenant(text) IS
  'The tenant an API key in an Authorization header names (for routing; not a check of the key), or NULL';

-- The authority the bearer key of auth is held to ('' when none), for the setting cscp.authority
-- of the gateway's fact writes; called after cscp._http_tenant accepted the key.  A key it
-- cannot find again (revoked in between) is refused rather than trusted.
CREATE FUNCTION cscp._http_key_authority(auth text) RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    token text := pg_catalog.substring(auth, '^\s*[Bb][Ee][Aa][Rr][Ee][Rr] +(cscp_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)\s*$');
    a text;
BEGIN
    SELECT coalesce(k.authority, '') INTO a FROM cscp.api_key k
     WHERE k.key_hash OPERATOR(pg_catalog.=) pg_catalog.sha256(pg_catalog.convert_to(token, 'UTF8'));
    IF a IS NULL THEN
        RAISE EXCEPTION 'the API key is not valid' USING ERRCODE = '28000';
    END IF;
    RETURN a;
END
$$;
COMMENT ON FUNCTION cscp._http_key_authority(text) IS
  'Internal: the authority the bearer key in an Authorization header is held to, '''' when none';

-- Store a key's hash under its tenant and label, after the checks of api_key_create; a label
-- whose key was revoked or has expired is taken over.  Split from api_key_create so that a
-- PL/Proxy proxy can make one key and store it on every shard (proxy/local.sql).
CREATE FUNCTION cscp._api_key_store(tenant_id text, label text, key_hash bytea, scopes text[],
                                    expires_at timestamptz, authority text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    unknown text;
BEGIN
    PERFORM cscp._tenant(_api_key_store.tenant_id);
    PERFORM cscp._id('label', _api_key_store.label);
    IF _api_key_store.scopes IS NOT NULL THEN
        IF pg_catalog.cardinality(_api_key_store.scopes) = 0 THEN
            RAISE EXCEPTION 'scopes must not be empty'
                USING ERRCODE = '22023',
                      HINT = format('Pass NULL for a key with every scope, or some of %s.', cscp.api_scopes());
        END IF;
        SELECT s INTO unknown FROM pg_catalog.unnest(_api_key_store.scopes) s
         WHERE s IS NULL OR NOT (s = ANY (cscp.api_scopes())) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'unknown scope "%"', coalesce(unknown, 'null')
                USING ERRCODE = '22023',
                      HINT = format('Scopes are %s.', cscp.api_scopes());
        END IF;
    END IF;
    IF _api_key_store.expires_at <= cscp.now() THEN
        RAISE EXCEPTION 'expires_at must be in the future'
            USING ERRCODE = '22023',
                  DETAIL = format('It is %s; the time is now %s.', _api_key_store.expires_at, cscp.now()),
                  HINT = 'Pass NULL for a key that does not expire.';
    END IF;
    IF _api_key_store.authority IS NOT NULL THEN
        PERFORM cscp._id('authority', _api_key_store.authority);
        IF cscp.authority_rank(_api_key_store.tenant_id, _api_key_store.authority) IS NULL THEN
            RAISE EXCEPTION 'unknown authority "%"', _api_key_store.authority
                USING ERRCODE = '22023',
                      DETAIL = format('Tenant "%s" does not rank authority "%s".', _api_key_store.tenant_id,
                                      _api_key_store.authority),
                      HINT = 'Register it with cscp.authority_set(tenant_id, authority, rank) first, or pass NULL for a key trusted with the authority its facts name.';
        END IF;
    END IF;
    INSERT INTO cscp.api_key AS k (tenant_id, label, key_hash, scopes, expires_at, authority)
    VALUES (_api_key_store.tenant_id, _api_key_store.label, _api_key_store.key_hash,
            _api_key_store.scopes, _api_key_store.expires_at, _api_key_store.authority)
    ON CONFLICT ON CONSTRAINT api_key_pkey DO UPDATE
       SET key_hash = excluded.key_hash, scopes = excluded.scopes, created_at = cscp.now(),
           expires_at = excluded.expires_at, revoked_at = NULL, last_used_at = NULL,
           authority = excluded.authority
     WHERE k.revoked_at IS NOT NULL OR k.expires_at <= cscp.now();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'API key "%" of tenant "%" already exists', _api_key_store.label,
                        _api_key_store.tenant_id
            USING ERRCODE = '23505',
                  DETAIL = 'It is neither revoked nor expired.',
                  HINT = 'Revoke it with cscp.api_key_revoke first, or choose another label.';
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION cscp._api_key_store(text, text, bytea, text[], timestamptz, text) IS
  'Internal: store an API key''s hash (the checks and the insert of cscp.api_key_create)';

CREATE FUNCTION cscp.api_key_create(tenant_id text, label text, scopes text[] DEFAULT NULL,
                                    expires_at timestamptz DEFAULT NULL, authority text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    -- 256 bits from the server's strong random source (three version 4 uuids, 366 random bits).
    secret bytea := pg_catalog.sha256(pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
                                      || pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
                                      || pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));
    key text;
BEGIN
    -- 'cscp_' <tenant> '.' <secret>, both base64url: a proxy routes a request by the tenant the
    -- key names (cscp.http_key_tenant) without a lookup; the key is checked by its hash all the same.
    key := 'cscp_' || cscp._base64url(pg_catalog.convert_to(api_key_create.tenant_id, 'UTF8'))
           || '.' || cscp._base64url(secret);
    PERFORM cscp._api_key_store(api_key_create.tenant_id, api_key_create.label,
                                pg_catalog.sha256(pg_catalog.convert_to(key, 'UTF8')),
                                api_key_create.scopes, api_key_create.expires_at,
                                api_key_create.authority);
    RETURN key;
END
$$;
COMMENT ON FUNCTION cscp.api_key_create(text, text, text[], timestamptz, text) IS
  'Create an API key of a tenant for the HTTPS gateway and return it: it is shown this once, only its SHA-256 is kept; with authority, the key''s fact writes may name none ranked higher';

CREATE FUNCTION cscp.api_key_revoke(tenant_id text, label text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM cscp.check_tenant(api_key_revoke.tenant_id);
    PERFORM cscp.check_id('label', api_key_revoke.label);
    UPDATE cscp.api_key k SET revoked_at = cscp.now()
     WHERE k.tenant_id = api_key_revoke.tenant_id AND k.label = api_key_revoke.label
       AND k.revoked_at IS NULL;
    IF FOUND THEN
        RETURN true;
    END IF;
    PERFORM FROM cscp.api_key k
     WHERE k.tenant_id = api_key_revoke.tenant_id AND k.label = api_key_revoke.label;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'API key "%" of tenant "%" does not exist', api_key_revoke.label,
                        api_key_revoke.tenant_id
            USING ERRCODE = '42704',
                  HINT = 'Keys are listed in table cscp.api_key.';
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION cscp.api_key_revoke(text, text) IS
  'Revoke an API key at once: true when it was live, false when it was already revoked';

-- Documents: the listing the gateway serves as GET /v1/context/{session_id}.
CREATE FUNCTION cscp.doc_list(tenant_id text, session_id text)
RETURNS TABLE(namespace text, updated_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM cscp.check_tenant(doc_list.tenant_id);
    PERFORM cscp.check_id('session_id', doc_list.session_id);
    RETURN QUERY
        SELECT d.namespace, d.updated_at, d.expires_at FROM cscp.document d
         WHERE d.tenant_id = doc_list.tenant_id AND d.session_id = doc_list.session_id
           AND d.expires_at > cscp.now()
         ORDER BY d.namespace;
END
$$;
COMMENT ON FUNCTION cscp.doc_list(text, text) IS
  'The live (not expired) documents of a session: namespace, last update, expiry';

-- What every cscp.http_* function returns, and the gateway sends.
CREATE TYPE cscp.http_response AS (status int, headers jsonb, body jsonb);
COMMENT ON TYPE cscp.http_response IS
  'An HTTP response of the gateway: status, headers (an object of strings), body (JSON, or NULL for none)';

-- An error response: {"error": {"code", "message", "sqlstate"[, "detail"]}}.
CREATE FUNCTION cscp._http_error(status int, code text, message text, sqlstate text,
                                 detail text DEFAULT NULL, headers jsonb DEFAULT '{}')
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW($1, $6,
               pg_catalog.jsonb_build_object('error',
                   pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
                       'code', $2, 'message', $3, 'sqlstate', $4, 'detail', $5))))::cscp.http_response
$$;
COMMENT ON FUNCTION cscp._http_error(int, text, text, text, text, jsonb) IS
  'Internal: an HTTP error response with its stable code, message and SQLSTATE';

-- The 404 response to a request for what the key's tenant does not have (or no longer has).
CREATE FUNCTION cscp._http_not_found(message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT cscp._http_error(404, 'not_found', $1, 'P0002', $2)
$$;
COMMENT ON FUNCTION cscp._http_not_found(text, text) IS
  'Internal: the HTTP 404 response (not_found, SQLSTATE P0002) with its message';

-- A 200 response no cache may keep: what the tenant's data is now.
CREATE FUNCTION cscp._http_no_store(body jsonb) RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{"Cache-Control": "no-store"}'::pg_catalog.jsonb, $1)::cscp.http_response
$$;
COMMENT ON FUNCTION cscp._http_no_store(jsonb) IS
  'Internal: an HTTP 200 response with Cache-Control: no-store';

-- The response to an error an API function raised, or NULL for one that is not the caller's
-- doing (the http function raises it again, and the gateway answers 500).
CREATE FUNCTION cscp._http_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'invalid_parameter', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) '42501' THEN cscp._http_error(403, 'forbidden', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) '55000' OR $1 OPERATOR(pg_catalog.~~) '23%' THEN
            cscp._http_error(409, 'conflict', $2, $1, $3)
        WHEN $1 OPERATOR(pg_catalog.=) ANY ('{40001,40P01,55P03}') THEN
            cscp._http_error(503, 'try_again', $2, $1, $3, '{"Retry-After": "1"}')
    END
$$;
COMMENT ON FUNCTION cscp._http_failure(text, text, text) IS
  'Internal: the HTTP response to an error by its SQLSTATE (22: 400, 42501: 403, 55000 and 23: 409, 40001, 40P01, 55P03: 503), NULL for any other';

-- A path segment percent-encoded: every byte but the unreserved characters of RFC 3986.
CREATE FUNCTION cscp._http_segment(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    bytes bytea;
    out text;
BEGIN
    -- PL/pgSQL, not SQL: a SQL function this size is planned again at every call (0.1 ms).
    IF value ~ '^[A-Za-z0-9._~-]*$' THEN
        RETURN value;
    END IF;
    bytes := pg_catalog.convert_to(value, 'UTF8');
    -- One aggregate, not a loop appending to a string: that copies the string at every byte,
    -- and a megabyte took minutes.
    SELECT pg_catalog.string_agg(CASE WHEN b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122
                                           OR b IN (45, 46, 95, 126)
                                      THEN pg_catalog.chr(b)
                                      ELSE '%' OPERATOR(pg_catalog.||)
                                           pg_catalog.upper(pg_catalog.lpad(pg_catalog.to_hex(b), 2, '0')) END,
                                 '' ORDER BY i)
      INTO out
      FROM pg_catalog.generate_series(0, pg_catalog.length(bytes) - 1) i,
           LATERAL pg_catalog.get_byte(bytes, i) b;
    RETURN out;
END
$$;
COMMENT ON FUNCTION cscp._http_segment(text) IS
  'Internal: a path segment percent-encoded (RFC 3986), for Location headers';

-- The documentKey of the specification, 'session_id:namespace', made unambiguous: in each part
-- '%' is written '%25' and ':' '%3A', so the one ':' left separates them.
CREATE FUNCTION cscp.http_document_key(session_id text, namespace text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.replace(pg_catalog.replace($1, '%', '%25'), ':', '%3A') OPERATOR(pg_catalog.||) ':'
        OPERATOR(pg_catalog.||) pg_catalog.replace(pg_catalog.replace($2, '%', '%25'), ':', '%3A')
$$;
COMMENT ON FUNCTION cscp.http_document_key(text, text) IS
  'The documentKey the gateway answers: session_id '':'' namespace, with ''%'' and '':'' in each written %25 and %3A';

-- The tenant of the bearer key in auth (the Authorization header) when it is live and has the scope; else
-- tenant_id is NULL and failure the response (401 or 403).  Records the key's use at most once
-- a minute, so that a busy key costs no write per request.  In C (src/document/http_api.c): every request makes it.
CREATE FUNCTION cscp._http_auth(auth text, scope text,
                                OUT tenant_id text, OUT failure cscp.http_response)
    AS 'MODULE_PATHNAME', 'cscp_http_auth' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp._http_auth(text, text) IS
  'Internal: the tenant of a live bearer key with the scope, or the 401/403 response';

-- The JSON body of a request: doc, or failure (415 not application/json, 400 empty, not JSON,
-- or not an object when object_only).  An optional body that is absent reads as {}.
CREATE FUNCTION cscp._http_body(content_type text, body text, required boolean, object_only boolean,
                                hint text, OUT doc jsonb, OUT failure cscp.http_response)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    detail text;
BEGIN
    IF NOT required AND (body IS NULL OR body ~ '^\s*$') THEN
        doc := '{}';
        RETURN;
    END IF;
    IF content_type IS NULL OR content_type !~* '^\s*application/json\s*(;.*)?$' THEN
        failure := cscp._http_error(415, 'unsupported_media_type', 'the request body must be application/json',
                                    '0A000', 'Send the header "Content-Type: application/json".');
        RETURN;
    END IF;
    IF body IS NULL OR body ~ '^\s*$' THEN
        failure := cscp._http_error(400, 'bad_json', 'the request body is empty', '22P02', hint);
        RETURN;
    END IF;
    BEGIN
        doc := body::jsonb;
    EXCEPTION WHEN invalid_text_representation OR untranslatable_character OR statement_too_complex THEN
        GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
        failure := cscp._http_error(400, 'bad_json', 'the request body is not valid JSON', SQLSTATE,
                                    nullif(SQLERRM || coalesce(': ' || nullif(detail, ''), ''), ''));
        RETURN;
    END;
    IF object_only AND pg_catalog.jsonb_typeof(doc) <> 'object' THEN
        doc := NULL;
        failure := cscp._http_error(400, 'bad_json', 'the request body must be a JSON object', '22023', hint);
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._http_body(text, text, boolean, boolean, text) IS
  'Internal: the JSON body of a request, or its 415 or 400 response';

-- NULL when field of doc is present (or absent and optional) with the JSON type given ('string',
-- 'boolean', 'object', 'array', 'integer': a whole number within int4, or 'any'); else the 400
-- response.  An optional field given as null counts as absent.
CREATE FUNCTION cscp._http_field(doc jsonb, field text, type text, required boolean, hint text)
RETURNS cscp.http_response
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb := doc -> field;
BEGIN
    IF v IS NULL OR (NOT required AND pg_catalog.jsonb_typeof(v) = 'null') THEN
        IF required THEN
            RETURN cscp._http_error(400, 'missing_field', pg_catalog.format('field "%s" is required', field),
                                    '22023', hint);
        END IF;
        RETURN NULL;
    END IF;
    IF type = 'integer' THEN
        IF pg_catalog.jsonb_typeof(v) = 'number' AND v::text::numeric = pg_catalog.trunc(v::text::numeric)
           AND v::text::numeric BETWEEN -2147483648 AND 2147483647 THEN
            RETURN NULL;
        END IF;
    ELSIF type = 'any' OR pg_catalog.jsonb_typeof(v) = type THEN
        RETURN NULL;
    END IF;
    RETURN cscp._http_error(400, 'invalid_parameter',
                            pg_catalog.format('field "%s" must be %s', field,
                                              CASE type WHEN 'integer' THEN 'an integer' WHEN 'object' THEN 'an object'
                                                        WHEN 'array' THEN 'an array' ELSE 'a ' || type END),
                            '22023', pg_catalog.format('It is %s.', v));
END
$$;
COMMENT ON FUNCTION cscp._http_field(jsonb, text, text, boolean, text) IS
  'Internal: NULL when a field of a request body is there with its JSON type, else the 400 response';

-- The tenant of the bearer key in auth when it is live and has the scope, bound to
-- cscp.tenant_id until the calling http function returns (set_config local to the transaction:
-- that function's own SET clause restores the caller's value, so this one has none); else
-- tenant_id is NULL and failure the 401 or 403 response.  Every endpoint's first step.
CREATE FUNCTION cscp._http_tenant(auth text, scope text, OUT tenant_id text, OUT failure cscp.http_response)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    k record := cscp._http_auth(auth, scope);
BEGIN
    tenant_id := k.tenant_id;
    failure := k.failure;
    IF tenant_id IS NOT NULL THEN
        PERFORM pg_catalog.set_config('cscp.tenant_id', tenant_id, true);
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._http_tenant(text, text) IS
  'Internal: the tenant of a live bearer key with the scope, bound to cscp.tenant_id for the calling http function, or the 401/403 response';

-- A request with a JSON body: the key's tenant bound (cscp._http_tenant), the body read
-- (cscp._http_body: an object when fields are given, {} when absent and not body_required) and
-- its fields checked in their order (cscp._http_field).  doc is the body; or tenant_id and doc
-- are NULL and failure is the first refusal.  A field is written 'name: type', or 'name?: type'
-- when optional; a type is one of cscp._http_field's, 'any' (any JSON value, null included) or
-- 'string[]' (an array, whose elements are checked to be strings after every field's type).
CREATE FUNCTION cscp._http_request(auth text, scope text, content_type text, body text, hint text,
                                   fields text[] DEFAULT NULL, body_required boolean DEFAULT true,
                                   OUT tenant_id text, OUT doc jsonb, OUT failure cscp.http_response)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    k record := cscp._http_tenant(auth, scope);
    b record;
    f text;
    field text;
    kind text;
    string_arrays text[] := '{}';
BEGIN
    IF k.tenant_id IS NULL THEN
        failure := k.failure;
        RETURN;
    END IF;
    b := cscp._http_body(content_type, body, body_required, fields IS NOT NULL, hint);
    doc := b.doc;
    failure := b.failure;
    IF doc IS NOT NULL THEN
        FOREACH f IN ARRAY coalesce(fields, '{}') LOOP
            field := pg_catalog.split_part(f, ':', 1);
            kind := pg_catalog.btrim(pg_catalog.split_part(f, ':', 2));
            IF kind = 'string[]' THEN
                kind := 'array';
                string_arrays := string_arrays || pg_catalog.rtrim(field, '?');
            END IF;
            failure := cscp._http_field(doc, pg_catalog.rtrim(field, '?'), kind, field NOT LIKE '%?', hint);
            EXIT WHEN failure.status IS NOT NULL;
        END LOOP;
        -- The elements of the string arrays, once every field has its type.
        FOREACH field IN ARRAY string_arrays LOOP
            EXIT WHEN failure.status IS NOT NULL;
            IF pg_catalog.jsonb_path_exists(coalesce(doc -> field, '[]'), '$[*] ? (@.type() != "string")') THEN
                failure := cscp._http_error(400, 'invalid_parameter',
                                            pg_catalog.format('field "%s" must be an array of strings', field),
                                            '22023', hint);
            END IF;
        END LOOP;
    END IF;
    IF failure.status IS NULL THEN
        tenant_id := k.tenant_id;
    ELSE
        doc := NULL;
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._http_request(text, text, text, text, text, text[], boolean) IS
  'Internal: the tenant of a bearer key (bound as by cscp._http_tenant) and the JSON body of its request with its fields checked, or the first refusal';

-- The response to an error an API function raised, caught by an http function: by
-- cscp._http_failure, or cscp._http_turn_failure for a conversation's turn; an error neither
-- answers is raised again with its SQLSTATE, message, detail and hint (the gateway answers 500).
CREATE FUNCTION cscp._http_caught(sqlstate text, message text, detail text, hint text, turn boolean DEFAULT false)
RETURNS cscp.http_response
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    r cscp.http_response := CASE WHEN turn THEN cscp._http_turn_failure(sqlstate, message, nullif(detail, ''))
                                 ELSE cscp._http_failure(sqlstate, message, nullif(detail, '')) END;
BEGIN
    IF r.status IS NOT NULL THEN
        RETURN r;
    END IF;
    -- RAISE takes no NULL option, and an empty one would still be sent.
    IF detail <> '' AND hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail, HINT = hint;
    ELSIF detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, DETAIL = detail;
    ELSIF hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message, HINT = hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = message;
END
$$;
COMMENT ON FUNCTION cscp._http_caught(text, text, text, text, boolean) IS
  'Internal: the HTTP response to an error an API function raised, or the error raised again when it has none';

-- In C (src/document/http_api.c), as the gateway's most frequent write: the body checked in C, and by
-- cscp._http_body and cscp._http_field (as the other endpoints check theirs) when those checks
-- do not pass it, so that every refusal is theirs; the answer made before the write, so that
-- concurrent POSTs to one document hold its row lock for less.
CREATE FUNCTION cscp.http_doc_put(auth text, session_id text, namespace text,
                                  content_type text, body text)
RETURNS cscp.http_response
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS 'MODULE_PATHNAME', 'cscp_http_doc_put';
COMMENT ON FUNCTION cscp.http_doc_put(text, text, text, text, text) IS
  'POST /v1/context/{session_id}/{namespace}: merge-upsert {"ttlSeconds", "payload"} for the bearer key''s tenant; 201 with documentKey';

-- In C (src/document/http_api.c), as the gateway's most frequent call: the same key check, tenant
-- binding and answers as the PL/pgSQL of the endpoints beside it.
CREATE FUNCTION cscp.http_doc_get(auth text, session_id text, namespace text)
RETURNS cscp.http_response
LANGUAGE C VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS 'MODULE_PATHNAME', 'cscp_http_doc_get';
COMMENT ON FUNCTION cscp.http_doc_get(text, text, text) IS
  'GET /v1/context/{session_id}/{namespace}: 200 with the document of the bearer key''s tenant, 404 when absent or expired';

CREATE FUNCTION cscp.http_doc_delete(auth text, session_id text, namespace text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    deleted boolean;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'documents:write');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        deleted := cscp.doc_delete(req.tenant_id, session_id, namespace);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    IF NOT deleted THEN
        RETURN cscp._http_not_found('no such document', 'It does not exist or has expired.');
    END IF;
    RETURN ROW(204, '{}'::jsonb, NULL)::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_doc_delete(text, text, text) IS
  'DELETE /v1/context/{session_id}/{namespace}: 204 when the bearer key''s tenant had the document, 404 when absent or expired';

CREATE FUNCTION cscp.http_doc_list(auth text, session_id text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    list jsonb;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'documents:read');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'namespace', d.namespace, 'updatedAt', cscp._utc(d.updated_at),
                   'expiresAt', cscp._utc(d.expires_at)) ORDER BY d.namespace), '[]')
          INTO list
          FROM cscp.doc_list(req.tenant_id, session_id) d;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(pg_catalog.jsonb_build_object('sessionId', session_id, 'namespaces', list));
END
$$;
COMMENT ON FUNCTION cscp.http_doc_list(text, text) IS
  'GET /v1/context/{session_id}: 200 with the live namespaces of the bearer key''s tenant''s session';

-- Contexts, confirmations and approvals (RFC-WF-0034) over the same gateway, under
-- /v1/conversations/{conversation_id}: a context is named by its conversation and actor, as
-- cscp.context_get names it, so that the key's tenant is the only one it can reach.

-- A context as the gateway answers it.
CREATE FUNCTION cscp._http_context(c cscp.context) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.jsonb_build_object(
        'contextId', c.context_id, 'conversationId', c.conversation_id, 'actorId', c.actor_id,
        'status', c.status, 'slots', c.slots, 'createdAt', cscp._utc(c.created_at),
        'updatedAt', cscp._utc(c.updated_at), 'expiresAt', cscp._utc(c.expires_at),
        'lastMessageId', c.last_message_id, 'lastCommandId', c.last_command_id,
        'correlationId', c.correlation_id, 'reason', c.reason, 'version', c.version)
$$;
COMMENT ON FUNCTION cscp._http_context(cscp.context) IS
  'Internal: a context as JSON for the gateway (camelCase keys)';

CREATE FUNCTION cscp.http_context_open(auth text, conversation_id text, actor_id text,
                                       content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"slots": {...}, "ttlSeconds": <seconds>, "correlationId": "..."}, each optional.';
    req record;
    c cscp.context;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'contexts:write', content_type, body, hint,
                              '{slots?: object, ttlSeconds?: integer, correlationId?: string}',
                              body_required => false);
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        c := cscp.context_open(req.tenant_id, conversation_id, actor_id,
                               coalesce(nullif(req.doc -> 'slots', 'null'), '{}'),
                               pg_catalog.make_interval(secs => (req.doc ->> 'ttlSeconds')::int),
                               req.doc ->> 'correlationId');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(cscp._http_context(c));
END
$$;
COMMENT ON FUNCTION cscp.http_context_open(text, text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}/actors/{actor_id}/context: cscp.context_open for the bearer key''s tenant; 200 with the context';

CREATE FUNCTION cscp.http_context_get(auth text, conversation_id text, actor_id text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    c cscp.context;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'contexts:read');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT * INTO c FROM cscp.context_get(req.tenant_id, conversation_id, actor_id);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    IF c.context_id IS NULL THEN
        RETURN cscp._http_not_found('no such context', 'No context was ever opened for this conversation and actor.');
    END IF;
    RETURN cscp._http_no_store(cscp._http_context(c));
END
$$;
COMMENT ON FUNCTION cscp.http_context_get(text, text, text) IS
  'GET /v1/conversations/{conversation_id}/actors/{actor_id}/context: the latest context with its effective status, or 404';

-- PUT (value given) and DELETE (value NULL) of one slot of the live context.
CREATE FUNCTION cscp._http_slot(tenant_id text, conversation_id text, actor_id text, slot text, value jsonb)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    c cscp.context;
    e_detail text;
    e_hint text;
BEGIN
    BEGIN
        SELECT * INTO c FROM cscp.context_get(tenant_id, conversation_id, actor_id);
        IF c.context_id IS NULL OR NOT cscp.context_usable(c.status, c.expires_at, cscp.now()) THEN
            RETURN cscp._http_not_found('no live context', 'Open a context first: POST .../context.');
        END IF;
        c := cscp.slot_set(c.context_id, slot, value);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(cscp._http_context(c));
END
$$;
COMMENT ON FUNCTION cscp._http_slot(text, text, text, text, jsonb) IS
  'Internal: set (or with NULL remove) a slot of the live context of a conversation''s actor, as an HTTP response';

CREATE FUNCTION cscp.http_slot_put(auth text, conversation_id text, actor_id text, slot text,
                                   content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
BEGIN
    req := cscp._http_request(auth, 'contexts:write', content_type, body, 'Send the slot''s value as JSON.');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    RETURN cscp._http_slot(req.tenant_id, conversation_id, actor_id, slot, req.doc);
END
$$;
COMMENT ON FUNCTION cscp.http_slot_put(text, text, text, text, text, text) IS
  'PUT /v1/conversations/{conversation_id}/actors/{actor_id}/context/slots/{slot}: cscp.slot_set on the live context; 200 with the context';

CREATE FUNCTION cscp.http_slot_delete(auth text, conversation_id text, actor_id text, slot text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
BEGIN
    req := cscp._http_tenant(auth, 'contexts:write');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    RETURN cscp._http_slot(req.tenant_id, conversation_id, actor_id, slot, NULL);
END
$$;
COMMENT ON FUNCTION cscp.http_slot_delete(text, text, text, text) IS
  'DELETE /v1/conversations/{conversation_id}/actors/{actor_id}/context/slots/{slot}: remove a slot of the live context; 200 with the context';

-- The answer to a confirmation or an approval: every outcome is one (evidence is written for
-- each), 200.
CREATE FUNCTION cscp._http_decision(outcome text, command_id uuid, context_id uuid)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{}'::pg_catalog.jsonb,
               pg_catalog.jsonb_build_object('outcome', $1, 'commandId', $2, 'contextId', $3))::cscp.http_response
$$;
COMMENT ON FUNCTION cscp._http_decision(text, uuid, uuid) IS
  'Internal: the HTTP 200 response with the outcome of a confirmation or an approval';

CREATE FUNCTION cscp.http_confirm(auth text, conversation_id text, actor_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"messageId": "...", "answer": true|false, "targetFingerprint": "..."}.';
    req record;
    o record;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'confirmations:write', content_type, body, hint,
                              '{messageId: string, answer: boolean, targetFingerprint?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT * INTO o FROM cscp.confirm(req.tenant_id, conversation_id, actor_id, req.doc ->> 'messageId',
                                          (req.doc -> 'answer')::boolean, req.doc ->> 'targetFingerprint');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_decision(o.outcome, o.command_id, o.context_id);
END
$$;
COMMENT ON FUNCTION cscp.http_confirm(text, text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}/actors/{actor_id}/confirmations: cscp.confirm bound to the answering message id; 200 with the outcome';

CREATE FUNCTION cscp.http_approve(auth text, conversation_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"approverId": "...", "messageId": "...", "decision": true|false, "commandId": "..."}.';
    req record;
    o record;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'approvals:write', content_type, body, hint,
                              '{approverId: string, messageId: string, decision: boolean, commandId?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT * INTO o FROM cscp.approve(req.tenant_id, conversation_id, req.doc ->> 'approverId',
                                          req.doc ->> 'messageId', (req.doc -> 'decision')::boolean,
                                          (req.doc ->> 'commandId')::uuid);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_decision(o.outcome, o.command_id, o.context_id);
END
$$;
COMMENT ON FUNCTION cscp.http_approve(text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}/approvals: cscp.approve bound to the approving message id; 200 with the outcome';

-- Commands (RFC-WF-0018): submitted under their conversation and actor, then named by their
-- id (a uuid carrying its conversation's routing hash, so a proxy routes it); an id of another
-- tenant's command is not found (404), as an unknown one.

-- Whether command_id names a command of tenant_id (the http functions run as cscp's owner, whom
-- row-level security does not bind, so the tenant of an id is checked here).
CREATE FUNCTION cscp._http_command_of(tenant_id text, command_id uuid) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.command c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2)
$$;
COMMENT ON FUNCTION cscp._http_command_of(text, uuid) IS
  'Internal: whether a command id is one of the tenant''s commands';

CREATE FUNCTION cscp.http_command_submit(auth text, conversation_id text, actor_id text,
                                         content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"idempotencyKey": "...", "commandName": "...", "messageIds": ["..."], "mutating": true, "payload": {...}, "targetFingerprint": "..."}.';
    req record;
    o record;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'commands:write', content_type, body, hint,
                              '{idempotencyKey: string, commandName: string, messageIds: string[], mutating?: boolean,
                                payload?: object, targetFingerprint?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT * INTO o FROM cscp.command_submit(
            req.tenant_id, conversation_id, actor_id, req.doc ->> 'idempotencyKey', req.doc ->> 'commandName',
            coalesce((nullif(req.doc -> 'mutating', 'null'))::boolean, true),
            ARRAY(SELECT pg_catalog.jsonb_array_elements_text(req.doc -> 'messageIds')),
            coalesce(nullif(req.doc -> 'payload', 'null'), '{}'), req.doc ->> 'targetFingerprint');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    -- A replay answers what the first submit made (200); a new command is created (201).
    RETURN ROW(CASE WHEN o.replayed THEN 200 ELSE 201 END,
               pg_catalog.jsonb_build_object('Location', '/v1/commands/' || o.command_id),
               pg_catalog.jsonb_build_object('commandId', o.command_id, 'state', o.state,
                                             'replayed', o.replayed, 'outcome', o.outcome))::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_command_submit(text, text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}/actors/{actor_id}/commands: cscp.command_submit; 201 new, 200 replayed by its idempotency key';

CREATE FUNCTION cscp.http_command_status(auth text, command_id uuid)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    id uuid;
    o record;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'commands:read');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        id := command_id;
        IF NOT cscp._http_command_of(req.tenant_id, id) THEN
            RETURN cscp._http_not_found('no such command');
        END IF;
        SELECT * INTO o FROM cscp.command_status(id);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(pg_catalog.jsonb_build_object(
               'commandId', id, 'state', o.state, 'lastTransitionAt', cscp._utc(o.last_transition_at),
               'terminal', o.terminal, 'outcome', o.outcome, 'reasonCode', o.reason_code,
               'nextAllowed', o.next_allowed, 'recoveryOptions', o.recovery_options));
END
$$;
COMMENT ON FUNCTION cscp.http_command_status(text, uuid) IS
  'GET /v1/commands/{command_id}: cscp.command_status of a command of the bearer key''s tenant, or 404';

CREATE FUNCTION cscp.http_command_transition(auth text, command_id uuid, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"toState": "...", "reasonCode": "...", "detail": {...}}.';
    req record;
    id uuid;
    o record;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'commands:write', content_type, body, hint,
                              '{toState: string, reasonCode?: string, detail?: object}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        id := command_id;
        IF NOT cscp._http_command_of(req.tenant_id, id) THEN
            RETURN cscp._http_not_found('no such command');
        END IF;
        SELECT * INTO o FROM cscp.command_transition(id, (req.doc ->> 'toState')::cscp.command_state,
                                                     req.doc ->> 'reasonCode', nullif(req.doc -> 'detail', 'null'));
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    -- A refused transition is an answer, not an error: accepted false, evidence written.
    RETURN ROW(200, '{}'::jsonb,
               pg_catalog.jsonb_build_object('accepted', o.accepted, 'state', o.state,
                                             'reasonCode', o.reason_code))::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_command_transition(text, uuid, text, text) IS
  'POST /v1/commands/{command_id}/transitions: cscp.command_transition of a command of the bearer key''s tenant; 200 with accepted, state, reasonCode';

-- Conversations (OpenWOP RFC 0005) under /v1/conversations/{conversation_id}: started with
-- their first turn, then resolved turn by turn with the body RFC 0005 section E gives the
-- interrupt's resume endpoint, ConversationResolve: {"operation": "exchange" | "close", "turn":
-- <ConversationTurn>, "outcome": <any, only on close>}.  A turn the conversation refuses (its
-- schema, a closed conversation, a bad turn: SQLSTATE 22xxx) answers 400 validation_error, the
-- RFC's name for it; replay, divergence and timeout are results of a 200, as in SQL.

-- The response to an error of a conversation call: 22xxx is the turn's validation_error.
CREATE FUNCTION cscp._http_turn_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'validation_error', $2, $1, $3)
                WHEN $1 OPERATOR(pg_catalog.=) '54000' THEN cscp._http_error(422, 'validation_too_costly', $2, $1, $3)
                ELSE cscp._http_failure($1, $2, $3) END
$$;
COMMENT ON FUNCTION cscp._http_turn_failure(text, text, text) IS
  'Internal: the HTTP response to an error of a conversation call (22xxx: 400 validation_error, 54000: 422 validation_too_costly, else as cscp._http_failure)';

-- Whether the tenant has the conversation (the http functions run as cscp's owner, whom
-- row-level security does not bind, and an absent conversation is 404, not the 22023 of SQL).
CREATE FUNCTION cscp._http_conversation_of(tenant_id text, conversation_id text) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.conversation c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1
                      AND c.conversation_id OPERATOR(pg_catalog.=) $2)
$$;
COMMENT ON FUNCTION cscp._http_conversation_of(text, text) IS
  'Internal: whether a conversation id is one of the tenant''s conversations';

CREATE FUNCTION cscp.http_conversation_start(auth text, conversation_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"agentId": "...", "initialTurn": <ConversationTurn>, "schema": {...}, "timeoutMs": <ms>, "causationId": "..."}, the last three optional.';
    req record;
    o record;
    existed boolean;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'conversations:write', content_type, body, hint,
                              '{agentId: string, initialTurn: object, schema?: object, timeoutMs?: integer,
                                causationId?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        -- The same start sent again replays it (200); a new conversation is created (201).
        existed := cscp._http_conversation_of(req.tenant_id, conversation_id);
        SELECT * INTO o FROM cscp.conversation_start(req.tenant_id, conversation_id, req.doc ->> 'agentId',
                                                     req.doc -> 'initialTurn', nullif(req.doc -> 'schema', 'null'),
                                                     (req.doc ->> 'timeoutMs')::bigint, req.doc ->> 'causationId');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint, turn => true);
    END;
    RETURN ROW(CASE WHEN existed THEN 200 ELSE 201 END,
               pg_catalog.jsonb_build_object('Location', '/v1/conversations/' || cscp._http_segment(conversation_id)),
               pg_catalog.jsonb_build_object('conversationId', conversation_id, 'eventId', o.event_id,
                                             'turnIndex', o.turn_index, 'messageId', o.message_id))::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_conversation_start(text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}: cscp.conversation_start with agentId, initialTurn, schema, timeoutMs; 201 new, 200 the same start replayed';

CREATE FUNCTION cscp.http_conversation_resolve(auth text, conversation_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send a ConversationResolve: {"operation": "exchange" | "close", "turn": <ConversationTurn>, "outcome": <JSON, only on close>}.';
    req record;
    o record;
    recorded jsonb;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'conversations:write', content_type, body, hint,
                              '{operation: string, turn: object}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    IF req.doc ->> 'operation' NOT IN ('exchange', 'close') THEN
        RETURN cscp._http_error(400, 'validation_error', 'field "operation" must be "exchange" or "close"',
                                '22023', pg_catalog.format('It is %s.', req.doc -> 'operation'));
    ELSIF req.doc ->> 'operation' = 'exchange' AND req.doc ? 'outcome' THEN
        RETURN cscp._http_error(400, 'validation_error', 'field "outcome" is only for "close"', '22023', hint);
    END IF;
    BEGIN
        IF NOT cscp._http_conversation_of(req.tenant_id, conversation_id) THEN
            RETURN cscp._http_not_found('no such conversation', 'Start it first: POST /v1/conversations/{conversation_id}.');
        END IF;
        IF req.doc ->> 'operation' = 'exchange' THEN
            SELECT x.event_id, x.turn_index, x.message_id, x.outcome AS result INTO o
              FROM cscp.conversation_exchange(req.tenant_id, conversation_id, req.doc -> 'turn') x;
        ELSE
            SELECT x.event_id, x.turn_index, x.message_id, x.result INTO o
              FROM cscp.conversation_close(req.tenant_id, conversation_id, req.doc -> 'turn', req.doc -> 'outcome') x;
        END IF;
        -- The turn as recorded: the new one, the original of a replay or divergence, or the
        -- system turn that recorded a timeout.
        SELECT cscp.turn_json(t) INTO recorded FROM cscp.turn t
         WHERE t.tenant_id = req.tenant_id AND t.conversation_id = http_conversation_resolve.conversation_id
           AND t.turn_index = o.turn_index;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint, turn => true);
    END;
    -- Every result is an answer (exchanged, replayed, diverged, closed, timed_out): 200.
    RETURN ROW(200, '{}'::jsonb,
               pg_catalog.jsonb_build_object('conversationId', conversation_id,
                                             'operation', req.doc ->> 'operation', 'result', o.result,
                                             'eventId', o.event_id, 'turnIndex', o.turn_index,
                                             'messageId', o.message_id, 'turn', recorded))::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_conversation_resolve(text, text, text, text) IS
  'POST /v1/conversations/{conversation_id}/turns: a ConversationResolve (RFC 0005): exchange or close a turn; 200 with the result, 400 validation_error for a refused turn';

CREATE FUNCTION cscp.http_conversation_get(auth text, conversation_id text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    c cscp.conversation;
    doc jsonb;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'conversations:read');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        SELECT * INTO c FROM cscp.conversation_get(req.tenant_id, conversation_id);
        IF c.conversation_id IS NULL THEN
            RETURN cscp._http_not_found('no such conversation');
        END IF;
        doc := cscp.conversation_export(req.tenant_id, conversation_id);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(doc || pg_catalog.jsonb_build_object(
               'agentId', c.agent_id, 'openedAt', cscp._utc(c.opened_at), 'closedAt', cscp._utc(c.closed_at),
               'closeReason', c.close_reason, 'outcome', c.outcome, 'timeoutMs', c.timeout_ms,
               'nextTurnIndex', c.next_turn_index));
END
$$;
COMMENT ON FUNCTION cscp.http_conversation_get(text, text) IS
  'GET /v1/conversations/{conversation_id}: the conversation with its effective state, its turns (ConversationTurn) and events, or 404';

-- Facts (StateBench): written and read under their subject, and the context built for an agent.

-- A fact as the gateway answers it.
CREATE FUNCTION cscp._http_fact(f cscp.fact) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.jsonb_build_object(
        'factId', f.fact_id, 'subjectId', f.subject_id, 'key', f.key, 'value', f.value,
        'source', f.source, 'authority', f.authority, 'createdAt', cscp._utc(f.created_at),
        'isValid', f.is_valid, 'supersededBy', f.superseded_by, 'supersedes', f.supersedes,
        'memoryType', f.memory_type, 'scope', f.scope, 'scopeId', f.scope_id,
        'dependsOn', f.depends_on, 'derivedFacts', f.derived_facts, 'needsReview', f.needs_review,
        'isConstraint', f.is_constraint, 'constraintType', f.constraint_type)
$$;
COMMENT ON FUNCTION cscp._http_fact(cscp.fact) IS 'Internal: a fact as JSON for the gateway (camelCase keys)';

CREATE FUNCTION cscp.http_fact_write(auth text, subject_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
SET cscp.authority = ''
AS $$
DECLARE
    hint constant text := 'Send {"key": "...", "value": <JSON>, "factId", "source", "supersedes", "scope", "scopeId", "dependsOn", "isConstraint", "constraintType", "memoryType"}, all but key and value optional.';
    req record;
    f cscp.fact;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'facts:write', content_type, body, hint,
                              '{value: any, key: string, factId?: string, source?: object, supersedes?: string,
                                scope?: string, scopeId?: string, dependsOn?: string[], isConstraint?: boolean,
                                constraintType?: string, memoryType?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    -- The fact is written with the key's authority, not the one its source claims.
    PERFORM pg_catalog.set_config('cscp.authority', cscp._http_key_authority(auth), true);
    BEGIN
        f := cscp.fact_write(req.tenant_id, subject_id, req.doc ->> 'factId', req.doc ->> 'key', req.doc -> 'value',
                             coalesce(nullif(req.doc -> 'source', 'null'), '{"type": "conversation"}'),
                             req.doc ->> 'supersedes', coalesce(req.doc ->> 'scope', 'global'), req.doc ->> 'scopeId',
                             ARRAY(SELECT pg_catalog.jsonb_array_elements_text(coalesce(nullif(req.doc -> 'dependsOn', 'null'), '[]'))),
                             coalesce((nullif(req.doc -> 'isConstraint', 'null'))::boolean, false),
                             req.doc ->> 'constraintType', req.doc ->> 'memoryType');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN ROW(201,
               pg_catalog.jsonb_build_object('Location', '/v1/subjects/' || cscp._http_segment(subject_id)
                                                         || '/facts/' || cscp._http_segment(f.fact_id)),
               cscp._http_fact(f))::cscp.http_response;
END
$$;
COMMENT ON FUNCTION cscp.http_fact_write(text, text, text, text) IS
  'POST /v1/subjects/{subject_id}/facts: cscp.fact_write for the bearer key''s tenant (supersession, authority, dependencies as in SQL); 201 with the fact';

CREATE FUNCTION cscp.http_fact_current(auth text, subject_id text, fact_id text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    req record;
    f cscp.fact;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_tenant(auth, 'facts:read');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        -- An unknown fact is not found (fact_current refuses it as bad input, 22023).
        PERFORM FROM cscp.fact x
         WHERE x.tenant_id = req.tenant_id AND x.subject_id = http_fact_current.subject_id
           AND (x.fact_id = http_fact_current.fact_id
                OR (x.key = http_fact_current.fact_id AND x.is_valid));
        IF NOT FOUND THEN
            RETURN cscp._http_not_found('no such fact');
        END IF;
        f := cscp.fact_current(req.tenant_id, subject_id, fact_id);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    IF f.fact_id IS NULL THEN
        RETURN cscp._http_not_found('no such fact');
    END IF;
    RETURN cscp._http_no_store(cscp._http_fact(f));
END
$$;
COMMENT ON FUNCTION cscp.http_fact_current(text, text, text) IS
  'GET /v1/subjects/{subject_id}/facts/{fact_id}: the head of the fact''s supersession chain (fact_id an id, else a key, as cscp.fact_current takes it), or 404';

CREATE FUNCTION cscp.http_build_context(auth text, subject_id text, content_type text, body text)
RETURNS cscp.http_response
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET cscp.tenant_id = ''
AS $$
DECLARE
    hint constant text := 'Send {"sessionId": "...", "query": "...", "tokenBudget": <n>, "taskId": "..."}, all but sessionId optional.';
    req record;
    ctx jsonb;
    e_detail text;
    e_hint text;
BEGIN
    req := cscp._http_request(auth, 'facts:read', content_type, body, hint,
                              '{sessionId: string, query?: string, tokenBudget?: integer, taskId?: string}');
    IF req.tenant_id IS NULL THEN
        RETURN req.failure;
    END IF;
    BEGIN
        ctx := cscp.build_context(req.tenant_id, subject_id, req.doc ->> 'sessionId', req.doc ->> 'query',
                                  (req.doc ->> 'tokenBudget')::int, req.doc ->> 'taskId');
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RETURN cscp._http_caught(SQLSTATE, SQLERRM, e_detail, e_hint);
    END;
    RETURN cscp._http_no_store(ctx);
END
$$;
COMMENT ON FUNCTION cscp.http_build_context(text, text, text, text) IS
  'POST /v1/subjects/{subject_id}/context: cscp.build_context for an agent (identity, environment, valid facts, working set within a token budget)';

CREATE FUNCTION cscp.grant_gateway(role name) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r regrole := cscp._role(role);
    f regprocedure;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_roles g WHERE g.oid = r AND (g.rolsuper OR g.rolbypassrls)) THEN
        RAISE EXCEPTION 'role "%" bypasses row-level security', role
            USING ERRCODE = '22023',
                  DETAIL = 'A superuser or a role with BYPASSRLS holds every tenant''s rights.',
                  HINT = 'Create a role of its own for the gateway: CREATE ROLE name LOGIN.';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    -- Through a PL/Proxy proxy (shard.sql), each call first sets the caller's settings.
    IF pg_catalog.to_regprocedure('cscp.proxy_session(text, text, anyelement)') IS NOT NULL THEN
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION cscp.proxy_session(text, text, anyelement) TO %s', r);
    END IF;
    -- Every endpoint: the SECURITY DEFINER functions named http_*, and nothing else.
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE 'http\_%' AND p.prosecdef
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f, r);
    END LOOP;
END
$$;
COMMENT ON FUNCTION cscp.grant_gateway(name) IS
  'Let a role run the HTTPS gateway: call the cscp.http_* endpoint functions, which check each request''s API key, and nothing else';
