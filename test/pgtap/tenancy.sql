-- Tenancy: a non-superuser application role set up with cscp.grant_app can do everything the
-- API offers for its own tenant and nothing for another, through the functions or through
-- direct SQL on the tables; without cscp.tenant_id it sees and writes nothing; it cannot move
-- the clock.
BEGIN;
SELECT plan(48);

CREATE ROLE tap_app;
SELECT cscp.grant_app('tap_app');
SET cscp.clock = '2026-08-01 10:00:00+00';

-- Another tenant's data, made by the superuser.
SELECT context_id AS globex_ctx FROM cscp.context_open('globex', 'g-conv', 'g-user', '{"active_intent": "payroll"}') \gset
SELECT cscp.doc_put('globex', 'g-sess', 'ns', '{"salary": 1}', 600);
SELECT cscp.policy_set('globex', '{"detail_level": "full"}');
CREATE TEMP TABLE globex_before AS
    SELECT (SELECT count(*) FROM cscp.context WHERE tenant_id = 'globex') AS contexts,
           (SELECT version FROM cscp.context WHERE tenant_id = 'globex') AS version,
           (SELECT cscp.doc_get('globex', 'g-sess', 'ns')) AS doc,
           (SELECT settings FROM cscp.policy WHERE tenant_id = 'globex') AS policy;

SET ROLE tap_app;

-- Fail closed: no tenant named, nothing visible, nothing callable.
SELECT is((SELECT count(*) FROM cscp.context), 0::bigint, 'without cscp.tenant_id no context is visible');
SELECT is((SELECT count(*) FROM cscp.document), 0::bigint, 'without cscp.tenant_id no document is visible');
SELECT is((SELECT count(*) FROM cscp.policy WHERE tenant_id <> '*'), 0::bigint, 'without cscp.tenant_id only default policies are visible');
SELECT throws_ok($$SELECT cscp.context_open('acme', 'c', 'u')$$, '42501', 'cscp.tenant_id is not set',
                 'without cscp.tenant_id the functions refuse');
SELECT throws_ok($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('acme', 's', 'n', '{}', cscp.now() + interval '1 hour')$$, '42501', NULL,
                 'without cscp.tenant_id direct inserts are refused');

SET cscp.tenant_id = 'acme';

-- Everything the API offers, for its own tenant.
SELECT lives_ok($$SELECT cscp.context_open('acme', 'a-conv', 'a-user', '{"active_intent": "order"}')$$, 'context_open for its own tenant');
SELECT is((SELECT status FROM cscp.context_get('acme', 'a-conv', 'a-user')), 'active'::cscp.context_status, 'context_get for its own tenant');
SELECT lives_ok($$SELECT cscp.slot_set((SELECT context_id FROM cscp.context_get('acme', 'a-conv', 'a-user')), 'x_step', '1')$$, 'slot_set on its own context');
SELECT lives_ok($$SELECT cscp.context_transition((SELECT context_id FROM cscp.context_get('acme', 'a-conv', 'a-user')), 'pending')$$, 'context_transition on its own context');
SELECT is(cscp.doc_put('acme', 'a-sess', 'ns', '{"x": 1}', 600), 'a-sess:ns', 'doc_put for its own tenant');
SELECT is(cscp.doc_get('acme', 'a-sess', 'ns'), '{"x": 1}'::jsonb, 'doc_get for its own tenant');
SELECT ok(cscp.doc_delete('acme', 'a-sess', 'ns'), 'doc_delete for its own tenant');
SELECT is(cscp.policy_set('acme', '{"context_ttl": "5 minutes"}') ->> 'context_ttl', '5 minutes', 'policy_set for its own tenant');
SELECT lives_ok($$SELECT cscp.sweep(10)$$, 'sweep runs, bound to its own tenant');
SELECT is((SELECT count(*) FROM cscp.context), 1::bigint, 'direct SELECT shows its own context only');

-- Nothing for another tenant, through the functions.
SELECT throws_ok($$SELECT cscp.context_open('globex', 'g-conv', 'g-user')$$, '42501', 'permission denied for tenant "globex"', 'context_open for another tenant');
SELECT throws_ok($$SELECT cscp.context_get('globex', 'g-conv', 'g-user')$$, '42501', NULL, 'context_get for another tenant');
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', :'globex_ctx', 'x_hack', '1'), '22023', NULL, 'slot_set on another tenant''s context: no such context');
SELECT throws_ok(format('SELECT cscp.context_transition(%L, %L)', :'globex_ctx', 'closed'), '22023', NULL, 'context_transition on another tenant''s context: no such context');
SELECT throws_ok($$SELECT cscp.doc_put('globex', 'g-sess', 'ns', '{"salary": 2}', 600)$$, '42501', NULL, 'doc_put for another tenant');
SELECT throws_ok($$SELECT cscp.doc_get('globex', 'g-sess', 'ns')$$, '42501', NULL, 'doc_get for another tenant');
SELECT throws_ok($$SELECT cscp.doc_delete('globex', 'g-sess', 'ns')$$, '42501', NULL, 'doc_delete for another tenant');
SELECT throws_ok($$SELECT cscp.policy_set('globex', '{"detail_level": "none"}')$$, '42501', NULL, 'policy_set for another tenant');
SELECT throws_ok($$SELECT cscp.policy_set('*', '{"context_ttl": "1 minute"}')$$, '42501', NULL, 'policy_set of the defaults');

-- Nothing for another tenant, through direct SQL.
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s contexts');
SELECT is((SELECT count(*) FROM cscp.document WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s documents');
SELECT is((SELECT count(*) FROM cscp.policy WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s policy');
WITH u AS (UPDATE cscp.context SET slots = '{}' WHERE tenant_id = 'globex' RETURNING 1) SELECT is(count(*), 0::bigint, 'direct UPDATE of another tenant''s contexts touches nothing') FROM u;
WITH d AS (DELETE FROM cscp.context WHERE tenant_id = 'globex' RETURNING 1) SELECT is(count(*), 0::bigint, 'direct DELETE of another tenant''s contexts touches nothing') FROM d;
WITH d AS (DELETE FROM cscp.document WHERE tenant_id = 'globex' RETURNING 1) SELECT is(count(*), 0::bigint, 'direct DELETE of another tenant''s documents touches nothing') FROM d;
WITH u AS (UPDATE cscp.policy SET settings = '{}' WHERE tenant_id IN ('globex', '*') RETURNING 1) SELECT is(count(*), 0::bigint, 'direct UPDATE of another tenant''s or the default policy touches nothing') FROM u;
SELECT throws_ok($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                   VALUES ('globex', 'x', 'y', cscp.now() + interval '1 hour', interval '1 hour')$$, '42501', NULL,
                 'direct INSERT of a context for another tenant');
SELECT throws_ok($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('globex', 's', 'n', '{}', cscp.now() + interval '1 hour')$$, '42501', NULL,
                 'direct INSERT of a document for another tenant');
SELECT throws_ok($$INSERT INTO cscp.policy (tenant_id, settings) VALUES ('globex', '{}')$$, '42501', NULL,
                 'direct INSERT of a policy for another tenant');
SELECT throws_ok($$UPDATE cscp.policy SET settings = '{"context_ttl": "forever", "x": 1}' WHERE tenant_id = 'acme'$$, '22023', NULL,
                 'direct UPDATE of its own policy is held to the key and type rules');
SELECT is(cscp.doc_put('acme', 'a-sess-2', 'ns', '{"y": 2}', 600), 'a-sess-2:ns', 'a second document of its own');
SELECT throws_ok($$UPDATE cscp.document SET tenant_id = 'globex' WHERE tenant_id = 'acme'$$, '42501', NULL,
                 'moving a document to another tenant is refused');
SELECT throws_ok($$UPDATE cscp.context SET tenant_id = 'globex' WHERE tenant_id = 'acme'$$, '42501', NULL,
                 'moving a context to another tenant is refused');

-- No clock, no administration, no operator views.
SELECT is((SELECT count(*) FROM information_schema.routine_privileges WHERE grantee = 'PUBLIC' AND routine_schema = 'cscp'), 0::bigint, 'no cscp function is executable by PUBLIC');
SELECT throws_ok($$SET cscp.clock = '2000-01-01 00:00:00+00'$$, '42501', NULL, 'SET cscp.clock is refused');
SELECT throws_ok($$SELECT set_config('cscp.clock', '2030-01-01 00:00:00+00', true)$$, '42501', NULL, 'set_config of cscp.clock is refused');
SELECT throws_ok($$SELECT cscp.grant_app('tap_app')$$, '42501', NULL, 'grant_app is not the application''s');
SELECT throws_ok($$SELECT * FROM cscp.show_active_context('globex', 'g-conv')$$, '42501', NULL, 'show_active_context is not the application''s');
SELECT throws_ok($$SELECT * FROM cscp.inspection_log$$, '42501', NULL, 'inspection_log is closed to the application');
SELECT throws_ok($$SELECT * FROM cscp.active_context$$, '42501', NULL, 'the operator view is closed to the application');

RESET ROLE;
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'globex'), (SELECT contexts FROM globex_before), 'another tenant''s contexts are all still there');
SELECT is((SELECT version FROM cscp.context WHERE tenant_id = 'globex'), (SELECT version FROM globex_before), 'another tenant''s context is unchanged');
SELECT is(cscp.doc_get('globex', 'g-sess', 'ns'), (SELECT doc FROM globex_before), 'another tenant''s document is unchanged');

SELECT * FROM finish();
ROLLBACK;
