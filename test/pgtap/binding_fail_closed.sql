-- Bindings fail closed: once any binding exists, a role with no binding of its own or inherited
-- may name no tenant (42501), so a role bound to one tenant that is a member of a DBA's role
-- holding plain grants on cscp's tables cannot SET ROLE to it and read another tenant.  A binding
-- inherited from a group role binds; grant_app without tenants makes a trusted multi-tenant
-- service; while no binding exists, every role is unrestricted as before.
BEGIN;
SELECT plan(18);

SET cscp.clock = '2026-08-01 10:00:00+00';
SELECT cscp.context_open('fc_b', 'conv', 'user', '{"active_intent": "payroll"}') IS NOT NULL AS b_context;
SELECT cscp.context_open('fc_a', 'conv', 'user', '{"active_intent": "order"}') IS NOT NULL AS a_context;

-- A DBA's role with plain grants (and what row-level security needs to evaluate), no binding.
CREATE ROLE tap_fc_dba;
GRANT USAGE ON SCHEMA cscp TO tap_fc_dba;
GRANT SELECT, UPDATE ON cscp.context TO tap_fc_dba;
GRANT EXECUTE ON FUNCTION cscp.current_tenant() TO tap_fc_dba;
-- A role bound to fc_a, member of the DBA's role.
CREATE ROLE tap_fc_a;
SELECT cscp.grant_app('tap_fc_a', ARRAY['fc_a']);
GRANT tap_fc_dba TO tap_fc_a;
-- A login role inheriting the bound group role, and a trusted service.
CREATE ROLE tap_fc_login IN ROLE tap_fc_a;
CREATE ROLE tap_fc_svc;
SELECT cscp.grant_app('tap_fc_svc');

SET ROLE tap_fc_a;
SET cscp.tenant_id = 'fc_a';
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, 'the bound role reads its own tenant');
SET cscp.tenant_id = 'fc_b';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', 'permission denied for tenant "fc_b"',
                 'the bound role naming another tenant: 42501');

-- The SET ROLE path: the DBA's role has no binding, and bindings exist.
SET ROLE tap_fc_dba;
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', 'permission denied for tenant "fc_b"',
                 'SET ROLE to an unbound role with plain grants: naming another tenant is refused');
SELECT throws_ok($$SELECT cscp.current_tenant()$$, '42501', 'permission denied for tenant "fc_b"',
                 '... cscp.current_tenant() too');
SELECT throws_ok($$UPDATE cscp.context SET slots = '{}'$$, '42501', 'permission denied for tenant "fc_b"',
                 '... and an UPDATE');
SET cscp.tenant_id = 'fc_a';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', 'permission denied for tenant "fc_a"',
                 'the unbound role may not name even the tenant its member is bound to');
RESET cscp.tenant_id;
SELECT is((SELECT count(*) FROM cscp.context), 0::bigint, 'naming no tenant, it sees nothing');
RESET ROLE;

-- An inherited binding binds.
SET ROLE tap_fc_login;
SET cscp.tenant_id = 'fc_a';
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, 'a login role inheriting the bound role reads fc_a');
SELECT is(cscp.bound_tenants('app'), ARRAY['fc_a'], '... and is bound to fc_a');
SET cscp.tenant_id = 'fc_b';
SELECT throws_ok($$SELECT count(*) FROM cscp.context$$, '42501', NULL, '... and refused fc_b');
RESET ROLE;

-- The trusted service: explicit, by a binding without tenants.
SET ROLE tap_fc_svc;
SET cscp.tenant_id = 'fc_b';
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, 'grant_app without tenants: a trusted service names any tenant');
SELECT is(cscp.bound_tenants('app'), NULL, '... unrestricted');
SET cscp.tenant_id = 'fc_a';
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, '... either tenant');
RESET ROLE;

-- A BYPASSRLS role without a binding, which row-level security does not bind, is not held to none.
CREATE ROLE tap_fc_bypass BYPASSRLS;
GRANT USAGE ON SCHEMA cscp TO tap_fc_bypass;
GRANT EXECUTE ON FUNCTION cscp.current_tenant() TO tap_fc_bypass;
SET ROLE tap_fc_bypass;
SET cscp.tenant_id = 'fc_b';
SELECT is(cscp.current_tenant(), 'fc_b', 'a BYPASSRLS role without a binding names a tenant');
RESET ROLE;

-- Superusers stay unrestricted.
SET cscp.tenant_id = 'fc_b';
SELECT is(cscp.current_tenant(), 'fc_b', 'a superuser names any tenant');

-- No binding at all: every role is unrestricted, as before bindings existed.
RESET cscp.tenant_id;
SELECT cscp.revoke_app('tap_fc_a');
SELECT cscp.revoke_app('tap_fc_svc');
SELECT is((SELECT count(*) FROM cscp.tenant_binding), 0::bigint, 'no binding is left');
SET ROLE tap_fc_dba;
SET cscp.tenant_id = 'fc_b';
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, 'with no binding anywhere, the unbound role names a tenant as before');
SELECT is(cscp.current_tenant(), 'fc_b', '... and cscp.current_tenant() answers it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
