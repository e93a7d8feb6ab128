-- The sweep keeps what check_invariants() judges by: with the clock moved past every TTL and
-- retention, in steps, the owner's sweep (in batches of one, as a backlog is worked through)
-- leaves check_invariants() empty after every step.  A confirmed command's answer is purged only
-- with its command: one confirmed and never finished, one finished two months after its yes, one
-- approved and finished, one declined, one finished at once (its answer goes with it).
BEGIN;
SELECT plan(13);

SET cscp.clock = '2026-01-10 10:00:00+00';
SELECT cscp.command_declare('swi', 'pay', true) IS NOT NULL;
SELECT cscp.command_declare('swi', 'wire', true, true, 'high') IS NOT NULL;

CREATE FUNCTION pg_temp.cmd(k text) RETURNS uuid LANGUAGE sql
AS $$ SELECT command_id FROM cscp.command WHERE tenant_id = 'swi' AND idempotency_key = k $$;
CREATE FUNCTION pg_temp.run(k text, VARIADIC s cscp.command_state[]) RETURNS void LANGUAGE sql
AS $$ SELECT count(*) FROM unnest(s) WITH ORDINALITY u (x, n), LATERAL cscp.command_transition(pg_temp.cmd(k), u.x) $$;
-- Sweeps in batches of one until a sweep finds nothing to do; how many sweeps that took.
CREATE FUNCTION pg_temp.sweep_all() RETURNS int LANGUAGE plpgsql
AS $$
DECLARE
    n int := 0;
    r jsonb;
BEGIN
    LOOP
        n := n + 1;
        r := cscp.sweep(1);
        EXIT WHEN NOT EXISTS (SELECT FROM jsonb_each_text(r) v WHERE v.value <> '0') OR n > 500;
    END LOOP;
    RETURN n;
END
$$;

-- c-open: confirmed, never finished.  c-late: confirmed now, executed two months later.
-- c-now: confirmed and executed now.  c-no: declined.  c-wire: approved, executed.
SELECT (cscp.context_open('swi', c, 'ana', '{"active_intent": "pay"}')).status
  FROM unnest(ARRAY['c-open', 'c-late', 'c-now', 'c-no', 'c-wire']) c;
SELECT (cscp.command_submit('swi', c, 'ana', c, CASE c WHEN 'c-wire' THEN 'wire' ELSE 'pay' END,
                            true, ARRAY[c || ':m1'], '{"amount": 10}')).state
  FROM unnest(ARRAY['c-open', 'c-late', 'c-now', 'c-no', 'c-wire']) c;
SELECT (cscp.confirm('swi', c, 'ana', c || ':m2', c <> 'c-no')).outcome
  FROM unnest(ARRAY['c-open', 'c-late', 'c-now', 'c-no', 'c-wire']) c;
SELECT (cscp.command_transition(pg_temp.cmd('c-wire'), 'authz_pending', 'approval_required',
                                '{"approver_id": "boss"}')).state;
SELECT is((cscp.approve('swi', 'c-wire', 'boss', 'c-wire:m3', true)).outcome, 'approved', 'c-wire approved');
SELECT pg_temp.run('c-now', 'authz_pending', 'authorized', 'started', 'executed');
SELECT pg_temp.run('c-wire', 'started', 'executed');
SELECT pg_temp.run('c-late', 'authz_pending', 'authorized', 'started');
SELECT cscp.conversation_start('swi', 'c-now', 'agent', '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}') IS NOT NULL;
SELECT cscp.conversation_close('swi', 'c-now', '{"from": "agent", "role": "agent", "content": "bye", "ts": 2}', '{}') IS NOT NULL;
SELECT cscp.doc_put('swi', 'c-now', 'cart', '{"n": 1}', 3600) IS NOT NULL;

SELECT is(ARRAY(SELECT state::text FROM cscp.command WHERE tenant_id = 'swi' ORDER BY idempotency_key),
          ARRAY['started', 'rejected', 'executed', 'confirmed', 'executed'], 'the commands where the story put them');
SELECT is_empty($$SELECT * FROM cscp.check_invariants()$$, 'healthy before any sweep');
SELECT is((SELECT count(*) FROM cscp.answer WHERE tenant_id = 'swi' AND kind = 'confirm'), 5::bigint,
          'five confirmation answers recorded');

SET cscp.clock = '2026-03-10 10:00:00+00';
SELECT pg_temp.run('c-late', 'executed');
SELECT ok(pg_temp.sweep_all() > 1, 'two months on: the sweep expires the contexts');
SELECT is_empty($$SELECT * FROM cscp.check_invariants()$$, '... and check_invariants() stays empty');

-- A year and a day after the answers: every answer past retention_evidence (365 days), but
-- only the commands that finished a year ago are.
SET cscp.clock = '2027-01-11 10:00:00+00';
SELECT ok(pg_temp.sweep_all() > 1, 'a year on: the sweep purges what is past retention');
SELECT is_empty($$SELECT * FROM cscp.check_invariants()$$,
                '... and check_invariants() stays empty (no confirmed command lost its answer)');
SELECT is(ARRAY(SELECT m.idempotency_key FROM cscp.command m
                  JOIN cscp.answer a ON a.tenant_id = m.tenant_id AND a.command_id = m.command_id
                                    AND a.kind = 'confirm' AND a.outcome = 'confirmed'
                 WHERE m.tenant_id = 'swi' ORDER BY 1),
          ARRAY['c-late', 'c-open'],
          'the commands still there (unfinished, finished late) keep their yes');
SELECT is((SELECT count(*) FROM cscp.answer a WHERE a.tenant_id = 'swi'
            AND NOT EXISTS (SELECT FROM cscp.command m WHERE m.tenant_id = a.tenant_id AND m.command_id = a.command_id)),
          0::bigint, 'the answers of the purged commands went with them');

-- Past the retention of the late command too, and far beyond.
SET cscp.clock = '2027-03-11 10:00:00+00';
SELECT pg_temp.sweep_all();
SELECT is_empty($$SELECT * FROM cscp.check_invariants()$$, 'a year after the late command finished: still empty');
SELECT is(ARRAY(SELECT idempotency_key FROM cscp.command WHERE tenant_id = 'swi'), ARRAY['c-open'],
          '... the late command is purged, the unfinished one stays');
SET cscp.clock = '2036-01-01 00:00:00+00';
SELECT pg_temp.sweep_all();
SELECT is_empty($$SELECT * FROM cscp.check_invariants()$$, 'ten years on: still empty');

SELECT * FROM finish();
ROLLBACK;
