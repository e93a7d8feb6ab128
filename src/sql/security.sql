-- security.sql: tenancy (row-level security), privileges, and what pg_dump keeps.
--
-- Every table is bound by row-level security on cscp.tenant_id: a role it binds sees and
-- writes only the rows of the tenant its session names, and nothing while none is named.
-- Superusers and the extension's owner are not bound (maintenance, the sweep).  Nothing is
-- granted to PUBLIC; cscp.grant_app and cscp.grant_operator hand out what each kind of role needs.

ALTER TABLE cscp.context ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.context
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.command ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.command
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.frame ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.frame
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.answer ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.answer
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

-- Live contexts: application roles only ever read them (the guard trigger writes them as the
-- owner, see context_fsm.c).
ALTER TABLE cscp.context_live ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.context_live FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));
-- Retired contexts likewise (the triggers write them as the owner).
ALTER TABLE cscp.context_retired ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.context_retired FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));
-- Open windows and finished commands likewise (the command triggers write them as the owner).
ALTER TABLE cscp.command_window ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.command_window FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));
ALTER TABLE cscp.command_retired ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.command_retired FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));

-- Evidence: application roles only ever read it (the owner writes it, see evidence.c).
ALTER TABLE cscp.evidence ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.evidence FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.conversation ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.conversation
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.turn ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.turn
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

-- Events: application roles only ever read them (cscp's C code writes them as the owner).
ALTER TABLE cscp.event ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.event FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.document ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.document
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

-- Policies: a tenant reads its own and the defaults, and writes only its own.
ALTER TABLE cscp.policy ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.policy FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true) OR tenant_id = '*');
CREATE POLICY tenant_insert ON cscp.policy FOR INSERT
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');
CREATE POLICY tenant_update ON cscp.policy FOR UPDATE
    USING (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*')
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');
CREATE POLICY tenant_delete ON cscp.policy FOR DELETE
    USING (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');

ALTER TABLE cscp.inspection_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.inspection_log
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

-- Facts and the state layers around them (facts.sql).
ALTER TABLE cscp.identity ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.identity
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.fact ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.fact
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.working_set ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.working_set
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

ALTER TABLE cscp.environment ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON cscp.environment
    USING (tenant_id = current_setting('cscp.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true));

-- Tombstones: written and read by cscp.forget_* and the forgotten_guard trigger as the owner;
-- application roles are granted nothing on them.
ALTER TABLE cscp.tombstone ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.tombstone FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true));

-- Authority ranks: like policies, a tenant reads its own and the defaults, writes only its own.
ALTER TABLE cscp.authority ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON cscp.authority FOR SELECT
    USING (tenant_id = current_setting('cscp.tenant_id', true) OR tenant_id = '*');
CREATE POLICY tenant_insert ON cscp.authority FOR INSERT
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');
CREATE POLICY tenant_update ON cscp.authority FOR UPDATE
    USING (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*')
    WITH CHECK (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');
CREATE POLICY tenant_delete ON cscp.authority FOR DELETE
    USING (tenant_id = current_setting('cscp.tenant_id', true) AND tenant_id <> '*');

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

CREATE FUNCTION cscp.grant_app(role name) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r regrole := cscp._role(role);
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.context, cscp.document, cscp.policy TO %s', r);
    -- Which context is live, and when each retired, is written by the context triggers as their owner.
    EXECUTE format('GRANT SELECT ON cscp.context_live, cscp.context_retired TO %s', r);
    -- Commands change only by transitions (no DELETE); frames and answers are written once;
    -- evidence is read-only: the trigger and cscp._evidence_refusal write it as its owner.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.command TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.command_window, cscp.command_retired TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT ON cscp.frame, cscp.answer TO %s', r);
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
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA cscp TO %s', r);
    -- Administration and operator inspection are not the application's.
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.grant_app(name), cscp.grant_operator(name), '
                   'cscp.grant_gateway(name), '
                   'cscp.show_active_context(text, text), cscp.check_invariants(text) FROM %s', r);
    -- Nor a shard's place in a scale-out deployment (shard.sql).
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.shard_set(int, int[]), cscp.shard_misplaced() FROM %s', r);
END
$$;
COMMENT ON FUNCTION cscp.grant_app(name) IS
  'Let a role use cscp for the tenant its sessions name in cscp.tenant_id: every API function, and its own rows';

CREATE FUNCTION cscp.grant_operator(role name) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    r regrole := cscp._role(role);
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.active_context, cscp.command_lifecycle TO %s', r);
    EXECUTE format('GRANT EXECUTE ON FUNCTION cscp.show_active_context(text, text), cscp.now(), '
                   'cscp._redact_slots(jsonb, text), cscp._id(text, text), '
                   'cscp.check_invariants(text) TO %s', r);
END
$$;
COMMENT ON FUNCTION cscp.grant_operator(name) IS
  'Let a role read the redacted operator views (cscp.active_context, cscp.command_lifecycle, cscp.show_active_context) and run cscp.check_invariants, and nothing else';

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
-- The identity sequences of evidence and inspections: restored, new rows continue after the
-- restored ones instead of colliding with them.
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('cscp.evidence', 'evidence_id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('cscp.inspection_log', 'inspection_id'), '');

-- search_path: every PL/pgSQL function of cscp, and the SQL functions an operator's view or a
-- verification runs, resolve names in pg_catalog (then pg_temp) whatever the caller's
-- search_path, so that no object in a schema the caller puts first (CVE-2018-1058) can stand in
-- for a built-in; their bodies name cscp's own objects schema-qualified.  The SECURITY DEFINER
-- functions carry the same setting in their definitions.  The small SQL functions PostgreSQL
-- inlines into the caller's query (conversation_turns, conversation_events, authority_rank, ...)
-- are left without it, which would stop the inlining; they run with the caller's rights only.
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

-- Last, so that it covers every object above: nothing of cscp's is PUBLIC's.
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM PUBLIC;
