-- tenancy (issue 39): ids are keyed per tenant, so a lookup by id alone is held to the
-- session's tenant (cscp.tenant_id) for a role that row-level security does not bind too, such
-- as the owner behind the gateway.  The C functions (command_transition, command_recover,
-- slot_set, context_transition) changed in the library alone; command_status, which is SQL,
-- takes its final body in 40-auth.sql.

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
