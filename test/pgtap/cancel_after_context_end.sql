-- A command is canceled after its context ended too (the state machine does not judge a cancel
-- recovery by its context), and check_invariants() agrees: the recovery's steps to authz_pending,
-- authorized and started, taken after the context expired, are not moved_after_context_ended.
-- Found by `make fuzz`.  A forward command of that context is still refused its steps.
BEGIN;
SELECT plan(8);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_ce_app;
SELECT cscp.grant_app('tap_ce_app', ARRAY['ce']);
SELECT cscp.command_declare('ce', 'lookup_order', false);

SET ROLE tap_ce_app;
SET cscp.tenant_id = 'ce';
SELECT cscp.context_open('ce', c, 'user', '{"active_intent": "order"}') IS NOT NULL
  FROM unnest(ARRAY['conv', 'conv2', 'conv3']) c;
SELECT (cscp.command_submit('ce', c, 'user', 'k-' || c, 'lookup_order', false, ARRAY['m-' || c])).state
  FROM unnest(ARRAY['conv', 'conv2', 'conv3']) c;
RESET ROLE;

-- a day later: every context of the tenant has expired (context_ttl 30 minutes), none swept
SET cscp.clock = '2026-08-02 10:00:00+00';
SET ROLE tap_ce_app;
SELECT is((SELECT r.state FROM cscp.command_recover((SELECT command_id FROM cscp.command WHERE idempotency_key = 'k-conv'),
                                                    'cancel', 'k-cancel', '{}') r),
          'executed'::cscp.command_state, 'the application cancels a command whose context expired');
SELECT is((SELECT state FROM cscp.command WHERE idempotency_key = 'k-conv'), 'canceled'::cscp.command_state,
          '... and its target is canceled');
SELECT is((SELECT r.accepted FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'k-conv2'),
                                                          'authz_pending') r),
          false, 'a forward command of an expired context is refused its step');
SELECT is((SELECT r.reason_code FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'k-conv2'),
                                                             'authz_pending') r),
          'context_expired', '... as context_expired');
RESET ROLE;

-- the owner too
SELECT is((SELECT r.state FROM cscp.command_recover((SELECT command_id FROM cscp.command WHERE idempotency_key = 'k-conv3'),
                                                    'cancel', 'k-cancel-3', '{}') r),
          'executed'::cscp.command_state, 'the owner cancels a command whose context expired');
SELECT is((SELECT count(*) FROM cscp.evidence e JOIN cscp.command m USING (tenant_id, command_id)
            WHERE m.recovery_kind = 'cancel' AND e.to_state IN ('authz_pending', 'authorized', 'started')),
          6::bigint, 'both recoveries stepped through authz_pending, authorized and started after the expiry');
SELECT is_empty($$SELECT * FROM cscp.check_invariants('ce')$$,
                'check_invariants() finds nothing wrong with a cancel after the context ended');

-- the invariant still sees a forward step taken late (written around the triggers)
SET session_replication_role = replica;
UPDATE cscp.command SET state = 'authz_pending'
 WHERE idempotency_key = 'k-conv2';
INSERT INTO cscp.evidence
SELECT (jsonb_populate_record(e, jsonb_build_object('evidence_id', e.evidence_id + 1000, 'seq', 99,
                                                    'from_state', 'canonicalized', 'to_state', 'authz_pending',
                                                    'created_at', cscp.now()))).*
  FROM cscp.evidence e JOIN cscp.command m USING (tenant_id, command_id)
 WHERE m.idempotency_key = 'k-conv2' AND e.event_type <> 'invalid_transition_attempt'
 ORDER BY e.seq DESC LIMIT 1;
SET session_replication_role = DEFAULT;
SELECT ok(EXISTS (SELECT FROM cscp.check_invariants('ce') i
                   WHERE i.kind = 'moved_after_context_ended'
                     AND i.object_id = (SELECT command_id::text FROM cscp.command WHERE idempotency_key = 'k-conv2')),
          'a forward command''s late step is still moved_after_context_ended');

SELECT * FROM finish();
ROLLBACK;
