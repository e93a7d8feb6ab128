-- 40-auth.sql: authority from the writer (cscp.authority_bind, API keys' authority, the setting
-- cscp.authority); refused direct-SQL transitions logged; risk drives recovery; the snapshot link
-- on every path; operators' next steps, fact_current by key, the confirming message in traces.

-- Authority from the writer.
CREATE TABLE cscp.authority_binding (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    role        regrole     NOT NULL,
    authority   text        NOT NULL CHECK (authority <> '' AND octet_length(authority) <= 256),
    bound_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    bound_by    name        NOT NULL DEFAULT current_user,
    PRIMARY KEY (tenant_id, role)
);
COMMENT ON TABLE cscp.authority_binding IS
  'The highest authority each role may write facts with in a tenant (cscp.authority_bind); roles with none are trusted with the authority their facts name';

CREATE FUNCTION cscp.authority_bind(tenant_id text, role name, authority text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    r regrole := cscp._role(role);
BEGIN
    PERFORM cscp.check_tenant(tenant_id);
    IF authority IS NULL THEN
        DELETE FROM cscp.authority_binding b
         WHERE b.tenant_id OPERATOR(pg_catalog.=) tenant_id AND b.role OPERATOR(pg_catalog.=) r;
        RETURN;
    END IF;
    PERFORM cscp.check_id('authority', authority);
    IF cscp.authority_rank(tenant_id, authority) IS NULL THEN
        RAISE EXCEPTION 'unknown authority "%"', authority
            USING ERRCODE = '22023',
                  DETAIL = pg_catalog.format('Tenant "%s" does not rank authority "%s".', tenant_id, authority),
                  HINT = 'Register it with cscp.authority_set(tenant_id, authority, rank) first.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles a WHERE a.oid OPERATOR(pg_catalog.=) r::pg_catalog.oid AND a.rolsuper) THEN
        RAISE EXCEPTION 'role "%" cannot be held to an authority', role
            USING ERRCODE = '22023', DETAIL = 'A superuser writes any fact.',
                  HINT = 'Bind a role without SUPERUSER.';
    END IF;
    INSERT INTO cscp.authority_binding AS b (tenant_id, role, authority)
    VALUES (tenant_id, r, authority)
    ON CONFLICT ON CONSTRAINT authority_binding_pkey DO UPDATE
       SET authority = excluded.authority, bound_at = pg_catalog.now(), bound_by = current_user;
END
$$;
COMMENT ON FUNCTION cscp.authority_bind(text, name, text) IS
  'Hold a role (and the roles that have its privileges) to an authority in a tenant: its facts may name none ranked higher (42501); NULL authority removes the binding';

CREATE FUNCTION cscp.authority_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_authority_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.authority_guard() IS
  'Trigger: a writer held to an authority (cscp.authority_bind, or the setting cscp.authority) may not rank authorities';
CREATE TRIGGER authority_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.authority
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.authority_guard();

SELECT pg_catalog.pg_extension_config_dump('cscp.authority_binding', '');
ALTER FUNCTION cscp.authority_bind(text, name, text) SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON TABLE cscp.authority_binding FROM PUBLIC;
REVOKE ALL ON FUNCTION cscp.authority_bind(text, name, text), cscp.authority_guard() FROM PUBLIC;

-- API keys carry an authority.
ALTER TABLE cscp.api_key
    ADD COLUMN authority text CHECK (authority <> '' AND octet_length(authority) <= 256);
DROP FUNCTION cscp.api_key_create(text, text, text[], timestamptz);
DROP FUNCTION cscp._api_key_store(text, text, bytea, text[], timestamptz);
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

CREATE OR REPLACE FUNCTION cscp.http_fact_write(auth text, subject_id text, content_type text, body text)
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

ALTER FUNCTION cscp._api_key_store(text, text, bytea, text[], timestamptz, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.api_key_create(text, text, text[], timestamptz, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp._http_key_authority(text) SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION cscp._api_key_store(text, text, bytea, text[], timestamptz, text),
    cscp.api_key_create(text, text, text[], timestamptz, text), cscp._http_key_authority(text) FROM PUBLIC;

-- An application role is granted neither authority_bind nor the new api_key_create.
COMMENT ON FUNCTION cscp._grant_app_privileges(regrole) IS 'Internal: the privileges of an application role';
ALTER FUNCTION cscp._grant_app_privileges(regrole) SET search_path = pg_catalog, pg_temp;

-- Operators see what may come next: command_lifecycle's next_allowed and recovery_options.
CREATE FUNCTION cscp.command_recovery_options(state cscp.command_state) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN $1 OPERATOR(pg_catalog.=) 'failed'::cscp.command_state THEN ARRAY['retry', 'reprocess', 'compensate']
        WHEN $1 OPERATOR(pg_catalog.=) 'executed'::cscp.command_state THEN ARRAY['compensate']
        WHEN $1 OPERATOR(pg_catalog.=) ANY (ARRAY['rejected', 'canceled']::cscp.command_state[])
            THEN ARRAY['reprocess']
        WHEN $1 OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'canonicalized', 'confirmation_required', 'confirmed',
                                                  'authz_pending', 'authorized', 'started']::cscp.command_state[])
            THEN ARRAY['cancel']
        ELSE '{}'::text[] END
$$;
COMMENT ON FUNCTION cscp.command_recovery_options(cscp.command_state) IS
  'The recovery kinds (cscp.command_recover) that apply to a command in this state';
REVOKE ALL ON FUNCTION cscp.command_recovery_options(cscp.command_state) FROM PUBLIC;

CREATE OR REPLACE FUNCTION cscp.command_status(command_id uuid)
RETURNS TABLE(state cscp.command_state, last_transition_at timestamptz, terminal boolean,
              outcome jsonb, reason_code text, next_allowed cscp.command_state[],
              recovery_options text[])
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_variable
DECLARE
    cmd cscp.command;
    n int := 0;
    r cscp.command;
BEGIN
    IF command_id IS NULL THEN
        RAISE EXCEPTION 'command_id must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the command_id returned by cscp.command_submit.';
    END IF;
    -- Ids are keyed per tenant: the session's tenant's command (row-level security binds an
    -- application role to it; the owner behind the gateway is held to it here).
    FOR r IN SELECT * FROM cscp.command x
              WHERE x.command_id = command_id
                AND x.tenant_id = coalesce(cscp.current_tenant(), x.tenant_id)
              LIMIT 2 LOOP
        cmd := r;
        n := n + 1;
    END LOOP;
    IF n > 1 THEN
        RAISE EXCEPTION 'command id % is held by more than one tenant''s command', command_id
            USING ERRCODE = '21000',
                  DETAIL = 'A role that row-level security does not bind sees the commands of every tenant.',
                  HINT = 'Set cscp.tenant_id to the command''s tenant.';
    END IF;
    IF n = 0 THEN
        RAISE EXCEPTION 'command % does not exist', command_id
            USING ERRCODE = '22023',
                  HINT = 'Check the id, and that cscp.tenant_id names the command''s tenant.';
    END IF;
    state := cmd.state;
    last_transition_at := cmd.last_transition_at;
    terminal := cmd.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated');
    outcome := cmd.outcome;
    reason_code := cmd.reason_code;
    next_allowed := cscp.command_next_allowed(cmd);
    recovery_options := cscp.command_recovery_options(cmd.state);
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION cscp.command_status(uuid) IS
  'A command''s state, outcome, the states it may move to next and the recoveries that apply';
ALTER FUNCTION cscp.command_status(uuid) SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE VIEW cscp._command_lifecycle WITH (security_barrier) AS
SELECT m.tenant_id,
       m.command_id,
       m.conversation_id,
       cscp._redact_actor(m.actor_id, d.level) AS actor,
       CASE WHEN d.level = 'none' THEN NULL ELSE m.command_name END AS command_name,
       m.mutating,
       m.auto_confirm,
       m.state,
       m.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated') AS terminal,
       CASE WHEN d.level = 'none' THEN NULL ELSE m.reason_code END AS reason_code,
       m.confirmed_at IS NOT NULL AS confirmed,
       m.authorized_at IS NOT NULL AS authorized,
       m.recovery_kind,
       m.target_command_id,
       m.context_id,
       m.created_at,
       m.last_transition_at,
       m.window_expires_at,
       d.level AS detail_level,
       -- At full, the path the command took, from its evidence.
       CASE WHEN d.level = 'full' THEN
           (SELECT array_agg(e.event_type ORDER BY e.seq) FROM cscp.evidence e
             WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id)
       END AS events,
       -- What may come next (SMCL X): the steps the lifecycle allows now, and the recoveries.
       cscp.command_next_allowed(m) AS next_allowed,
       cscp.command_recovery_options(m.state) AS recovery_options
  FROM cscp.command m
  CROSS JOIN LATERAL (
       SELECT coalesce(cscp.policy_effective(m.tenant_id) ->> 'detail_level', 'summary') AS level) d;
CREATE OR REPLACE VIEW cscp.command_lifecycle AS
SELECT * FROM cscp.inspect_command_lifecycle();

-- fact_current by id or key, over the gateway too.
CREATE OR REPLACE FUNCTION cscp.http_fact_current(auth text, subject_id text, fact_id text)
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
