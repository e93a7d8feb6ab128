-- Row counts checked on the LangGraph surface too (checkpoint.sql): a DBA's BEFORE ROW trigger
-- that returns NULL skips a write of checkpoint_touch, checkpoint_put, store_put or
-- session_add_items; each raises 27000 and changes nothing, rather than answer as if it had
-- written (session_add_items answered the count of items it had not added).  As the
-- application role bound to the tenant, and as the owner.
BEGIN;
SELECT plan(12);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE FUNCTION public.tap_lg_skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE ROLE tap_lg_app;
SELECT cscp.grant_app('tap_lg_app', ARRAY['lg']);
SELECT cscp.checkpoint_put('lg', 'th-0', '', 'c-0', NULL, '{"v": 4, "channel_versions": {}}', '{}') IS NOT NULL AS put;
SELECT cscp.session_add_items('lg', 's-0', '[{"role": "user", "content": "hi"}]') AS added;

CREATE TRIGGER zz_tap_skip BEFORE INSERT OR UPDATE ON cscp.checkpoint_thread FOR EACH ROW EXECUTE FUNCTION public.tap_lg_skip();
CREATE TRIGGER zz_tap_skip BEFORE INSERT OR UPDATE ON cscp.checkpoint FOR EACH ROW EXECUTE FUNCTION public.tap_lg_skip();
CREATE TRIGGER zz_tap_skip BEFORE INSERT OR UPDATE ON cscp.store_item FOR EACH ROW EXECUTE FUNCTION public.tap_lg_skip();
CREATE TRIGGER zz_tap_skip BEFORE INSERT ON cscp.session_item FOR EACH ROW EXECUTE FUNCTION public.tap_lg_skip();

SET ROLE tap_lg_app;
SET cscp.tenant_id = 'lg';
SELECT throws_ok($$SELECT cscp.checkpoint_touch('lg', 'th-1')$$, '27000', NULL,
                 'app role: checkpoint_touch whose thread INSERT is skipped raises');
SELECT throws_ok($$SELECT cscp.checkpoint_put('lg', 'th-1', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}')$$,
                 '27000', NULL, 'app role: checkpoint_put raises');
SELECT throws_ok($$SELECT cscp.store_put('lg', '{users}', 'k', '{"v": 1}')$$, '27000', NULL,
                 'app role: store_put whose INSERT is skipped raises');
SELECT throws_ok($$SELECT cscp.session_add_items('lg', 's-0', '[{"role": "user", "content": "again"}]')$$, '27000', NULL,
                 'app role: session_add_items whose items are skipped raises, not "1 added"');
SELECT is((SELECT count(*) FROM cscp.session_item), 1::bigint, '... the session holds its one item');
SELECT is((SELECT next_seq FROM cscp.agent_session WHERE session_id = 's-0'), 2::bigint, '... and its head is unchanged');
SELECT is((SELECT count(*) FROM cscp.store_item), 0::bigint, 'no store item was written');
RESET ROLE;

-- the owner, and a checkpoint whose thread is written but not the checkpoint itself
DROP TRIGGER zz_tap_skip ON cscp.checkpoint_thread;
SELECT throws_ok($$SELECT cscp.checkpoint_put('lg', 'th-2', '', 'c-1', NULL, '{"v": 4, "channel_versions": {}}', '{}')$$,
                 '27000', NULL, 'owner: checkpoint_put whose checkpoint INSERT is skipped raises');
SELECT is((SELECT count(*) FROM cscp.checkpoint_thread WHERE thread_id = 'th-2'), 0::bigint, '... and leaves no thread');
SELECT throws_ok($$SELECT cscp.store_put('lg', '{users}', 'k', '{"v": 1}')$$, '27000', NULL, 'owner: store_put raises');
SELECT throws_ok($$SELECT cscp.session_add_items('lg', 's-1', '[{"role": "user", "content": "hi"}]')$$, '27000', NULL,
                 'owner: session_add_items raises');
SELECT is((SELECT count(*) FROM cscp.agent_session WHERE session_id = 's-1'), 0::bigint, '... and leaves no session');

SELECT * FROM finish();
ROLLBACK;
