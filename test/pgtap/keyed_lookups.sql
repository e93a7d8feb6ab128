-- The look-ups of a yes by its key (the command trigger's check that cscp.answer records the
-- answer a step to confirmed appends, cscp.confirm's look-up of its command and of an answer
-- already given, its replay) take cscp.answer's primary key whatever the table's statistics
-- say: freshly analyzed with a few rows, the planner would read it whole, every answer of every
-- tenant on each call.  And the caller's enable_seqscan is its own again afterwards, after a
-- refusal too.  As an application role, through the API and by a direct UPDATE.
BEGIN;
SELECT plan(9);

CREATE ROLE tap_kl_app;
SELECT cscp.grant_app('tap_kl_app', ARRAY['kl']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SET ROLE tap_kl_app;
SET cscp.tenant_id = 'kl';
SELECT (cscp.context_open('kl', 'c1', 'u')).status;
SELECT state FROM cscp.command_submit('kl', 'c1', 'u', 'k1', 'transfer', true, '{m1}');
SELECT outcome FROM cscp.confirm('kl', 'c1', 'u', 'm2', true);
SELECT state FROM cscp.command_submit('kl', 'c1', 'u', 'k2', 'transfer', true, '{m3}');
SELECT outcome FROM cscp.confirm('kl', 'c1', 'u', 'm4', false);
RESET ROLE;
-- a table of a few rows, analyzed: a plan made from these statistics reads it whole
ANALYZE cscp.answer;
CREATE TEMP TABLE kl_before AS
    SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relid = 'cscp.answer'::regclass;
GRANT SELECT ON kl_before TO tap_kl_app;

SET ROLE tap_kl_app;
SET cscp.tenant_id = 'kl';
SELECT state FROM cscp.command_submit('kl', 'c1', 'u', 'k3', 'transfer', true, '{m5}');
SELECT is((SELECT outcome FROM cscp.confirm('kl', 'c1', 'u', 'm6', true)), 'confirmed',
          'a yes confirms');
SELECT is((SELECT outcome FROM cscp.confirm('kl', 'c1', 'u', 'm6', true)), 'confirmed',
          'and is replayed when its message comes again');
SELECT is(current_setting('enable_seqscan'), 'on', 'the caller''s enable_seqscan is back');
SELECT state FROM cscp.command_submit('kl', 'c1', 'u', 'k4', 'transfer', true, '{m7}');
SELECT throws_ok($$UPDATE cscp.command SET state = 'confirmed', message_ids = message_ids || '{m8}'
                    WHERE tenant_id = 'kl' AND idempotency_key = 'k4'$$,
                 '55000', NULL, 'a direct step to confirmed with no answer recorded is refused');
SELECT is(current_setting('enable_seqscan'), 'on', 'enable_seqscan is back after the refusal too');
SET LOCAL enable_seqscan = off;
SELECT is((SELECT outcome FROM cscp.confirm('kl', 'c1', 'u', 'm9', true)), 'confirmed',
          'a yes with the caller''s own setting');
SELECT is(current_setting('enable_seqscan'), 'off', 'which it keeps');
SET LOCAL enable_seqscan = on;
RESET ROLE;

SELECT is((SELECT s.seq_scan - b.seq_scan FROM pg_stat_xact_user_tables s, kl_before b
            WHERE s.relid = 'cscp.answer'::regclass), 0::bigint,
          'no look-up of an answer read the table whole');
SELECT cmp_ok((SELECT s.idx_scan - b.idx_scan FROM pg_stat_xact_user_tables s, kl_before b
                WHERE s.relid = 'cscp.answer'::regclass), '>=', 4::bigint,
              'each went through its primary key');
SELECT * FROM finish();
ROLLBACK;
