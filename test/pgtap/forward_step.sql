-- A step forward that asks nothing (command_transition to authz_pending without an approval
-- request, authorized, started) for a session naming its tenant is tried by its UPDATE alone,
-- which locks the context and then the command when the step may write the context (authorized),
-- the command alone otherwise (the order and the waits: isolation spec forward_step_order).  As an application role bound to its tenant: the steps are made; an
-- unknown id is 22023 and changes nothing; a refusal (the command's rule, or its context closed)
-- returns the reason code, leaves the state, and records one invalid_transition_attempt, as a
-- direct UPDATE of the same step is refused 55000 naming the same reason; an authorized whose
-- context holds a pending question takes the full path and releases the slot that names the
-- command, and only that one.
BEGIN;
SELECT plan(17);

CREATE ROLE tap_fs_app;
SELECT cscp.grant_app('tap_fs_app', ARRAY['fs']);
SELECT cscp.command_declare('fs', 'lookup', false) IS NOT NULL AS declared;
SET ROLE tap_fs_app;
SET cscp.tenant_id = 'fs';

SELECT context_id AS ctx FROM cscp.context_open('fs', 'conv', 'alice') \gset
SELECT command_id AS a FROM cscp.command_submit('fs', 'conv', 'alice', 'k-a', 'lookup', false, '{m1}') \gset
SELECT command_id AS b FROM cscp.command_submit('fs', 'conv', 'alice', 'k-b', 'lookup', false, '{m2}') \gset
SELECT command_id AS c FROM cscp.command_submit('fs', 'conv', 'alice', 'k-c', 'lookup', false, '{m3}') \gset

CREATE TEMP TABLE fs_before AS
    SELECT (SELECT count(*) FROM cscp.command WHERE tenant_id = 'fs') AS commands,
           (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'fs') AS evidence,
           (SELECT string_agg(state::text, ',' ORDER BY idempotency_key) FROM cscp.command WHERE tenant_id = 'fs') AS states;
SELECT throws_ok($$SELECT cscp.command_transition('00000000-0000-4000-8000-000000000000', 'started')$$,
                 '22023', NULL, 'an unknown id: 22023');
SELECT is((SELECT (SELECT count(*) FROM cscp.command WHERE tenant_id = 'fs') = commands
              AND (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'fs') = evidence
              AND (SELECT string_agg(state::text, ',' ORDER BY idempotency_key) FROM cscp.command WHERE tenant_id = 'fs') = states
             FROM fs_before), true, 'and nothing changed');

SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'a', 'authz_pending', 'policy_check')),
          '(t,authz_pending,policy_check)', 'authz_pending, its UPDATE alone');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'a', 'authorized')),
          '(t,authorized)', 'authorized');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'a', 'started')),
          '(t,started)', 'started');

-- A refusal by the command's own rules.
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'c', 'started')),
          '(f,canonicalized,invalid_transition)', 'started from canonicalized: refused, the state left');
SELECT is((SELECT count(*) FROM cscp.evidence
            WHERE tenant_id = 'fs' AND command_id = :'c' AND event_type = 'invalid_transition_attempt'
              AND from_state = 'canonicalized' AND to_state = 'started' AND reason_code = 'invalid_transition'),
          1::bigint, 'and recorded once');

-- An approval asked for B: the context holds a pending question.
SELECT is((SELECT row(accepted, state::text)::text
             FROM cscp.command_transition(:'b', 'authz_pending', 'approval_required',
                                          jsonb_build_object('approver_id', 'boss'))),
          '(t,authz_pending)', 'an approval asked for');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'c', 'authz_pending')),
          '(t,authz_pending)', 'another command steps forward beside the pending question');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'c', 'authorized')),
          '(t,authorized)', 'authorized while the question names another command');
SELECT is((SELECT slots -> 'pending_approval' ->> 'command_id' FROM cscp.context WHERE tenant_id = 'fs'),
          :'b', 'the question still names the command it asks about');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'b', 'authorized', 'approved')),
          '(t,authorized)', 'the command asked about authorized');
SELECT is((SELECT row(status::text, slots ? 'pending_approval')::text FROM cscp.context WHERE tenant_id = 'fs'),
          '(active,f)', 'its slot released, the context active again');

-- The context closed: a step forward is refused context_closed, by the API and by direct SQL.
SELECT is((SELECT status::text FROM cscp.context_transition(:'ctx', 'closed', 'done')), 'closed', 'the context closed');
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'b', 'started')),
          '(f,authorized,context_closed)', 'started on a closed context: refused context_closed');
SELECT is((SELECT count(*) FROM cscp.evidence
            WHERE tenant_id = 'fs' AND command_id = :'b' AND event_type = 'invalid_transition_attempt'
              AND from_state = 'authorized' AND to_state = 'started' AND reason_code = 'context_closed'),
          1::bigint, 'and recorded once');
SELECT throws_ok(format($$UPDATE cscp.command SET state = 'started' WHERE tenant_id = 'fs' AND command_id = %L$$, :'b'),
                 '55000', format('command %s cannot move from "authorized" to "started" (context_closed)', :'b'),
                 'a direct UPDATE of the same step: 55000, the same reason');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
