-- The three conformance cases of the StateBench state-based context spec, as cscp runs them:
--   1. supersession: a fact the user replaced never comes back into the context;
--   2. frequency of mention does not matter: a value said many times loses to the one that
--      replaced it, said once;
--   3. authority: an intern cannot override a CFO's policy; the policy stays in force.
BEGIN;
SELECT plan(20);
SET cscp.clock = '2026-09-01 09:00:00+00';

-- 1. Supersession.
SELECT cscp.identity_set('conf', 'maria', '{"user_name": "Maria", "authority": "employee"}');
SELECT lives_ok($$SELECT cscp.fact_write('conf', 'maria', 'addr-1', 'home_address', '"Rua Augusta 1, Lisbon"')$$,
                'Maria says she lives in Lisbon');
SET cscp.clock = '2026-09-02 09:00:00+00';
SELECT is((cscp.fact_write('conf', 'maria', 'addr-2', 'home_address', '"Rua de Santa Catarina 5, Porto"',
                           supersedes => 'home_address')).supersedes, 'addr-1',
          'she moved: the new address supersedes the old one by key');
SELECT is((SELECT is_valid FROM cscp.fact WHERE tenant_id = 'conf' AND fact_id = 'addr-1'), false,
          'the old address is no longer valid');
SELECT is((cscp.fact_current('conf', 'maria', 'addr-1')).fact_id, 'addr-2',
          'the current fact of the old address''s chain is the new address');
SELECT ok(strpos(cscp.build_context('conf', 'maria', 's-1', 'Where should we ship the parcel?') ->> 'text', 'Porto') > 0,
          'the context tells the new address');
SELECT ok(strpos(cscp.build_context('conf', 'maria', 's-1', 'Where should we ship the parcel? Lisbon?') ->> 'text', 'Lisbon') = 0,
          'the old address never comes back, even when the query names it');
SELECT is((SELECT array_agg(fact_id ORDER BY created_at) FROM cscp.fact_history('conf', 'maria', 'addr-2')),
          ARRAY['addr-1', 'addr-2'], 'the history keeps both, oldest first');

-- 2. Frequency of mention does not matter.
SELECT cscp.policy_set('conf', '{"supersede_same_key": true}');
SELECT lives_ok($$SELECT cscp.fact_write('conf', 'maria', 'drink-' || i, 'favourite_drink', '"coffee"')
                    FROM generate_series(1, 5) i$$,
                'coffee is mentioned five times (each mention supersedes the one before)');
SELECT lives_ok($$SELECT cscp.fact_write('conf', 'maria', 'note-' || i, 'note_' || i, '"coffee with the team"')
                    FROM generate_series(1, 5) i$$,
                'and coffee appears in five other facts');
SET cscp.clock = '2026-09-03 09:00:00+00';
SELECT is((cscp.fact_write('conf', 'maria', 'drink-tea', 'favourite_drink', '"green tea"')).supersedes, 'drink-5',
          'green tea, mentioned once, supersedes the last coffee');
SELECT is((SELECT count(*) FROM cscp.fact WHERE tenant_id = 'conf' AND key = 'favourite_drink' AND is_valid), 1::bigint,
          'one valid favourite drink');
SELECT is((cscp.fact_current('conf', 'maria', 'drink-1')).value, '"green tea"'::jsonb,
          'the first coffee''s chain ends in green tea');
SELECT ok(strpos(cscp.build_context('conf', 'maria', 's-1', 'favourite drink coffee') ->> 'text',
                 'favourite_drink: green tea') > 0,
          'the context tells green tea, though the query says coffee');
SELECT ok(strpos(cscp.build_context('conf', 'maria', 's-1', 'favourite drink coffee') ->> 'text',
                 'favourite_drink: coffee') = 0,
          'and never coffee as the favourite drink');

-- 3. An intern cannot override a CFO policy.
SELECT cscp.authority_set('conf', 'cfo', 500);
SELECT cscp.authority_set('conf', 'intern', 50);
SELECT lives_ok($$SELECT cscp.fact_write('conf', 'maria', 'limit-cfo', 'expense_limit', '"500 EUR per trip"',
                                         '{"type": "policy", "authority": "cfo"}', is_constraint => true,
                                         constraint_type => 'budget')$$,
                'the CFO sets the expense limit');
SELECT throws_ok($$SELECT cscp.fact_write('conf', 'maria', 'limit-intern', 'expense_limit', '"no limit"',
                                          '{"type": "user", "authority": "intern"}', supersedes => 'expense_limit')$$,
                 '42501', 'authority "intern" cannot supersede a fact of authority "cfo"',
                 'an intern''s override is refused');
SELECT is((SELECT count(*) FROM cscp.fact WHERE tenant_id = 'conf' AND fact_id = 'limit-intern'), 0::bigint,
          'nothing of the intern''s write was stored');
SELECT is((cscp.fact_current('conf', 'maria', 'limit-cfo')).fact_id, 'limit-cfo', 'the CFO''s limit is still current');
SELECT ok(strpos(cscp.build_context('conf', 'maria', 's-1', 'can I spend more?', 80) ->> 'text',
                 'expense_limit: 500 EUR per trip (budget)') > 0,
          'the limit is in the context, as a constraint, even on a small budget');
SELECT is((cscp.fact_write('conf', 'maria', 'limit-cfo-2', 'expense_limit', '"800 EUR per trip"',
                           '{"type": "policy", "authority": "cfo"}', supersedes => 'limit-cfo',
                           is_constraint => true)).supersedes, 'limit-cfo',
          'the CFO may change it');

SELECT * FROM finish();
ROLLBACK;
