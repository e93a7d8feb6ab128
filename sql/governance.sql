\i sql/include/helpers.sql
-- Audited governance (issue 34, item 7): every change to a tenant's policy, authority ranks and
-- command registry is appended to cscp.governance_log (who, when, the row before and after),
-- whoever writes it, through the API or direct SQL; a tenant's admin_role lets only its members
-- change them (42501 for anyone else, nothing changed).  Operators read the log of their tenants.
-- Tenants 'gv' and 'gv2'.
SET cscp.clock = '2026-03-03 10:00:00+00';
\set SHOW_CONTEXT never

CREATE ROLE gv_app;
CREATE ROLE gv_admin;
CREATE ROLE gv_app_admin;
SELECT cscp.grant_app('gv_app', ARRAY['gv', 'gv2']);
SELECT cscp.grant_app('gv_app_admin', ARRAY['gv']);
GRANT gv_admin TO gv_app_admin;

-- Through the API, as the application role: each change is one row, naming the role.
SET ROLE gv_app;
SET cscp.tenant_id = 'gv';
SELECT cscp.policy_set('gv', '{"detail_level": "full"}')->'detail_level' AS detail_level;
SELECT cscp.policy_set('gv', '{"detail_level": "none"}')->'detail_level' AS detail_level;
SELECT cscp.authority_set('gv', 'cfo', 90);
SELECT cscp.authority_set('gv', 'cfo', 95);
SELECT cscp.command_declare('gv', 'pay', true) IS NOT NULL AS declared;
-- ... and by direct SQL: the same record.
UPDATE cscp.authority SET rank = 1 WHERE tenant_id = 'gv' AND authority = 'cfo';
DELETE FROM cscp.command_registry WHERE tenant_id = 'gv' AND command_name = 'pay';
UPDATE cscp.policy SET settings = settings - 'detail_level' WHERE tenant_id = 'gv';
-- The application role cannot read, write or erase the log.
SELECT try($$SELECT count(*) FROM cscp.governance_log$$);
SELECT try($$INSERT INTO cscp.governance_log (tenant_id, object, action, changed_by, changed_at)
             VALUES ('gv', 'policy', 'update', 'nobody', now())$$);
SELECT try($$DELETE FROM cscp.governance_log$$);
RESET ROLE;
RESET cscp.tenant_id;

SELECT object, object_key, action, changed_by,
       old_value->'settings' AS old_settings, new_value->'settings' AS new_settings,
       old_value->'rank' AS old_rank, new_value->'rank' AS new_rank,
       old_value->'mutating' AS old_mutating, new_value->'mutating' AS new_mutating,
       changed_at
  FROM cscp.governance_log WHERE tenant_id = 'gv' ORDER BY change_id;

-- Append-only, for the owner too.
SELECT try($$UPDATE cscp.governance_log SET changed_by = 'someone' WHERE tenant_id = 'gv'$$);
SELECT try($$DELETE FROM cscp.governance_log WHERE tenant_id = 'gv'$$);

---------------------------------------------------------------------------------------------------
-- An admin role: once the tenant's policy names one, only its members change policy, ranks and
-- registry.  Anyone else: 42501, through the API and by direct SQL, and nothing changes.
SET ROLE gv_app;
SET cscp.tenant_id = 'gv';
SELECT cscp.authority_set('gv', 'cfo', 90);
SELECT cscp.command_declare('gv', 'pay', true) IS NOT NULL AS declared;
SELECT cscp.policy_set('gv', '{"admin_role": "gv_admin"}')->>'admin_role' AS admin_role;
RESET ROLE;
SELECT count(*) AS log_before FROM cscp.governance_log WHERE tenant_id = 'gv' \gset
SET ROLE gv_app;
SELECT try($$SELECT cscp.policy_set('gv', '{"auto_confirm": ["pay"]}')$$);
SELECT try($$SELECT cscp.policy_set('gv', '{"admin_role": null}')$$);
SELECT try($$SELECT cscp.authority_set('gv', 'cfo', 1)$$);
SELECT try($$SELECT cscp.authority_set('gv', 'intern', 5)$$);
SELECT try($$SELECT cscp.command_declare('gv', 'pay', false)$$);
SELECT try($$UPDATE cscp.policy SET settings = settings || '{"auto_confirm": ["pay"]}' WHERE tenant_id = 'gv'$$);
SELECT try($$DELETE FROM cscp.policy WHERE tenant_id = 'gv'$$);
SELECT try($$UPDATE cscp.authority SET rank = 1 WHERE tenant_id = 'gv'$$);
SELECT try($$DELETE FROM cscp.authority WHERE tenant_id = 'gv'$$);
SELECT try($$UPDATE cscp.command_registry SET mutating = false WHERE tenant_id = 'gv'$$);
SELECT try($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('gv', 'wipe', false)$$);
-- Nothing changed.
SELECT cscp.policy_effective('gv')->'auto_confirm' AS auto_confirm, cscp.policy_effective('gv')->>'admin_role' AS admin_role;
SELECT authority, rank FROM cscp.authority WHERE tenant_id = 'gv' ORDER BY authority;
SELECT command_name, mutating FROM cscp.command_registry WHERE tenant_id = 'gv' ORDER BY command_name;
-- Another tenant without an admin role is not affected.
SET cscp.tenant_id = 'gv2';
SELECT cscp.authority_set('gv2', 'cfo', 7);
RESET ROLE;
RESET cscp.tenant_id;
SELECT count(*) - :log_before AS new_log_rows FROM cscp.governance_log WHERE tenant_id = 'gv';

-- A member of the admin role may; its changes are recorded under its own name.
SET ROLE gv_app_admin;
SET cscp.tenant_id = 'gv';
SELECT cscp.policy_set('gv', '{"auto_confirm": ["pay"]}')->'auto_confirm' AS auto_confirm;
SELECT cscp.authority_set('gv', 'cfo', 99);
SELECT command_name, mutating FROM cscp.command_declare('gv', 'pay', true, true, 'critical');
RESET ROLE;
RESET cscp.tenant_id;
SELECT object, object_key, action, changed_by FROM cscp.governance_log
 WHERE tenant_id = 'gv' AND change_id > (SELECT max(change_id) FROM cscp.governance_log
                                           WHERE tenant_id = 'gv' AND changed_by = 'gv_app')
 ORDER BY change_id;
-- The owner (a superuser here) is never held to the admin role.
SELECT cscp.policy_set('gv', '{"admin_role": null}')->>'admin_role' AS admin_role;
SELECT try($$SELECT cscp.policy_set('gv', '{"admin_role": ""}')$$);
SELECT try($$SELECT cscp.policy_set('gv', '{"admin_role": 5}')$$);
-- An admin role that does not exist lets nobody but the owner change the tenant (fail closed).
SELECT cscp.policy_set('gv', '{"admin_role": "gv_no_such_role"}')->>'admin_role' AS admin_role;
SET ROLE gv_app_admin;
SET cscp.tenant_id = 'gv';
SELECT try($$SELECT cscp.authority_set('gv', 'cfo', 3)$$);
RESET ROLE;
RESET cscp.tenant_id;
SELECT cscp.policy_set('gv', '{"admin_role": null}')->>'admin_role' AS admin_role;

---------------------------------------------------------------------------------------------------
-- Operators read the log of their tenants only.
CREATE ROLE gv_op;
SELECT cscp.grant_operator('gv_op', ARRAY['gv2']);
SET ROLE gv_op;
SELECT tenant_id, object, object_key, action, changed_by FROM cscp.governance_log ORDER BY change_id;
SELECT try($$DELETE FROM cscp.governance_log$$);
RESET ROLE;

SELECT cscp.revoke_operator('gv_op');
SELECT cscp.revoke_app('gv_app');
SELECT cscp.revoke_app('gv_app_admin');
DROP OWNED BY gv_app, gv_app_admin, gv_op;
DROP ROLE gv_app, gv_app_admin, gv_admin, gv_op;
RESET cscp.clock;
