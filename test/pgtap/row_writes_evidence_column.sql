-- One write path, issue 30's reproduction: after ALTER TABLE cscp.evidence ADD COLUMN note text,
-- a new session's command calls still work (they failed with XX000 while the evidence was
-- appended below the executor).  The ALTER comes before this session's first call of cscp.
BEGIN;
SELECT plan(4);

ALTER TABLE cscp.evidence ADD COLUMN note text;

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_rwe_app;
SELECT cscp.grant_app('tap_rwe_app');
SET ROLE tap_rwe_app;
SET cscp.tenant_id = 'acme';

SELECT lives_ok($$SELECT cscp.context_open('acme', 'ev', 'u')$$, 'context_open');
SELECT lives_ok($$SELECT cscp.command_submit('acme', 'ev', 'u', 'ev-1', 'cancel_order', true, ARRAY['m1'], '{}', 'order:1')$$,
                'command_submit');
SELECT lives_ok($$SELECT cscp.confirm('acme', 'ev', 'u', 'y1', true, 'order:1')$$, 'confirm');
SELECT lives_ok($$SELECT cscp.command_transition((SELECT c.command_id FROM cscp.command c
                                                   WHERE c.idempotency_key = 'ev-1'),
                                                  'authz_pending', 'policy_check')$$,
                'command_transition');

SELECT * FROM finish();
ROLLBACK;
