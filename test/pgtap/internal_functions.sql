-- Internal functions are not an attack surface (issue 30): an application role can execute no
-- function whose name starts with _ (cscp.grant_app grants the public API only, and takes the
-- internal ones back from a role granted them all by hand); the API whose
-- implementation calls them works all the same as that role, with row-level security
-- (approve, command_recover, sweep, context_get and context_transition, command_status,
-- evidence_verify, fact_write, ws_put); and the functions that take a row of a table refuse a
-- row with null fields (22004) instead of crashing, whoever calls them.
BEGIN;
SELECT plan(38);

CREATE ROLE tap_int_app;
CREATE ROLE tap_int_old;
-- A role granted every function of the schema by hand before cscp.grant_app.
GRANT USAGE ON SCHEMA cscp TO tap_int_old;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA cscp TO tap_int_old;
SELECT cscp.grant_app('tap_int_app');
SELECT cscp.grant_app('tap_int_old');
SET cscp.clock = '2026-09-01 10:00:00+00';

---------------------------------------------------------------------------------------------------
-- What grant_app grants.
SELECT cmp_ok((SELECT count(*) FROM pg_catalog.pg_proc p
                WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^_'), '>=', 10::bigint,
              'cscp has internal functions to keep from the application');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^_'
                   AND has_function_privilege('tap_int_app', p.oid, 'EXECUTE') ORDER BY 1),
          '{}'::text[], 'no internal function is executable by an application role');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^_'
                   AND has_function_privilege('tap_int_old', p.oid, 'EXECUTE') ORDER BY 1),
          '{}'::text[], 'grant_app takes the internal functions back from a role granted them before');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^http_'
                   AND has_function_privilege('tap_int_app', p.oid, 'EXECUTE') ORDER BY 1),
          '{}'::text[], 'no endpoint of the HTTPS gateway is executable by an application role');
SELECT is(ARRAY(SELECT DISTINCT p.proname::text FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname !~ '^(_|http_)'
                   AND p.prorettype <> 'pg_catalog.trigger'::regtype
                   AND NOT has_function_privilege('tap_int_app', p.oid, 'EXECUTE') ORDER BY 1),
          ARRAY['api_key_create', 'api_key_revoke', 'authority_bind', 'check_invariants', 'grant_app', 'grant_gateway', 'grant_operator', 'inspect_active_context',
                'inspect_command_lifecycle', 'revoke_app', 'revoke_operator', 'shard_misplaced',
                'shard_set', 'show_active_context'],
          'every other public function is the application''s');

-- Calling each internal function, as the role, with typed null arguments (in subqueries, so that
-- the planner cannot fold a strict call away): refused before it runs.
CREATE FUNCTION pg_temp.internal_calls_not_refused() RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    f text;
    q text;
    bad text[] := '{}';
BEGIN
    FOR f, q IN
        SELECT p.oid::regprocedure::text,
               format('SELECT cscp.%I(%s)', p.proname,
                      (SELECT string_agg('(SELECT NULL::' || pg_catalog.format_type(t, NULL) || ')', ', ' ORDER BY i)
                         FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i)))
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^_'
    LOOP
        BEGIN
            EXECUTE replace(q, 'NULL::anyelement', 'NULL::text');
            bad := bad || f;
        EXCEPTION
            WHEN insufficient_privilege THEN NULL;
            WHEN OTHERS THEN bad := bad || (f || ': ' || SQLSTATE);
        END;
    END LOOP;
    RETURN bad;
END
$$;

---------------------------------------------------------------------------------------------------
-- Data of two tenants, made by the superuser.
SELECT cscp.policy_set('it', '{"auto_confirm": []}') IS NOT NULL;
SELECT context_id AS it_ctx FROM cscp.context_open('it', 'i-conv', 'i-user', '{"active_intent": "pay"}') \gset
-- A command waiting for approval (from boss), another waiting for its confirmation.
SELECT command_id AS it_appr FROM cscp.command_submit('it', 'i-conv', 'i-user', 'i-k1', 'report', false, '{i:m1}') \gset
SELECT accepted FROM cscp.command_transition(:'it_appr', 'authz_pending', 'approval_required', '{"approver_id": "boss"}');
SELECT context_id AS it_ctx2 FROM cscp.context_open('it', 'i-conv2', 'i-user', '{"active_intent": "pay"}') \gset
SELECT command_id AS it_conf FROM cscp.command_submit('it', 'i-conv2', 'i-user', 'i-k2', 'pay', true, '{i:m2}',
                                                       '{"amount": 1}', 'acct:1') \gset
-- The other tenant: a confirmation whose window passes with the tenant's own.
SELECT context_id AS ot_ctx FROM cscp.context_open('ot', 'o-conv', 'o-user', '{"active_intent": "pay"}') \gset
SELECT command_id AS ot_conf FROM cscp.command_submit('ot', 'o-conv', 'o-user', 'o-k1', 'pay', true, '{o:m1}',
                                                       '{"amount": 1}', 'acct:2') \gset
CREATE TEMP TABLE ot_before AS
    SELECT (SELECT state FROM cscp.command WHERE command_id = :'ot_conf') AS state,
           (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'ot') AS evidence,
           (SELECT slots FROM cscp.context WHERE context_id = :'ot_ctx') AS slots;

---------------------------------------------------------------------------------------------------
-- The application role.
SET ROLE tap_int_app;
SET cscp.tenant_id = 'it';
SELECT is(pg_temp.internal_calls_not_refused(), '{}'::text[],
          'every internal function called directly by the application is refused (42501)');
SELECT throws_ok(format('SELECT cscp._evidence_refusal(%L, %L, %L, %L, %L, NULL, NULL, NULL)',
                        'it', 'i-conv', :'it_appr', 'started', 'forged'), '42501', NULL,
                 'nor can it forge refusal evidence in its own tenant');

-- The public functions that take a row: a row with null fields is refused, not a crash.
SELECT throws_ok($$SELECT cscp.command_next_allowed(jsonb_populate_record(NULL::cscp.command, '{"state": "executed"}'))$$,
                 '22004', 'field "tenant_id" of argument "c" must not be null',
                 'command_next_allowed refuses a row without its key');
SELECT throws_ok($$SELECT cscp.command_next_allowed(jsonb_populate_record(NULL::cscp.command,
                     '{"tenant_id": "it", "command_id": "00000000-0000-0000-0000-000000000001"}'))$$,
                 '22004', 'field "state" of argument "c" must not be null',
                 'command_next_allowed refuses a row without its state');
SELECT is((SELECT cscp.command_next_allowed(x) FROM cscp.command x WHERE x.command_id = :'it_appr'),
          (SELECT next_allowed FROM cscp.command_status(:'it_appr')),
          'command_next_allowed of a row of cscp.command is what command_status reports');
SELECT is(cscp.context_touch(jsonb_populate_record(NULL::cscp.context, '{}')), NULL::timestamptz,
          'context_touch of a row without an expiry is null');
SELECT throws_ok(format('UPDATE cscp.context SET status = NULL WHERE context_id = %L', :'it_ctx'), '23502',
                 'status of a context must not be null', 'a direct UPDATE of a context''s status to NULL is refused');

-- approve: its decisions, the slot released, the evidence written as the owner.
SELECT is((SELECT row(outcome, command_id = :'it_appr')::text FROM cscp.approve('it', 'i-conv', 'eve', 'i:a0', true)),
          '(approver_mismatch,t)', 'approve by another approver: approver_mismatch');
SELECT is((SELECT count(*) FROM cscp.evidence WHERE command_id = :'it_appr' AND event_type = 'invalid_transition_attempt'
              AND reason_code = 'approver_mismatch'), 1::bigint,
          'its invalid_transition_attempt is written (as the owner) and readable by the tenant');
SELECT is((SELECT row(outcome, command_id = :'it_appr', context_id = :'it_ctx')::text
             FROM cscp.approve('it', 'i-conv', 'boss', 'i:a1', true)),
          '(approved,t,t)', 'approve by the approver: approved');
SELECT is((SELECT state::text FROM cscp.command WHERE command_id = :'it_appr'), 'authorized',
          'the command is authorized');
SELECT is((SELECT row(status, slots ? 'pending_approval')::text FROM cscp.context WHERE context_id = :'it_ctx'),
          '(active,f)', 'the context''s pending_approval is released, the context active again');
SELECT is((SELECT outcome FROM cscp.approve('it', 'i-conv', 'boss', 'i:a1', false)), 'approved',
          'the same message answered again replays the first outcome');
SELECT is((SELECT outcome FROM cscp.approve('it', 'i-conv', 'boss', 'i:a2', true)), 'nothing_pending',
          'a second approval with nothing pending: nothing_pending');
SELECT throws_ok($$SELECT * FROM cscp.approve('ot', 'o-conv', 'boss', 'i:a3', true)$$, '42501', NULL,
                 'approve for another tenant is refused');

-- command_status, context_get and context_transition.
SELECT ok((SELECT 'started' = ANY (next_allowed) AND terminal = false FROM cscp.command_status(:'it_appr')),
          'command_status: an authorized command may start');
SELECT is((SELECT status::text FROM cscp.context_transition(:'it_ctx', 'blocked', 'waiting')), 'blocked',
          'context_transition moves the context');
SELECT is((SELECT status::text FROM cscp.context_get('it', 'i-conv', 'i-user')), 'blocked',
          'context_get reads it back');
SELECT throws_ok(format('SELECT cscp.context_transition(%L, %L)', :'ot_ctx', 'closed'), '22023', NULL,
                 'context_transition of another tenant''s context: not found');

-- command_recover: a cancel carried out, a recovery that does not apply rejected at once.
SELECT is((SELECT row(state, replayed)::text FROM cscp.command_recover(:'it_conf', 'cancel', 'i-r1')),
          '(executed,f)', 'a cancel recovery runs to executed');
SELECT is((SELECT row(state, reason_code)::text FROM cscp.command WHERE command_id = :'it_conf'),
          '(canceled,canceled_by_recovery)', 'its target is canceled');
SELECT is((SELECT slots ? 'pending_confirmation' FROM cscp.context WHERE context_id = :'it_ctx2'), false,
          'the target''s pending confirmation is released');
SELECT is((SELECT row(state, replayed)::text FROM cscp.command_recover(:'it_conf', 'cancel', 'i-r1')),
          '(executed,t)', 'the same recovery again replays');
SELECT is((SELECT state::text FROM cscp.command_recover(:'it_appr', 'retry', 'i-r2')),
          'rejected', 'a retry of a command that has not failed is rejected');
SELECT is((SELECT reason_code FROM cscp.command WHERE idempotency_key = 'i-r2'), 'recovery_not_applicable',
          'with reason recovery_not_applicable');
SELECT throws_ok(format('SELECT * FROM cscp.command_recover(%L, %L, %L)', :'ot_conf', 'cancel', 'i-r3'), '22023', NULL,
                 'command_recover of another tenant''s command: not found');

-- evidence_verify, fact_write, ws_put.
SELECT is((SELECT count(*) FROM cscp.evidence_verify('it')), 0::bigint, 'the tenant''s evidence verifies');
SELECT is((SELECT key FROM cscp.fact_write('it', 'i-user', 'f-1', 'diet', '"vegan"')), 'diet', 'fact_write works');
SELECT lives_ok($$SELECT cscp.ws_put('it', 'i-sess', 'draft', '{"to": "x"}', '10 minutes')$$, 'ws_put works');
SELECT throws_ok($$SELECT cscp.ws_put('it', 'i-sess', 'draft', '{"to": "x"}', '-1 minutes')$$, '22023',
                 'ttl must be positive', 'ws_put refuses a lifetime that is not positive');

-- sweep, an hour later: the tenant's own windows lapse, the other tenant's are left alone.
RESET ROLE;
SET cscp.clock = '2026-09-01 11:00:00+00';
SELECT (cscp.context_open('it', 'i-conv3', 'i-user', '{"active_intent": "pay"}')).context_id IS NOT NULL;
SELECT command_id AS it_late FROM cscp.command_submit('it', 'i-conv3', 'i-user', 'i-k3', 'pay', true, '{i:m3}',
                                                       '{"amount": 2}', 'acct:3') \gset
SET cscp.clock = '2026-09-01 12:00:00+00';
SET ROLE tap_int_app;
SELECT is((SELECT (cscp.sweep(100) ->> 'confirmations_lapsed')::int), 1, 'the sweep lapses the tenant''s passed window');
SELECT is((SELECT row(state, reason_code)::text FROM cscp.command WHERE command_id = :'it_late'),
          '(rejected,confirmation_expired)', 'its command is rejected');
RESET ROLE;
SELECT is((SELECT row(state, evidence, slots)::text FROM (SELECT
              (SELECT state FROM cscp.command WHERE command_id = :'ot_conf') AS state,
              (SELECT count(*) FROM cscp.evidence WHERE tenant_id = 'ot') AS evidence,
              (SELECT slots FROM cscp.context WHERE context_id = :'ot_ctx') AS slots) x),
          (SELECT row(state, evidence, slots)::text FROM ot_before),
          'the other tenant''s command, evidence and context are untouched');

SELECT * FROM finish();
ROLLBACK;
