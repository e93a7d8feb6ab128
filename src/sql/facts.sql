-- facts.sql: the state layers of the StateBench state-based context spec (DESIGN section 8):
-- identity, authority ranks, persistent facts with supersession chains, the working set and the
-- environment, and the functions that write them.
--
-- The rules live on the tables: a C trigger on cscp.identity (identity.c) keeps an identity
-- immutable except through an explicit replace that records the version it replaces; C triggers on
-- cscp.fact (facts.c) keep supersession chains well-formed, check authority and propagate repair,
-- whether a row comes from cscp.fact_write or from direct SQL.  Chain walking (fact_current,
-- fact_history) and context assembly (build_context, assemble.c) are C.

CREATE TYPE cscp.fact_scope AS ENUM ('global', 'task', 'hypothetical', 'draft', 'session');
COMMENT ON TYPE cscp.fact_scope IS
  'Where a fact holds: everywhere, in one task or session, or nowhere real (hypothetical, draft)';

CREATE TYPE cscp.memory_type AS ENUM ('user', 'capability', 'organizational');
COMMENT ON TYPE cscp.memory_type IS
  'What a fact is about: the user, what the agent can do, or the organization';

-- Identity: one row per subject, immutable once set; a replace keeps the versions it replaced.
CREATE FUNCTION cscp.identity_check(identity jsonb) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_identity_check' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.identity_check(jsonb) IS
  'Raise 22023 unless identity is an object whose known keys (user_name, user_id, authority, department, organization: strings; permissions: array of strings) have the right types';

CREATE TABLE cscp.identity (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    subject_id  text        NOT NULL CHECK (subject_id <> ''),
    identity    jsonb       NOT NULL CHECK (cscp.identity_check(identity) IS NOT NULL),
    version     int         NOT NULL DEFAULT 1,
    set_at      timestamptz NOT NULL DEFAULT cscp.now(),
    -- Why the current version replaced the one before (NULL for version 1).
    reason      text,
    -- The versions replaced, oldest first: {version, identity, set_at, replaced_at, reason}.
    history     jsonb       NOT NULL DEFAULT '[]',
    PRIMARY KEY (tenant_id, subject_id)
);
COMMENT ON TABLE cscp.identity IS
  'Who a subject is (user_name, authority, department, ...); set once, changed only by cscp.identity_replace, which keeps the old version in history';

CREATE FUNCTION cscp.identity_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_identity_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.identity_guard() IS
  'Trigger: an identity never changes except by a replace that names a reason; the replaced version is appended to history';
CREATE TRIGGER identity_guard BEFORE INSERT OR UPDATE ON cscp.identity
    FOR EACH ROW EXECUTE FUNCTION cscp.identity_guard();

-- Authority ranks: tenant '*' holds the defaults, a tenant adds or re-ranks its own.
CREATE TABLE cscp.authority (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    authority   text        NOT NULL CHECK (authority <> '' AND octet_length(authority) <= 256),
    rank        int         NOT NULL CHECK (rank BETWEEN 1 AND 1000000),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, authority)
);
COMMENT ON TABLE cscp.authority IS
  'Ranks of authorities per tenant (higher outranks lower), over the defaults of tenant ''*''; written with cscp.authority_set';

INSERT INTO cscp.authority (tenant_id, authority, rank) VALUES
    ('*', 'policy', 400), ('*', 'manager', 300), ('*', 'employee', 200), ('*', 'guest', 100);

CREATE FUNCTION cscp.authority_rank(tenant_id text, authority text) RETURNS int
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce((SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) $1 AND a.authority OPERATOR(pg_catalog.=) $2),
                    (SELECT a.rank FROM cscp.authority a
                      WHERE a.tenant_id OPERATOR(pg_catalog.=) '*' AND a.authority OPERATOR(pg_catalog.=) $2))
$$;
COMMENT ON FUNCTION cscp.authority_rank(text, text) IS
  'The rank of an authority for a tenant (its own, else the default), or NULL when unknown';

CREATE FUNCTION cscp.authority_set(tenant_id text, authority text, rank int) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF authority_set.tenant_id IS DISTINCT FROM '*' THEN
        PERFORM cscp.check_tenant(authority_set.tenant_id);
    END IF;
    PERFORM cscp.check_id('authority', authority_set.authority);
    IF authority_set.rank IS NULL OR authority_set.rank < 1 OR authority_set.rank > 1000000 THEN
        RAISE EXCEPTION 'rank must be between 1 and 1000000'
            USING ERRCODE = '22023',
                  DETAIL = format('The rank given is %s.', coalesce(authority_set.rank::text, 'null')),
                  HINT = 'Higher ranks outrank lower ones; the defaults are policy 400, manager 300, employee 200, guest 100.';
    END IF;
    INSERT INTO cscp.authority AS a (tenant_id, authority, rank, updated_at)
    VALUES (authority_set.tenant_id, authority_set.authority, authority_set.rank, cscp.now())
    ON CONFLICT (tenant_id, authority) DO UPDATE
        SET rank = excluded.rank, updated_at = excluded.updated_at;
END
$$;
COMMENT ON FUNCTION cscp.authority_set(text, text, int) IS
  'Add an authority to a tenant, or re-rank one (higher outranks lower); tenant ''*'' holds the defaults';

-- Authority from the writer (StateBench: authority comes from who writes, not what they claim):
-- the highest authority a role may write facts with in a tenant.  A role bound here (or a role
-- whose privileges it has) is held to it: a fact whose source.authority ranks above it is
-- refused (42501), a fact that names none takes the identity's authority capped at it; a
-- writer with no binding is trusted with its claim.  API keys carry their own
-- (cscp.api_key.authority), the gateway's fact writes run with it (setting cscp.authority).
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

-- Facts.
CREATE TABLE cscp.fact (
    tenant_id       text             NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    subject_id      text             NOT NULL CHECK (subject_id <> ''),
    fact_id         text             NOT NULL CHECK (fact_id <> '' AND octet_length(fact_id) <= 256),
    key             text             NOT NULL CHECK (key <> ''),
    value           jsonb            NOT NULL,
    source          jsonb            NOT NULL DEFAULT '{"type": "conversation"}'
                                     CHECK (jsonb_typeof(source) = 'object'),
    -- The writer's authority as resolved at write time (source.authority, else the subject's
    -- identity's authority when it is a known one, else guest), and its rank then.
    authority       text             NOT NULL,
    authority_rank  int              NOT NULL,
    created_at      timestamptz      NOT NULL DEFAULT cscp.now(),
    is_valid        boolean          NOT NULL DEFAULT true,
    superseded_by   text,
    supersedes      text,
    memory_type     cscp.memory_type NOT NULL,
    scope           cscp.fact_scope  NOT NULL DEFAULT 'global',
    scope_id        text,
    depends_on      text[]           NOT NULL DEFAULT '{}',
    derived_facts   text[]           NOT NULL DEFAULT '{}',
    needs_review    boolean          NOT NULL DEFAULT false,
    is_constraint   boolean          NOT NULL DEFAULT false,
    constraint_type text,
    -- What relevance ranking searches: the key (words of it, weight A) and the value's strings.
    search          tsvector         GENERATED ALWAYS AS (
                        setweight(to_tsvector('english'::regconfig, translate(key, '_-.', '   ')), 'A')
                        || setweight(jsonb_to_tsvector('english'::regconfig, value, '["string", "numeric"]'), 'B')
                    ) STORED,
    -- The key carries the links, so that fact_current reads a step of a chain from the index
    -- entry alone where the row's heap page is all-visible (see facts.c).
    PRIMARY KEY (tenant_id, subject_id, fact_id) INCLUDE (is_valid, superseded_by, supersedes),
    -- Chains stay within one subject and never point at a fact that is not there.
    FOREIGN KEY (tenant_id, subject_id, supersedes) REFERENCES cscp.fact (tenant_id, subject_id, fact_id),
    FOREIGN KEY (tenant_id, subject_id, superseded_by) REFERENCES cscp.fact (tenant_id, subject_id, fact_id),
    CHECK (is_valid = (superseded_by IS NULL)),
    CHECK (supersedes <> fact_id AND superseded_by <> fact_id),
    CHECK ((scope IN ('task', 'session')) = (scope_id IS NOT NULL) OR scope IN ('hypothetical', 'draft')),
    CHECK (scope_id <> ''),
    CHECK (is_constraint OR constraint_type IS NULL),
    CHECK (array_ndims(depends_on) IS NULL OR array_ndims(depends_on) = 1),
    CHECK (array_position(depends_on, NULL) IS NULL)
);
COMMENT ON TABLE cscp.fact IS
  'Persistent facts of a subject; a fact is replaced only by a newer fact that supersedes it, forming a chain with one valid fact at its head';

-- A fact is superseded at most once: chains never fork.
CREATE UNIQUE INDEX fact_supersedes_key ON cscp.fact (tenant_id, subject_id, supersedes)
    WHERE supersedes IS NOT NULL;
-- Context assembly and supersession by key read valid facts only, never superseded ones.
CREATE INDEX fact_valid_idx ON cscp.fact (tenant_id, subject_id) WHERE is_valid;
CREATE INDEX fact_valid_key_idx ON cscp.fact (tenant_id, subject_id, key) WHERE is_valid;

CREATE FUNCTION cscp.fact_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_fact_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.fact_guard() IS
  'Trigger: a new fact is valid, its authority resolved and checked against the fact it supersedes and the valid facts of its key, its dependencies known; chains and facts never change except as supersession and repair require';
CREATE TRIGGER fact_guard BEFORE INSERT OR UPDATE ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION cscp.fact_guard();

CREATE FUNCTION cscp.fact_link() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_fact_link' LANGUAGE C;
COMMENT ON FUNCTION cscp.fact_link() IS
  'Trigger: after a fact is inserted, mark the fact it supersedes superseded, flag every fact derived from that one for review, and record the new fact in its dependencies'' derived_facts';
CREATE TRIGGER fact_link AFTER INSERT ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION cscp.fact_link();

CREATE FUNCTION cscp.fact_current(tenant_id text, subject_id text, fact_id text) RETURNS cscp.fact
    AS 'MODULE_PATHNAME', 'cscp_fact_current' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.fact_current(text, text, text) IS
  'The head of the fact''s supersession chain: the fact itself when it is valid, else the valid fact that replaced it';

CREATE FUNCTION cscp.fact_history(tenant_id text, subject_id text, fact_id text) RETURNS SETOF cscp.fact
    AS 'MODULE_PATHNAME', 'cscp_fact_history' LANGUAGE C STABLE PARALLEL SAFE ROWS 10;
COMMENT ON FUNCTION cscp.fact_history(text, text, text) IS
  'The whole supersession chain the fact belongs to, oldest first';

CREATE FUNCTION cscp.fact_write(tenant_id text, subject_id text, fact_id text, key text, value jsonb,
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
COMMENT ON FUNCTION cscp.fact_write(text, text, text, text, jsonb, jsonb, text, text, text, text[], boolean, text, text) IS
  'Write a fact, optionally superseding one (by fact id, or by key within the same scope); returns the fact written';

-- Working set: short-lived items per session.
CREATE TABLE cscp.working_set (
    tenant_id   text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    session_id  text        NOT NULL CHECK (session_id <> ''),
    key         text        NOT NULL CHECK (key <> ''),
    value       jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT cscp.now(),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_id, key)
);
COMMENT ON TABLE cscp.working_set IS
  'Working-set items per (tenant, session, key): what the agent is holding right now; gone once expired';
CREATE INDEX working_set_expiry_idx ON cscp.working_set (expires_at);

CREATE FUNCTION cscp.working_set_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_working_set_guard' LANGUAGE C;
COMMENT ON FUNCTION cscp.working_set_guard() IS
  'Trigger: a working-set item''s expires_at is finite and within its tenant''s max_ttl, and an expired item is never updated, whoever writes it';
CREATE TRIGGER working_set_guard BEFORE INSERT OR UPDATE ON cscp.working_set
    FOR EACH ROW EXECUTE FUNCTION cscp.working_set_guard();

CREATE FUNCTION cscp.ws_put(tenant_id text, session_id text, key text, value jsonb,
                            ttl interval DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := cscp.now();
    v_ttl interval;
BEGIN
    PERFORM cscp.check_tenant(ws_put.tenant_id);
    PERFORM cscp.check_id('session_id', ws_put.session_id);
    PERFORM cscp.check_id('key', ws_put.key);
    IF ws_put.value IS NULL THEN
        RAISE EXCEPTION 'value must not be null'
            USING ERRCODE = '22023', HINT = 'Pass a JSON value; to forget an item, let it expire.';
    END IF;
    v_ttl := cscp.check_lifetime(cscp.policy_effective(ws_put.tenant_id), ws_put.ttl, 'context_ttl', 'ttl');
    -- An expired item is never updated (the guard refuses it): it goes, and a new one comes.
    DELETE FROM cscp.working_set w
     WHERE w.tenant_id = ws_put.tenant_id AND w.session_id = ws_put.session_id AND w.key = ws_put.key
       AND w.expires_at <= v_now;
    INSERT INTO cscp.working_set AS w (tenant_id, session_id, key, value, created_at, updated_at, expires_at)
    VALUES (ws_put.tenant_id, ws_put.session_id, ws_put.key, ws_put.value, v_now, v_now, v_now + v_ttl)
    ON CONFLICT (tenant_id, session_id, key) DO UPDATE
        SET value = excluded.value,
            updated_at = v_now,
            expires_at = excluded.expires_at;
END
$$;
COMMENT ON FUNCTION cscp.ws_put(text, text, text, jsonb, interval) IS
  'Put an item into a session''s working set for ttl (default: the policy''s context_ttl), replacing the item of that key';

CREATE FUNCTION cscp.ws_get(tenant_id text, session_id text, key text) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    v jsonb;
BEGIN
    PERFORM cscp.check_tenant(ws_get.tenant_id);
    PERFORM cscp.check_id('session_id', ws_get.session_id);
    PERFORM cscp.check_id('key', ws_get.key);
    SELECT w.value INTO v FROM cscp.working_set w
     WHERE w.tenant_id = ws_get.tenant_id AND w.session_id = ws_get.session_id AND w.key = ws_get.key
       AND w.expires_at > cscp.now();
    RETURN v;
END
$$;
COMMENT ON FUNCTION cscp.ws_get(text, text, text) IS
  'A working-set item, or NULL when absent or expired';

-- Environment: what is true of a session's surroundings (place, device, calendar, timezone, ...).
CREATE FUNCTION cscp.environment_check(environment jsonb) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_environment_check' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.environment_check(jsonb) IS
  'Raise 22023 unless environment is an object whose "timezone", if any, names a time zone PostgreSQL knows';

CREATE TABLE cscp.environment (
    tenant_id    text        NOT NULL CHECK (tenant_id <> '' AND tenant_id <> '*'),
    session_id   text        NOT NULL CHECK (session_id <> ''),
    environment  jsonb       NOT NULL CHECK (cscp.environment_check(environment) IS NOT NULL),
    updated_at   timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, session_id)
);
COMMENT ON TABLE cscp.environment IS
  'The environment of a session, shown in every context assembled for it; the current time comes from cscp.now(), not from here';

CREATE FUNCTION cscp.env_set(tenant_id text, session_id text, environment jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(env_set.tenant_id);
    PERFORM cscp.check_id('session_id', env_set.session_id);
    IF env_set.environment IS NULL OR jsonb_typeof(env_set.environment) <> 'object' THEN
        RAISE EXCEPTION 'environment must be a JSON object'
            USING ERRCODE = '22023',
                  DETAIL = format('The environment given is %s.', coalesce(jsonb_typeof(env_set.environment), 'null')),
                  HINT = 'Pass an object such as ''{"location": "Lisbon", "device": "phone"}''.';
    END IF;
    PERFORM cscp.environment_check(env_set.environment);
    INSERT INTO cscp.environment AS e (tenant_id, session_id, environment, updated_at)
    VALUES (env_set.tenant_id, env_set.session_id, env_set.environment, cscp.now())
    ON CONFLICT (tenant_id, session_id) DO UPDATE
        SET environment = excluded.environment, updated_at = excluded.updated_at;
END
$$;
COMMENT ON FUNCTION cscp.env_set(text, text, jsonb) IS
  'Set (replace) the environment of a session';

CREATE FUNCTION cscp.identity_set(tenant_id text, subject_id text, identity jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_old jsonb;
BEGIN
    PERFORM cscp.check_tenant(identity_set.tenant_id);
    PERFORM cscp.check_id('subject_id', identity_set.subject_id);
    PERFORM cscp.identity_check(identity_set.identity);
    INSERT INTO cscp.identity AS i (tenant_id, subject_id, identity)
    VALUES (identity_set.tenant_id, identity_set.subject_id, identity_set.identity)
    ON CONFLICT (tenant_id, subject_id) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT i.identity INTO v_old FROM cscp.identity i
     WHERE i.tenant_id = identity_set.tenant_id AND i.subject_id = identity_set.subject_id;
    IF v_old IS DISTINCT FROM identity_set.identity THEN
        RAISE EXCEPTION 'identity of subject "%" is already set', identity_set.subject_id
            USING ERRCODE = '55000',
                  DETAIL = 'An identity does not change once set.',
                  HINT = 'Replace it explicitly with cscp.identity_replace(tenant_id, subject_id, identity, reason).';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.identity_set(text, text, jsonb) IS
  'Set a subject''s identity once; setting the same identity again does nothing, a different one is refused (55000)';

CREATE FUNCTION cscp.identity_replace(tenant_id text, subject_id text, identity jsonb, reason text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    PERFORM cscp.check_tenant(identity_replace.tenant_id);
    PERFORM cscp.check_id('subject_id', identity_replace.subject_id);
    PERFORM cscp.identity_check(identity_replace.identity);
    IF identity_replace.reason IS NULL OR btrim(identity_replace.reason) = '' THEN
        RAISE EXCEPTION 'reason must not be empty'
            USING ERRCODE = '22023', HINT = 'Say why the identity changes; it is kept with the replaced version.';
    END IF;
    UPDATE cscp.identity i SET identity = identity_replace.identity, reason = identity_replace.reason
     WHERE i.tenant_id = identity_replace.tenant_id AND i.subject_id = identity_replace.subject_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'subject "%" has no identity', identity_replace.subject_id
            USING ERRCODE = '22023', HINT = 'Set it first with cscp.identity_set.';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp.identity_replace(text, text, jsonb, text) IS
  'Replace a subject''s identity, keeping the replaced version, the time and the reason in its history';

CREATE FUNCTION cscp.token_count(txt text) RETURNS int
    AS 'MODULE_PATHNAME', 'cscp_token_count' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.token_count(text) IS
  'Estimated tokens of a text: each run of letters and digits counts one per 4 characters (at least 1), every other visible character 1, white space 0';

CREATE FUNCTION cscp.build_context(tenant_id text, subject_id text, session_id text,
                                   query text DEFAULT NULL, token_budget int DEFAULT NULL,
                                   task_id text DEFAULT NULL) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_build_context' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.build_context(text, text, text, text, int, text) IS
  'The context to tell an agent: identity, environment, constraints, facts ranked by relevance to query, working set, within token_budget';
