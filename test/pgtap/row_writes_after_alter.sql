-- One write path after ALTER TABLE, in a new session: the columns of cscp.command and
-- cscp.context are added and dropped before this session's first call of cscp, so nothing
-- cscp keeps per backend was set up from the old tables.  Every command call (command_submit,
-- confirm, command_transition, approve, command_recover, command_status) still answers as
-- before, as the application role; the rows it writes carry the new column's default.
-- (row_writes.sql does the same in a session that has used the tables before the ALTER.)
BEGIN;
SELECT plan(17);

ALTER TABLE cscp.command ADD COLUMN rw_gone text, ADD COLUMN rw_note text DEFAULT 'note';
ALTER TABLE cscp.command DROP COLUMN rw_gone;
ALTER TABLE cscp.context ADD COLUMN rw_gone text, ADD COLUMN rw_note text DEFAULT 'note';
ALTER TABLE cscp.context DROP COLUMN rw_gone;

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_rwa_app;
SELECT cscp.grant_app('tap_rwa_app');
SET ROLE tap_rwa_app;
SET cscp.tenant_id = 'acme';

-- The context, written by a plain INSERT (context_open: see the end).
SELECT lives_ok($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
                  VALUES ('acme', 'alt', 'u', cscp.now() + interval '30 minutes', interval '30 minutes')$$,
                'a context inserted by the application role');

SELECT command_id AS c1 FROM cscp.command_submit('acme', 'alt', 'u', 'alt-1', 'cancel_order', true,
                                                 ARRAY['m1'], '{}', 'order:1') \gset
SELECT results_eq(format('SELECT state::text, rw_note FROM cscp.command WHERE command_id = %L', :'c1'),
                  $$VALUES ('confirmation_required', 'note')$$,
                  'command_submit forms a command asking for confirmation, with the new column''s default');
SELECT results_eq($$SELECT state::text, replayed FROM cscp.command_submit('acme', 'alt', 'u', 'alt-1', 'cancel_order', true,
                                                                   ARRAY['m1'], '{}', 'order:1')$$,
                  $$VALUES ('confirmation_required', true)$$, 'the same key replays');
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'alt', 'u', 'y1', true, 'order:1')$$,
                  $$VALUES ('confirmed')$$, 'confirm confirms it');
SELECT results_eq($$SELECT status::text, slots ? 'pending_confirmation', rw_note FROM cscp.context
                     WHERE conversation_id = 'alt'$$,
                  $$VALUES ('active', false, 'note')$$, 'and releases its context');
SELECT results_eq(format('SELECT accepted, state::text, reason_code FROM cscp.command_transition(%L, %L)', :'c1', 'started'),
                  $$VALUES (false, 'confirmed', 'invalid_transition')$$, 'a refused step is returned');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L, %L)', :'c1', 'authz_pending', 'policy_check'),
                  $$VALUES (true, 'authz_pending')$$, 'authz_pending');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L)', :'c1', 'authorized'),
                  $$VALUES (true, 'authorized')$$, 'authorized');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L)', :'c1', 'started'),
                  $$VALUES (true, 'started')$$, 'started');
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L, %L)', :'c1', 'executed', 'done'),
                  $$VALUES (true, 'executed')$$, 'executed');
SELECT results_eq(format('SELECT state::text, terminal FROM cscp.command_status(%L)', :'c1'),
                  $$VALUES ('executed', true)$$, 'command_status');
SELECT is((SELECT string_agg(event_type, ' ' ORDER BY evidence_id) FROM cscp.evidence WHERE command_id = :'c1'),
          'command.accepted command.confirmation.requested command.confirmation.satisfied invalid_transition_attempt '
          'authz.requested authz.decided execution.started execution.executed',
          'one evidence row per step and one for the refusal');

SELECT command_id AS c2 FROM cscp.command_submit('acme', 'alt', 'u', 'alt-2', 'lookup', false, ARRAY['m2']) \gset
SELECT results_eq(format('SELECT accepted, state::text FROM cscp.command_transition(%L, %L, %L, %L)',
                         :'c2', 'authz_pending', 'approval_required', '{"approver_id": "boss"}'),
                  $$VALUES (true, 'authz_pending')$$, 'an approval request');
SELECT results_eq($$SELECT outcome FROM cscp.approve('acme', 'alt', 'boss', 'ok2', true)$$,
                  $$VALUES ('approved')$$, 'approve approves it');
SELECT command_id AS c3 FROM cscp.command_submit('acme', 'alt', 'u', 'alt-3', 'cancel_order', true,
                                                 ARRAY['m3'], '{}', 'order:3') \gset
SELECT results_eq($$SELECT outcome FROM cscp.confirm('acme', 'alt', 'u', 'n3', false)$$,
                  $$VALUES ('declined')$$, 'a no declines');
SELECT results_eq(format('SELECT state::text, replayed FROM cscp.command_recover(%L, %L, %L)', :'c3', 'reprocess', 'alt-3r'),
                  $$VALUES ('confirmation_required', false)$$, 'command_recover forms the recovery');

SELECT lives_ok($$SELECT cscp.context_open('acme', 'alt-open', 'u')$$, 'context_open after the ALTER');

SELECT * FROM finish();
ROLLBACK;
