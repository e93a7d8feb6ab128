-- tenancy (issue 39): ids are keyed per tenant, so a lookup by id alone is held to the
-- session's tenant (cscp.tenant_id) for a role that row-level security does not bind too, such
-- as the owner behind the gateway.  The C functions (command_transition, command_recover,
-- slot_set, context_transition) changed in the library alone; command_status is SQL.
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
    recovery_options := CASE
        WHEN cmd.state = 'failed' THEN ARRAY['retry', 'reprocess', 'compensate']
        WHEN cmd.state = 'executed' THEN ARRAY['compensate']
        WHEN cmd.state IN ('rejected', 'canceled') THEN ARRAY['reprocess']
        WHEN cmd.state IN ('received', 'canonicalized', 'confirmation_required', 'confirmed',
                           'authz_pending', 'authorized', 'started') THEN ARRAY['cancel']
        ELSE '{}'::text[] END;
    RETURN NEXT;
END
$$;

-- A policy's default lifetimes stay within its max_ttl (policy.c, lifetime.c).  Only writes are
-- judged: a stored policy that already breaks the rule is refused at its next change, and
-- cscp.check_invariants' view of rows is unchanged.
CREATE FUNCTION cscp.policy_lifetimes() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_policy_lifetimes' LANGUAGE C;
COMMENT ON FUNCTION cscp.policy_lifetimes() IS
  'Trigger: refuses (22023) a policy whose context_ttl, confirmation_ttl or approval_ttl in force exceeds its max_ttl (for the defaults, any tenant''s)';
CREATE TRIGGER policy_lifetimes AFTER INSERT OR UPDATE ON cscp.policy
    FOR EACH ROW EXECUTE FUNCTION cscp.policy_lifetimes();
