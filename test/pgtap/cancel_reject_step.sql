-- A cancel or a reject (command_transition to canceled or rejected) for a session naming its
-- tenant is tried by its UPDATE alone, which locks the context and then the command, as a step
-- forward is (forward_step.sql); a context holding a pending question makes it take the full
-- path, which releases the slot naming the command, and only that one.  As an application role
-- bound to its tenant: the steps are made with their evidence; an unknown id is 22023 and
-- changes nothing; a refusal returns the reason code, leaves the state and records one
-- invalid_transition_attempt, as a direct UPDATE of the same step is refused 55000.
BEGIN;
SELECT plan(14);

CREATE ROLE tap_cr_app;
SELECT cscp.grant_app('tap_cr_app', ARRAY['cr']);
SELECT cscp.command_declare('cr', 'lookup', false) IS NOT NULL AS declared;
SET ROLE tap_cr_app;
SET cscp.tenant_id = 'cr';

SELECT context_id AS ctx FROM cscp.context_open('cr', 'conv', 'alice') \gset
SELECT command_id AS a FROM cscp.command_submit('cr', 'conv', 'alice', 'k-a', 'lookup', false, '{m1}') \gset
SELECT command_id AS b FROM cscp.command_submit('cr', 'conv', 'alice', 'k-b', 'lookup', false, '{m2}') \gset
SELECT command_id AS c FROM cscp.command_submit('cr', 'conv', 'alice', 'k-c', 'lookup', false, '{m3}') \gset
SELECT command_id AS d FROM cscp.command_submit('cr', 'conv', 'alice', 'k-d', 'lookup', false, '{m4}') \gset

CREATE TEMP TABLE cr_before AS
    SELECT (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'cr') AS evidence,
           (SELECT string_agg(state::text, ',' ORDER BY idempotency_key) FROM cscp.command WHERE tenant_id = 'cr') AS states;
SELECT throws_ok($$SELECT cscp.command_transition('00000000-0000-4000-8000-000000000000', 'canceled')$$,
                 '22023', NULL, 'an unknown id: 22023');
SELECT is((SELECT (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'cr') = evidence
              AND (SELECT string_agg(state::text, ',' ORDER BY idempotency_key) FROM cscp.command WHERE tenant_id = 'cr') = states
             FROM cr_before), true, 'and nothing changed');

-- No question pending: the UPDATE alone.
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'a', 'canceled', 'user_changed_mind')),
          '(t,canceled,user_changed_mind)', 'canceled from canonicalized');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'b', 'authz_pending')),
          '(t,authz_pending)', 'another command to authz_pending');
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'b', 'rejected', 'policy_denied')),
          '(t,rejected,policy_denied)', 'rejected from authz_pending');
SELECT is((SELECT string_agg(e.to_state::text || '/' || e.reason_code, ',' ORDER BY e.seq) FROM cscp.evidence e
            WHERE e.tenant_id = 'cr' AND e.command_id IN (:'a', :'b') AND e.to_state IN ('canceled', 'rejected')),
          'canceled/user_changed_mind,rejected/policy_denied', 'each with its evidence');

-- A refusal: a terminal command is not canceled again.
SELECT is((SELECT row(accepted, state::text, reason_code)::text FROM cscp.command_transition(:'a', 'canceled')),
          '(f,canceled,invalid_transition)', 'canceled again: refused, the state left');
SELECT is((SELECT count(*) FROM cscp.evidence
            WHERE tenant_id = 'cr' AND command_id = :'a' AND event_type = 'invalid_transition_attempt'
              AND to_state = 'canceled' AND reason_code = 'invalid_transition'),
          1::bigint, 'and recorded once');
SELECT throws_ok(format($$UPDATE cscp.command SET state = 'rejected' WHERE tenant_id = 'cr' AND command_id = %L$$, :'a'),
                 '55000', 'invalid command transition from "canceled" to "rejected"',
                 'a direct UPDATE of a terminal command: 55000');

-- An approval asked for C: the context holds a pending question naming C.
SELECT is((SELECT row(accepted, state::text)::text
             FROM cscp.command_transition(:'c', 'authz_pending', 'approval_required',
                                          jsonb_build_object('approver_id', 'boss'))),
          '(t,authz_pending)', 'an approval asked for');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'d', 'canceled')),
          '(t,canceled)', 'another command canceled beside the pending question');
SELECT is((SELECT slots -> 'pending_approval' ->> 'command_id' FROM cscp.context WHERE tenant_id = 'cr'),
          :'c', 'the question still names the command it asks about');
SELECT is((SELECT row(accepted, state::text)::text FROM cscp.command_transition(:'c', 'rejected', 'denied_by_policy')),
          '(t,rejected)', 'the command asked about rejected');
SELECT is((SELECT row(status::text, slots ? 'pending_approval')::text FROM cscp.context WHERE tenant_id = 'cr'),
          '(active,f)', 'its slot released, the context active again');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
