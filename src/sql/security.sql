-- security.sql: tenancy (roles bound to tenants, row-level security), privileges, and what
-- pg_dump keeps.
--
-- Every table is bound by row-level security on cscp.current_tenant(): a role it binds sees
-- and writes only the rows of the tenant its session names in cscp.tenant_id, nothing while
-- none is named, and gets 42501 when it names a tenant its binding does not allow (tenancy.c).
-- Superusers and the extension's owner are not bound (maintenance, the sweep).  Nothing is
-- granted to PUBLIC; cscp.grant_app and cscp.grant_operator hand out what each kind of role
-- needs and record which tenants it may use in cscp.tenant_binding.

-- Which tenants a role may use.  Not tenant data: its key is the role.
CREATE TABLE cscp.tenant_binding (
    role        regrole     NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('app', 'operator')),
    tenants     text[]      CHECK (cardinality(tenants) > 0),
    granted_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    granted_by  name        NOT NULL DEFAULT current_user,
    PRIMARY KEY (role, kind)
);
COMMENT ON TABLE cscp.tenant_binding IS
  'Roles granted by cscp.grant_app and cscp.grant_operator: NULL tenants for a trusted multi-tenant role, else the only tenants it may use';
-- Every change reaches every backend's cache of bindings (tenancy.c) as a relcache invalidation.
CREATE TRIGGER tenant_binding_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.tenant_binding
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();

CREATE FUNCTION cscp.current_tenant() RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_current_tenant' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.current_tenant() IS
  'The tenant row-level security lets this session use: cscp.tenant_id, NULL when unset, 42501 when the role is bound to other tenants';

CREATE FUNCTION cscp.bound_tenants(kind text DEFAULT 'app') RETURNS text[]
    AS 'MODULE_PATHNAME', 'cscp_bound_tenants' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.bound_tenants(text) IS
  'The tenants the current role is bound to as an application (kind app) or operator (kind operator); NULL when it is not bound';

-- The policies of each kind of table, stated once and applied to its tables by name.
DO $$
DECLARE
    t text;
BEGIN
    -- Tenant data: read and written by application roles, each row of its tenant only.
    FOREACH t IN ARRAY ARRAY['context', 'command', 'frame', 'answer', 'conversation', 'turn',
                             'document', 'inspection_log', 'identity', 'fact', 'working_set',
                             'environment', 'checkpoint_thread', 'checkpoint', 'checkpoint_blob',
                             'checkpoint_write', 'store_item', 'agent_session', 'session_item'] LOOP
        EXECUTE pg_catalog.format('ALTER TABLE cscp.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_isolation ON cscp.%I'
                                  ' USING (tenant_id = cscp.current_tenant())'
                                  ' WITH CHECK (tenant_id = cscp.current_tenant())', t);
    END LOOP;
    -- Tenant data that application roles only ever read: the live and retired contexts, the
    -- open windows and finished commands (the context and command triggers write them as the
    -- owner, see context_fsm.c), evidence (evidence.c) and events (cscp's C code), and the
    -- tombstones (cscp.forget_* and the forgotten_guard trigger; application roles are
    -- granted nothing on them).
    FOREACH t IN ARRAY ARRAY['context_live', 'context_retired', 'command_window', 'command_retired',
                             'evidence', 'event', 'tombstone'] LOOP
        EXECUTE pg_catalog.format('ALTER TABLE cscp.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_read ON cscp.%I FOR SELECT'
                                  ' USING (tenant_id = cscp.current_tenant())', t);
    END LOOP;
    -- Tenant settings (policies, authority ranks, the command registry): a tenant reads its own
    -- and the defaults of tenant '*', and writes only its own.
    FOREACH t IN ARRAY ARRAY['policy', 'authority', 'command_registry'] LOOP
        EXECUTE pg_catalog.format('ALTER TABLE cscp.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_read ON cscp.%I FOR SELECT'
                                  ' USING (tenant_id = cscp.current_tenant() OR tenant_id = ''*'')', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_insert ON cscp.%I FOR INSERT'
                                  ' WITH CHECK (tenant_id = cscp.current_tenant() AND tenant_id <> ''*'')', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_update ON cscp.%I FOR UPDATE'
                                  ' USING (tenant_id = cscp.current_tenant() AND tenant_id <> ''*'')'
                                  ' WITH CHECK (tenant_id = cscp.current_tenant() AND tenant_id <> ''*'')', t);
        EXECUTE pg_catalog.format('CREATE POLICY tenant_delete ON cscp.%I FOR DELETE'
                                  ' USING (tenant_id = cscp.current_tenant() AND tenant_id <> ''*'')', t);
    END LOOP;
END
$$;

-- The log: operators read the tenants their binding lets them see (granted SELECT by
-- cscp.grant_operator); application roles are granted nothing on it.
ALTER TABLE cscp.governance_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY operator_read ON cscp.governance_log FOR SELECT
    USING (cscp.operator_tenant_visible(tenant_id));

-- Raise 22023 unless role names an existing role.
CREATE FUNCTION cscp._role(role name) RETURNS regrole
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r regrole := to_regrole(quote_ident(role));
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null'
            USING ERRCODE = '22023', HINT = 'Pass the name of an existing role.';
    END IF;
    IF r IS NULL THEN
        RAISE EXCEPTION 'role "%" does not exist', role
            USING ERRCODE = '22023', HINT = 'Create the role first, then grant it cscp''s privileges.';
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION cscp._role(name) IS 'Internal: the role named, or 22023';

-- Raise 22023 unless tenants is NULL or a non-empty list of tenant ids; the list sorted, once each.
CREATE FUNCTION cscp._tenant_list(tenants text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    t text;
BEGIN
    IF tenants IS NULL THEN
        RETURN NULL;
    END IF;
    IF cardinality(tenants) = 0 THEN
        RAISE EXCEPTION 'tenants must not be empty'
            USING ERRCODE = '22023',
                  HINT = 'Pass the tenants the role may use, or NULL for a role that names its tenant in cscp.tenant_id.';
    END IF;
    FOREACH t IN ARRAY tenants LOOP
        PERFORM cscp._id('tenant', t);
        IF t = '*' THEN
            RAISE EXCEPTION 'tenant "*" is reserved'
                USING ERRCODE = '22023', DETAIL = 'Tenant "*" holds the policy defaults of all tenants.',
                      HINT = 'Bind the role to the tenants it serves.';
        END IF;
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT u FROM unnest(tenants) u ORDER BY 1);
END
$$;
COMMENT ON FUNCTION cscp._tenant_list(text[]) IS 'Internal: a checked list of tenants for a binding';

-- Record (or replace) the binding of role as kind.
CREATE FUNCTION cscp._bind(r regrole, kind text, tenants text[]) RETURNS void
LANGUAGE sql VOLATILE
AS $$
    INSERT INTO cscp.tenant_binding AS b (role, kind, tenants)
    VALUES ($1, $2, $3)
    ON CONFLICT (role, kind) DO UPDATE
       SET tenants = excluded.tenants, granted_at = pg_catalog.now(), granted_by = current_user;
$$;
COMMENT ON FUNCTION cscp._bind(regrole, text, text[]) IS 'Internal: record the binding of a role';

-- What an application role is granted (cscp.grant_app, and cscp.revoke_operator for a role
-- that stays an application role).
CREATE FUNCTION cscp._grant_app_privileges(r regrole) RETURNS void
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
COMMENT ON FUNCTION cscp._grant_app_privileges(regrole) IS 'Internal: the privileges of an application role';

-- What an operator is granted: the views and the functions behind them, nothing else.
CREATE FUNCTION cscp._grant_operator_privileges(r regrole) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.active_context, cscp.command_lifecycle, cscp.governance_log TO %s', r);
    EXECUTE format('GRANT EXECUTE ON FUNCTION cscp.show_active_context(text, text), '
                   'cscp.inspect_active_context(text, text), cscp.inspect_command_lifecycle(text, text), '
                   'cscp.check_invariants(text), cscp.bound_tenants(text), cscp.now(), '
                   'cscp.operator_tenant_visible(text), '
                   -- row-level security calls it before the table's privileges are checked:
                   -- with it, a SELECT on a table is refused for want of that privilege
                   'cscp.current_tenant() TO %s', r);
END
$$;
COMMENT ON FUNCTION cscp._grant_operator_privileges(regrole) IS 'Internal: the privileges of an operator role';

CREATE FUNCTION cscp.grant_app(role name, tenants text[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r regrole := cscp._role(role);
    t text[] := cscp._tenant_list(tenants);
BEGIN
    -- Row-level security does not bind these: a binding would promise what nothing enforces.
    IF t IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.pg_roles a
                                  WHERE a.oid = r::oid AND (a.rolsuper OR a.rolbypassrls)) THEN
        RAISE EXCEPTION 'role "%" cannot be bound to tenants', role
            USING ERRCODE = '22023',
                  DETAIL = 'Superusers and roles with BYPASSRLS are not subject to row-level security.',
                  HINT = 'Bind a role without SUPERUSER and BYPASSRLS, or grant this one without tenants.';
    END IF;
    PERFORM cscp._grant_app_privileges(r);
    PERFORM cscp._bind(r, 'app', t);
END
$$;
COMMENT ON FUNCTION cscp.grant_app(name, text[]) IS
  'Let a role use cscp: every API function, and its own rows; without tenants for the tenant its sessions name in cscp.tenant_id, with tenants for those only (a new call replaces the list)';

CREATE FUNCTION cscp.grant_operator(role name, tenants text[] DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r regrole := cscp._role(role);
    t text[] := cscp._tenant_list(tenants);
BEGIN
    IF t IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.pg_roles a WHERE a.oid = r::oid AND a.rolsuper) THEN
        RAISE EXCEPTION 'role "%" cannot be bound to tenants', role
            USING ERRCODE = '22023', DETAIL = 'A superuser sees every tenant.',
                  HINT = 'Bind a role without SUPERUSER, or grant this one without tenants.';
    END IF;
    PERFORM cscp._grant_operator_privileges(r);
    PERFORM cscp._bind(r, 'operator', t);
END
$$;
COMMENT ON FUNCTION cscp.grant_operator(name, text[]) IS
  'Let a role read the redacted operator views (cscp.active_context, cscp.command_lifecycle, cscp.show_active_context) and run cscp.check_invariants, and nothing else; with tenants, of those tenants only (a new call replaces the list)';

-- Take back every privilege on cscp's objects; give back those of the role's other binding.
CREATE FUNCTION cscp._revoke(r regrole, kind text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    DELETE FROM cscp.tenant_binding b WHERE b.role = r AND b.kind = _revoke.kind;
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM %s', r);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA cscp FROM %s', r);
    EXECUTE format('REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA cscp FROM %s', r);
    EXECUTE format('REVOKE USAGE ON SCHEMA cscp FROM %s', r);
    IF EXISTS (SELECT FROM cscp.tenant_binding b WHERE b.role = r AND b.kind = 'app') THEN
        PERFORM cscp._grant_app_privileges(r);
    END IF;
    IF EXISTS (SELECT FROM cscp.tenant_binding b WHERE b.role = r AND b.kind = 'operator') THEN
        PERFORM cscp._grant_operator_privileges(r);
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._revoke(regrole, text) IS 'Internal: what cscp.revoke_app and cscp.revoke_operator do';

CREATE FUNCTION cscp.revoke_app(role name) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM cscp._revoke(cscp._role(role), 'app');
END
$$;
COMMENT ON FUNCTION cscp.revoke_app(name) IS
  'Take back what cscp.grant_app gave a role (its privileges on cscp and its tenants); an operator stays an operator';

CREATE FUNCTION cscp.revoke_operator(role name) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM cscp._revoke(cscp._role(role), 'operator');
END
$$;
COMMENT ON FUNCTION cscp.revoke_operator(name) IS
  'Take back what cscp.grant_operator gave a role; an application role stays one';

-- pg_dump keeps user data; the defaults of tenant '*' come back with CREATE EXTENSION.
SELECT pg_catalog.pg_extension_config_dump('cscp.context', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.context_live', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.context_retired', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.document', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.policy', 'WHERE tenant_id <> ''*''');
SELECT pg_catalog.pg_extension_config_dump('cscp.inspection_log', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.command', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.command_window', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.command_retired', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.frame', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.answer', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.evidence', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.conversation', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.turn', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.event', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.identity', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.authority', 'WHERE tenant_id <> ''*''');
SELECT pg_catalog.pg_extension_config_dump('cscp.fact', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.working_set', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.environment', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.tombstone', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.tenant_binding', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.authority_binding', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.command_registry', 'WHERE tenant_id <> ''*''');
SELECT pg_catalog.pg_extension_config_dump('cscp.governance_log', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_thread', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_blob', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.checkpoint_write', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.store_item', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.agent_session', '');
SELECT pg_catalog.pg_extension_config_dump('cscp.session_item', '');
-- Evidence and inspection ids are time-ordered (cscp._row_id()), not drawn from a sequence:
-- rows written after a restore get later ids than the restored ones.

-- search_path: every PL/pgSQL function of cscp, and the SQL functions an operator's view or a
-- verification runs, resolve names in pg_catalog (then pg_temp) whatever the caller's
-- search_path, so that no object in a schema the caller puts first (CVE-2018-1058) can stand in
-- for a built-in; their bodies name cscp's own objects schema-qualified.  The SECURITY DEFINER
-- functions carry the same setting in their definitions.  The small SQL functions PostgreSQL
-- inlines into the caller's query (conversation_turns, conversation_events, authority_rank, ...)
-- are left without it, which would stop the inlining: their bodies, parsed under the caller's
-- search_path, qualify every name instead (OPERATOR(pg_catalog.=), pg_catalog.f, ::pg_catalog.t),
-- as cscp's C statements do (spiplan.c).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proconfig IS NULL
           AND (p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'plpgsql')
                OR p.oid IN ('cscp._redact_slots(jsonb, text)'::regprocedure,
                             'cscp.evidence_verify(text, uuid)'::regprocedure,
                             'cscp.evidence_problems(text, uuid)'::regprocedure,
                             'cscp.conversation_export(text, text)'::regprocedure,
                             'cscp.retention_floor(text)'::regprocedure,
                             'cscp.session_state(text, text)'::regprocedure))
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$$;

-- Last, so that it covers every object above: nothing of cscp's is PUBLIC's.
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM PUBLIC;
