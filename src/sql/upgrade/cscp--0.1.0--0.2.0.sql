-- cscp upgrade script 0.1.0 -> 0.2.0 (ALTER EXTENSION cscp UPDATE).  One section per change of
-- 0.2.0, in the order it must run; the grants section runs last and re-grants the roles granted by
-- 0.1.0.  A schema change of 0.2.0 adds its statements here as it lands; the upgrade suite
-- (test/scripts/upgrade.sh) checks that the result equals a fresh install.
-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cscp UPDATE TO '0.2.0'" to load this file. \quit

-- ==== search_path
-- Issue 39, finding 1: no privileged caller's search_path is trusted.  The SQL functions
-- PostgreSQL inlines into the caller's query (or parses under the caller's search_path) name
-- every operator, function and type in pg_catalog or cscp; the larger ones off the hot path pin
-- search_path = pg_catalog, pg_temp as the PL/pgSQL functions do (security.sql).  The C code's
-- statements are qualified in the library itself and need no step here.

CREATE OR REPLACE FUNCTION cscp.turn_json(t cscp.turn) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.jsonb_build_object('messageId', t.message_id, 'from', t.sender, 'content', t.content,
                                         'ts', t.ts, 'role', t.role, 'turnIndex', t.turn_index)
           OPERATOR(pg_catalog.||) CASE WHEN t.role OPERATOR(pg_catalog.=) 'agent'
                                        THEN pg_catalog.jsonb_build_object('speakerId', t.sender)
                                        ELSE '{}'::pg_catalog.jsonb END
           OPERATOR(pg_catalog.||) coalesce(t.extra, '{}'::pg_catalog.jsonb)
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_turns(tenant_id text, conversation_id text, last int DEFAULT NULL)
RETURNS SETOF cscp.turn
LANGUAGE sql STABLE
AS $$
    SELECT t.* FROM cscp.turn t
     WHERE t.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND t.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
       AND t.turn_index OPERATOR(pg_catalog.>=)
           CASE WHEN $3 IS NULL THEN 0
                ELSE (SELECT c.next_turn_index FROM cscp.conversation c
                       WHERE c.tenant_id OPERATOR(pg_catalog.=) $1
                         AND c.conversation_id OPERATOR(pg_catalog.=) $2)
                     OPERATOR(pg_catalog.-) greatest($3, 0)
           END
     ORDER BY t.turn_index
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_events(tenant_id text, conversation_id text)
RETURNS SETOF cscp.event
LANGUAGE sql STABLE
AS $$
    SELECT e.* FROM cscp.event e
     WHERE e.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND e.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
     ORDER BY e.seq
$$;

CREATE OR REPLACE FUNCTION cscp.conversation_get(tenant_id text, conversation_id text)
RETURNS SETOF cscp.conversation
LANGUAGE sql STABLE
AS $$
    SELECT c.tenant_id, c.conversation_id, c.agent_id,
           CASE WHEN due THEN 'closed'::cscp.conversation_state ELSE c.state END,
           c.schema, c.timeout_ms, c.deadline, c.causation_id, c.opened_at,
           CASE WHEN due THEN c.deadline ELSE c.closed_at END,
           c.outcome,
           CASE WHEN due THEN 'timeout' ELSE c.close_reason END,
           c.next_turn_index, c.next_event_seq, c.updated_at
      FROM cscp.conversation c
     CROSS JOIN LATERAL (SELECT c.state OPERATOR(pg_catalog.=) 'open'
                                AND c.deadline OPERATOR(pg_catalog.<=) cscp.now() AS due) d
     WHERE c.tenant_id OPERATOR(pg_catalog.=) cscp.check_tenant($1)
       AND c.conversation_id OPERATOR(pg_catalog.=) cscp.check_id('conversation_id', $2)
$$;

CREATE OR REPLACE FUNCTION cscp.authority_rank(tenant_id text, authority text) RETURNS int
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce((SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.authority OPERATOR(pg_catalog.=) $2),
                    (SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) '*' AND a.authority OPERATOR(pg_catalog.=) $2))
$$;

CREATE OR REPLACE FUNCTION cscp.api_scopes() RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY['documents:read', 'documents:write', 'contexts:read', 'contexts:write',
                 'confirmations:write', 'approvals:write', 'commands:read', 'commands:write',
                 'facts:read', 'facts:write', 'conversations:read', 'conversations:write']::pg_catalog.text[]
$$;

CREATE OR REPLACE FUNCTION cscp._http_no_store(body jsonb) RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{"Cache-Control": "no-store"}'::pg_catalog.jsonb, $1)::cscp.http_response
$$;

CREATE OR REPLACE FUNCTION cscp._http_failure(sqlstate text, message text, detail text DEFAULT NULL)
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

CREATE OR REPLACE FUNCTION cscp.http_document_key(session_id text, namespace text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.replace(pg_catalog.replace($1, '%', '%25'), ':', '%3A') OPERATOR(pg_catalog.||) ':'
        OPERATOR(pg_catalog.||) pg_catalog.replace(pg_catalog.replace($2, '%', '%25'), ':', '%3A')
$$;

CREATE OR REPLACE FUNCTION cscp._http_decision(outcome text, command_id uuid, context_id uuid)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ROW(200, '{}'::pg_catalog.jsonb,
               pg_catalog.jsonb_build_object('outcome', $1, 'commandId', $2, 'contextId', $3))::cscp.http_response
$$;

CREATE OR REPLACE FUNCTION cscp._http_command_of(tenant_id text, command_id uuid) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.command c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2)
$$;

CREATE OR REPLACE FUNCTION cscp._http_conversation_of(tenant_id text, conversation_id text) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT FROM cscp.conversation c
                    WHERE c.tenant_id OPERATOR(pg_catalog.=) $1
                      AND c.conversation_id OPERATOR(pg_catalog.=) $2)
$$;

ALTER FUNCTION cscp.evidence_problems(text, uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.conversation_export(text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.retention_floor(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.shard_misplaced() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.session_state(text, text) SET search_path = pg_catalog, pg_temp;

-- ==== tenancy
-- tenancy (issue 39): ids are keyed per tenant, so a lookup by id alone is held to the
-- session's tenant (cscp.tenant_id) for a role that row-level security does not bind too, such
-- as the owner behind the gateway.  The C functions (command_transition, command_recover,
-- slot_set, context_transition) changed in the library alone; command_status, which is SQL,
-- takes its final body in the authority section below.

-- A policy's default lifetimes stay within its max_ttl (policy.c, lifetime.c).  Only writes are
-- judged: a stored policy that already breaks the rule is refused at its next change, and
-- cscp.check_invariants' view of rows is unchanged.
CREATE FUNCTION cscp.policy_lifetimes() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_policy_lifetimes' LANGUAGE C;
COMMENT ON FUNCTION cscp.policy_lifetimes() IS
  'Trigger: refuses (22023) a policy whose context_ttl, confirmation_ttl or approval_ttl in force exceeds its max_ttl (for the defaults, any tenant''s)';
CREATE TRIGGER policy_lifetimes AFTER INSERT OR UPDATE ON cscp.policy
    FOR EACH ROW EXECUTE FUNCTION cscp.policy_lifetimes();

-- Row counts checked (27000 when a trigger or rule skips a write cscp needs): the C writes
-- changed in the library alone; fact_write is PL/pgSQL.
CREATE OR REPLACE FUNCTION cscp.fact_write(tenant_id text, subject_id text, fact_id text, key text, value jsonb,
                                source jsonb DEFAULT '{"type": "conversation"}', supersedes text DEFAULT NULL,
                                scope text DEFAULT 'global', scope_id text DEFAULT NULL,
                                depends_on text[] DEFAULT '{}', is_constraint boolean DEFAULT false,
                                constraint_type text DEFAULT NULL, memory_type text DEFAULT NULL)
RETURNS cscp.fact
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_scope cscp.fact_scope;
    v_id text := fact_write.fact_id;
    v_target text;
    v_candidates text[];
    v_by_key text;
    v_row cscp.fact;
BEGIN
    PERFORM cscp.check_tenant(fact_write.tenant_id);
    PERFORM cscp.check_id('subject_id', fact_write.subject_id);
    IF v_id IS NULL THEN
        v_id := 'f-' || pg_catalog.gen_random_uuid();
    ELSE
        PERFORM cscp.check_id('fact_id', v_id);
    END IF;
    -- The other arguments.
    PERFORM cscp.check_id('key', fact_write.key);
    IF fact_write.value IS NULL THEN
        RAISE EXCEPTION 'value must not be null'
            USING ERRCODE = '22023', HINT = 'Pass a JSON value; JSON null (''null''::jsonb) is a value.';
    END IF;
    IF fact_write.source IS NULL OR jsonb_typeof(fact_write.source) <> 'object' OR jsonb_typeof(fact_write.source -> 'type') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'source must be a JSON object with a string "type"'
            USING ERRCODE = '22023',
                  DETAIL = format('The source given is %s.', coalesce(fact_write.source::text, 'null')),
                  HINT = 'Pass a source such as ''{"type": "user", "authority": "employee"}''.';
    END IF;
    IF fact_write.source ? 'authority' AND jsonb_typeof(fact_write.source -> 'authority') <> 'string' THEN
        RAISE EXCEPTION 'source authority must be a string'
            USING ERRCODE = '22023', DETAIL = format('The source given is %s.', fact_write.source),
                  HINT = 'Name an authority registered with cscp.authority_set, such as "employee".';
    END IF;
    IF (fact_write.source ? 'turn_index' AND jsonb_typeof(fact_write.source -> 'turn_index') <> 'number')
       OR (fact_write.source ? 'event_index' AND jsonb_typeof(fact_write.source -> 'event_index') <> 'number') THEN
        RAISE EXCEPTION 'source turn_index and event_index must be numbers'
            USING ERRCODE = '22023', DETAIL = format('The source given is %s.', fact_write.source);
    END IF;
    IF fact_write.scope IS NULL OR fact_write.scope NOT IN ('global', 'task', 'hypothetical', 'draft', 'session') THEN
        RAISE EXCEPTION 'unknown scope "%"', coalesce(fact_write.scope, 'null')
            USING ERRCODE = '22023',
                  HINT = 'Use one of global, task, hypothetical, draft, session.';
    END IF;
    IF fact_write.scope IN ('task', 'session') AND fact_write.scope_id IS NULL THEN
        RAISE EXCEPTION 'a % fact needs a scope_id', fact_write.scope
            USING ERRCODE = '22023', HINT = format('Pass the id of the %s the fact holds in.', fact_write.scope);
    END IF;
    IF fact_write.scope = 'global' AND fact_write.scope_id IS NOT NULL THEN
        RAISE EXCEPTION 'a global fact has no scope_id'
            USING ERRCODE = '22023', HINT = 'Pass scope_id NULL, or use scope task or session.';
    END IF;
    IF fact_write.scope_id IS NOT NULL THEN
        PERFORM cscp.check_id('scope_id', fact_write.scope_id);
    END IF;
    IF fact_write.depends_on IS NULL THEN
        RAISE EXCEPTION 'depends_on must not be null'
            USING ERRCODE = '22023', HINT = 'Pass ''{}'' for a fact that depends on nothing.';
    END IF;
    IF array_ndims(fact_write.depends_on) > 1 OR array_position(fact_write.depends_on, NULL) IS NOT NULL
       OR array_position(fact_write.depends_on, '') IS NOT NULL THEN
        RAISE EXCEPTION 'depends_on must be a one-dimensional array of fact ids'
            USING ERRCODE = '22023', DETAIL = format('The depends_on given is %s.', fact_write.depends_on),
                  HINT = 'Pass the ids of the facts this one was derived from, such as ''{f-1,f-2}''.';
    END IF;
    IF fact_write.is_constraint IS NULL THEN
        RAISE EXCEPTION 'is_constraint must not be null'
            USING ERRCODE = '22023', HINT = 'Pass true or false.';
    END IF;
    IF fact_write.constraint_type IS NOT NULL AND NOT fact_write.is_constraint THEN
        RAISE EXCEPTION 'constraint_type is only for constraints'
            USING ERRCODE = '22023', HINT = 'Pass is_constraint => true, or constraint_type NULL.';
    END IF;
    IF fact_write.memory_type IS NOT NULL AND fact_write.memory_type NOT IN ('user', 'capability', 'organizational') THEN
        RAISE EXCEPTION 'unknown memory type "%"', fact_write.memory_type
            USING ERRCODE = '22023',
                  HINT = 'Use one of user, capability, organizational, or NULL to classify from the source.';
    END IF;
    v_scope := fact_write.scope::cscp.fact_scope;

    -- What this fact supersedes: a fact id, else the one valid fact with that key in this scope;
    -- with supersede_same_key, a write without supersedes replaces the valid fact of its own key.
    IF fact_write.supersedes IS NOT NULL THEN
        PERFORM cscp.check_id('supersedes', fact_write.supersedes);
        SELECT f.fact_id INTO v_target FROM cscp.fact f
         WHERE f.tenant_id = fact_write.tenant_id AND f.subject_id = fact_write.subject_id
           AND f.fact_id = fact_write.supersedes;
        IF NOT FOUND THEN
            v_by_key := fact_write.supersedes;
        END IF;
    ELSIF coalesce((cscp.policy_effective(fact_write.tenant_id) ->> 'supersede_same_key')::boolean, false) THEN
        v_by_key := fact_write.key;
    END IF;

    IF v_by_key IS NOT NULL THEN
        -- Writers by key queue on the key: two first writes of a key under supersede_same_key
        -- would otherwise both find no valid fact and leave two (after which every write by
        -- that key is refused), and the second of two replacements would find its candidate
        -- superseded (55000).  Locks: the key (advisory, 64 bits of its SHA-256, so that no
        -- tenant can choose keys whose lock another tenant waits on), then the fact superseded
        -- (trigger).
        PERFORM pg_catalog.pg_advisory_xact_lock(('x' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(
                    pg_catalog.convert_to(concat_ws(chr(1), 'fact', fact_write.tenant_id,
                                                    fact_write.subject_id, v_by_key, v_scope::text,
                                                    fact_write.scope_id), 'UTF8')), 'hex'), 16))::bit(64)::bigint);
        SELECT array_agg(f.fact_id ORDER BY f.fact_id COLLATE "C") INTO v_candidates FROM cscp.fact f
         WHERE f.tenant_id = fact_write.tenant_id AND f.subject_id = fact_write.subject_id
           AND f.key = v_by_key AND f.is_valid
           AND f.scope = v_scope AND f.scope_id IS NOT DISTINCT FROM fact_write.scope_id;
        IF cardinality(v_candidates) > 1 THEN
            RAISE EXCEPTION 'key "%" names % valid facts', v_by_key, cardinality(v_candidates)
                USING ERRCODE = '22023',
                      DETAIL = format('Subject "%s" has valid facts %s with key "%s" in scope %s.',
                                      fact_write.subject_id, array_to_string(v_candidates, ', '),
                                      v_by_key, v_scope),
                      HINT = 'Name the fact to supersede by its id.';
        ELSIF v_candidates IS NOT NULL THEN
            v_target := v_candidates[1];
        ELSIF fact_write.supersedes IS NOT NULL THEN
            RAISE EXCEPTION 'no fact to supersede: "%" is neither a fact id nor the key of a valid fact', v_by_key
                USING ERRCODE = '22023',
                      DETAIL = format('Subject "%s" has no fact with that id and no valid fact with that key in scope %s.',
                                      fact_write.subject_id, v_scope),
                      HINT = 'Check the id or key, and the scope; pass supersedes NULL for a fact that replaces nothing.';
        END IF;
    END IF;

    -- The trigger resolves the authority, locks and checks the fact superseded (42501 when the
    -- writer ranks below it, 55000 when it was superseded meanwhile) and links the chain.
    INSERT INTO cscp.fact AS f (tenant_id, subject_id, fact_id, key, value, source, supersedes,
                                memory_type, scope, scope_id, depends_on, is_constraint,
                                constraint_type)
    VALUES (fact_write.tenant_id, fact_write.subject_id, v_id, fact_write.key, fact_write.value,
            fact_write.source, v_target, fact_write.memory_type::cscp.memory_type, v_scope,
            fact_write.scope_id, fact_write.depends_on, fact_write.is_constraint,
            fact_write.constraint_type)
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write fact "%": the write was skipped', v_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN v_row;
END
$$;

-- As the install script leaves them (security.sql): PL/pgSQL functions resolve names in
-- pg_catalog only, and nothing of cscp's is PUBLIC's.
ALTER FUNCTION cscp.command_status(uuid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION cscp.fact_write(text, text, text, text, jsonb, jsonb, text, text, text, text[], boolean, text, text)
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION cscp.policy_lifetimes() FROM PUBLIC;

-- ==== input rules

-- 30-input: minimal data in contexts.  Two policy keys, slot_max_length and
-- slot_refuse_card_numbers, with their defaults in tenant '*' (a key the
-- owner already set there is kept).  Their checks are C (slots.c,
-- context_fsm.c); rows stored before are checked only when they change.
UPDATE cscp.policy
   SET settings = '{"slot_max_length": 256, "slot_refuse_card_numbers": true}'::jsonb OPERATOR(pg_catalog.||) settings
 WHERE tenant_id OPERATOR(pg_catalog.=) '*';

-- A turn whose validation would spend more than its work budget (54000, jsonschema.c) answers
-- 422 validation_too_costly over HTTP, not 500.
CREATE OR REPLACE FUNCTION cscp._http_turn_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'validation_error', $2, $1, $3)
                WHEN $1 OPERATOR(pg_catalog.=) '54000' THEN cscp._http_error(422, 'validation_too_costly', $2, $1, $3)
                ELSE cscp._http_failure($1, $2, $3) END
$$;
COMMENT ON FUNCTION cscp._http_turn_failure(text, text, text) IS
  'Internal: the HTTP response to an error of a conversation call (22xxx: 400 validation_error, 54000: 422 validation_too_costly, else as cscp._http_failure)';

-- ==== authority, recovery, snapshots
-- authority from the writer (cscp.authority_bind, API keys' authority, the setting
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

-- ==== evidence head, API key cache
-- judge: the head of each command's evidence chain kept in the command's row (src/command/evidence.c,
-- src/command/command_fsm.c), so that a transition appends its evidence without reading the chain.
ALTER TABLE cscp.command
    ADD COLUMN evidence_seq int NOT NULL DEFAULT 0,
    ADD COLUMN evidence_hash text;
COMMENT ON COLUMN cscp.command.evidence_seq IS
  'seq of the evidence row of the command''s last transition (0: none yet), after which its next transition appends; kept by the command trigger';
COMMENT ON COLUMN cscp.command.evidence_hash IS
  'hash of the evidence row of the command''s last transition; kept by the command trigger';
-- Existing chains stay as they are.  A command written before carries the head 0 until its next
-- transition, which finds its chain past that head, reads the chain's last row once and stores it.

-- judge: each backend keeps the API keys it has checked (src/document/http_api.c) until this trigger's
-- relcache invalidation, sent on every change of cscp.api_key but a key's last use.
CREATE TRIGGER api_key_changed
    AFTER INSERT OR UPDATE OF tenant_id, label, key_hash, scopes, created_at, expires_at, revoked_at
          OR DELETE OR TRUNCATE ON cscp.api_key
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();

-- ==== LangGraph checkpoints, store, sessions
-- 60-clients: LangGraph's checkpoints and store, agent sessions (src/sql/checkpoint.sql), the
-- policy key checkpoint_ttl, their row-level security, grants and dump settings; forget_conversation
-- and the sweep reach them (C).  The tables and functions, as checkpoint.sql creates them:
-- Threads: one row per (tenant, thread id), the parent of everything a thread holds.
CREATE TABLE cscp.checkpoint_thread (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    thread_id   text        NOT NULL CHECK (thread_id <> ''),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, thread_id)
);
COMMENT ON TABLE cscp.checkpoint_thread IS
  'LangGraph threads per tenant: gone for every read once expires_at (the tenant''s checkpoint_ttl after the last write) has passed';
CREATE INDEX checkpoint_thread_expiry_idx ON cscp.checkpoint_thread (expires_at);

-- Checkpoints, without their channel values (see cscp.checkpoint_blob).
CREATE TABLE cscp.checkpoint (
    tenant_id             text        NOT NULL,
    thread_id             text        NOT NULL,
    checkpoint_ns         text        COLLATE "C" NOT NULL,
    checkpoint_id         text        COLLATE "C" NOT NULL CHECK (checkpoint_id <> ''),
    parent_checkpoint_id  text        COLLATE "C",
    checkpoint            jsonb       NOT NULL CHECK (pg_catalog.jsonb_typeof(checkpoint) = 'object'
                                                      AND NOT checkpoint ? 'channel_values'),
    metadata              jsonb       NOT NULL DEFAULT '{}' CHECK (pg_catalog.jsonb_typeof(metadata) = 'object'),
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE
);
COMMENT ON TABLE cscp.checkpoint IS
  'LangGraph checkpoints per (tenant, thread, namespace, id), their channel values in cscp.checkpoint_blob';

-- A channel's value at one version, shared by every checkpoint of the thread that names it.
CREATE TABLE cscp.checkpoint_blob (
    tenant_id      text  NOT NULL,
    thread_id      text  NOT NULL,
    checkpoint_ns  text  COLLATE "C" NOT NULL,
    channel        text  NOT NULL,
    version        text  NOT NULL,
    type           text  NOT NULL,
    blob           bytea,
    base           text,
    depth          integer NOT NULL DEFAULT 0 CHECK (depth BETWEEN 0 AND 256),
    digest         bytea,
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, channel, version),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE,
    CHECK ((base IS NULL) = (depth = 0)),
    CHECK (base IS NULL OR (type = 'json' AND blob IS NOT NULL AND digest IS NOT NULL))
);
COMMENT ON TABLE cscp.checkpoint_blob IS
  'Channel values of LangGraph checkpoints per (tenant, thread, namespace, channel, version), as the client serialised them (type ''empty'': no value); with a base, the JSON array of the elements that follow those of version base';
COMMENT ON COLUMN cscp.checkpoint_blob.base IS
  'NULL: blob is the whole value; else the version of the same channel whose JSON array this value extends by the elements of blob (a JSON array)';
COMMENT ON COLUMN cscp.checkpoint_blob.depth IS
  'How many rows reading the value joins beyond this one: 0 for a whole value, the base''s depth + 1 for an extension';
COMMENT ON COLUMN cscp.checkpoint_blob.digest IS
  'SHA-256 of the whole value of a type ''json'' row holding a JSON array (blob), or of its base''s digest followed by blob for an extension: what a client names a base by; NULL for other values, which no extension can follow';

-- Writes of the tasks of a checkpoint's next step, not yet folded into a checkpoint.
CREATE TABLE cscp.checkpoint_write (
    tenant_id      text     NOT NULL,
    thread_id      text     NOT NULL,
    checkpoint_ns  text     COLLATE "C" NOT NULL,
    checkpoint_id  text     COLLATE "C" NOT NULL,
    task_id        text     COLLATE "C" NOT NULL,
    idx            integer  NOT NULL,
    channel        text     NOT NULL,
    type           text     NOT NULL,
    blob           bytea,
    task_path      text     COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx),
    FOREIGN KEY (tenant_id, thread_id) REFERENCES cscp.checkpoint_thread ON DELETE CASCADE
);
COMMENT ON TABLE cscp.checkpoint_write IS
  'Pending writes of LangGraph checkpoints per (tenant, thread, namespace, checkpoint, task, index), read in (task_path, task_id, idx) order';

-- Erasing a conversation erases the thread of the same id; no forgotten id starts one again.
CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_thread
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'thread_id');

-- Scale-out (shard.sql): a thread and all it holds live on the node of (tenant, thread id), where
-- the proxy sends its calls; the shard guard refuses (55000) a row of it written on another.
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_thread
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_blob
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, thread_id ON cscp.checkpoint_write
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'thread_id');

-- Raise 22023 with the argument's name unless value is a usable id ('' allowed when empty_ok).
CREATE FUNCTION cscp.checkpoint_check_ns(checkpoint_ns text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF checkpoint_ns IS NULL OR octet_length(checkpoint_ns) > 256 THEN
        RAISE EXCEPTION 'checkpoint_ns must be a string of at most 256 bytes'
            USING ERRCODE = '22023', HINT = 'Pass '''' for the root namespace.';
    END IF;
    RETURN checkpoint_ns;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_check_ns(text) IS
  'checkpoint_ns when it is a usable checkpoint namespace (a string of at most 256 bytes, '''' the root); 22023 otherwise';

-- Start a thread or extend its life; an expired one is deleted first, so it starts empty.
CREATE OR REPLACE FUNCTION cscp.checkpoint_touch(tenant_id text, thread_id text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
    v_expires timestamptz;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_touch.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_touch.thread_id);
    v_ttl := cscp.check_lifetime(cscp.policy_effective(checkpoint_touch.tenant_id), NULL,
                                 'checkpoint_ttl', 'checkpoint_ttl');
    -- A live thread extended within the last 1% of its TTL is left as it is: no row version, no
    -- WAL, no index entry per write of a busy thread.
    SELECT t.expires_at INTO v_expires FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_touch.tenant_id AND t.thread_id = checkpoint_touch.thread_id;
    IF v_expires > v_now AND v_expires >= v_now + v_ttl - v_ttl / 100 THEN
        RETURN v_expires;
    END IF;
    DELETE FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_touch.tenant_id AND t.thread_id = checkpoint_touch.thread_id
       AND t.expires_at <= v_now;
    INSERT INTO cscp.checkpoint_thread AS t (tenant_id, thread_id, created_at, updated_at, expires_at)
    VALUES (checkpoint_touch.tenant_id, checkpoint_touch.thread_id, v_now, v_now, v_now + v_ttl)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE
        SET updated_at = v_now, expires_at = excluded.expires_at
    RETURNING t.expires_at INTO v_expires;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write checkpoint thread "%": the write was skipped', checkpoint_touch.thread_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN v_expires;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_touch(text, text) IS
  'Start a thread, or extend it to the tenant''s checkpoint_ttl from now unless it was within the last 1% of it (an expired one starts empty); returns its expires_at';

-- Its statements keep one generic plan each (plan_cache_mode): a custom plan per call, fitted to
-- the arrays' lengths, cost more to make than the statement took to run.
CREATE OR REPLACE FUNCTION cscp.checkpoint_put(tenant_id text, thread_id text, checkpoint_ns text,
                                    checkpoint_id text, parent_checkpoint_id text,
                                    checkpoint jsonb, metadata jsonb,
                                    channels text[] DEFAULT '{}', versions text[] DEFAULT '{}',
                                    types text[] DEFAULT '{}', blobs bytea[] DEFAULT '{}',
                                    bases text[] DEFAULT NULL, base_digests bytea[] DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_expires timestamptz;
    v_channel text;
    v_base text;
    v_depth integer;
    v_written bigint;
    v_same boolean;
    -- Stored without channel_values, and without its id when that is checkpoint_id (a read puts
    -- it back from the column).
    v_checkpoint jsonb := checkpoint_put.checkpoint - 'channel_values'
                          - CASE WHEN checkpoint_put.checkpoint ->> 'id' = checkpoint_put.checkpoint_id
                                 THEN 'id' ELSE '' END;
    r record;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_put.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_put.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_put.checkpoint_ns);
    PERFORM cscp.check_id('checkpoint_id', checkpoint_put.checkpoint_id);
    IF checkpoint_put.parent_checkpoint_id IS NOT NULL THEN
        PERFORM cscp.check_id('parent_checkpoint_id', checkpoint_put.parent_checkpoint_id);
    END IF;
    IF checkpoint_put.checkpoint IS NULL OR jsonb_typeof(checkpoint_put.checkpoint) <> 'object' THEN
        RAISE EXCEPTION 'checkpoint must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass the checkpoint without its channel values, which go in blobs.';
    END IF;
    IF checkpoint_put.metadata IS NOT NULL AND jsonb_typeof(checkpoint_put.metadata) <> 'object' THEN
        RAISE EXCEPTION 'metadata must be a JSON object'
            USING ERRCODE = '22023';
    END IF;
    IF channels IS NULL OR versions IS NULL OR types IS NULL OR blobs IS NULL
       OR cardinality(channels) <> cardinality(versions) OR cardinality(channels) <> cardinality(types)
       OR cardinality(channels) <> cardinality(blobs)
       OR array_position(channels, NULL) IS NOT NULL OR array_position(versions, NULL) IS NOT NULL
       OR array_position(types, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'channels, versions, types and blobs must be arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each describes the value of one changed channel; only blobs may hold nulls.',
                  HINT = 'Pass empty arrays when no channel changed.';
    END IF;
    IF (bases IS NULL) <> (base_digests IS NULL)
       OR (bases IS NOT NULL AND (cardinality(bases) <> cardinality(channels)
                                  OR cardinality(base_digests) <> cardinality(channels))) THEN
        RAISE EXCEPTION 'bases and base_digests must both be NULL or arrays as long as channels'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each, when not null, says that blobs[i] holds only the elements that follow those of version bases[i] of channels[i], whose digest is base_digests[i].';
    END IF;
    IF bases IS NOT NULL THEN
        SELECT u.c INTO v_channel
          FROM unnest(channels, types, blobs, bases, base_digests) AS u (c, t, b, base, d)
         WHERE (u.base IS NULL) <> (u.d IS NULL)
            OR (u.base IS NOT NULL AND (u.t <> 'json' OR u.b IS NULL OR octet_length(u.b) < 2
                                        OR get_byte(u.b, 0) <> 91 OR get_byte(u.b, octet_length(u.b) - 1) <> 93))
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the extension of channel "%" must be a JSON array of type json with a base and its digest', v_channel
                USING ERRCODE = '22023',
                      DETAIL = 'A value stored as an extension of a base version holds, as a JSON array, the elements that follow the base''s.';
        END IF;
    END IF;

    v_expires := cscp.checkpoint_touch(checkpoint_put.tenant_id, checkpoint_put.thread_id);
    IF bases IS NOT NULL THEN
        -- An extension names its base by version and digest: a base stored under that version
        -- with another value (a fork that reused the version number, a thread deleted and
        -- written again) is not the value the client extended, and it must send the whole one.
        SELECT u.c, u.base, p.depth INTO v_channel, v_base, v_depth
          FROM unnest(channels, bases, base_digests) AS u (c, base, d)
          LEFT JOIN LATERAL (
               SELECT p.digest, p.depth FROM cscp.checkpoint_blob p
                WHERE p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
                  AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c
                  AND p.version = u.base LIMIT 1) p ON true
         WHERE u.base IS NOT NULL AND (p.digest IS DISTINCT FROM u.d OR p.depth >= 256)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'version "%" of channel "%" is not stored as the base named', v_base, v_channel
                USING ERRCODE = '55000',
                      DETAIL = CASE WHEN v_depth >= 256 THEN 'The base already extends 256 others.'
                                    ELSE 'No value of that version with that digest is stored in the thread.' END,
                      HINT = 'Send the whole value of the channel instead.';
        END IF;
    END IF;
    -- Only the channels that changed: a version already stored keeps its value.  A channel
    -- changed to no value ('empty', never read) at a version with a part of its own (a '.' in
    -- it, as CscpSaver and LangGraph's Python savers make them) is not stored: no other value
    -- can come under that version, and a checkpoint naming a version no row holds reads the
    -- channel as empty.  At a version that only counts it is stored, so that a fork giving the
    -- channel a value at the same version is refused (below).
    INSERT INTO cscp.checkpoint_blob AS b (tenant_id, thread_id, checkpoint_ns, channel, version, type, blob,
                                           base, depth, digest)
    SELECT checkpoint_put.tenant_id, checkpoint_put.thread_id, checkpoint_put.checkpoint_ns, u.c, u.v, u.t, u.b,
           u.base, coalesce(p.depth + 1, 0),
           CASE WHEN u.base IS NOT NULL THEN sha256(p.digest || u.b)
                WHEN u.t = 'json' AND octet_length(u.b) >= 2 AND get_byte(u.b, 0) = 91 THEN sha256(u.b) END
      FROM unnest(channels, versions, types, blobs,
                  coalesce(bases, array_fill(NULL::text, ARRAY[cardinality(channels)]))) AS u (c, v, t, b, base)
      LEFT JOIN LATERAL (
           SELECT p.digest, p.depth FROM cscp.checkpoint_blob p
            WHERE p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
              AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c
              AND p.version = u.base LIMIT 1) p ON true
     WHERE u.t <> 'empty' OR strpos(u.v, '.') = 0
    ON CONFLICT (tenant_id, thread_id, checkpoint_ns, channel, version) DO NOTHING;
    GET DIAGNOSTICS v_written = ROW_COUNT;
    v_written := v_written + (SELECT count(*) FROM unnest(types, versions) AS u (t, v)
                               WHERE u.t = 'empty' AND strpos(u.v, '.') > 0);
    -- A version names one value.  A version already stored (a retry, another writer of the same
    -- checkpoint) must hold the value given: two checkpoints that gave a channel the same version
    -- with different values (forks whose versions only count, previous + 1) would otherwise read
    -- one value, the first stored.  The same list may be stored whole on one side and as an
    -- extension on the other: then the whole values are compared.
    IF v_written < cardinality(channels) THEN
        FOR r IN
            SELECT u.c, u.v, u.t, u.b, u.base, p.type AS p_type
              FROM unnest(channels, versions, types, blobs,
                          coalesce(bases, array_fill(NULL::text, ARRAY[cardinality(channels)]))) AS u (c, v, t, b, base)
              JOIN cscp.checkpoint_blob p
                ON p.tenant_id = checkpoint_put.tenant_id AND p.thread_id = checkpoint_put.thread_id
               AND p.checkpoint_ns = checkpoint_put.checkpoint_ns AND p.channel = u.c AND p.version = u.v
             WHERE p.type IS DISTINCT FROM u.t OR p.base IS DISTINCT FROM u.base OR p.blob IS DISTINCT FROM u.b
        LOOP
            IF r.p_type = r.t AND r.t = 'json' THEN
                -- The whole values of the version stored and of the base given.
                WITH RECURSIVE w (start, blob, base, depth) AS (
                    SELECT y.version, y.blob, y.base, 0 FROM cscp.checkpoint_blob y
                     WHERE y.tenant_id = checkpoint_put.tenant_id AND y.thread_id = checkpoint_put.thread_id
                       AND y.checkpoint_ns = checkpoint_put.checkpoint_ns AND y.channel = r.c
                       AND (y.version = r.v OR y.version = r.base)
                    UNION ALL
                    SELECT w.start, y.blob, y.base, w.depth + 1
                      FROM w JOIN cscp.checkpoint_blob y
                        ON y.tenant_id = checkpoint_put.tenant_id AND y.thread_id = checkpoint_put.thread_id
                       AND y.checkpoint_ns = checkpoint_put.checkpoint_ns AND y.channel = r.c AND y.version = w.base),
                whole (start, value) AS (
                    SELECT w.start,
                           CASE WHEN pg_catalog.count(*) = 1 THEN (pg_catalog.array_agg(w.blob))[1]
                           ELSE '\x5b'::bytea || coalesce(pg_catalog.string_agg(
                                    pg_catalog.substr(w.blob, 2, pg_catalog.octet_length(w.blob) - 2),
                                    '\x2c'::bytea ORDER BY w.depth DESC)
                                    FILTER (WHERE pg_catalog.octet_length(w.blob) > 2), '\x'::bytea)
                                || '\x5d'::bytea END
                      FROM w GROUP BY w.start)
                SELECT true INTO v_same
                  FROM whole s
                  LEFT JOIN whole g ON g.start = r.base
                 WHERE s.start = r.v
                   AND s.value = CASE WHEN r.base IS NULL THEN r.b
                                      WHEN pg_catalog.octet_length(r.b) <= 2 THEN g.value
                                      ELSE pg_catalog.substr(g.value, 1, pg_catalog.octet_length(g.value) - 1)
                                           || '\x2c'::bytea || pg_catalog.substr(r.b, 2) END;
                CONTINUE WHEN FOUND;
            END IF;
            RAISE EXCEPTION 'version "%" of channel "%" is already stored with another value', r.v, r.c
                USING ERRCODE = '23505',
                      DETAIL = format('Two checkpoints of thread "%s" gave the channel the same version with different values: versions that only count (previous + 1) repeat when checkpoints fork from one parent.',
                                      checkpoint_put.thread_id),
                      HINT = 'Give each new version a part of its own, as CscpSaver does ("<counter>.<random>"); a version stored keeps its value.';
        END LOOP;
    END IF;
    -- The checkpoint row: a new one (every write but a retry) is inserted plainly; one already
    -- stored (a retry, another writer of the same checkpoint) takes the values last given.
    -- Plain insertion in a block costs less than ON CONFLICT DO UPDATE's speculative insertion
    -- (32,000 instructions a call) and logs no confirmation record.
    BEGIN
        INSERT INTO cscp.checkpoint AS c (tenant_id, thread_id, checkpoint_ns, checkpoint_id,
                                          parent_checkpoint_id, checkpoint, metadata)
        VALUES (checkpoint_put.tenant_id, checkpoint_put.thread_id, checkpoint_put.checkpoint_ns,
                checkpoint_put.checkpoint_id, checkpoint_put.parent_checkpoint_id,
                v_checkpoint, coalesce(checkpoint_put.metadata, '{}'));
    EXCEPTION WHEN unique_violation THEN
        UPDATE cscp.checkpoint c
           SET parent_checkpoint_id = checkpoint_put.parent_checkpoint_id,
               checkpoint = v_checkpoint, metadata = coalesce(checkpoint_put.metadata, '{}')
         WHERE c.tenant_id = checkpoint_put.tenant_id AND c.thread_id = checkpoint_put.thread_id
           AND c.checkpoint_ns = checkpoint_put.checkpoint_ns AND c.checkpoint_id = checkpoint_put.checkpoint_id;
        IF NOT FOUND THEN
            -- The row stored is not in this transaction's snapshot (REPEATABLE READ), or was
            -- deleted since: as ON CONFLICT DO UPDATE would, fail to serialize.
            RAISE EXCEPTION 'could not serialize access due to concurrent update'
                USING ERRCODE = '40001',
                      DETAIL = format('Checkpoint "%s" of thread "%s" was written or deleted by a transaction this one cannot see.',
                                      checkpoint_put.checkpoint_id, checkpoint_put.thread_id),
                      HINT = 'Retry the transaction.';
        END IF;
    END;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write checkpoint "%": the write was skipped', checkpoint_put.checkpoint_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN v_expires;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_put(text, text, text, text, text, jsonb, jsonb, text[], text[], text[], bytea[], text[], bytea[]) IS
  'Store a LangGraph checkpoint (without channel_values) and the values of the channels that changed (channels[i] at versions[i], serialised as types[i], blobs[i]; with bases[i], blobs[i] is the JSON array of the elements that follow those of version bases[i], whose digest is base_digests[i]); returns the thread''s new expires_at';

CREATE FUNCTION cscp.checkpoint_put_writes(tenant_id text, thread_id text, checkpoint_ns text,
                                           checkpoint_id text, task_id text, task_path text,
                                           channels text[], types text[], blobs bytea[], idxs int[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    n integer;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_put_writes.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_put_writes.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_put_writes.checkpoint_ns);
    PERFORM cscp.check_id('checkpoint_id', checkpoint_put_writes.checkpoint_id);
    PERFORM cscp.check_id('task_id', checkpoint_put_writes.task_id);
    IF channels IS NULL OR types IS NULL OR blobs IS NULL OR idxs IS NULL
       OR cardinality(channels) <> cardinality(types) OR cardinality(channels) <> cardinality(blobs)
       OR cardinality(channels) <> cardinality(idxs)
       OR array_position(channels, NULL) IS NOT NULL OR array_position(types, NULL) IS NOT NULL
       OR array_position(idxs, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'channels, types, blobs and idxs must be arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each describes one write; only blobs may hold nulls.';
    END IF;

    PERFORM cscp.checkpoint_touch(checkpoint_put_writes.tenant_id, checkpoint_put_writes.thread_id);
    -- A regular write (idx >= 0) is written once: a retry leaves the stored row as it is.  A
    -- special one (an error, an interrupt: negative idx) replaces the one before it.
    INSERT INTO cscp.checkpoint_write AS w (tenant_id, thread_id, checkpoint_ns, checkpoint_id,
                                            task_id, idx, channel, type, blob, task_path)
    SELECT checkpoint_put_writes.tenant_id, checkpoint_put_writes.thread_id,
           checkpoint_put_writes.checkpoint_ns, checkpoint_put_writes.checkpoint_id,
           checkpoint_put_writes.task_id, u.i, u.c, u.t, u.b, coalesce(checkpoint_put_writes.task_path, '')
      FROM unnest(channels, types, blobs, idxs) AS u (c, t, b, i)
    ON CONFLICT (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
        SET channel = excluded.channel, type = excluded.type, blob = excluded.blob,
            task_path = excluded.task_path
        WHERE excluded.idx < 0;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_put_writes(text, text, text, text, text, text, text[], text[], bytea[], int[]) IS
  'Store the pending writes of a task against a checkpoint (regular ones once, special ones with a negative idx replaced); returns the number written';

CREATE FUNCTION cscp.checkpoint_list(tenant_id text, thread_id text DEFAULT NULL,
                                     checkpoint_ns text DEFAULT NULL, checkpoint_id text DEFAULT NULL,
                                     before text DEFAULT NULL, filter jsonb DEFAULT NULL,
                                     row_limit integer DEFAULT NULL)
RETURNS TABLE (thread text, ns text, id text, parent_id text, checkpoint jsonb, metadata jsonb,
               blob_channels text[], blob_types text[], blobs bytea[],
               write_task_ids text[], write_channels text[], write_types text[], write_blobs bytea[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(checkpoint_list.tenant_id);
    IF checkpoint_list.thread_id IS NOT NULL THEN
        PERFORM cscp.check_id('thread_id', checkpoint_list.thread_id);
    END IF;
    IF checkpoint_list.checkpoint_ns IS NOT NULL THEN
        PERFORM cscp.checkpoint_check_ns(checkpoint_list.checkpoint_ns);
    END IF;
    IF checkpoint_list.filter IS NOT NULL AND jsonb_typeof(checkpoint_list.filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass the metadata keys and values a checkpoint must have.';
    END IF;
    IF checkpoint_list.row_limit < 0 THEN
        RAISE EXCEPTION 'row_limit must not be negative'
            USING ERRCODE = '22023', HINT = 'Pass NULL for no limit.';
    END IF;
    -- The query names only the filters given (fixed fragments; every value a parameter), so that
    -- each call is planned for them: a thread's newest checkpoint is one backward step of the
    -- primary key, whatever the length of the thread.  Each checkpoint found is read, with its
    -- channel values and pending writes, by cscp.checkpoint_get_tuple.
    RETURN QUERY EXECUTE
       'SELECT g.* FROM (SELECT x.tenant_id, x.thread_id, x.checkpoint_ns, x.checkpoint_id FROM cscp.checkpoint x'
    || '          JOIN cscp.checkpoint_thread t ON t.tenant_id = x.tenant_id AND t.thread_id = x.thread_id'
    || '         WHERE x.tenant_id = $1 AND t.expires_at > cscp.now()'
    || CASE WHEN checkpoint_list.thread_id IS NULL THEN '' ELSE ' AND x.thread_id = $2' END
    || CASE WHEN checkpoint_list.checkpoint_ns IS NULL THEN '' ELSE ' AND x.checkpoint_ns = $3' END
    || CASE WHEN checkpoint_list.checkpoint_id IS NULL THEN '' ELSE ' AND x.checkpoint_id = $4' END
    || CASE WHEN checkpoint_list.before IS NULL THEN '' ELSE ' AND x.checkpoint_id < $5' END
    || CASE WHEN checkpoint_list.filter IS NULL THEN '' ELSE ' AND x.metadata OPERATOR(pg_catalog.@>) $6' END
    || '         ORDER BY x.checkpoint_id DESC, x.thread_id, x.checkpoint_ns'
    || CASE WHEN checkpoint_list.row_limit IS NULL THEN '' ELSE ' LIMIT $7' END
    || '       ) c'
    || ' CROSS JOIN LATERAL cscp.checkpoint_get_tuple(c.tenant_id, c.thread_id, c.checkpoint_ns, c.checkpoint_id) g'
    || ' ORDER BY c.checkpoint_id DESC, c.thread_id, c.checkpoint_ns'
    USING checkpoint_list.tenant_id, checkpoint_list.thread_id, checkpoint_list.checkpoint_ns,
          checkpoint_list.checkpoint_id, checkpoint_list.before, checkpoint_list.filter,
          checkpoint_list.row_limit;
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_list(text, text, text, text, text, jsonb, integer) IS
  'Checkpoints of live threads, newest id first, with the blobs of their channel_versions and their pending writes in (task_path, task_id, idx) order; NULL arguments do not filter';

-- held_channels and held_versions (pairs): the values the caller already holds (a client's cache of
-- the values it wrote or read, which a version names once, see checkpoint_put): such a channel
-- of the checkpoint is returned with its type and a NULL blob, its row found by its whole key but
-- neither its extensions walked nor its bytes sent.
CREATE FUNCTION cscp.checkpoint_get_tuple(tenant_id text, thread_id text, checkpoint_ns text DEFAULT '',
                                          checkpoint_id text DEFAULT NULL,
                                          held_channels text[] DEFAULT NULL, held_versions text[] DEFAULT NULL)
RETURNS TABLE (thread text, ns text, id text, parent_id text, checkpoint jsonb, metadata jsonb,
               blob_channels text[], blob_types text[], blobs bytea[],
               write_task_ids text[], write_channels text[], write_types text[], write_blobs bytea[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_id text COLLATE "C" := checkpoint_get_tuple.checkpoint_id;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_get_tuple.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_get_tuple.thread_id);
    PERFORM cscp.checkpoint_check_ns(checkpoint_get_tuple.checkpoint_ns);
    IF (held_channels IS NULL) <> (held_versions IS NULL)
       OR cardinality(held_channels) <> cardinality(held_versions) THEN
        RAISE EXCEPTION 'held_channels and held_versions must both be NULL or arrays of the same length'
            USING ERRCODE = '22023',
                  DETAIL = 'Element i of each names a value the caller holds: version held_versions[i] of channel held_channels[i].';
    END IF;
    IF v_id IS NULL THEN
        SELECT x.checkpoint_id INTO v_id FROM cscp.checkpoint x
         WHERE x.tenant_id = checkpoint_get_tuple.tenant_id AND x.thread_id = checkpoint_get_tuple.thread_id
           AND x.checkpoint_ns = checkpoint_get_tuple.checkpoint_ns
         ORDER BY x.checkpoint_id DESC
         LIMIT 1;
    END IF;
    -- Static statements, their plans kept for the session: the checkpoint named, or the newest
    -- of the namespace (one backward step of the primary key, whatever the length of the
    -- thread), of a live thread.  A value stored as extensions of a base is the base's JSON
    -- array followed by the elements of each extension, oldest first: its rows (depth 0 the one
    -- named) are found by walking the bases, and joined into one array; each blob is read by its
    -- whole key (LIMIT 1 keeps the planner from hashing all of a thread's blobs to find a few).
    -- A value the caller holds is its row at depth 0 with no blob and no base to walk.
    RETURN QUERY
    SELECT c.thread_id, c.checkpoint_ns::text, c.checkpoint_id::text, c.parent_checkpoint_id::text,
           jsonb_build_object('id', c.checkpoint_id::text) || c.checkpoint, c.metadata,
           b.channels, b.types, b.blobs, w.task_ids, w.channels, w.types, w.blobs
      FROM cscp.checkpoint c
      JOIN cscp.checkpoint_thread t ON t.tenant_id = c.tenant_id AND t.thread_id = c.thread_id
     CROSS JOIN LATERAL (
           WITH RECURSIVE r (channel, type, blob, base, depth) AS (
                SELECT v.channel, y.type, CASE WHEN h.held THEN NULL ELSE y.blob END,
                       CASE WHEN h.held THEN NULL ELSE y.base END, 0
                  FROM jsonb_each_text(c.checkpoint -> 'channel_versions') v (channel, version)
                 CROSS JOIN LATERAL (
                       SELECT y.type, y.blob, y.base FROM cscp.checkpoint_blob y
                        WHERE y.tenant_id = c.tenant_id AND y.thread_id = c.thread_id
                          AND y.checkpoint_ns = c.checkpoint_ns AND y.channel = v.channel
                          AND y.version = v.version AND y.type <> 'empty' LIMIT 1) y
                 CROSS JOIN LATERAL (
                       SELECT EXISTS (SELECT FROM unnest(checkpoint_get_tuple.held_channels,
                                                         checkpoint_get_tuple.held_versions) AS h (c, v)
                                       WHERE h.c = v.channel AND h.v = v.version) AS held) h
                UNION ALL
                SELECT r.channel, y.type, y.blob, y.base, r.depth + 1
                  FROM r CROSS JOIN LATERAL (
                       SELECT y.type, y.blob, y.base FROM cscp.checkpoint_blob y
                        WHERE y.tenant_id = c.tenant_id AND y.thread_id = c.thread_id
                          AND y.checkpoint_ns = c.checkpoint_ns AND y.channel = r.channel
                          AND y.version = r.base LIMIT 1) y)
           SELECT coalesce(array_agg(j.channel ORDER BY j.channel), '{}') AS channels,
                  coalesce(array_agg(j.type ORDER BY j.channel), '{}') AS types,
                  coalesce(array_agg(j.blob ORDER BY j.channel), '{}') AS blobs
             FROM (SELECT r.channel, (array_agg(r.type ORDER BY r.depth))[1] AS type,
                          CASE WHEN count(*) = 1 THEN (array_agg(r.blob))[1]
                          ELSE '\x5b'::bytea || coalesce(string_agg(
                                   substr(r.blob, 2, octet_length(r.blob) - 2),
                                   '\x2c'::bytea ORDER BY r.depth DESC)
                                   FILTER (WHERE octet_length(r.blob) > 2), '\x'::bytea)
                               || '\x5d'::bytea END AS blob
                     FROM r GROUP BY r.channel) j) b
     CROSS JOIN LATERAL (
           SELECT coalesce(array_agg(z.task_id::text ORDER BY z.task_path, z.task_id, z.idx), '{}') AS task_ids,
                  coalesce(array_agg(z.channel ORDER BY z.task_path, z.task_id, z.idx), '{}') AS channels,
                  coalesce(array_agg(z.type ORDER BY z.task_path, z.task_id, z.idx), '{}') AS types,
                  coalesce(array_agg(z.blob ORDER BY z.task_path, z.task_id, z.idx), '{}') AS blobs
             FROM cscp.checkpoint_write z
            WHERE z.tenant_id = c.tenant_id AND z.thread_id = c.thread_id
              AND z.checkpoint_ns = c.checkpoint_ns AND z.checkpoint_id = c.checkpoint_id) w
     WHERE c.tenant_id = checkpoint_get_tuple.tenant_id AND c.thread_id = checkpoint_get_tuple.thread_id
       AND c.checkpoint_ns = checkpoint_get_tuple.checkpoint_ns
       AND c.checkpoint_id = v_id AND t.expires_at > cscp.now();
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_get_tuple(text, text, text, text, text[], text[]) IS
  'One checkpoint of a live thread as cscp.checkpoint_list returns it: the one named, or the newest of the namespace; a channel at a version the caller holds (held_channels, held_versions) comes with a NULL blob';

CREATE FUNCTION cscp.checkpoint_delete_thread(tenant_id text, thread_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_live boolean;
BEGIN
    PERFORM cscp.check_tenant(checkpoint_delete_thread.tenant_id);
    PERFORM cscp.check_id('thread_id', checkpoint_delete_thread.thread_id);
    DELETE FROM cscp.checkpoint_thread t
     WHERE t.tenant_id = checkpoint_delete_thread.tenant_id AND t.thread_id = checkpoint_delete_thread.thread_id
    RETURNING t.expires_at > cscp.now() INTO v_live;
    RETURN coalesce(v_live, false);
END
$$;
COMMENT ON FUNCTION cscp.checkpoint_delete_thread(text, text) IS
  'Delete a thread with every checkpoint, blob and pending write of it; true when a live thread was deleted';

-- LangGraph's store: items of a tenant under a namespace (a path of labels) and a key.
CREATE TABLE cscp.store_item (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    namespace   text[]      NOT NULL CHECK (cardinality(namespace) > 0
                                            AND pg_catalog.array_position(namespace, NULL) IS NULL
                                            AND '' <> ALL (namespace)),
    key         text        NOT NULL CHECK (key <> ''),
    value       jsonb       NOT NULL CHECK (pg_catalog.jsonb_typeof(value) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    ttl         interval,
    expires_at  timestamptz,
    PRIMARY KEY (tenant_id, namespace, key),
    CHECK ((ttl IS NULL) = (expires_at IS NULL))
);
COMMENT ON TABLE cscp.store_item IS
  'LangGraph store items per (tenant, namespace, key); with a ttl, gone once expires_at has passed (reads may push it back by ttl)';
CREATE INDEX store_item_expiry_idx ON cscp.store_item (expires_at) WHERE expires_at IS NOT NULL;

-- Scale-out: a tenant's store lives whole on the node of (tenant, '') (its searches span it).
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id ON cscp.store_item
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', '');

-- Whether a value passes a store filter: per top-level key, equal to the filter's value, or
-- meeting every operator of it ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin).
CREATE FUNCTION cscp.store_filter_match(value jsonb, filter jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
    o record;
    v jsonb;
    ok boolean;
BEGIN
    IF filter IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Pass {"field": value} or {"field": {"$gt": value}}.';
    END IF;
    FOR f IN SELECT e.key, e.value FROM jsonb_each(filter) e LOOP
        v := value -> f.key;
        IF jsonb_typeof(f.value) = 'object' AND f.value <> '{}'
           AND NOT EXISTS (SELECT FROM jsonb_object_keys(f.value) k WHERE k NOT LIKE '$%') THEN
            FOR o IN SELECT e.key, e.value FROM jsonb_each(f.value) e LOOP
                CASE o.key
                WHEN '$eq' THEN
                    IF v IS DISTINCT FROM o.value THEN RETURN false; END IF;
                WHEN '$ne' THEN
                    IF v IS NOT DISTINCT FROM o.value THEN RETURN false; END IF;
                WHEN '$gt', '$gte', '$lt', '$lte' THEN
                    IF v IS NULL OR jsonb_typeof(v) <> jsonb_typeof(o.value)
                       OR jsonb_typeof(v) NOT IN ('number', 'string') THEN
                        RETURN false;
                    END IF;
                    ok := CASE o.key WHEN '$gt' THEN v > o.value WHEN '$gte' THEN v >= o.value
                                     WHEN '$lt' THEN v < o.value ELSE v <= o.value END;
                    IF NOT ok THEN
                        RETURN false;
                    END IF;
                WHEN '$in', '$nin' THEN
                    IF jsonb_typeof(o.value) <> 'array' THEN
                        RAISE EXCEPTION 'operator % takes an array', o.key
                            USING ERRCODE = '22023';
                    END IF;
                    IF (v IS NOT NULL AND EXISTS (SELECT FROM jsonb_array_elements(o.value) a WHERE a = v))
                       <> (o.key = '$in') THEN
                        RETURN false;
                    END IF;
                ELSE
                    RAISE EXCEPTION 'unknown filter operator "%"', o.key
                        USING ERRCODE = '22023',
                              HINT = 'Use $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin.';
                END CASE;
            END LOOP;
        ELSIF v IS DISTINCT FROM f.value THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
COMMENT ON FUNCTION cscp.store_filter_match(jsonb, jsonb) IS
  'Whether a store value passes a filter: per top-level field, equal to the value given or meeting each of its operators ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin)';

-- Whether a namespace starts (or, with from_end, ends) with path, '*' matching any label.
CREATE FUNCTION cscp.store_namespace_match(namespace text[], path text[], from_end boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT path IS NULL
        OR (cardinality(path) <= cardinality(namespace)
            AND NOT EXISTS (SELECT FROM unnest(path) WITH ORDINALITY p (label, i)
                             WHERE p.label <> '*'
                               AND p.label IS DISTINCT FROM namespace[CASE WHEN from_end
                                   THEN cardinality(namespace) - cardinality(path) + p.i
                                   ELSE p.i END]))
$$;
COMMENT ON FUNCTION cscp.store_namespace_match(text[], text[], boolean) IS
  'Whether a namespace starts with path (ends with it when from_end), ''*'' in path matching any label';

-- Raise 22023 unless namespace is a usable store namespace.
CREATE FUNCTION cscp.store_check_namespace(namespace text[], allow_empty boolean DEFAULT false) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF namespace IS NULL OR (cardinality(namespace) = 0 AND NOT allow_empty)
       OR array_position(namespace, NULL) IS NOT NULL OR '' = ANY (namespace)
       OR EXISTS (SELECT FROM unnest(namespace) l WHERE octet_length(l) > 256 OR strpos(l, '.') > 0) THEN
        RAISE EXCEPTION 'namespace must be a non-empty array of labels'
            USING ERRCODE = '22023',
                  DETAIL = 'Each label is a non-empty string of at most 256 bytes without a period.',
                  HINT = 'Pass a path such as {users,u-1,memories}.';
    END IF;
    RETURN namespace;
END
$$;
COMMENT ON FUNCTION cscp.store_check_namespace(text[], boolean) IS
  'namespace when it is a usable store namespace (labels non-empty, at most 256 bytes, without a period); 22023 otherwise';

CREATE OR REPLACE FUNCTION cscp.store_put(tenant_id text, namespace text[], key text, value jsonb,
                               ttl interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
BEGIN
    PERFORM cscp.check_tenant(store_put.tenant_id);
    PERFORM cscp.store_check_namespace(store_put.namespace);
    PERFORM cscp.check_id('key', store_put.key);
    IF store_put.value IS NULL OR jsonb_typeof(store_put.value) <> 'object' THEN
        RAISE EXCEPTION 'value must be a JSON object'
            USING ERRCODE = '22023', HINT = 'Delete an item with cscp.store_delete.';
    END IF;
    IF store_put.ttl IS NOT NULL THEN
        v_ttl := cscp.check_lifetime(cscp.policy_effective(store_put.tenant_id), store_put.ttl,
                                     'checkpoint_ttl', 'ttl');
    END IF;
    INSERT INTO cscp.store_item AS s (tenant_id, namespace, key, value, created_at, updated_at, ttl, expires_at)
    VALUES (store_put.tenant_id, store_put.namespace, store_put.key, store_put.value, v_now, v_now,
            v_ttl, v_now + v_ttl)
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE
        SET value = excluded.value, updated_at = v_now, ttl = excluded.ttl,
            expires_at = excluded.expires_at,
            -- an expired item is replaced, not updated
            created_at = CASE WHEN s.expires_at <= v_now THEN v_now ELSE s.created_at END;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write store item "%": the write was skipped', store_put.key
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.store_put(text, text[], text, jsonb, interval) IS
  'Store (or replace) an item; with ttl (positive, within max_ttl) it expires that long after its last write or refreshing read';

CREATE FUNCTION cscp.store_get(tenant_id text, namespace text[], key text, refresh_ttl boolean DEFAULT true)
RETURNS TABLE (item_namespace text[], item_key text, item_value jsonb, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_hash bigint;
BEGIN
    PERFORM cscp.check_tenant(store_get.tenant_id);
    PERFORM cscp.store_check_namespace(store_get.namespace);
    PERFORM cscp.check_id('key', store_get.key);
    v_hash := hash_array_extended(store_get.namespace, 0);
    IF coalesce(store_get.refresh_ttl, true) THEN
        UPDATE cscp.store_item s SET expires_at = v_now + s.ttl
         WHERE s.tenant_id = store_get.tenant_id AND s.namespace_hash = v_hash
           AND s.namespace = store_get.namespace
           AND s.key = store_get.key AND s.ttl IS NOT NULL AND s.expires_at > v_now;
    END IF;
    RETURN QUERY
    SELECT s.namespace, s.key, s.value, s.created_at, s.updated_at, s.expires_at
      FROM cscp.store_item s
     WHERE s.tenant_id = store_get.tenant_id AND s.namespace_hash = v_hash
       AND s.namespace = store_get.namespace
       AND s.key = store_get.key AND (s.expires_at IS NULL OR s.expires_at > v_now);
END
$$;
COMMENT ON FUNCTION cscp.store_get(text, text[], text, boolean) IS
  'A live store item (none when absent or expired); with refresh_ttl (the default) its TTL starts again';

CREATE FUNCTION cscp.store_search(tenant_id text, namespace_prefix text[] DEFAULT '{}',
                                  filter jsonb DEFAULT NULL, query text DEFAULT NULL,
                                  row_limit integer DEFAULT 10, row_offset integer DEFAULT 0,
                                  refresh_ttl boolean DEFAULT true)
RETURNS TABLE (item_namespace text[], item_key text, item_value jsonb, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, score double precision)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_query tsquery;
BEGIN
    PERFORM cscp.check_tenant(store_search.tenant_id);
    PERFORM cscp.store_check_namespace(coalesce(store_search.namespace_prefix, '{}'), true);
    PERFORM cscp.store_filter_match('{}', store_search.filter);
    IF store_search.row_limit IS NULL OR store_search.row_limit < 0
       OR store_search.row_offset IS NULL OR store_search.row_offset < 0 THEN
        RAISE EXCEPTION 'row_limit and row_offset must not be negative'
            USING ERRCODE = '22023';
    END IF;
    IF store_search.query IS NOT NULL AND store_search.query <> '' THEN
        v_query := websearch_to_tsquery('simple', store_search.query);
    END IF;
    RETURN QUERY
    WITH hit AS (
        SELECT s.tenant_id, s.namespace, s.key,
               CASE WHEN v_query IS NULL THEN NULL
                    ELSE ts_rank(jsonb_to_tsvector('simple', s.value, '["string", "numeric"]'), v_query)::double precision
               END AS score,
               s.namespace_hash
          FROM cscp.store_item s
         WHERE s.tenant_id = store_search.tenant_id
           AND (s.expires_at IS NULL OR s.expires_at > v_now)
           AND s.namespace[1:cardinality(coalesce(store_search.namespace_prefix, '{}'))]
               = coalesce(store_search.namespace_prefix, '{}')
           AND (v_query IS NULL OR jsonb_to_tsvector('simple', s.value, '["string", "numeric"]') @@ v_query)
           AND cscp.store_filter_match(s.value, store_search.filter)
         ORDER BY 4 DESC NULLS LAST, s.updated_at DESC, s.namespace, s.key
         LIMIT store_search.row_limit OFFSET store_search.row_offset),
    refreshed AS (
        UPDATE cscp.store_item s SET expires_at = v_now + s.ttl
          FROM hit h
         WHERE coalesce(store_search.refresh_ttl, true) AND s.ttl IS NOT NULL
           AND s.tenant_id = h.tenant_id AND s.namespace_hash = h.namespace_hash
           AND s.namespace = h.namespace AND s.key = h.key
        RETURNING s.namespace, s.key, s.expires_at)
    SELECT s.namespace, s.key, s.value, s.created_at, s.updated_at,
           coalesce(r.expires_at, s.expires_at), h.score
      FROM hit h
      JOIN cscp.store_item s ON s.tenant_id = h.tenant_id AND s.namespace_hash = h.namespace_hash
                            AND s.namespace = h.namespace AND s.key = h.key
      LEFT JOIN refreshed r ON r.namespace = h.namespace AND r.key = h.key
     ORDER BY h.score DESC NULLS LAST, s.updated_at DESC, s.namespace, s.key;
END
$$;
COMMENT ON FUNCTION cscp.store_search(text, text[], jsonb, text, integer, integer, boolean) IS
  'Live store items under a namespace prefix that pass filter (cscp.store_filter_match) and, with query, match it as a web search (ranked by ts_rank, best first); newest first otherwise';

CREATE FUNCTION cscp.store_delete(tenant_id text, namespace text[], key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_live boolean;
BEGIN
    PERFORM cscp.check_tenant(store_delete.tenant_id);
    PERFORM cscp.store_check_namespace(store_delete.namespace);
    PERFORM cscp.check_id('key', store_delete.key);
    DELETE FROM cscp.store_item s
     WHERE s.tenant_id = store_delete.tenant_id
       AND s.namespace_hash = hash_array_extended(store_delete.namespace, 0)
       AND s.namespace = store_delete.namespace AND s.key = store_delete.key
    RETURNING s.expires_at IS NULL OR s.expires_at > cscp.now() INTO v_live;
    RETURN coalesce(v_live, false);
END
$$;
COMMENT ON FUNCTION cscp.store_delete(text, text[], text) IS
  'Delete a store item; true when a live one was deleted';

CREATE FUNCTION cscp.store_list_namespaces(tenant_id text, prefix text[] DEFAULT NULL,
                                           suffix text[] DEFAULT NULL, max_depth integer DEFAULT NULL,
                                           row_limit integer DEFAULT 100, row_offset integer DEFAULT 0)
RETURNS SETOF text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(store_list_namespaces.tenant_id);
    IF store_list_namespaces.max_depth < 1 THEN
        RAISE EXCEPTION 'max_depth must be at least 1'
            USING ERRCODE = '22023', HINT = 'Pass NULL for namespaces of any depth.';
    END IF;
    IF store_list_namespaces.row_limit IS NULL OR store_list_namespaces.row_limit < 0
       OR store_list_namespaces.row_offset IS NULL OR store_list_namespaces.row_offset < 0 THEN
        RAISE EXCEPTION 'row_limit and row_offset must not be negative'
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT DISTINCT s.namespace[1:coalesce(store_list_namespaces.max_depth, cardinality(s.namespace))]
      FROM cscp.store_item s
     WHERE s.tenant_id = store_list_namespaces.tenant_id
       AND (s.expires_at IS NULL OR s.expires_at > cscp.now())
       AND cscp.store_namespace_match(s.namespace, store_list_namespaces.prefix)
       AND cscp.store_namespace_match(s.namespace, store_list_namespaces.suffix, true)
     ORDER BY 1
     LIMIT store_list_namespaces.row_limit OFFSET store_list_namespaces.row_offset;
END
$$;
COMMENT ON FUNCTION cscp.store_list_namespaces(text, text[], text[], integer, integer, integer) IS
  'The namespaces of live store items matching prefix and suffix (''*'' any label), cut at max_depth, once each, in order';

-- OpenAI Agents sessions: a head row numbering the items, and the items in that order.
CREATE TABLE cscp.agent_session (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    session_id  text        NOT NULL CHECK (session_id <> ''),
    next_seq    bigint      NOT NULL DEFAULT 1 CHECK (next_seq > 0),
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, session_id)
);
COMMENT ON TABLE cscp.agent_session IS
  'Agent sessions (OpenAI Agents SDK) per tenant: the number the next item gets';

CREATE TABLE cscp.session_item (
    tenant_id   text        NOT NULL,
    session_id  text        NOT NULL,
    seq         bigint      NOT NULL,
    item        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES cscp.agent_session ON DELETE CASCADE
);
COMMENT ON TABLE cscp.session_item IS
  'Items of agent sessions in the order they were added';

CREATE TRIGGER forgotten_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.agent_session
    FOR EACH ROW EXECUTE FUNCTION cscp.forgotten_guard('conversation', 'session_id');

-- Scale-out: a session and its items live on the node of (tenant, session id).
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.agent_session
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');
CREATE TRIGGER shard_guard BEFORE INSERT OR UPDATE OF tenant_id, session_id ON cscp.session_item
    FOR EACH ROW EXECUTE FUNCTION cscp.shard_guard('tenant_id', 'session_id');

CREATE OR REPLACE FUNCTION cscp.session_add_items(tenant_id text, session_id text, items jsonb) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    n integer;
    v_written bigint;
    v_first bigint;
BEGIN
    PERFORM cscp.check_tenant(session_add_items.tenant_id);
    PERFORM cscp.check_id('session_id', session_add_items.session_id);
    IF items IS NULL OR jsonb_typeof(items) <> 'array' THEN
        RAISE EXCEPTION 'items must be a JSON array'
            USING ERRCODE = '22023', HINT = 'Pass the items to add, oldest first.';
    END IF;
    n := jsonb_array_length(items);
    IF n = 0 THEN
        RETURN 0;
    END IF;
    -- The head row's lock orders concurrent writers, the first ones of a session included.
    INSERT INTO cscp.agent_session AS s (tenant_id, session_id, next_seq, created_at, updated_at)
    VALUES (session_add_items.tenant_id, session_add_items.session_id, 1 + n, v_now, v_now)
    ON CONFLICT (tenant_id, session_id) DO UPDATE
        SET next_seq = s.next_seq + n, updated_at = v_now
    RETURNING s.next_seq - n INTO v_first;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'could not write session "%": the write was skipped', session_add_items.session_id
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote no row: a trigger, a rule or a row-level security policy on the table suppressed it.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    INSERT INTO cscp.session_item (tenant_id, session_id, seq, item, created_at)
    SELECT session_add_items.tenant_id, session_add_items.session_id, v_first + e.ord - 1, e.value, v_now
      FROM jsonb_array_elements(items) WITH ORDINALITY AS e (value, ord);
    GET DIAGNOSTICS v_written = ROW_COUNT;
    IF v_written <> n THEN
        RAISE EXCEPTION 'could not write the items of session "%": % of % writes were skipped',
                        session_add_items.session_id, n - v_written, n
            USING ERRCODE = '27000',
                  DETAIL = 'The statement wrote fewer rows than items: a trigger, a rule or a row-level security policy on the table suppressed some.',
                  HINT = 'A BEFORE ROW trigger on cscp''s tables must return the row, and no rule or policy may hide cscp''s writes.';
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION cscp.session_add_items(text, text, jsonb) IS
  'Append items (a JSON array) to a session, creating it; atomic under concurrent writers; returns the number added';

CREATE FUNCTION cscp.session_get_items(tenant_id text, session_id text, row_limit integer DEFAULT NULL)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(session_get_items.tenant_id);
    PERFORM cscp.check_id('session_id', session_get_items.session_id);
    IF session_get_items.row_limit < 0 THEN
        RAISE EXCEPTION 'row_limit must not be negative'
            USING ERRCODE = '22023', HINT = 'Pass NULL for every item.';
    END IF;
    RETURN QUERY
    SELECT l.item FROM (
        SELECT i.item, i.seq FROM cscp.session_item i
         WHERE i.tenant_id = session_get_items.tenant_id AND i.session_id = session_get_items.session_id
         ORDER BY i.seq DESC
         LIMIT session_get_items.row_limit) l
     ORDER BY l.seq;
END
$$;
COMMENT ON FUNCTION cscp.session_get_items(text, text, integer) IS
  'A session''s items, oldest first; with row_limit, the latest row_limit of them';

CREATE FUNCTION cscp.session_pop_item(tenant_id text, session_id text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_item jsonb;
BEGIN
    PERFORM cscp.check_tenant(session_pop_item.tenant_id);
    PERFORM cscp.check_id('session_id', session_pop_item.session_id);
    -- The head row's lock: two pops take two items, never the same one.
    PERFORM FROM cscp.agent_session s
      WHERE s.tenant_id = session_pop_item.tenant_id AND s.session_id = session_pop_item.session_id
        FOR UPDATE;
    DELETE FROM cscp.session_item i
     WHERE i.tenant_id = session_pop_item.tenant_id AND i.session_id = session_pop_item.session_id
       AND i.seq = (SELECT max(x.seq) FROM cscp.session_item x
                     WHERE x.tenant_id = session_pop_item.tenant_id
                       AND x.session_id = session_pop_item.session_id)
    RETURNING i.item INTO v_item;
    RETURN v_item;
END
$$;
COMMENT ON FUNCTION cscp.session_pop_item(text, text) IS
  'Remove and return a session''s latest item; NULL when it has none';

CREATE FUNCTION cscp.session_clear(tenant_id text, session_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    n bigint;
BEGIN
    PERFORM cscp.check_tenant(session_clear.tenant_id);
    PERFORM cscp.check_id('session_id', session_clear.session_id);
    DELETE FROM cscp.agent_session s
     WHERE s.tenant_id = session_clear.tenant_id AND s.session_id = session_clear.session_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n > 0;
END
$$;
COMMENT ON FUNCTION cscp.session_clear(text, text) IS
  'Delete a session and all its items; true when there was one';

-- The sweep's part (called by cscp.sweep, src/operations/sweep.c): expired threads (with everything they
-- hold, by cascade) and expired store items, up to batch of each, rows others hold skipped.
CREATE FUNCTION cscp._sweep_checkpoints(batch int, v_now timestamptz,
                                        OUT n_threads bigint, OUT n_store_items bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM cscp.checkpoint_thread d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.checkpoint_thread x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_threads = ROW_COUNT;
    DELETE FROM cscp.store_item d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.store_item x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_store_items = ROW_COUNT;
END
$$;
COMMENT ON FUNCTION cscp._sweep_checkpoints(int, timestamptz) IS
  'Internal: the sweep''s deletion of up to batch expired checkpoint threads (with their checkpoints, blobs and writes) and expired store items';

-- The default of the new policy key (policy.sql); tenants' own policies keep theirs.
UPDATE cscp.policy SET settings = settings || '{"checkpoint_ttl": "30 days"}'
 WHERE tenant_id = '*' AND NOT settings ? 'checkpoint_ttl';

-- Row-level security as security.sql gives every table of tenant data.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['checkpoint_thread', 'checkpoint', 'checkpoint_blob', 'checkpoint_write',
                             'store_item', 'agent_session', 'session_item'] LOOP
        EXECUTE pg_catalog.format('ALTER TABLE cscp.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_isolation ON cscp.%I'
                                  ' USING (tenant_id = cscp.current_tenant())'
                                  ' WITH CHECK (tenant_id = cscp.current_tenant())', t);
    END LOOP;
END
$$;

SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_thread', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_blob', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_write', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.store_item', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.agent_session', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.session_item', '');

COMMENT ON FUNCTION cscp.forget_conversation(text, text) IS
  'Erase every row of a conversation and its session (contexts, frames, commands and their evidence, answers, turns, events, documents, working set, environment, inspections, the LangGraph thread and agent session of the same id) and leave a tombstone; rows erased per table';

-- What an application role is granted, the new tables included (security.sql); the grants section
-- then gives it to the roles granted by 0.1.0.

-- Nothing of cscp's is PUBLIC's (security.sql), the new objects included.
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM PUBLIC;

-- ==== inv: the sweep keeps an answer while its command lives
-- Issue 39 (inv): an answer for a command is purged only once the command is gone, so that the
-- sweep never leaves a confirmed command without the yes that confirmed it (check_invariants,
-- confirmed_without_answer); only the answers' DELETE changed.
CREATE OR REPLACE FUNCTION cscp._sweep_purge(batch int, v_now timestamptz,
                                  OUT n_docs bigint, OUT n_ws bigint, OUT n_purged bigint,
                                  OUT n_commands bigint, OUT n_evidence bigint,
                                  OUT n_conversations bigint, OUT n_turns bigint,
                                  OUT n_events bigint, OUT n_answers bigint, OUT n_frames bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_retired_evidence timestamptz := v_now - cscp.retention_floor('retention_evidence');
    v_retired_turns timestamptz := v_now - cscp.retention_floor('retention_turns');
    n_other bigint;
    r record;
BEGIN
    n_commands := 0;
    n_evidence := 0;
    n_conversations := 0;
    n_turns := 0;
    n_events := 0;
    n_answers := 0;
    n_frames := 0;
    -- Rows naming a command that is gone or out of its window (written with the triggers off)
    -- would hold the head of the queue for good: the owner's sweep drops those that are due.
    IF pg_catalog.has_table_privilege('cscp.command_window', 'DELETE') THEN
        DELETE FROM cscp.command_window w
         WHERE w.ctid = ANY (ARRAY(
                   SELECT d.ctid
                     FROM (SELECT y.ctid,
                                  EXISTS (SELECT FROM cscp.command z
                                           WHERE z.tenant_id = y.tenant_id AND z.command_id = y.command_id
                                             AND z.state IN ('confirmation_required', 'authz_pending')
                                             AND z.window_expires_at = y.window_expires_at) AS present
                             FROM cscp.command_window y
                            WHERE y.window_expires_at <= v_now
                            ORDER BY y.window_expires_at
                            LIMIT batch
                              FOR UPDATE SKIP LOCKED) d
                    WHERE NOT d.present));
    END IF;

    -- Expired documents are deleted.
    DELETE FROM cscp.document d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.document x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_docs = ROW_COUNT;

    -- Expired working-set items are deleted.
    DELETE FROM cscp.working_set w
     WHERE w.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.working_set x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND w.expires_at <= v_now;
    GET DIAGNOSTICS n_ws = ROW_COUNT;

    -- Closed and expired contexts past their tenant's retention are deleted, found through
    -- cscp.context_retired by status and the time they retired; the scan of each status stops at
    -- the shortest retention any policy gives it (cscp.retention_floor), so it reads what is
    -- due and, beyond, only what tenants with a longer retention keep.  The context_unlist
    -- trigger takes each deleted context's row out of cscp.context_retired.
    n_purged := 0;
    FOR r IN
        SELECT k.status, k.key, v_now - cscp.retention_floor(k.key) AS bound
          FROM (VALUES ('expired'::cscp.context_status, 'retention_expired'),
                       ('closed'::cscp.context_status, 'retention_closed')) k (status, key)
    LOOP
        CONTINUE WHEN r.bound IS NULL;
        DELETE FROM cscp.context c
         WHERE c.ctid = ANY (ARRAY(
                   SELECT x.ctid
                     FROM (SELECT y.tenant_id, y.context_id FROM cscp.context_retired y
                            WHERE y.status = r.status AND y.retired_at <= r.bound
                              AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> r.key)::interval <= v_now
                            ORDER BY y.retired_at
                            LIMIT batch) d
                    CROSS JOIN LATERAL (
                          SELECT z.ctid FROM cscp.context z
                           WHERE z.tenant_id = d.tenant_id AND z.context_id = d.context_id
                             AND z.status = r.status
                             FOR UPDATE SKIP LOCKED) x))
           AND c.status = r.status
           AND c.updated_at + (cscp.policy_effective(c.tenant_id) ->> r.key)::interval <= v_now;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_purged := n_purged + n_other;
        -- Rows naming a context that is gone (deleted with the triggers off) would hold the head
        -- of the queue for good: the owner's sweep drops those that are due.
        IF pg_catalog.has_table_privilege('cscp.context_retired', 'DELETE') THEN
            -- (The test for the context is in the select list of the limited scan: one lookup
            -- by primary key per row, never a join the planner could make a scan of the table.)
            DELETE FROM cscp.context_retired w
             WHERE w.ctid = ANY (ARRAY(
                       SELECT d.ctid
                         FROM (SELECT y.ctid,
                                      EXISTS (SELECT FROM cscp.context z
                                               WHERE z.tenant_id = y.tenant_id
                                                 AND z.context_id = y.context_id) AS present
                                 FROM cscp.context_retired y
                                WHERE y.status = r.status AND y.retired_at <= r.bound
                                  AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> r.key)::interval <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
    END LOOP;

    -- Finished commands past their tenant's retention_evidence go with their evidence chain;
    -- then standalone evidence, and answers and frames no command needs any more.  Only a sweep run
    -- by a role that may delete evidence (the owner, a superuser) does this; application roles
    -- may neither delete commands nor evidence, and their sweep leaves them.
    IF pg_catalog.has_table_privilege('cscp.evidence', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.command', 'DELETE') THEN
        -- They are found through cscp.command_retired, by the time they finished; the
        -- command_unlist trigger takes each deleted command's row out of it.
        FOR r IN
            SELECT d.tenant_id, d.command_id
              FROM (SELECT y.tenant_id, y.command_id, y.retired_at FROM cscp.command_retired y
                     WHERE y.retired_at <= v_retired_evidence
                       AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
                     ORDER BY y.retired_at
                     LIMIT batch) d
             CROSS JOIN LATERAL (
                   SELECT FROM cscp.command x
                    WHERE x.tenant_id = d.tenant_id AND x.command_id = d.command_id
                      AND x.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                      AND x.last_transition_at = d.retired_at
                      FOR UPDATE SKIP LOCKED) x
        LOOP
            DELETE FROM cscp.evidence e WHERE e.tenant_id = r.tenant_id AND e.command_id = r.command_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_evidence := n_evidence + n_other;
            DELETE FROM cscp.command x WHERE x.tenant_id = r.tenant_id AND x.command_id = r.command_id;
            n_commands := n_commands + 1;
        END LOOP;
        -- Rows naming a command that is gone (deleted with the triggers off) are dropped once due.
        IF pg_catalog.has_table_privilege('cscp.command_retired', 'DELETE') THEN
            DELETE FROM cscp.command_retired w
             WHERE w.ctid = ANY (ARRAY(
                       SELECT d.ctid
                         FROM (SELECT y.ctid,
                                      EXISTS (SELECT FROM cscp.command z
                                               WHERE z.tenant_id = y.tenant_id
                                                 AND z.command_id = y.command_id) AS present
                                 FROM cscp.command_retired y
                                WHERE y.retired_at <= v_retired_evidence
                                  AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
        DELETE FROM cscp.evidence e
         WHERE e.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.evidence x
                    WHERE x.command_id IS NULL
                      AND x.created_at <= v_retired_evidence
                      AND x.created_at + (cscp.policy_effective(x.tenant_id) ->> 'retention_evidence')::interval <= v_now
                    ORDER BY x.created_at
                    LIMIT batch))
           AND e.command_id IS NULL;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_evidence := n_evidence + n_other;
        -- An answer for a command stays as long as the command: a confirmed command's yes is
        -- the record that it was confirmed (cscp.check_invariants, confirmed_without_answer),
        -- and the command may outlive its answer's retention, unfinished or finished later.
        DELETE FROM cscp.answer a
         WHERE a.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.answer x
                    WHERE x.created_at <= v_retired_evidence
                      AND x.created_at + (cscp.policy_effective(x.tenant_id) ->> 'retention_evidence')::interval <= v_now
                      AND NOT EXISTS (SELECT 1 FROM cscp.command y
                                       WHERE y.tenant_id = x.tenant_id AND y.command_id = x.command_id)
                    ORDER BY x.created_at
                    LIMIT batch))
           AND NOT EXISTS (SELECT 1 FROM cscp.command y
                            WHERE y.tenant_id = a.tenant_id AND y.command_id = a.command_id);
        GET DIAGNOSTICS n_answers = ROW_COUNT;
        DELETE FROM cscp.frame f
         WHERE f.ctid = ANY (ARRAY(
                   SELECT y.ctid FROM cscp.frame y
                    WHERE y.created_at <= v_retired_evidence
                      AND y.created_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
                      AND NOT EXISTS (SELECT 1 FROM cscp.command x
                                       WHERE x.tenant_id = y.tenant_id AND x.frame_id = y.frame_id)
                    ORDER BY y.created_at
                    LIMIT batch))
           AND NOT EXISTS (SELECT 1 FROM cscp.command x
                            WHERE x.tenant_id = f.tenant_id AND x.frame_id = f.frame_id);
        GET DIAGNOSTICS n_frames = ROW_COUNT;
    END IF;

    -- Closed conversations past their tenant's retention_turns go with their turns and events
    -- (by a role that may delete them: the owner, a superuser).
    IF pg_catalog.has_table_privilege('cscp.turn', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.event', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.conversation', 'DELETE') THEN
        FOR r IN
            SELECT c.tenant_id, c.conversation_id FROM cscp.conversation c
             WHERE c.state = 'closed'
               AND c.closed_at <= v_retired_turns
               AND c.closed_at + (cscp.policy_effective(c.tenant_id) ->> 'retention_turns')::interval <= v_now
             ORDER BY c.closed_at
             LIMIT batch
               FOR UPDATE SKIP LOCKED
        LOOP
            DELETE FROM cscp.turn t WHERE t.tenant_id = r.tenant_id AND t.conversation_id = r.conversation_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_turns := n_turns + n_other;
            DELETE FROM cscp.event e WHERE e.tenant_id = r.tenant_id AND e.conversation_id = r.conversation_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_events := n_events + n_other;
            DELETE FROM cscp.conversation c
             WHERE c.tenant_id = r.tenant_id AND c.conversation_id = r.conversation_id;
            n_conversations := n_conversations + 1;
        END LOOP;
    END IF;
END
$$;
-- ==== inv: shard_misplaced hashes each key once
-- Issue 39 (inv): cscp.shard_misplaced counts each table's rows per key and hashes each distinct
-- key once, and reads nothing on a node that holds every partition; no table changes.  Its
-- search_path is now in its definition, with jit off.
CREATE OR REPLACE FUNCTION cscp.shard_misplaced() RETURNS TABLE(table_name text, partition int, row_count bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- One large query, run rarely: compiling it would cost more than running it.
SET jit = off
AS $$
    WITH cfg AS (SELECT s.partition_count AS n, s.partitions FROM cscp.shard s),
    -- The rows of each table per conversation, then per tenant and subject, session or thread key.
    conv AS MATERIALIZED (
        SELECT 'context' AS t, x.conversation_id AS k, count(*) AS c FROM cscp.context x GROUP BY 2
        UNION ALL SELECT 'context_live', x.conversation_id, count(*) FROM cscp.context_live x GROUP BY 2
        UNION ALL SELECT 'context_retired', x.conversation_id, count(*) FROM cscp.context_retired x GROUP BY 2
        UNION ALL SELECT 'command', x.conversation_id, count(*) FROM cscp.command x GROUP BY 2
        UNION ALL SELECT 'command_window', x.conversation_id, count(*) FROM cscp.command_window x GROUP BY 2
        UNION ALL SELECT 'command_retired', x.conversation_id, count(*) FROM cscp.command_retired x GROUP BY 2
        UNION ALL SELECT 'frame', x.conversation_id, count(*) FROM cscp.frame x GROUP BY 2
        UNION ALL SELECT 'answer', x.conversation_id, count(*) FROM cscp.answer x GROUP BY 2
        UNION ALL SELECT 'evidence', x.conversation_id, count(*) FROM cscp.evidence x GROUP BY 2
        UNION ALL SELECT 'conversation', x.conversation_id, count(*) FROM cscp.conversation x GROUP BY 2
        UNION ALL SELECT 'turn', x.conversation_id, count(*) FROM cscp.turn x GROUP BY 2
        UNION ALL SELECT 'event', x.conversation_id, count(*) FROM cscp.event x GROUP BY 2
        UNION ALL SELECT 'inspection_log', x.conversation_id, count(*) FROM cscp.inspection_log x GROUP BY 2
    ),
    keyed AS MATERIALIZED (
        SELECT 'identity' AS t, x.tenant_id AS a, x.subject_id AS k, count(*) AS c FROM cscp.identity x GROUP BY 2, 3
        UNION ALL SELECT 'fact', x.tenant_id, x.subject_id, count(*) FROM cscp.fact x GROUP BY 2, 3
        UNION ALL SELECT 'document', x.tenant_id, x.session_id, count(*) FROM cscp.document x GROUP BY 2, 3
        UNION ALL SELECT 'working_set', x.tenant_id, x.session_id, count(*) FROM cscp.working_set x GROUP BY 2, 3
        UNION ALL SELECT 'environment', x.tenant_id, x.session_id, count(*) FROM cscp.environment x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_thread', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_thread x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_blob', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_blob x GROUP BY 2, 3
        UNION ALL SELECT 'checkpoint_write', x.tenant_id, x.thread_id, count(*) FROM cscp.checkpoint_write x GROUP BY 2, 3
        UNION ALL SELECT 'agent_session', x.tenant_id, x.session_id, count(*) FROM cscp.agent_session x GROUP BY 2, 3
        UNION ALL SELECT 'session_item', x.tenant_id, x.session_id, count(*) FROM cscp.session_item x GROUP BY 2, 3
        -- a tenant's store lives on the node of (tenant, '')
        UNION ALL SELECT 'store_item', x.tenant_id, '', count(*) FROM cscp.store_item x GROUP BY 2
    ),
    -- Each distinct key hashed once (a keyed hash costs microseconds; a conversation has rows in
    -- many tables), kept when its partition is not this node's.
    conv_away AS MATERIALIZED (
        SELECT d.k, p.p
          FROM (SELECT DISTINCT v.k FROM conv v) d, cfg,
               LATERAL (SELECT cscp.routing_conversation_hash(d.k) & (cfg.n - 1) AS p) p
         WHERE NOT p.p = ANY (cfg.partitions)
    ),
    keyed_away AS MATERIALIZED (
        SELECT d.a, d.k, p.p
          FROM (SELECT DISTINCT v.a, v.k FROM keyed v) d, cfg,
               LATERAL (SELECT cscp.routing_key_hash(d.a, d.k) & (cfg.n - 1) AS p) p
         WHERE NOT p.p = ANY (cfg.partitions)
    ),
    h AS (
        SELECT v.t, w.p, v.c FROM conv v JOIN conv_away w ON w.k = v.k
        UNION ALL
        SELECT v.t, w.p, v.c FROM keyed v JOIN keyed_away w ON w.a = v.a AND w.k = v.k
    )
    -- (Nothing is read when this node holds every partition, or is the only one.)
    SELECT h.t, h.p, sum(h.c)::bigint
      FROM h
     WHERE EXISTS (SELECT FROM cfg WHERE cardinality(cfg.partitions) < cfg.n)
     GROUP BY 1, 2
     ORDER BY 1, 2
$$;


-- ==== w1: context usable in SQL
-- "Context usable" (a live status and expires_at ahead) is one SQL function, cscp.context_usable,
-- inlined by the planner; context_get, the gateway's slot endpoint and the operators' view of
-- live contexts use it instead of writing the rule inline.
-- "Context usable" in SQL, beside cscp_context_usable in C (src/shared/enums.c): a live status and an
-- expiry still ahead of the clock given (cscp.now() for a statement of its own).  A SQL function
-- of one expression, not STRICT, so that the planner inlines it into the statement that calls it
-- (no call at run time; a partial index on the live statuses still matches); its body is parsed
-- once, here, so it means the same whatever the caller's search_path.
CREATE FUNCTION cscp.context_usable(status cscp.context_status, expires_at timestamptz,
                                    as_of timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN status OPERATOR(pg_catalog.=) ANY ('{active,pending,blocked}'::cscp.context_status[])
   AND expires_at OPERATOR(pg_catalog.>) as_of;
COMMENT ON FUNCTION cscp.context_usable(cscp.context_status, timestamptz, timestamptz) IS
  'Whether a context of this status and expires_at is usable at the time given: a live status (active, pending, blocked) and expires_at later';

CREATE OR REPLACE FUNCTION cscp.context_get(tenant_id text, conversation_id text, actor_id text)
RETURNS SETOF cscp.context
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    c cscp.context;
BEGIN
    PERFORM cscp.check_tenant(context_get.tenant_id);
    PERFORM cscp.check_id('conversation_id', context_get.conversation_id);
    PERFORM cscp.check_id('actor_id', context_get.actor_id);
    SELECT * INTO c FROM cscp.context x
     WHERE x.tenant_id = context_get.tenant_id
       AND x.conversation_id = context_get.conversation_id
       AND x.actor_id = context_get.actor_id
     ORDER BY x.status IN ('active', 'pending', 'blocked') DESC, x.created_at DESC, x.version DESC
     LIMIT 1;
    IF FOUND THEN
        -- As readers see it: the effective status (expired once past expires_at), visible slots.
        IF c.status IN ('active', 'pending', 'blocked')
           AND NOT cscp.context_usable(c.status, c.expires_at, cscp.now()) THEN
            c.status := 'expired';
        END IF;
        c.slots := cscp.slots_visible(c.tenant_id, c.slots);
        RETURN NEXT c;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION cscp._http_slot(tenant_id text, conversation_id text, actor_id text, slot text, value jsonb)
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

CREATE OR REPLACE VIEW cscp._active_context WITH (security_barrier) AS
SELECT c.tenant_id,
       c.context_id,
       c.conversation_id,
       cscp._redact_actor(c.actor_id, d.level) AS actor,
       CASE WHEN cscp.context_usable(c.status, c.expires_at, cscp.now()) THEN c.status
            ELSE 'expired'::cscp.context_status END AS status,
       c.created_at,
       c.updated_at,
       c.expires_at,
       c.version,
       d.level AS detail_level,
       cscp._redact_slots(c.slots, d.level) AS slots,
       -- The intent is a name the application chose ("cancel_order"), shown from summary up;
       -- a derived (hashed) intent shows as such.
       CASE WHEN d.level = 'none' OR NOT c.slots ? 'active_intent' THEN NULL
            WHEN jsonb_typeof(c.slots -> 'active_intent') = 'string' THEN c.slots ->> 'active_intent'
            WHEN c.slots -> 'active_intent' ? 'derived' THEN '[derived]'
            ELSE '[' || jsonb_typeof(c.slots -> 'active_intent') || ']' END AS intent,
       -- The target never shows: at full, a short digest to tell two targets apart.
       CASE WHEN d.level = 'none' OR NOT c.slots ? 'active_target' THEN NULL
            WHEN d.level = 'full' THEN cscp._pseudonym((c.slots -> 'active_target')::text)
            ELSE '[redacted]' END AS target,
       coalesce(jsonb_typeof(c.slots -> 'pending_confirmation') = 'object', false)
           AND cscp.context_usable(c.status, c.expires_at, cscp.now()) AS confirmation_pending,
       coalesce(jsonb_typeof(c.slots -> 'pending_approval') = 'object', false)
           AND cscp.context_usable(c.status, c.expires_at, cscp.now()) AS approval_pending,
       m.state AS last_command_state
  FROM cscp.context_live l
  JOIN cscp.context c ON c.tenant_id = l.tenant_id AND c.context_id = l.context_id
  CROSS JOIN LATERAL (
       SELECT coalesce(cscp.policy_effective(c.tenant_id) ->> 'detail_level', 'summary') AS level) d
  LEFT JOIN cscp.command m ON m.tenant_id = c.tenant_id AND m.command_id = c.last_command_id
 WHERE c.status IN ('active', 'pending', 'blocked');

-- ==== cost2: the command registry's declarations cached per backend
-- registry.c reads each (tenant, command name) once per backend; this trigger drops the caches
-- when the registry changes.
CREATE TRIGGER command_registry_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.command_registry
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
ALTER TABLE cscp.command_registry ENABLE ALWAYS TRIGGER command_registry_changed;

-- ==== cmdstep: a command's frame is checked once, when the command is inserted
-- 0.2.0 checks the frame a command names when the command is inserted, in every state, and a
-- step of a stored command no longer reads the frame again (its columns never change, a frame
-- never does).  0.1.0 checked it at the insert only for a command born confirmation_required: a
-- command it let in received or canonicalized (by direct SQL) naming a frame that is not its
-- context's as command_submit records it could never go forward; it is rejected here, through
-- the command trigger (its evidence records the step), with reason snapshot_mismatch.
UPDATE cscp.command m
   SET state = 'rejected', reason_code = 'snapshot_mismatch'
 WHERE m.state IN ('received', 'canonicalized') AND m.frame_id IS NOT NULL
   AND NOT EXISTS (
       SELECT 1 FROM cscp.frame f
        WHERE f.tenant_id = m.tenant_id AND f.frame_id = m.frame_id
          AND f.conversation_id = m.conversation_id AND f.context_id = m.context_id
          AND m.context_ref ->> 'frame_id' = m.frame_id::text
          AND m.context_ref ->> 'context_id' = m.context_id::text
          AND m.context_ref ->> 'context_hash' = f.context_hash
          AND f.state ->> 'tenant_id' = m.tenant_id
          AND f.state ->> 'conversation_id' = m.conversation_id
          AND f.state ->> 'actor_id' = m.actor_id
          AND CASE WHEN pg_catalog.jsonb_typeof(f.state -> 'message_ids') = 'array'
                   THEN f.state -> 'message_ids'
                        = pg_catalog.to_jsonb(m.message_ids[1:pg_catalog.jsonb_array_length(f.state -> 'message_ids')])
                   ELSE false END);

-- ==== window and retired lists found by command
-- The trigger takes a command's row out of cscp.command_window (a window answered or closed) or
-- cscp.command_retired (a finished command compensated) by time, tenant and command; indexed by
-- the time alone, the rows of every command asked or finished at that same time (one statement,
-- one transaction) were read for each, or the whole table.
DROP INDEX cscp.command_window_idx;
CREATE INDEX command_window_idx ON cscp.command_window (window_expires_at, tenant_id, command_id);
DROP INDEX cscp.command_retired_idx;
CREATE INDEX command_retired_idx ON cscp.command_retired (retired_at, tenant_id, command_id);

-- ==== ckpt: store items found by their key under row-level security
-- (store_get, store_delete and store_search, whose bodies the LangGraph section above holds,
-- compare namespace_hash before namespace.)
ALTER TABLE cscp.store_item
    ADD COLUMN namespace_hash bigint NOT NULL GENERATED ALWAYS AS (pg_catalog.hash_array_extended(namespace, 0)) STORED;
COMMENT ON COLUMN cscp.store_item.namespace_hash IS
  'hash_array_extended(namespace, 0): how a read finds an item under row-level security (store_item_lookup_idx)';
CREATE INDEX store_item_lookup_idx ON cscp.store_item (tenant_id, namespace_hash, key);

-- ==== exchange: an event's id written by cscp, not computed in every INSERT
-- cscp.event is written only by cscp's C code, as its owner: the id (conversation_id:e<seq>) is
-- written by the INSERT, and the seq is the conversation's counter, which conversation_guard keeps
-- non-negative.  The generated column and the CHECK constraint were re-planned in every INSERT of
-- an event.  The ids stored stay as they are (the expression dropped keeps the values).
ALTER TABLE cscp.event ALTER COLUMN event_id DROP EXPRESSION;
ALTER TABLE cscp.event DROP CONSTRAINT event_seq_check;

-- ==== promise: a step believes its context live without reading it
-- A step that needs a live context (to confirmed, authz_pending, authorized, started) reads the
-- context once and keeps its expires_at in the command's row; every end of the context (or an
-- earlier expires_at) takes the promise back from the commands that could still step forward
-- (src/context/context_fsm.c).  Commands written before carry none: their next such step reads
-- the context, as every step did.
ALTER TABLE cscp.command ADD COLUMN context_live_until timestamptz;
COMMENT ON COLUMN cscp.command.context_live_until IS
  'Until when the command''s context is live at least (NULL: not known): set by the step that reads the context, lowered or taken away on every command that could still step forward when the context ends or its end comes nearer; an UPDATE may only lower it';

-- ==== tombstones known to every backend
-- A database that has forgotten anything looked up cscp.tombstone in every guarded row write (a
-- context, frame, command, answer, turn, event...), about 33,000 instructions each.  Every backend
-- now keeps the keys of the tombstones (src/operations/forget.c) and looks up only an id whose key
-- is among them; a change of the table drops the caches, also during a restore.
CREATE TRIGGER tombstone_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.tombstone
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
ALTER TABLE cscp.tombstone ENABLE ALWAYS TRIGGER tombstone_changed;

-- ==== no migration logic in the install script
-- No migration logic in the install script: cscp._grant_app_privileges no longer speaks of
-- roles granted by earlier versions (it takes back what a role was granted by hand beyond the
-- API, whatever granted it); only its comments changed.
CREATE OR REPLACE FUNCTION cscp._grant_app_privileges(r regrole) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.context, cscp.document, cscp.policy TO %s', r);
    -- Which context is live, and when each retired, is written by the context triggers as their owner.
    EXECUTE format('GRANT SELECT ON cscp.context_live, cscp.context_retired TO %s', r);
    -- Commands change only by transitions (no DELETE); frames are written once; answers are
    -- read-only: cscp.confirm and cscp.approve write them as their owner (a yes confirms a
    -- command only with its answer recorded, so no role below the owner may forge one); a
    -- role granted more by hand loses INSERT on them.  Evidence is read-only: the trigger and
    -- cscp._evidence_refusal write it as its owner.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.command TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.command_window, cscp.command_retired TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT ON cscp.frame TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.answer TO %s', r);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON cscp.answer FROM %s', r);
    EXECUTE format('GRANT SELECT ON cscp.evidence TO %s', r);
    -- Conversations change only through their turns (the triggers see to it; UPDATE is needed
    -- for the row lock every append takes); turns are written once; events are read-only.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.conversation TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT ON cscp.turn TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.event TO %s', r);
    -- Facts are replaced, not deleted, by the application; identities are replaced, not deleted.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.fact, cscp.identity TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.authority, cscp.working_set, '
                   'cscp.environment TO %s', r);
    -- LangGraph's checkpoints and store, agent sessions (checkpoint.sql): the application's own.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.checkpoint_thread, cscp.checkpoint, '
                   'cscp.checkpoint_blob, cscp.checkpoint_write, cscp.store_item, cscp.agent_session, '
                   'cscp.session_item TO %s', r);
    -- The command registry, like the policy (registry.sql); its governance log is not the app's.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.command_registry TO %s', r);
    -- The public API only: no internal (_-prefixed) function, which an application could
    -- otherwise call with arguments cscp never passes, and no trigger function.  A role
    -- granted more by hand (GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA cscp) loses the
    -- internal ones.
    EXECUTE (SELECT format('GRANT EXECUTE ON FUNCTION %s TO %s', string_agg(p.oid::regprocedure::text, ', '), r)
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname !~ '^(_|http_)'
                AND p.prorettype <> 'pg_catalog.trigger'::regtype);
    -- Nor the gateway's endpoints (cscp.grant_gateway's): a key passed to them would act for its
    -- tenant whatever tenants the role is bound to.
    EXECUTE (SELECT format('REVOKE EXECUTE ON FUNCTION %s FROM %s', string_agg(p.oid::regprocedure::text, ', '), r)
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^(_|http_)');
    -- Administration and operator inspection are not the application's.
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.grant_app(name, text[]), cscp.grant_operator(name, text[]), '
                   'cscp.revoke_app(name), cscp.revoke_operator(name), cscp.grant_gateway(name), '
                   'cscp.api_key_create(text, text, text[], timestamptz, text), cscp.api_key_revoke(text, text), '
                   'cscp.authority_bind(text, name, text), '
                   'cscp.show_active_context(text, text), cscp.inspect_active_context(text, text), '
                   'cscp.inspect_command_lifecycle(text, text), cscp.check_invariants(text) FROM %s', r);
    -- Nor a shard's place in a scale-out deployment (shard.sql).
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.shard_set(int, int[]), cscp.shard_misplaced() FROM %s', r);
END
$$;

-- ==== fuzz findings
-- fuzz: check_invariants does not judge a cancel recovery by its context (moved_after_context_ended),
-- as the state machine does not (context_ended in src/command/command_fsm.c).
CREATE OR REPLACE FUNCTION cscp._check_invariants(tenant_id text DEFAULT NULL)
RETURNS TABLE(kind text, tenant_id text, object_id text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- One large query, run rarely: compiling it would cost more than running it.
SET jit = off
AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN cscp._id('tenant_id', $1) END;
    WITH
    -- More than one live context for one (tenant, conversation, actor).
    live AS (
        SELECT 'multiple_live_contexts'::text AS kind, c.tenant_id, c.conversation_id AS object_id,
               format('%s live contexts for actor %s: %s', count(*), cscp._pseudonym(c.actor_id),
                      string_agg(c.context_id::text || ' (' || c.status || ')', ', '
                                 ORDER BY c.created_at, c.context_id)) AS detail
          FROM cscp.context c
         WHERE c.status IN ('active', 'pending', 'blocked') AND ($1 IS NULL OR c.tenant_id = $1)
         GROUP BY c.tenant_id, c.conversation_id, c.actor_id
        HAVING count(*) > 1
    ),
    -- cscp.context_live out of step with the contexts: a live context it does not name, or a row
    -- of it naming a context that is not live (or with an expires_at after the context's).
    unlisted AS (
        SELECT 'unlisted_live_context'::text AS kind, c.tenant_id, c.context_id::text AS object_id,
               format('context is %s, but cscp.context_live names %s for its conversation and actor',
                      c.status, coalesce(l.context_id::text, 'none')) AS detail
          FROM cscp.context c
          LEFT JOIN cscp.context_live l
                 ON l.tenant_id = c.tenant_id AND l.conversation_id = c.conversation_id
                AND l.actor_id = c.actor_id
         WHERE c.status IN ('active', 'pending', 'blocked') AND ($1 IS NULL OR c.tenant_id = $1)
           AND l.context_id IS DISTINCT FROM c.context_id
        UNION ALL
        SELECT 'unlisted_live_context', l.tenant_id, l.context_id::text,
               CASE WHEN c.context_id IS NULL THEN 'cscp.context_live names a context that does not exist'
                    WHEN c.status NOT IN ('active', 'pending', 'blocked')
                    THEN format('cscp.context_live names a context that is %s', c.status)
                    ELSE 'cscp.context_live expects it later than the context does' END
          FROM cscp.context_live l
          LEFT JOIN cscp.context c ON c.tenant_id = l.tenant_id AND c.context_id = l.context_id
         WHERE ($1 IS NULL OR l.tenant_id = $1)
           AND (c.context_id IS NULL OR c.status NOT IN ('active', 'pending', 'blocked')
                OR c.conversation_id <> l.conversation_id OR c.actor_id <> l.actor_id
                OR l.expires_at > c.expires_at)
    ),
    -- cscp.context_retired out of step with the contexts: a retired context without its row (with
    -- the context's status and updated_at), or a row naming no such retired context.
    unretired AS (
        SELECT 'unlisted_retired_context'::text AS kind, c.tenant_id, c.context_id::text AS object_id,
               format('context is %s since %s, but cscp.context_retired has no row for it',
                      c.status, c.updated_at) AS detail
          FROM cscp.context c
         WHERE c.status IN ('expired', 'closed') AND ($1 IS NULL OR c.tenant_id = $1)
           AND NOT EXISTS (SELECT FROM cscp.context_retired r
                            WHERE r.tenant_id = c.tenant_id AND r.context_id = c.context_id
                              AND r.status = c.status AND r.retired_at = c.updated_at)
        UNION ALL
        SELECT 'unlisted_retired_context', r.tenant_id, r.context_id::text,
               CASE WHEN c.context_id IS NULL THEN 'cscp.context_retired names a context that does not exist'
                    ELSE format('cscp.context_retired has it %s since %s, the context is %s since %s',
                                r.status, r.retired_at, c.status, c.updated_at) END
          FROM cscp.context_retired r
          LEFT JOIN cscp.context c ON c.tenant_id = r.tenant_id AND c.context_id = r.context_id
         WHERE ($1 IS NULL OR r.tenant_id = $1)
           AND (c.context_id IS NULL OR c.status <> r.status OR c.updated_at <> r.retired_at
                OR c.conversation_id <> r.conversation_id)
    ),
    -- cscp.command_window and cscp.command_retired out of step with the commands: an open window
    -- or a finished command without its row (with the window's end, or the last transition's
    -- time), or a row naming a command that does not exist or differs.
    windows AS (
        SELECT 'unlisted_command'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               CASE WHEN m.state IN ('confirmation_required', 'authz_pending')
                    THEN format('command is %s until %s, but cscp.command_window has no row for it',
                                m.state, m.window_expires_at)
                    ELSE format('command is %s since %s, but cscp.command_retired has no row for it',
                                m.state, m.last_transition_at) END AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND CASE WHEN m.state IN ('confirmation_required', 'authz_pending')
                    THEN m.window_expires_at IS NOT NULL
                         AND NOT EXISTS (SELECT FROM cscp.command_window w
                                          WHERE w.tenant_id = m.tenant_id AND w.command_id = m.command_id
                                            AND w.window_expires_at = m.window_expires_at)
                    WHEN m.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                    THEN NOT EXISTS (SELECT FROM cscp.command_retired r
                                      WHERE r.tenant_id = m.tenant_id AND r.command_id = m.command_id
                                        AND r.retired_at = m.last_transition_at)
                    ELSE false END
        UNION ALL
        SELECT 'unlisted_command', w.tenant_id, w.command_id::text,
               CASE WHEN m.command_id IS NULL THEN 'cscp.command_window names a command that does not exist'
                    ELSE format('cscp.command_window has its window open until %s, the command is %s%s',
                                w.window_expires_at, m.state,
                                CASE WHEN m.window_expires_at IS NULL THEN ' with no window'
                                     ELSE ' until ' || m.window_expires_at END) END
          FROM cscp.command_window w
          LEFT JOIN cscp.command m ON m.tenant_id = w.tenant_id AND m.command_id = w.command_id
         WHERE ($1 IS NULL OR w.tenant_id = $1)
           AND (m.command_id IS NULL OR m.state NOT IN ('confirmation_required', 'authz_pending')
                OR m.window_expires_at IS DISTINCT FROM w.window_expires_at
                OR m.conversation_id <> w.conversation_id
                OR m.context_id IS DISTINCT FROM w.context_id
                OR w.question <> CASE WHEN m.state = 'confirmation_required' THEN 'confirmation'
                                      ELSE 'approval' END)
        UNION ALL
        SELECT 'unlisted_command', r.tenant_id, r.command_id::text,
               CASE WHEN m.command_id IS NULL THEN 'cscp.command_retired names a command that does not exist'
                    ELSE format('cscp.command_retired has it finished at %s, the command is %s since %s',
                                r.retired_at, m.state, m.last_transition_at) END
          FROM cscp.command_retired r
          LEFT JOIN cscp.command m ON m.tenant_id = r.tenant_id AND m.command_id = r.command_id
         WHERE ($1 IS NULL OR r.tenant_id = $1)
           AND (m.command_id IS NULL
                OR m.state NOT IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                OR m.last_transition_at <> r.retired_at OR m.conversation_id <> r.conversation_id)
    ),
    -- The evidence verifier's findings: a command whose state is not where its chain ends, or a
    -- chain that is broken (a row altered, missing or re-linked).
    verified AS (
        SELECT CASE WHEN p.problem LIKE 'chain ends in state %' THEN 'unexplained_command_state'
                    ELSE 'broken_evidence_chain' END AS kind,
               p.tenant_id,
               coalesce(p.command_id::text, 'evidence:' || p.evidence_id) AS object_id,
               p.problem || CASE WHEN p.evidence_id IS NOT NULL
                                 THEN format(' (seq %s, evidence_id %s)', p.seq, p.evidence_id)
                                 ELSE '' END AS detail
          FROM cscp.evidence_problems($1, NULL) p
    ),
    -- A chain of transitions the lifecycle does not allow: each transition must start where the
    -- one before it ended (the first from received) and be an edge of the transition table.
    steps AS (
        SELECT e.tenant_id, e.command_id, e.seq, e.from_state, e.to_state,
               lag(e.to_state) OVER (PARTITION BY e.tenant_id, e.command_id ORDER BY e.seq) AS prev_to
          FROM cscp.evidence e
         WHERE e.command_id IS NOT NULL AND e.event_type <> 'invalid_transition_attempt'
           AND ($1 IS NULL OR e.tenant_id = $1)
    ),
    labels AS (
        SELECT pg_catalog.enum_range(NULL::cscp.command_state)::text[] AS names
    ),
    paths AS (
        SELECT 'unexplained_command_state'::text AS kind, s.tenant_id, s.command_id::text AS object_id,
               format('evidence seq %s records %s -> %s, which %s', s.seq,
                      coalesce(s.from_state, 'nothing'), coalesce(s.to_state, 'nothing'),
                      CASE WHEN s.from_state IS DISTINCT FROM coalesce(s.prev_to, 'received')
                           THEN format('does not follow the state before it (%s)',
                                       coalesce(s.prev_to, 'received'))
                           ELSE 'the command lifecycle does not allow' END) AS detail
          FROM steps s, labels l
         WHERE s.from_state IS DISTINCT FROM coalesce(s.prev_to, 'received')
            OR NOT CASE WHEN s.from_state = ANY (l.names) AND s.to_state = ANY (l.names)
                        THEN cscp.command_transition_allowed(s.from_state::cscp.command_state,
                                                             s.to_state::cscp.command_state)
                        ELSE false END
    ),
    -- Commands that reached started: a mutating one passed confirmed (or was auto-confirmed by a
    -- policy its acceptance records), and every one passed authorized, by its row and by its
    -- evidence.
    begun AS (
        SELECT m.tenant_id, m.command_id, m.state, m.mutating, m.auto_confirm,
               m.confirmed_at, m.authorized_at,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type <> 'invalid_transition_attempt'
                          AND e.to_state = 'confirmed') AS confirmed_evidence,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type <> 'invalid_transition_attempt'
                          AND e.to_state = 'authorized') AS authorized_evidence,
               EXISTS (SELECT 1 FROM cscp.evidence e
                        WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                          AND e.event_type = 'command.accepted'
                          AND e.decision = 'auto_confirm') AS auto_confirm_evidence
          FROM cscp.command m
         WHERE m.state IN ('started', 'executed', 'failed', 'compensated')
           AND ($1 IS NULL OR m.tenant_id = $1)
    ),
    starts AS (
        SELECT 'start_without_confirmation'::text AS kind, b.tenant_id, b.command_id::text AS object_id,
               format('mutating command is %s but %s', b.state,
                      CASE WHEN b.auto_confirm THEN 'its acceptance records no auto_confirm policy'
                           WHEN b.confirmed_at IS NULL THEN 'it has no confirmed_at'
                           ELSE 'its evidence records no transition to confirmed' END) AS detail
          FROM begun b
         WHERE b.mutating
           AND CASE WHEN b.auto_confirm THEN NOT b.auto_confirm_evidence
                    ELSE b.confirmed_at IS NULL OR NOT b.confirmed_evidence END
        UNION ALL
        SELECT 'start_without_authorization', b.tenant_id, b.command_id::text,
               format('command is %s but %s', b.state,
                      CASE WHEN b.authorized_at IS NULL THEN 'it has no authorized_at'
                           ELSE 'its evidence records no transition to authorized' END)
          FROM begun b
         WHERE b.authorized_at IS NULL OR NOT b.authorized_evidence
    ),
    -- Turn indexes run 0, 1, ... next_turn_index - 1 without a gap.
    turn_steps AS (
        SELECT t.tenant_id, t.conversation_id, t.turn_index,
               lag(t.turn_index) OVER (PARTITION BY t.tenant_id, t.conversation_id
                                       ORDER BY t.turn_index) AS prev_index
          FROM cscp.turn t
         WHERE $1 IS NULL OR t.tenant_id = $1
    ),
    turn_counts AS (
        SELECT s.tenant_id, s.conversation_id, count(*) AS n, max(s.turn_index) AS last_index,
               string_agg(CASE WHEN s.turn_index <> coalesce(s.prev_index, -1) + 1
                               THEN CASE WHEN s.turn_index - coalesce(s.prev_index, -1) = 2
                                         THEN (s.turn_index - 1)::text
                                         ELSE format('%s..%s', coalesce(s.prev_index, -1) + 1,
                                                     s.turn_index - 1) END END,
                          ', ' ORDER BY s.turn_index) AS holes
          FROM turn_steps s
         GROUP BY s.tenant_id, s.conversation_id
    ),
    gaps AS (
        SELECT 'turn_index_gap'::text AS kind, coalesce(t.tenant_id, c.tenant_id) AS tenant_id,
               coalesce(t.conversation_id, c.conversation_id) AS object_id,
               concat_ws('; ',
                   CASE WHEN t.holes IS NOT NULL THEN 'turns missing at index ' || t.holes END,
                   CASE WHEN c.conversation_id IS NULL THEN 'turns without a conversation row'
                        WHEN coalesce(t.last_index + 1, 0) <> c.next_turn_index
                        THEN format('the conversation''s next turn index is %s but its last turn is %s',
                                    c.next_turn_index, coalesce(t.last_index::text, 'none')) END)
                   AS detail
          FROM turn_counts t
          FULL JOIN (SELECT x.tenant_id, x.conversation_id, x.next_turn_index FROM cscp.conversation x
                      WHERE $1 IS NULL OR x.tenant_id = $1) c
            ON c.tenant_id = t.tenant_id AND c.conversation_id = t.conversation_id
         WHERE t.holes IS NOT NULL
            OR c.conversation_id IS NULL
            OR coalesce(t.last_index + 1, 0) <> c.next_turn_index
    ),
    -- A valid fact is the head of its chain: no valid fact supersedes it.
    heads AS (
        SELECT 'valid_fact_with_valid_successor'::text AS kind, f.tenant_id, f.fact_id AS object_id,
               format('fact of subject %s is valid, and so is fact %s, which supersedes it',
                      f.subject_id, n.fact_id) AS detail
          FROM cscp.fact f
          JOIN cscp.fact n ON n.tenant_id = f.tenant_id AND n.subject_id = f.subject_id
                          AND n.supersedes = f.fact_id
         WHERE f.is_valid AND n.is_valid AND ($1 IS NULL OR f.tenant_id = $1)
    ),
    -- Supersession chains end: walking from each chain's first fact (one that supersedes nothing,
    -- or names a fact that is not there) reaches every fact that is in a chain; a superseding
    -- fact it never reaches is on a loop.
    chained AS MATERIALIZED (
        SELECT f.tenant_id, f.subject_id, f.fact_id, f.supersedes
          FROM cscp.fact f
         WHERE f.supersedes IS NOT NULL AND ($1 IS NULL OR f.tenant_id = $1)
    ),
    reached AS (
        WITH RECURSIVE walk AS (
            SELECT c.tenant_id, c.subject_id, c.fact_id
              FROM chained c
             WHERE NOT EXISTS (SELECT 1 FROM cscp.fact p
                                WHERE p.tenant_id = c.tenant_id AND p.subject_id = c.subject_id
                                  AND p.fact_id = c.supersedes AND p.supersedes IS NOT NULL)
            UNION
            SELECT n.tenant_id, n.subject_id, n.fact_id
              FROM walk w
              JOIN cscp.fact n ON n.tenant_id = w.tenant_id AND n.subject_id = w.subject_id
                              AND n.supersedes = w.fact_id
        )
        SELECT * FROM walk
    ),
    -- (Looked for only when the walk reached fewer facts than there are in chains.)
    looped AS (
        SELECT c.* FROM chained c
         WHERE (SELECT count(*) FROM reached) < (SELECT count(*) FROM chained)
           AND NOT EXISTS (SELECT 1 FROM reached r
                            WHERE r.tenant_id = c.tenant_id AND r.subject_id = c.subject_id
                              AND r.fact_id = c.fact_id)
    ),
    loops AS (
        WITH RECURSIVE round AS (
            SELECT l.tenant_id, l.subject_id, l.fact_id AS start, l.supersedes AS next,
                   ARRAY[l.fact_id] AS path
              FROM looped l
            UNION ALL
            SELECT r.tenant_id, r.subject_id, r.start, l.supersedes, r.path || l.fact_id
              FROM round r
              JOIN looped l ON l.tenant_id = r.tenant_id AND l.subject_id = r.subject_id
                           AND l.fact_id = r.next
             WHERE r.next <> r.start AND l.fact_id <> ALL (r.path)
        )
        SELECT 'cyclic_fact_chain'::text AS kind, r.tenant_id, r.start AS object_id,
               format('the supersession chain of subject %s loops: %s -> %s', r.subject_id,
                      array_to_string(r.path, ' -> '), r.start) AS detail
          FROM round r
         WHERE r.next = r.start
           AND r.start = (SELECT min(x COLLATE "C") FROM unnest(r.path) x)
    ),
    -- A pending_confirmation or pending_approval slot naming a command of another tenant,
    -- conversation, actor or context (a slot naming no command at all is left to confirm, which
    -- answers nothing_pending; finished commands may have been purged before their context).
    slot_names AS (
        SELECT c.tenant_id, c.context_id, c.conversation_id, c.actor_id, s.slot,
               (c.slots -> s.slot ->> 'command_id')::uuid AS named
          FROM cscp.context c,
               (VALUES ('pending_confirmation'), ('pending_approval')) AS s (slot)
         WHERE jsonb_typeof(c.slots -> s.slot) = 'object'
           AND (c.slots -> s.slot ->> 'command_id')
               ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
           AND ($1 IS NULL OR c.tenant_id = $1)
    ),
    pendings AS (
        SELECT 'foreign_pending_slot'::text AS kind, n.tenant_id, n.context_id::text AS object_id,
               format('%s names command %s of %s', n.slot, m.command_id,
                      CASE WHEN m.tenant_id <> n.tenant_id THEN 'another tenant'
                           WHEN m.conversation_id <> n.conversation_id THEN 'another conversation'
                           WHEN m.actor_id <> n.actor_id THEN 'another actor'
                           ELSE 'another context' END) AS detail
          FROM slot_names n
          JOIN cscp.command m ON m.command_id = n.named
         WHERE m.tenant_id <> n.tenant_id OR m.conversation_id <> n.conversation_id
            OR m.actor_id <> n.actor_id OR m.context_id IS DISTINCT FROM n.context_id
    ),
    -- A context asking the same question twice: more than one of its commands waiting for a
    -- confirmation (confirmation_required) or for an approval (authz_pending with a window).
    questions AS (
        SELECT 'multiple_waiting_commands'::text AS kind, m.tenant_id, m.context_id::text AS object_id,
               format('%s commands wait for %s: %s', count(*),
                      CASE WHEN m.state = 'confirmation_required' THEN 'confirmation' ELSE 'approval' END,
                      string_agg(m.command_id::text, ', ' ORDER BY m.command_id)) AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.context_id IS NOT NULL
           AND (m.state = 'confirmation_required'
                OR (m.state = 'authz_pending' AND m.window_expires_at IS NOT NULL))
         GROUP BY m.tenant_id, m.context_id, m.state
        HAVING count(*) > 1
    ),
    -- A command confirmed (by its row or its evidence) with neither a recorded yes for it
    -- (cscp.answer, kind confirm, outcome confirmed) nor an auto_confirm policy its acceptance
    -- records.
    confirmations AS (
        SELECT 'confirmed_without_answer'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               format('command is %s and was confirmed, but no answer confirmed it', m.state) AS detail
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND (m.confirmed_at IS NOT NULL
                OR EXISTS (SELECT 1 FROM cscp.evidence e
                            WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                              AND e.event_type <> 'invalid_transition_attempt'
                              AND e.to_state = 'confirmed'))
           AND NOT EXISTS (SELECT 1 FROM cscp.answer a
                            WHERE a.tenant_id = m.tenant_id AND a.conversation_id = m.conversation_id
                              AND a.kind = 'confirm' AND a.command_id = m.command_id
                              AND a.outcome = 'confirmed')
           AND NOT (m.auto_confirm
                    AND EXISTS (SELECT 1 FROM cscp.evidence e
                                 WHERE e.tenant_id = m.tenant_id AND e.command_id = m.command_id
                                   AND e.event_type = 'command.accepted'
                                   AND e.decision = 'auto_confirm'))
    ),
    -- A step to confirmed, authz_pending, authorized or started taken when the command's context
    -- had ended: at or past its expires_at, or after it was recorded expired or closed (at its
    -- updated_at; a step at that very time, under a pinned clock, may have come first).  A
    -- cancel recovery is not judged by its context (context_ended in src/command/command_fsm.c): a
    -- command is canceled after its context ended too.
    late AS (
        SELECT 'moved_after_context_ended'::text AS kind, m.tenant_id, m.command_id::text AS object_id,
               format('evidence seq %s records %s -> %s at %s; its context %s %s', e.seq,
                      e.from_state, e.to_state, e.created_at, c.context_id,
                      CASE WHEN e.created_at >= c.expires_at
                           THEN format('expired at %s', c.expires_at)
                           ELSE format('was %s at %s', c.status, c.updated_at) END) AS detail
          FROM cscp.command m
          JOIN cscp.context c ON c.tenant_id = m.tenant_id AND c.context_id = m.context_id
          JOIN cscp.evidence e ON e.tenant_id = m.tenant_id AND e.command_id = m.command_id
         WHERE ($1 IS NULL OR m.tenant_id = $1)
           AND m.recovery_kind IS DISTINCT FROM 'cancel'
           AND e.event_type <> 'invalid_transition_attempt'
           AND e.to_state IN ('confirmed', 'authz_pending', 'authorized', 'started')
           AND (e.created_at >= c.expires_at
                OR (c.status IN ('expired', 'closed') AND e.created_at > c.updated_at))
    ),
    -- An expiry that is infinite or later than now + the tenant's max_ttl: contexts, documents
    -- and working-set items.  max_ttl bounds what a write may ask for, so a policy change after
    -- a row's last write (max_ttl lowered) leaves it healthy: such a row is judged by the largest
    -- max_ttl in force since, read from the policy rows cscp.governance_log kept.
    expiries AS (
        SELECT 'cscp.context'::text AS tbl, c.tenant_id, c.context_id::text AS id, c.expires_at,
               c.updated_at AS written_at
          FROM cscp.context c WHERE $1 IS NULL OR c.tenant_id = $1
        UNION ALL
        SELECT 'cscp.document', d.tenant_id, d.session_id || ':' || d.namespace, d.expires_at,
               d.updated_at
          FROM cscp.document d WHERE $1 IS NULL OR d.tenant_id = $1
        UNION ALL
        SELECT 'cscp.working_set', w.tenant_id, w.session_id || ':' || w.key, w.expires_at,
               w.updated_at
          FROM cscp.working_set w WHERE $1 IS NULL OR w.tenant_id = $1
    ),
    max_ttls AS (
        SELECT t.tenant_id,
               coalesce((cscp.policy_effective(t.tenant_id) ->> 'max_ttl')::interval,
                        interval '10 years') AS max_ttl
          FROM (SELECT DISTINCT x.tenant_id FROM expiries x) t
    ),
    lifetimes AS (
        SELECT 'unbounded_expiry'::text AS kind, x.tenant_id, x.id AS object_id,
               format('%s expires at %s, %s', x.tbl, x.expires_at,
                      CASE WHEN NOT isfinite(x.expires_at) THEN 'which is not finite'
                           ELSE format('later than now + max_ttl (%s)', t.max_ttl) END) AS detail
          FROM expiries x JOIN max_ttls t ON t.tenant_id = x.tenant_id
         WHERE NOT isfinite(x.expires_at)
            OR (x.expires_at > cscp.now() + t.max_ttl
                AND x.expires_at > cscp.now() + coalesce(
                    (SELECT max(b.max_ttl)
                       FROM cscp.governance_log g,
                            LATERAL (VALUES ((g.old_value -> 'settings' ->> 'max_ttl')::interval),
                                            ((cscp.policy_effective('*') ->> 'max_ttl')::interval)) b(max_ttl)
                      WHERE g.object = 'policy' AND g.tenant_id IN (x.tenant_id, '*')
                        AND g.changed_at >= x.written_at),
                    t.max_ttl))
    ),
    -- Snapshot-on-execute: a frame whose hash is not its state's; a command whose context_ref
    -- does not match the frame it names (or names a frame that does not exist); a mutating
    -- command that went on from canonicalized without context, frame or message ids.
    frames AS (
        SELECT 'frame_hash_mismatch'::text AS kind, f.tenant_id, f.frame_id::text AS object_id,
               'the frame''s context_hash is not the hash of its state' AS detail
          FROM cscp.frame f
         WHERE ($1 IS NULL OR f.tenant_id = $1)
           AND f.context_hash IS DISTINCT FROM cscp.canonical_hash(f.state)
        UNION ALL
        SELECT 'frame_hash_mismatch', m.tenant_id, m.command_id::text,
               CASE WHEN f.frame_id IS NULL THEN format('command names frame %s, which does not exist', m.frame_id)
                    ELSE format('command''s context_ref does not match its frame %s', m.frame_id) END
          FROM cscp.command m
          LEFT JOIN cscp.frame f ON f.tenant_id = m.tenant_id AND f.frame_id = m.frame_id
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.frame_id IS NOT NULL
           AND (f.frame_id IS NULL
                OR f.conversation_id <> m.conversation_id
                OR f.context_id IS DISTINCT FROM m.context_id
                OR m.context_ref ->> 'frame_id' IS DISTINCT FROM m.frame_id::text
                OR m.context_ref ->> 'context_id' IS DISTINCT FROM m.context_id::text
                OR m.context_ref ->> 'context_hash' IS DISTINCT FROM f.context_hash)
        UNION ALL
        SELECT 'unframed_command', m.tenant_id, m.command_id::text,
               format('mutating command is %s without %s', m.state,
                      concat_ws(', ', CASE WHEN m.context_id IS NULL THEN 'a context' END,
                                CASE WHEN m.frame_id IS NULL THEN 'a frame' END,
                                CASE WHEN coalesce(cardinality(m.message_ids), 0) = 0
                                     THEN 'message ids' END))
          FROM cscp.command m
         WHERE ($1 IS NULL OR m.tenant_id = $1) AND m.mutating
           AND m.state IN ('confirmation_required', 'confirmed', 'authz_pending', 'authorized',
                           'started', 'executed', 'failed', 'compensated')
           AND (m.context_id IS NULL OR m.frame_id IS NULL
                OR coalesce(cardinality(m.message_ids), 0) = 0)
    ),
    -- A recovery aimed at a command of another conversation or actor (or at none), or a
    -- compensation that is not mutating (so it skipped the user's confirmation).
    recoveries AS (
        SELECT 'invalid_recovery'::text AS kind, r.tenant_id, r.command_id::text AS object_id,
               CASE WHEN NOT r.mutating AND r.recovery_kind = 'compensate'
                    THEN 'compensate recovery is not mutating'
                    WHEN t.command_id IS NULL
                    THEN format('%s recovery aims at command %s, which does not exist', r.recovery_kind,
                                r.target_command_id)
                    ELSE format('%s recovery aims at command %s of another conversation or actor',
                                r.recovery_kind, r.target_command_id) END AS detail
          FROM cscp.command r
          LEFT JOIN cscp.command t ON t.tenant_id = r.tenant_id AND t.command_id = r.target_command_id
         WHERE ($1 IS NULL OR r.tenant_id = $1) AND r.recovery_kind IS NOT NULL
           AND (t.command_id IS NULL OR t.conversation_id <> r.conversation_id
                OR t.actor_id <> r.actor_id
                OR (NOT r.mutating AND r.recovery_kind = 'compensate'))
    ),
    found AS (
        SELECT * FROM live
        UNION ALL SELECT * FROM unlisted
        UNION ALL SELECT * FROM unretired
        UNION ALL SELECT * FROM windows
        UNION ALL SELECT * FROM verified
        UNION ALL SELECT * FROM paths
        UNION ALL SELECT * FROM starts
        UNION ALL SELECT * FROM gaps
        UNION ALL SELECT * FROM heads
        UNION ALL SELECT * FROM loops
        UNION ALL SELECT * FROM pendings
        UNION ALL SELECT * FROM questions
        UNION ALL SELECT * FROM confirmations
        UNION ALL SELECT * FROM late
        UNION ALL SELECT * FROM lifetimes
        UNION ALL SELECT * FROM frames
        UNION ALL SELECT * FROM recoveries
    )
    SELECT f.kind, f.tenant_id, f.object_id, f.detail
      FROM found f
     ORDER BY f.kind, f.tenant_id COLLATE "C", f.object_id COLLATE "C", f.detail COLLATE "C";
$$;

-- fuzz: cscp._http_segment in one aggregate, linear in its input (the loop it replaces
-- appended to a string, a megabyte took minutes).
CREATE OR REPLACE FUNCTION cscp._http_segment(value text) RETURNS text
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

-- ==== grants
-- Last step: what every step above created gets what an install of 0.2.0 gives it.
-- The PL/pgSQL functions (re)created above resolve names in pg_catalog whatever the caller's
-- search_path, as security.sql sets them (CREATE OR REPLACE FUNCTION drops the setting).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proconfig IS NULL
           AND (p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
                OR p.oid IN ('cscp._redact_slots(jsonb, text)'::regprocedure,
                             'cscp.evidence_verify(text, uuid)'::regprocedure))
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$$;

-- Roles granted by 0.1.0 get what 0.2.0 grants them, new functions and tables included, exactly
-- as cscp.grant_app, cscp.grant_operator and cscp.grant_gateway would now.  The gateway's roles
-- are not recorded in cscp.tenant_binding: they are the roles that may execute its endpoints,
-- found before an application role's re-grant takes the endpoints from a role that is both.
-- A binding whose role was dropped (after DROP OWNED) is left as it is.
DO $$
DECLARE
    gateway name[] := ARRAY(
        SELECT DISTINCT r.rolname
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname LIKE 'http\_%' AND p.prosecdef
           AND a.privilege_type = 'EXECUTE' AND r.oid = a.grantee AND a.grantee <> p.proowner
         ORDER BY 1);
    g name;
BEGIN
    PERFORM cscp._grant_app_privileges(b.role)
       FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
      WHERE b.kind = 'app' ORDER BY b.granted_at;
    PERFORM cscp._grant_operator_privileges(b.role)
       FROM cscp.tenant_binding b JOIN pg_catalog.pg_roles r ON r.oid = b.role::oid
      WHERE b.kind = 'operator' ORDER BY b.granted_at;
    FOREACH g IN ARRAY gateway LOOP
        PERFORM cscp.grant_gateway(g);
    END LOOP;
END
$$;

-- As at the end of security.sql: nothing of cscp's is PUBLIC's, what the steps created included.
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM PUBLIC;
