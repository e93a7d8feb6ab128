-- Governance (issue 34, items 4 and 7): the command registry decides whether a command mutates,
-- for a bound application role too; every change to policy, authority ranks and the registry is
-- in cscp.governance_log, which no application or operator role can write and operators read for
-- their tenants only; an admin_role keeps everyone else out (42501, nothing changed).
BEGIN;
SELECT plan(19);

CREATE ROLE tap_gov_app;
CREATE ROLE tap_gov_admin;
CREATE ROLE tap_gov_ops;
SELECT cscp.grant_app('tap_gov_app', ARRAY['tg']);
SELECT cscp.grant_operator('tap_gov_ops', ARRAY['tg']);
SET cscp.clock = '2026-10-02 10:00:00+00';

SET ROLE tap_gov_app;
SET cscp.tenant_id = 'tg';
SELECT lives_ok($$SELECT cscp.command_declare('tg', 'refund', true, false, 'high')$$,
                'the application declares a command of its tenant');
SELECT (cscp.context_open('tg', 'tg-1', 'u')).status;
SELECT throws_ok($$SELECT cscp.command_submit('tg', 'tg-1', 'u', 'tg-k1', 'refund', false, '{m1}')$$,
                 '22023', 'command "refund" is declared mutating',
                 'a read-only submit of a declared mutating command is refused');
SELECT is((SELECT state::text FROM cscp.command_submit('tg', 'tg-1', 'u', 'tg-k2', 'close_account', false, '{m2}')),
          'confirmation_required', 'an undeclared command is mutating whatever the caller says');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
                   VALUES ('tg', 'tg-k3', 'tg-1', 'u', 'refund', false)$$,
                 '22023', NULL, 'a direct INSERT cannot file a declared mutating command as read-only');
SELECT throws_ok($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('*', 'refund', false)$$,
                 '42501', NULL, 'the application cannot change the defaults of tenant *');
SELECT throws_ok($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('tg-other', 'x', false)$$,
                 '42501', NULL, 'the application cannot declare for another tenant');
SELECT throws_ok($$SELECT count(*) FROM cscp.governance_log$$, '42501', NULL,
                 'the application cannot read the governance log');
SELECT throws_ok($$INSERT INTO cscp.governance_log (tenant_id, object, action, changed_by, changed_at)
                   VALUES ('tg', 'policy', 'update', 'x', now())$$, '42501', NULL,
                 'the application cannot write the governance log');
SELECT lives_ok($$SELECT cscp.policy_set('tg', '{"detail_level": "full"}')$$, 'the application changes its policy');
SELECT lives_ok($$INSERT INTO cscp.authority (tenant_id, authority, rank) VALUES ('tg', 'cfo', 5)$$,
                'and its ranks by direct SQL');
RESET ROLE;

SELECT is((SELECT array_agg(object || ':' || action || ':' || changed_by ORDER BY change_id)
             FROM cscp.governance_log WHERE tenant_id = 'tg'),
          ARRAY['command_registry:insert:tap_gov_app', 'policy:insert:tap_gov_app', 'authority:insert:tap_gov_app'],
          'each change is recorded with the role that made it');
SELECT is((SELECT new_value -> 'settings' -> 'detail_level' FROM cscp.governance_log
            WHERE tenant_id = 'tg' AND object = 'policy'),
          '"full"'::jsonb, 'the new value is recorded');
SELECT throws_ok($$DELETE FROM cscp.governance_log WHERE tenant_id = 'tg'$$, '55000', NULL,
                 'the governance log is append-only for its owner too');

-- An admin role: the application without it is refused, through the API and direct SQL.
SELECT cscp.policy_set('tg', '{"admin_role": "tap_gov_admin"}') IS NOT NULL;
SET ROLE tap_gov_app;
SET cscp.tenant_id = 'tg';
SELECT throws_ok($$SELECT cscp.policy_set('tg', '{"auto_confirm": ["close_account"]}')$$, '42501', NULL,
                 'without the admin role the policy cannot change');
SELECT throws_ok($$SELECT cscp.authority_set('tg', 'intern', 1)$$, '42501', NULL,
                 'nor the authority ranks');
SELECT throws_ok($$UPDATE cscp.command_registry SET mutating = false WHERE tenant_id = 'tg'$$, '42501', NULL,
                 'nor the registry, by direct SQL');
RESET ROLE;
GRANT tap_gov_admin TO tap_gov_app;
SET ROLE tap_gov_app;
SELECT lives_ok($$SELECT cscp.authority_set('tg', 'intern', 1)$$, 'a member of the admin role may');
RESET ROLE;

-- Operators read the log of their tenants.
SELECT cscp.authority_set('tg-other', 'cfo', 9);
SET ROLE tap_gov_ops;
SELECT is((SELECT array_agg(DISTINCT tenant_id) FROM cscp.governance_log), ARRAY['tg'],
          'an operator bound to tg sees only tg''s changes');
SELECT throws_ok($$UPDATE cscp.governance_log SET changed_by = 'x'$$, '42501', NULL,
                 'an operator cannot change the log');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
