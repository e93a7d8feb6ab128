-- The command trigger takes a command's row out of cscp.command_window (its question answered)
-- by the row's time, tenant and command, through the list's index: when many questions share one
-- window end (asked by one statement, or under one clock), the row is found without reading the
-- others, whatever the table's statistics say.  As an application role, through the API.
BEGIN;
SELECT plan(4);

CREATE ROLE tap_wl_app;
SELECT cscp.grant_app('tap_wl_app', ARRAY['wl']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SET ROLE tap_wl_app;
SET cscp.tenant_id = 'wl';
-- 400 questions in 400 conversations, asked by one statement: one window end for all
SELECT count(*) FROM generate_series(1, 400) i,
       LATERAL cscp.context_open('wl', 'c' || i, 'u') o,
       LATERAL cscp.command_submit('wl', 'c' || i, 'u', 'k' || i, 'transfer', true, ARRAY['m' || i]) s;
RESET ROLE;
SELECT is((SELECT count(DISTINCT window_expires_at) FROM cscp.command_window WHERE tenant_id = 'wl'),
          1::bigint, '400 open questions share one window end');
ANALYZE cscp.command_window;
CREATE TEMP TABLE wl_before AS
    SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = 'cscp.command_window'::regclass;
GRANT SELECT ON wl_before TO tap_wl_app;

SET ROLE tap_wl_app;
SET cscp.tenant_id = 'wl';
SELECT is((SELECT outcome FROM cscp.confirm('wl', 'c7', 'u', 'y7', true)), 'confirmed', 'a yes confirms');
RESET ROLE;

SELECT is((SELECT s.seq_scan - b.seq_scan FROM pg_stat_xact_user_tables s, wl_before b
            WHERE s.relid = 'cscp.command_window'::regclass), 0::bigint,
          'taking its window out read no list whole');
SELECT cmp_ok((SELECT s.idx_tup_fetch - b.idx_tup_fetch FROM pg_stat_xact_user_tables s, wl_before b
                WHERE s.relid = 'cscp.command_window'::regclass), '<=', 2::bigint,
              'nor the windows of the other questions');
SELECT * FROM finish();
ROLLBACK;
