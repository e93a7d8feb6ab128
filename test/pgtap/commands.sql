-- Commands, confirmations and evidence under the application and operator roles.
--
-- An application role set up with cscp.grant_app, with cscp.tenant_id set, drives a command
-- through the API (submit, replay, confirm, transitions) and reads only its own tenant's
-- commands, frames, answers and evidence. It can neither write, change, delete nor truncate
-- evidence; nor delete a command; a direct UPDATE of a command is held to the lifecycle (55000),
-- including the confirmation and approval windows command_transition enforces, and cannot
-- change what the command is. It cannot move the clock, turn notifications on or
-- off, or call the administration and operator functions. Without cscp.tenant_id it sees
-- nothing. An operator role (cscp.grant_operator) cannot read the tables behind the views.
BEGIN;
SELECT plan(73);

CREATE ROLE tap_cmd_app;
SELECT cscp.grant_app('tap_cmd_app');
CREATE ROLE tap_cmd_op;
SELECT cscp.grant_operator('tap_cmd_op');
SET cscp.clock = '2026-08-01 10:00:00+00';

-- Another tenant's command, confirmed, made by the superuser: a frame, an answer, evidence.
SELECT status FROM cscp.context_open('globex', 'g-conv', 'g-user');
SELECT command_id AS globex_cmd
  FROM cscp.command_submit('globex', 'g-conv', 'g-user', 'g-key', 'wire', true, ARRAY['g-m1'], '{}', 'g-fp') \gset
SELECT outcome FROM cscp.confirm('globex', 'g-conv', 'g-user', 'g-yes', true, 'g-fp');
CREATE TEMP TABLE globex_before AS
    SELECT (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'globex') AS evidence,
           (SELECT version FROM cscp.command WHERE tenant_id = 'globex') AS version;

SET ROLE tap_cmd_app;

-- Fail closed: no tenant named, nothing callable.
SELECT throws_ok($$SELECT cscp.command_submit('acme', 'a-conv', 'a-user', 'k', 'refund', true, '{}')$$,
                 '42501', 'cscp.tenant_id is not set', 'without cscp.tenant_id command_submit refuses');
SELECT throws_ok($$SELECT cscp.confirm('globex', 'g-conv', 'g-user', 'g-yes-2', true)$$,
                 '42501', NULL, 'without cscp.tenant_id confirm refuses');

SET cscp.tenant_id = 'acme';

-- Everything the API offers, for its own tenant.
SELECT lives_ok($$SELECT cscp.context_open('acme', 'a-conv', 'a-user')$$, 'context_open for its own tenant');
SELECT command_id AS acme_cmd, state AS acme_state
  FROM cscp.command_submit('acme', 'a-conv', 'a-user', 'a-key', 'refund', true, ARRAY['a-m1'],
                           '{"amount": 5}', 'a-fp') \gset
SELECT is(:'acme_state'::text, 'confirmation_required', 'command_submit forms a mutating command that asks for confirmation');
SELECT is((SELECT row(r.command_id = :'acme_cmd', r.replayed)::text
             FROM cscp.command_submit('acme', 'a-conv', 'a-user', 'a-key', 'refund', true, ARRAY['a-m1'],
                                      '{"amount": 5}', 'a-fp') r),
          '(t,t)', 'the same idempotency key replays the same command');
SELECT is((SELECT row(r.outcome, r.command_id = :'acme_cmd')::text
             FROM cscp.confirm('acme', 'a-conv', 'a-user', 'a-yes', true, 'a-fp') r),
          '(confirmed,t)', 'confirm: yes with the matching fingerprint confirms the command');
SELECT is((SELECT outcome FROM cscp.confirm('acme', 'a-conv', 'a-user', 'a-yes', true, 'a-fp')),
          'confirmed', 'confirm: the same message again replays its first outcome');
SELECT is((SELECT count(*) FROM cscp.answer WHERE message_id = 'a-yes'), 1::bigint,
          'one answer row for the message answered twice');
-- A message answered while its question stays pending (another target) is replayed too.
SELECT cscp.context_open('acme', 'a-conv2', 'a-user') IS NOT NULL AS opened;
SELECT command_id AS acme_cmd2
  FROM cscp.command_submit('acme', 'a-conv2', 'a-user', 'a-key2', 'refund', true, ARRAY['b-m1'],
                           '{"amount": 6}', 'b-fp') \gset
SELECT is((SELECT outcome FROM cscp.confirm('acme', 'a-conv2', 'a-user', 'b-wrong', true, 'other-fp')),
          'target_mismatch', 'confirm: a yes for another target confirms nothing; the question stays');
SELECT is((SELECT row(r.outcome, c.state)::text
             FROM cscp.confirm('acme', 'a-conv2', 'a-user', 'b-wrong', true, 'b-fp') r,
                  cscp.command c WHERE c.command_id = :'acme_cmd2'),
          '(target_mismatch,confirmation_required)',
          'confirm: that message again, while its question is pending, replays its first outcome');
SELECT is((SELECT row(accepted, state)::text FROM cscp.command_transition(:'acme_cmd', 'authz_pending')),
          '(t,authz_pending)', 'command_transition to authz_pending');
SELECT is((SELECT row(accepted, state)::text FROM cscp.command_transition(:'acme_cmd', 'authorized')),
          '(t,authorized)', 'command_transition to authorized');
SELECT is((SELECT row(accepted, state)::text FROM cscp.command_transition(:'acme_cmd', 'started')),
          '(t,started)', 'command_transition to started');
SELECT is((SELECT row(accepted, state)::text FROM cscp.command_transition(:'acme_cmd', 'executed')),
          '(t,executed)', 'command_transition to executed');
SELECT is((SELECT row(accepted, state, reason_code)::text FROM cscp.command_transition(:'acme_cmd', 'started')),
          '(f,executed,invalid_transition)', 'a refused transition is returned, not raised');
SELECT is((SELECT terminal FROM cscp.command_status(:'acme_cmd')), true, 'command_status of its own command');
SELECT is((SELECT count(*) FROM cscp.evidence WHERE command_id = :'acme_cmd'
             AND event_type = 'invalid_transition_attempt'), 1::bigint,
          'the refused transition left evidence the application can read');
SELECT is_empty($$SELECT * FROM cscp.evidence_verify('acme')$$, 'its own evidence chains verify');

-- A second command, left pending, for the direct-SQL checks below.
SELECT command_id AS acme_cmd2
  FROM cscp.command_submit('acme', 'a-conv', 'a-user', 'a-key-2', 'refund', true, ARRAY['a-m2'],
                           '{"amount": 7}', 'a-fp-2') \gset

-- It reads its own tenant's rows only.
SELECT ok((SELECT count(*) > 0 AND bool_and(tenant_id = 'acme') FROM cscp.command), 'direct SELECT of commands: its own only');
SELECT ok((SELECT count(*) > 0 AND bool_and(tenant_id = 'acme') FROM cscp.evidence), 'direct SELECT of evidence: its own only');
SELECT ok((SELECT count(*) > 0 AND bool_and(tenant_id = 'acme') FROM cscp.frame), 'direct SELECT of frames: its own only');
SELECT ok((SELECT count(*) > 0 AND bool_and(tenant_id = 'acme') FROM cscp.answer), 'direct SELECT of answers: its own only');
SELECT is((SELECT count(*) FROM cscp.evidence WHERE command_id = :'globex_cmd'), 0::bigint,
          'another tenant''s evidence is invisible even by command id');
SELECT is((SELECT count(*) FROM cscp.command WHERE command_id = :'globex_cmd'), 0::bigint,
          'another tenant''s command is invisible even by id');

-- Nothing for another tenant, through the functions.
SELECT throws_ok(format('SELECT * FROM cscp.command_status(%L)', :'globex_cmd'), '22023', NULL,
                 'command_status of another tenant''s command: no such command');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'globex_cmd', 'authz_pending'), '22023', NULL,
                 'command_transition of another tenant''s command: no such command');
SELECT throws_ok($$SELECT cscp.command_submit('globex', 'g-conv', 'g-user', 'x-key', 'wire', true, '{}')$$, '42501', NULL,
                 'command_submit for another tenant');
SELECT throws_ok($$SELECT cscp.confirm('globex', 'g-conv', 'g-user', 'x-yes', true)$$, '42501', NULL,
                 'confirm for another tenant');
SELECT throws_ok($$SELECT * FROM cscp.evidence_verify('globex')$$, '42501', NULL,
                 'evidence_verify for another tenant');
SELECT throws_ok(format('SELECT cscp._evidence_refusal(%L, %L, %L, %L, %L, NULL, NULL, NULL)',
                        'globex', 'g-conv', :'globex_cmd', 'confirmed', 'forged'), '42501', NULL,
                 '_evidence_refusal for another tenant''s command, naming that tenant');
SELECT throws_ok(format('SELECT cscp._evidence_refusal(%L, %L, %L, %L, %L, NULL, NULL, NULL)',
                        'acme', 'g-conv', :'globex_cmd', 'confirmed', 'forged'), '42501', NULL,
                 '_evidence_refusal is internal: not even for its own tenant');

-- Evidence is read-only to the application.
SELECT throws_ok($$INSERT INTO cscp.evidence (tenant_id, conversation_id, seq, stage, event_type, created_at, hash)
                   VALUES ('acme', 'a-conv', 1, 'executed', 'execution.executed', cscp.now(), 'forged')$$,
                 '42501', NULL, 'INSERT into cscp.evidence is refused');
SELECT throws_ok($$UPDATE cscp.evidence SET reason_code = 'forged' WHERE tenant_id = 'acme'$$,
                 '42501', NULL, 'UPDATE of cscp.evidence is refused');
SELECT throws_ok($$DELETE FROM cscp.evidence WHERE tenant_id = 'acme'$$,
                 '42501', NULL, 'DELETE from cscp.evidence is refused');
SELECT throws_ok($$TRUNCATE cscp.evidence$$, '42501', NULL, 'TRUNCATE of cscp.evidence is refused');

-- Commands change only by transitions.
SELECT throws_ok($$DELETE FROM cscp.command WHERE tenant_id = 'acme'$$, '42501', NULL,
                 'DELETE from cscp.command is refused');
SELECT throws_ok(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'started', :'acme_cmd2'),
                 '55000', NULL, 'a direct UPDATE to a state the lifecycle does not allow is refused');
SELECT throws_ok(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'started', :'acme_cmd'),
                 '55000', NULL, 'a direct UPDATE of a terminal command is refused');
SELECT throws_ok(format('UPDATE cscp.command SET tenant_id = %L WHERE command_id = %L', 'globex', :'acme_cmd2'),
                 '42501', NULL, 'a command''s tenant_id cannot be changed (42501 first: the tenant is checked before the lifecycle)');
SELECT throws_ok(format('UPDATE cscp.command SET command_name = %L WHERE command_id = %L', 'wire', :'acme_cmd2'),
                 '55000', NULL, 'a command''s command_name cannot be changed');
SELECT throws_ok(format('UPDATE cscp.command SET state = %L, command_name = %L WHERE command_id = %L',
                        'canceled', 'wire', :'acme_cmd2'),
                 '55000', NULL, 'a command''s command_name cannot be changed along with a valid transition');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating, state)
                   VALUES ('globex', 'x-key', 'g-conv', 'g-user', 'wire', true, 'canonicalized')$$,
                 '42501', NULL, 'a direct INSERT of a command for another tenant is refused');
SELECT throws_ok($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating, state)
                   VALUES ('acme', 'x-key', 'a-conv', 'a-user', 'wire', true, 'confirmed')$$,
                 '55000', NULL, 'a direct INSERT of a command born confirmed is refused');
WITH u AS (UPDATE cscp.command SET state = 'canceled' WHERE command_id = :'globex_cmd' RETURNING 1)
SELECT is(count(*), 0::bigint, 'a direct UPDATE of another tenant''s command touches nothing') FROM u;

-- No clock, no notifications switch, no administration, no operator inspection.
SELECT throws_ok($$SET cscp.clock = '2000-01-01 00:00:00+00'$$, '42501', NULL, 'SET cscp.clock is refused');
SELECT throws_ok($$SELECT set_config('cscp.clock', '2030-01-01 00:00:00+00', true)$$, '42501', NULL,
                 'set_config of cscp.clock is refused');
SELECT throws_ok($$SET cscp.notify = on$$, '42501', NULL, 'SET cscp.notify is refused');
SELECT throws_ok($$SELECT set_config('cscp.notify', 'off', false)$$, '42501', NULL, 'set_config of cscp.notify is refused');
SELECT throws_ok($$SELECT cscp.grant_app('tap_cmd_app')$$, '42501', NULL, 'grant_app is not the application''s');
SELECT throws_ok($$SELECT cscp.grant_operator('tap_cmd_app')$$, '42501', NULL, 'grant_operator is not the application''s');
SELECT throws_ok($$SELECT * FROM cscp.show_active_context('acme', 'a-conv')$$, '42501', NULL,
                 'show_active_context is not the application''s');
SELECT throws_ok($$SELECT * FROM cscp.command_lifecycle$$, '42501', NULL,
                 'the operator view command_lifecycle is closed to the application');

-- Once the confirmation window has passed (10:05), the pending command cannot be confirmed:
-- command_transition refuses it, and a direct UPDATE, held to the same rules, too.
RESET ROLE;
SET cscp.clock = '2026-08-01 10:10:00+00';
SET ROLE tap_cmd_app;
SELECT is((SELECT row(accepted, state, reason_code)::text FROM cscp.command_transition(:'acme_cmd2', 'confirmed')),
          '(f,confirmation_required,confirmation_expired)', 'command_transition refuses to confirm past the window');
SELECT throws_ok(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'confirmed', :'acme_cmd2'),
                 '55000', NULL, 'a direct UPDATE to confirmed past the confirmation window is refused');
-- Likewise an approval: requested at 10:10 with the default approval_ttl (1 hour), looked at 11:20.
SELECT command_id AS acme_cmd3
  FROM cscp.command_submit('acme', 'a-conv', 'a-user', 'a-key-3', 'report', false, ARRAY['a-m3']) \gset
SELECT is((SELECT row(accepted, state)::text
             FROM cscp.command_transition(:'acme_cmd3', 'authz_pending', 'approval_required', '{"approver_id": "boss"}')),
          '(t,authz_pending)', 'command_transition asks for approval');
RESET ROLE;
SET cscp.clock = '2026-08-01 11:20:00+00';
SET ROLE tap_cmd_app;
SELECT is((SELECT row(accepted, state, reason_code)::text FROM cscp.command_transition(:'acme_cmd3', 'authorized')),
          '(f,authz_pending,approval_expired)', 'command_transition refuses to authorize past the approval window');
SELECT throws_ok(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'authorized', :'acme_cmd3'),
                 '55000', NULL, 'a direct UPDATE to authorized past the approval window is refused');

-- Without cscp.tenant_id, nothing is visible, although both tenants have rows.
RESET cscp.tenant_id;
SELECT is((SELECT count(*) FROM cscp.command), 0::bigint, 'without cscp.tenant_id no command is visible');
SELECT is((SELECT count(*) FROM cscp.evidence), 0::bigint, 'without cscp.tenant_id no evidence is visible');
SELECT is((SELECT count(*) FROM cscp.frame), 0::bigint, 'without cscp.tenant_id no frame is visible');
SELECT is((SELECT count(*) FROM cscp.answer), 0::bigint, 'without cscp.tenant_id no answer is visible');

-- The operator reads the redacted views, never the tables behind them.
RESET ROLE;
SET ROLE tap_cmd_op;
SELECT throws_ok($$SELECT count(*) FROM cscp.command$$, '42501', NULL, 'the operator cannot read cscp.command');
SELECT throws_ok($$SELECT count(*) FROM cscp.evidence$$, '42501', NULL, 'the operator cannot read cscp.evidence');
SELECT throws_ok($$SELECT count(*) FROM cscp.frame$$, '42501', NULL, 'the operator cannot read cscp.frame');
SELECT throws_ok($$SELECT count(*) FROM cscp.answer$$, '42501', NULL, 'the operator cannot read cscp.answer');
SELECT throws_ok($$SELECT cscp.command_submit('acme', 'a-conv', 'a-user', 'op-key', 'refund', true, '{}')$$,
                 '42501', NULL, 'the operator cannot submit commands');
SELECT lives_ok($$SELECT count(*) FROM cscp.active_context$$, 'the operator reads cscp.active_context');
SELECT lives_ok($$SELECT count(*) FROM cscp.command_lifecycle$$, 'the operator reads cscp.command_lifecycle');
SELECT hasnt_column('cscp', 'command_lifecycle', 'idempotency_key', 'command_lifecycle shows no idempotency key');
SELECT hasnt_column('cscp', 'command_lifecycle', 'target_fingerprint', 'command_lifecycle shows no target fingerprint');

RESET ROLE;
SELECT is((SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'globex'), (SELECT evidence FROM globex_before),
          'another tenant''s evidence is unchanged');
SELECT is((SELECT version FROM cscp.command WHERE tenant_id = 'globex'), (SELECT version FROM globex_before),
          'another tenant''s command is unchanged');
SELECT is_empty($$SELECT * FROM cscp.evidence_verify('acme')$$, 'the application''s evidence chains still verify');

SELECT * FROM finish();
ROLLBACK;
