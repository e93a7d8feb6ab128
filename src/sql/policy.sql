-- policy.sql: per-tenant policies, with tenant '*' holding the defaults.

CREATE FUNCTION cscp.policy_validate(settings jsonb, allow_null boolean DEFAULT false) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_policy_validate' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.policy_validate(jsonb, boolean) IS
  'Raise 22023 unless settings holds only known policy keys with values of the right type';

CREATE TABLE cscp.policy (
    tenant_id   text        NOT NULL CHECK (tenant_id <> ''),
    -- Held to the same key and type rules as cscp.policy_set, also for direct SQL (22023).
    settings    jsonb       NOT NULL DEFAULT '{}' CHECK (cscp.policy_validate(settings) IS NOT NULL),
    updated_at  timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id)
);
COMMENT ON TABLE cscp.policy IS
  'Policy keys per tenant, merged over the defaults of tenant ''*''; written with cscp.policy_set';

INSERT INTO cscp.policy (tenant_id, settings) VALUES ('*', '{
    "context_ttl": "30 minutes",
    "confirmation_ttl": "5 minutes",
    "approval_ttl": "1 hour",
    "context_ttl_mode": "sliding",
    "max_ttl": "30 days",
    "retention_closed": "7 days",
    "retention_expired": "1 day",
    "retention_turns": "30 days",
    "retention_evidence": "365 days",
    "max_slot_bytes": 4096,
    "slot_max_length": 256,
    "slot_refuse_card_numbers": true,
    "slot_rules": {},
    "extension_slots": [],
    "detail_level": "summary",
    "auto_confirm": [],
    "turn_content": "full",
    "replay_divergence": "keep",
    "fact_budget_share": 0.7,
    "supersede_same_key": false,
    "undeclared_commands": "mutating",
    "checkpoint_ttl": "30 days"
}');

-- Read through a per-backend cache that every change to cscp.policy drops (policy.c).
CREATE FUNCTION cscp.policy_effective(tenant_id text) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_policy_effective' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION cscp.policy_effective(text) IS
  'The policy in force for a tenant: the defaults of tenant ''*'' with its own keys merged over them';

CREATE FUNCTION cscp.policy_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_policy_changed' LANGUAGE C;
COMMENT ON FUNCTION cscp.policy_changed() IS
  'Trigger: drops every backend''s cache of effective policies when cscp.policy changes';
CREATE TRIGGER policy_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.policy
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();

CREATE FUNCTION cscp.policy_lifetimes() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_policy_lifetimes' LANGUAGE C;
COMMENT ON FUNCTION cscp.policy_lifetimes() IS
  'Trigger: refuses (22023) a policy whose context_ttl, confirmation_ttl or approval_ttl in force exceeds its max_ttl (for the defaults, any tenant''s)';
CREATE TRIGGER policy_lifetimes AFTER INSERT OR UPDATE ON cscp.policy
    FOR EACH ROW EXECUTE FUNCTION cscp.policy_lifetimes();

CREATE FUNCTION cscp.policy_set(tenant_id text, settings jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF policy_set.tenant_id IS DISTINCT FROM '*' THEN
        PERFORM cscp.check_tenant(policy_set.tenant_id);
    END IF;
    PERFORM cscp.policy_validate(policy_set.settings, policy_set.tenant_id <> '*');

    INSERT INTO cscp.policy AS p (tenant_id, settings, updated_at)
    VALUES (policy_set.tenant_id, jsonb_strip_nulls(policy_set.settings), cscp.now())
    ON CONFLICT (tenant_id) DO UPDATE
        SET settings = jsonb_strip_nulls(p.settings || policy_set.settings),
            updated_at = cscp.now();

    RETURN cscp.policy_effective(policy_set.tenant_id);
END
$$;
COMMENT ON FUNCTION cscp.policy_set(text, jsonb) IS
  'Merge policy keys into a tenant''s policy (null removes a key); returns the effective policy';

-- The interval under a policy key, checked positive and within max_ttl (lifetime.c: checked by
-- what it does, as the C API's lifetimes are); public, for the PL/pgSQL API that runs with its caller's rights.
CREATE FUNCTION cscp.check_lifetime(policy jsonb, requested interval, policy_key text, argname text)
RETURNS interval
    AS 'MODULE_PATHNAME', 'cscp_arg_lifetime' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.check_lifetime(jsonb, interval, text, text) IS
  'The requested lifetime or the policy''s (under policy_key), refused (22023, naming argname) unless positive and within max_ttl';
