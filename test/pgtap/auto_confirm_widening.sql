-- With no admin_role, an application role may change its tenant's policy but not widen its
-- auto_confirm list, which lets a command skip the user's confirmation (42501, nothing changed),
-- through cscp.policy_set or a direct write; it may narrow it; the owner may widen it.
BEGIN;
SELECT plan(8);

CREATE ROLE tap_ac_app;
SELECT cscp.grant_app('tap_ac_app', ARRAY['ac']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SELECT cscp.policy_set('ac', '{"auto_confirm": ["ping", "lookup"]}') IS NOT NULL AS owner_sets;

SET ROLE tap_ac_app;
SET cscp.tenant_id = 'ac';
SELECT throws_ok($$SELECT cscp.policy_set('ac', '{"auto_confirm": ["ping", "lookup", "transfer"]}')$$,
                 '42501', 'permission denied to add "transfer" to auto_confirm of tenant "ac"',
                 'the application cannot add a command to its auto_confirm');
SELECT throws_ok($$UPDATE cscp.policy SET settings = settings || '{"auto_confirm": ["transfer"]}' WHERE tenant_id = 'ac'$$,
                 '42501', NULL, 'nor by a direct UPDATE');
SELECT is((SELECT settings -> 'auto_confirm' FROM cscp.policy WHERE tenant_id = 'ac'),
          '["ping", "lookup"]'::jsonb, 'the list is unchanged');
SELECT lives_ok($$SELECT cscp.policy_set('ac', '{"auto_confirm": ["ping"]}')$$,
                'the application may narrow it');
SELECT lives_ok($$SELECT cscp.policy_set('ac', '{"detail_level": "full"}')$$,
                'and change the rest of its policy');
SELECT throws_ok($$SELECT cscp.policy_set('ac', '{"auto_confirm": ["ping", "lookup"]}')$$, '42501', NULL,
                 'putting back what it removed is a widening too');
RESET ROLE;
SELECT lives_ok($$SELECT cscp.policy_set('ac', '{"auto_confirm": ["ping", "transfer"]}')$$,
                'the owner may widen it');
SELECT is((SELECT array_agg(changed_by::text ORDER BY change_id) FROM cscp.governance_log WHERE tenant_id = 'ac'),
          ARRAY[current_user::text, 'tap_ac_app', 'tap_ac_app', current_user::text],
          'every change made is logged with its role');
SELECT * FROM finish();
ROLLBACK;
