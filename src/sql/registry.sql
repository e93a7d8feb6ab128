-- registry.sql: the command registry (which commands mutate, need approval, and how risky they
-- are) and the governance of a tenant: an optional admin role for its policy, authority ranks and
-- registry, and the append-only log of every change to them (registry.c).
--
-- Tenant '*' holds the default declarations, as it holds the default policy and ranks; only a
-- superuser (or the owner) writes them.

CREATE TABLE cscp.command_registry (
    tenant_id       text        NOT NULL CHECK (tenant_id <> ''),
    command_name    text        NOT NULL CHECK (command_name <> '' AND octet_length(command_name) <= 256),
    mutating        boolean     NOT NULL,
    needs_approval  boolean     NOT NULL DEFAULT false,
    risk            text        NOT NULL DEFAULT 'normal'
                                CHECK (risk IN ('low', 'normal', 'high', 'critical')),
    updated_at      timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, command_name)
);
COMMENT ON TABLE cscp.command_registry IS
  'Declared commands per tenant, over the defaults of tenant ''*'': whether each mutates (command_submit takes it from here), needs approval, and its risk; written with cscp.command_declare';

CREATE FUNCTION cscp.command_declare(tenant_id text, command_name text, mutating boolean,
                                     needs_approval boolean DEFAULT false, risk text DEFAULT 'normal')
RETURNS cscp.command_registry
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    r cscp.command_registry;
BEGIN
    IF command_declare.tenant_id IS DISTINCT FROM '*' THEN
        PERFORM cscp.check_tenant(command_declare.tenant_id);
    END IF;
    PERFORM cscp.check_id('command_name', command_declare.command_name);
    IF command_declare.mutating IS NULL OR command_declare.needs_approval IS NULL THEN
        RAISE EXCEPTION 'mutating and needs_approval must not be null'
            USING ERRCODE = '22023',
                  HINT = 'Say whether the command changes anything and whether it needs an approval.';
    END IF;
    IF command_declare.risk IS NULL OR command_declare.risk NOT IN ('low', 'normal', 'high', 'critical') THEN
        RAISE EXCEPTION 'invalid risk "%"', coalesce(command_declare.risk, 'null')
            USING ERRCODE = '22023', HINT = 'Use low, normal, high or critical.';
    END IF;

    INSERT INTO cscp.command_registry AS g (tenant_id, command_name, mutating, needs_approval, risk, updated_at)
    VALUES (command_declare.tenant_id, command_declare.command_name, command_declare.mutating,
            command_declare.needs_approval, command_declare.risk, cscp.now())
    ON CONFLICT (tenant_id, command_name) DO UPDATE
        SET mutating = excluded.mutating, needs_approval = excluded.needs_approval,
            risk = excluded.risk, updated_at = excluded.updated_at
    RETURNING * INTO r;
    RETURN r;
END
$$;
COMMENT ON FUNCTION cscp.command_declare(text, text, boolean, boolean, text) IS
  'Declare a command of a tenant (or replace its declaration): whether it mutates, needs approval, and its risk (low, normal, high, critical)';

-- Every change to policy, authority ranks and the registry, appended by the trigger below as the
-- owner of the tables.  Not writable by any application or operator role.
CREATE TABLE cscp.governance_log (
    tenant_id   text        NOT NULL,
    change_id   bigint      NOT NULL DEFAULT cscp._row_id(),
    object      text        NOT NULL CHECK (object IN ('policy', 'authority', 'command_registry')),
    object_key  text,
    action      text        NOT NULL CHECK (action IN ('insert', 'update', 'delete')),
    old_value   jsonb,
    new_value   jsonb,
    changed_by  name        NOT NULL,
    changed_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, change_id)
);
COMMENT ON TABLE cscp.governance_log IS
  'Append-only record of every change to cscp.policy, cscp.authority and cscp.command_registry: who, when, the row before and after';

CREATE FUNCTION cscp._governance_log_immutable() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'cscp.governance_log is append-only'
        USING ERRCODE = '55000', DETAIL = 'Its rows record governance changes and are never changed or deleted.';
END
$$;
COMMENT ON FUNCTION cscp._governance_log_immutable() IS 'Internal trigger: refuses UPDATE and DELETE on cscp.governance_log';
CREATE TRIGGER governance_log_immutable BEFORE UPDATE OR DELETE ON cscp.governance_log
    FOR EACH ROW EXECUTE FUNCTION cscp._governance_log_immutable();

CREATE FUNCTION cscp.governance_record() RETURNS trigger
    AS 'MODULE_PATHNAME', 'cscp_governance_record' LANGUAGE C;
COMMENT ON FUNCTION cscp.governance_record() IS
  'Trigger: refuses (42501) a change by a role outside the tenant''s admin_role, and records every change in cscp.governance_log';
CREATE TRIGGER governance_record AFTER INSERT OR UPDATE OR DELETE ON cscp.policy
    FOR EACH ROW EXECUTE FUNCTION cscp.governance_record();
CREATE TRIGGER governance_record AFTER INSERT OR UPDATE OR DELETE ON cscp.authority
    FOR EACH ROW EXECUTE FUNCTION cscp.governance_record();
CREATE TRIGGER governance_record AFTER INSERT OR UPDATE OR DELETE ON cscp.command_registry
    FOR EACH ROW EXECUTE FUNCTION cscp.governance_record();
-- Every backend caches the declarations it reads (registry.c); a change drops the caches (as for
-- cscp.policy), also during a restore, which runs with session_replication_role = replica.
CREATE TRIGGER command_registry_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cscp.command_registry
    FOR EACH STATEMENT EXECUTE FUNCTION cscp.policy_changed();
ALTER TABLE cscp.command_registry ENABLE ALWAYS TRIGGER command_registry_changed;

CREATE FUNCTION cscp.operator_tenant_visible(tenant_id text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'cscp_operator_tenant_visible' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION cscp.operator_tenant_visible(text) IS
  'Whether the current role may see a tenant as an operator (its binding of cscp.grant_operator)';

-- Row-level security and pg_dump: security.sql.
