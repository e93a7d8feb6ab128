-- No caller's search_path is trusted (issue 39, finding 1).  A tenant's role plants shadowing
-- operators, functions, aggregates and domains in public and in its pg_temp for every type cscp
-- compares (test/search_path/plant.sql); then every public function of cscp runs
-- (test/search_path/workload.sql and admin.sql): as a superuser that owns the extension, with
-- search_path public, pg_temp, pg_catalog (pg_catalog last, the worst case) and with the default
-- "$user", public; as an application role bound to its tenant; then the sweep, as a superuser,
-- with both paths, over what the workload left due.  Nothing planted may run, and the planting
-- role may not have become a superuser.  The planted objects are checked to fire first, so that
-- the test cannot pass by planting nothing.  The worker's part is in test/scripts/worker-test.sh.
BEGIN;
SELECT plan(15);
SET cscp.clock = '2026-10-01 10:00:00+00';
CREATE ROLE sp_app;
CREATE ROLE sp_adm_app;
CREATE ROLE sp_adm_ops;
CREATE ROLE sp_adm_gw;
SELECT cscp.grant_app('sp_app', ARRAY['sp-app']);
\ir ../search_path/plant.sql

-- The traps fire: as the planting role itself (no superuser, so no escalation), with the worst path.
SET ROLE sp_tenant;
SET search_path = public, pg_temp, pg_catalog;
SET sp.armed = on;
SELECT 'open'::cscp.conversation_state = 'open' AS enum_eq, 'a' || 'b' AS text_cat, now() IS NULL AS now_null,
       '{"a": 1}'::jsonb ->> 'a' AS jsonb_field, '1'::text AS domain_cast;
SET search_path = "$user", public;
SELECT 'open'::cscp.conversation_state = 'open' AS enum_eq, '2'::text AS temp_domain_cast;
SET sp.armed = off;
RESET search_path;
RESET ROLE;
SELECT ok((SELECT pg_catalog.array_agg(l.what ORDER BY l.what) FROM public.sp_log l)
              @> ARRAY['public.text (a domain)', 'public.->>(jsonb, text)', 'public.now()', 'public.||(text, text)',
                       'public.=(cscp.conversation_state, cscp.conversation_state)']::text[],
          'with pg_catalog last, the planted operators, functions and domains run when a statement resolves to them');
SELECT ok((SELECT pg_catalog.array_agg(l.what ORDER BY l.what) FROM public.sp_log l)
              @> ARRAY['pg_temp.text (a domain)']::text[]
          AND (SELECT pg_catalog.count(*) FROM public.sp_log l
                WHERE l.what = 'public.=(cscp.conversation_state, cscp.conversation_state)') = 2,
          'with the default path, an enum''s exact operator in public and a domain in pg_temp still win');
SELECT ok(NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = 'sp_tenant'),
          'the planting role is no superuser');
DELETE FROM public.sp_log;
SELECT pg_catalog.setval('public.sp_hits', 1, false);

-- The superuser that owns cscp, with pg_catalog last.
SET search_path = public, pg_temp, pg_catalog;
SET sp.armed = on;
\set t sp-su1
\ir ../search_path/workload.sql
\ir ../search_path/admin.sql
SET sp.armed = off;
RESET search_path;
SELECT is((SELECT pg_catalog.array_agg(DISTINCT l.what) FROM public.sp_log l), NULL,
          'superuser, search_path public, pg_temp, pg_catalog: nothing planted ran');
SELECT ok((SELECT pg_catalog.count(*) FROM cscp.command c WHERE c.tenant_id = 'sp-su1') >= 10
          AND (SELECT pg_catalog.count(*) FROM cscp.evidence e WHERE e.tenant_id = 'sp-su1') >= 30,
          'and the workload did its work');

-- The same with the default search_path ("$user", public: pg_catalog first, pg_temp first for types).
SET search_path = "$user", public;
SET sp.armed = on;
\set t sp-su2
\ir ../search_path/workload.sql
\ir ../search_path/admin.sql
SET sp.armed = off;
RESET search_path;
SELECT is((SELECT pg_catalog.array_agg(DISTINCT l.what) FROM public.sp_log l), NULL,
          'superuser, default search_path: nothing planted ran');
SELECT is((SELECT pg_catalog.count(*) FROM cscp.command c WHERE c.tenant_id = 'sp-su2'),
          (SELECT pg_catalog.count(*) FROM cscp.command c WHERE c.tenant_id = 'sp-su1'), 'and did the same work');

-- An application role bound to its tenant, pg_catalog last.
SET ROLE sp_app;
SET cscp.tenant_id = 'sp-app';
SET search_path = public, pg_temp, pg_catalog;
SET sp.armed = on;
\set t sp-app
\ir ../search_path/workload.sql
SET sp.armed = off;
RESET search_path;
RESET cscp.tenant_id;
RESET ROLE;
SELECT is((SELECT pg_catalog.array_agg(DISTINCT l.what) FROM public.sp_log l), NULL,
          'application role, search_path public, pg_temp, pg_catalog: nothing planted ran');
SELECT is((SELECT pg_catalog.count(*) FROM cscp.command c WHERE c.tenant_id = 'sp-app'),
          (SELECT pg_catalog.count(*) FROM cscp.command c WHERE c.tenant_id = 'sp-su1') - 1,
          'and did the same work (the gateway''s command aside)');
SELECT is((SELECT pg_catalog.count(*) FROM cscp.check_invariants()), 0::bigint,
          'every invariant holds after the workload');

-- The owner's cron: the sweep, once the questions lapsed, the conversations timed out and the
-- contexts expired; with pg_catalog last, then with the default path.
SET cscp.clock = '2026-10-03 10:00:00+00';
SET search_path = public, pg_temp, pg_catalog;
SET sp.armed = on;
SELECT cscp.sweep(1) AS first_sweep \gset
SELECT cscp.sweep() AS sweep \gset
SET sp.armed = off;
RESET search_path;
SET cscp.clock = '2027-10-03 10:00:00+00';
SET search_path = "$user", public;
SET sp.armed = on;
SELECT cscp.sweep() AS late_sweep \gset
SET sp.armed = off;
RESET search_path;
SELECT ok((:'first_sweep'::jsonb ->> 'conversations_timed_out')::int = 1
          AND (:'sweep'::jsonb ->> 'conversations_timed_out')::int >= 2
          AND (:'sweep'::jsonb ->> 'confirmations_lapsed')::int >= 1
          AND (:'sweep'::jsonb ->> 'contexts_expired')::int >= 1
          AND (:'sweep'::jsonb ->> 'documents_deleted')::int >= 1,
          'the sweep timed out conversations, lapsed questions and expired contexts');
SELECT ok((:'late_sweep'::jsonb ->> 'contexts_purged')::int >= 1
          AND (:'late_sweep'::jsonb ->> 'commands_purged')::int >= 1,
          'the late sweep purged contexts and commands');
SELECT is((SELECT pg_catalog.array_agg(DISTINCT l.what) FROM public.sp_log l), NULL,
          'the sweep, with either search_path: nothing planted ran');

SELECT is(pg_catalog.nextval('public.sp_hits'), 1::bigint,
          'no planted object ran at all, even in a subtransaction rolled back');
SELECT ok(NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = 'sp_tenant'),
          'the planting role is still no superuser');
SELECT * FROM finish();
ROLLBACK;
