-- Tenancy of the state layers: an application role set up with cscp.grant_app reads and writes
-- its own tenant's identities, authorities, facts, working set and environment, through the API
-- and through direct SQL, and nothing of another tenant's; without cscp.tenant_id, nothing.
BEGIN;
SELECT plan(35);

CREATE ROLE tap_facts_app;
SELECT cscp.grant_app('tap_facts_app');
SET cscp.clock = '2026-09-01 10:00:00+00';

-- Another tenant's state, made by the superuser.
SELECT cscp.identity_set('globex', 'g-user', '{"user_name": "Gail"}');
SELECT cscp.authority_set('globex', 'ceo', 900);
SELECT cscp.fact_write('globex', 'g-user', 'g-1', 'salary', '"secret"');
SELECT cscp.ws_put('globex', 'g-sess', 'draft', '"secret draft"');
SELECT cscp.env_set('globex', 'g-sess', '{"location": "HQ"}');
CREATE TEMP TABLE globex_before AS
    SELECT (SELECT md5(string_agg(f::text, '|' ORDER BY f.fact_id)) FROM cscp.fact f WHERE tenant_id = 'globex') AS facts,
           (SELECT md5(i::text) FROM cscp.identity i WHERE tenant_id = 'globex') AS identity,
           (SELECT md5(string_agg(a::text, '|')) FROM cscp.authority a WHERE tenant_id = 'globex') AS authority,
           (SELECT md5(string_agg(w::text, '|')) FROM cscp.working_set w WHERE tenant_id = 'globex') AS ws,
           (SELECT md5(string_agg(e::text, '|')) FROM cscp.environment e WHERE tenant_id = 'globex') AS env;
GRANT SELECT ON globex_before TO tap_facts_app;

SET ROLE tap_facts_app;

-- Fail closed.
SELECT is((SELECT count(*) FROM cscp.fact), 0::bigint, 'without cscp.tenant_id no fact is visible');
SELECT is((SELECT count(*) FROM cscp.identity), 0::bigint, 'without cscp.tenant_id no identity is visible');
SELECT is((SELECT count(*) FROM cscp.authority WHERE tenant_id <> '*'), 0::bigint, 'without cscp.tenant_id only default ranks are visible');
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'u', 'f', 'k', '1')$$, '42501', 'cscp.tenant_id is not set',
                 'without cscp.tenant_id fact_write refuses');
SELECT throws_ok($$SELECT cscp.build_context('acme', 'u', 's')$$, '42501', 'cscp.tenant_id is not set',
                 'without cscp.tenant_id build_context refuses');

SET cscp.tenant_id = 'acme';

-- Everything, for its own tenant.
SELECT lives_ok($$SELECT cscp.identity_set('acme', 'ana', '{"user_name": "Ana", "authority": "employee"}')$$, 'identity_set');
SELECT lives_ok($$SELECT cscp.identity_replace('acme', 'ana', '{"user_name": "Ana", "authority": "manager"}', 'promoted')$$, 'identity_replace');
SELECT lives_ok($$SELECT cscp.authority_set('acme', 'intern', 50)$$, 'authority_set');
SELECT lives_ok($$SELECT cscp.fact_write('acme', 'ana', 'a-1', 'home_city', '"Lisbon"')$$, 'fact_write');
SELECT lives_ok($$SELECT cscp.fact_write('acme', 'ana', 'a-2', 'home_city', '"Porto"', supersedes => 'a-1')$$, 'fact_write superseding');
SELECT lives_ok($$SELECT cscp.fact_write('acme', 'ana', 'a-3', 'shipping', '"to Porto"', depends_on => '{a-2}')$$, 'fact_write with a dependency');
SELECT is((cscp.fact_current('acme', 'ana', 'a-1')).fact_id, 'a-2', 'fact_current');
SELECT is((SELECT count(*) FROM cscp.fact_history('acme', 'ana', 'a-1')), 2::bigint, 'fact_history');
SELECT lives_ok($$SELECT cscp.ws_put('acme', 'a-sess', 'draft', '"hello"')$$, 'ws_put');
SELECT is(cscp.ws_get('acme', 'a-sess', 'draft'), '"hello"'::jsonb, 'ws_get');
SELECT lives_ok($$SELECT cscp.env_set('acme', 'a-sess', '{"device": "phone"}')$$, 'env_set');
SELECT ok(strpos(cscp.build_context('acme', 'ana', 'a-sess') ->> 'text', 'home_city: Porto') > 0, 'build_context');
SELECT throws_ok($$SELECT cscp.fact_write('acme', 'ana', 'a-4', 'home_city', '"Faro"', '{"type": "user", "authority": "intern"}', supersedes => 'a-2')$$,
                 '42501', NULL, 'the authority check holds for the application too');
SELECT throws_ok($$UPDATE cscp.fact SET is_valid = true, superseded_by = NULL WHERE fact_id = 'a-1'$$, '55000', NULL,
                 'direct SQL cannot revive a superseded fact');
SELECT throws_ok($$DELETE FROM cscp.fact WHERE fact_id = 'a-1'$$, '42501', NULL,
                 'the application cannot delete facts');

-- Nothing for another tenant, through the functions.
SELECT throws_ok($$SELECT cscp.fact_write('globex', 'g-user', 'x', 'salary', '"0"', supersedes => 'g-1')$$, '42501',
                 'permission denied for tenant "globex"', 'fact_write for another tenant');
SELECT throws_ok($$SELECT cscp.fact_current('globex', 'g-user', 'g-1')$$, '42501', NULL, 'fact_current for another tenant');
SELECT throws_ok($$SELECT * FROM cscp.fact_history('globex', 'g-user', 'g-1')$$, '42501', NULL, 'fact_history for another tenant');
SELECT throws_ok($$SELECT cscp.build_context('globex', 'g-user', 'g-sess')$$, '42501', NULL, 'build_context for another tenant');
SELECT throws_ok($$SELECT cscp.identity_replace('globex', 'g-user', '{"user_name": "Eve"}', 'takeover')$$, '42501', NULL, 'identity_replace for another tenant');
SELECT throws_ok($$SELECT cscp.authority_set('globex', 'ceo', 1)$$, '42501', NULL, 'authority_set for another tenant');
SELECT throws_ok($$SELECT cscp.ws_get('globex', 'g-sess', 'draft')$$, '42501', NULL, 'ws_get for another tenant');
SELECT throws_ok($$SELECT cscp.env_set('globex', 'g-sess', '{}')$$, '42501', NULL, 'env_set for another tenant');
SELECT throws_ok($$SELECT cscp.authority_set('*', 'policy', 1)$$, '42501', NULL, 'authority_set of the defaults');

-- Nothing for another tenant, through direct SQL.
SELECT is((SELECT count(*) FROM cscp.fact WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s facts');
SELECT is((SELECT count(*) FROM cscp.working_set WHERE tenant_id = 'globex') + (SELECT count(*) FROM cscp.environment WHERE tenant_id = 'globex')
          + (SELECT count(*) FROM cscp.identity WHERE tenant_id = 'globex') + (SELECT count(*) FROM cscp.authority WHERE tenant_id = 'globex'),
          0::bigint, 'direct SELECT of another tenant''s working set, environment, identities and ranks');
WITH u AS (UPDATE cscp.fact SET needs_review = true WHERE tenant_id = 'globex' RETURNING 1) SELECT is(count(*), 0::bigint, 'direct UPDATE of another tenant''s facts touches nothing') FROM u;
WITH d AS (DELETE FROM cscp.working_set WHERE tenant_id = 'globex' RETURNING 1) SELECT is(count(*), 0::bigint, 'direct DELETE of another tenant''s working set touches nothing') FROM d;
SELECT throws_ok($$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, supersedes) VALUES ('globex', 'g-user', 'x', 'salary', '"0"', 'g-1')$$,
                 '42501', NULL, 'direct INSERT of a fact for another tenant');

RESET ROLE;
SELECT is((SELECT md5(string_agg(f::text, '|' ORDER BY f.fact_id)) FROM cscp.fact f WHERE tenant_id = 'globex')
          || (SELECT md5(i::text) FROM cscp.identity i WHERE tenant_id = 'globex')
          || (SELECT md5(string_agg(a::text, '|')) FROM cscp.authority a WHERE tenant_id = 'globex')
          || (SELECT md5(string_agg(w::text, '|')) FROM cscp.working_set w WHERE tenant_id = 'globex')
          || (SELECT md5(string_agg(e::text, '|')) FROM cscp.environment e WHERE tenant_id = 'globex'),
          (SELECT facts || identity || authority || ws || env FROM globex_before),
          'another tenant''s state layers are unchanged');

SELECT * FROM finish();
ROLLBACK;
