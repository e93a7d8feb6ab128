\i sql/include/helpers.sql
-- Risk drives recovery (SMCL VIII.A): a cancel or compensate recovery of a command declared
-- needs_approval or of risk high or critical needs the confirmation and approval a forward
-- command of that class needs, whoever writes it; risk critical needs an approval going forward
-- too; a started command of such a class is canceled only by a recovery that has started.
SET timezone = 'UTC';
SET cscp.clock = '2026-09-01 09:00:00+00';
\set SHOW_CONTEXT never
CREATE ROLE rk_app;
SELECT cscp.grant_app('rk_app', '{rk}');
SET cscp.tenant_id = 'rk';
SET ROLE rk_app;
SELECT count(*) AS declared FROM (
    SELECT cscp.command_declare('rk', 'wire', true, true, 'critical')
    UNION ALL SELECT cscp.command_declare('rk', 'refund', true, false, 'high')
    UNION ALL SELECT cscp.command_declare('rk', 'purge', true, false, 'critical')
    UNION ALL SELECT cscp.command_declare('rk', 'note', true, false, 'normal')) d;
SELECT (cscp.context_open('rk', 'c1', 'u')).status;
CREATE FUNCTION pg_temp.run(id uuid, approver text, msg text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cscp.confirm('rk', 'c1', 'u', msg || ':yes', true);
    PERFORM cscp.command_transition(id, 'authz_pending', 'approval_required',
                                    pg_catalog.jsonb_build_object('approver_id', approver));
    PERFORM cscp.approve('rk', 'c1', approver, msg || ':ok', true);
    RETURN (SELECT c.state::text FROM cscp.command c WHERE c.command_id = id);
END
$$;

---------------------------------------------------------------------------------------------------
-- 1. A started critical command that needs approval: its cancel does not authorize itself.
SELECT command_id AS w FROM cscp.command_submit('rk', 'c1', 'u', 'w1', 'wire', true, '{m1}') \gset
SELECT pg_temp.run(:'w', 'boss', 'm1');
SELECT accepted, state FROM cscp.command_transition(:'w', 'started');
SELECT command_id AS rc, state FROM cscp.command_recover(:'w', 'cancel', 'w1:cancel') \gset
SELECT :'state' AS recovery_state, mutating, (SELECT state FROM cscp.command WHERE command_id = :'w') AS target_state
  FROM cscp.command WHERE command_id = :'rc';
-- The target cannot be canceled around it: by command_transition, nor by a direct UPDATE.
SELECT accepted, state, reason_code FROM cscp.command_transition(:'w', 'canceled');
SELECT try(format($$UPDATE cscp.command SET state = 'canceled' WHERE command_id = %L$$, :'w'));
-- The recovery goes on only with the user's yes and the approver's approval.
SELECT accepted, state, reason_code FROM cscp.command_transition(:'rc', 'authz_pending');
SELECT outcome FROM cscp.confirm('rk', 'c1', 'u', 'm2', true);
SELECT accepted, state FROM cscp.command_transition(:'rc', 'authorized');
SELECT accepted, state, reason_code FROM cscp.command_transition(:'rc', 'started');
SELECT try(format($$UPDATE cscp.command SET state = 'started' WHERE command_id = %L$$, :'rc'));

-- 2. The same again, approved: starting the recovery cancels the target, then it executes.
SELECT command_id AS rc2, state FROM cscp.command_recover(:'w', 'cancel', 'w1:cancel2') \gset
SELECT :'state' AS recovery_state;
SELECT pg_temp.run(:'rc2', 'boss', 'm3');
SELECT accepted, state FROM cscp.command_transition(:'rc2', 'started');
SELECT state, reason_code, detail ->> 'recovery_command_id' = :'rc2' AS by_it FROM cscp.command WHERE command_id = :'w';
SELECT accepted, state FROM cscp.command_transition(:'rc2', 'executed');
SELECT event_type, decision FROM cscp.evidence WHERE command_id = :'rc2' ORDER BY seq;

---------------------------------------------------------------------------------------------------
-- 3. Compensations: of a high-risk command, confirmed (no approval: its class needs none); of a
-- command that needs approval, approved too.
SELECT command_id AS f FROM cscp.command_submit('rk', 'c1', 'u', 'f1', 'refund', true, '{m5}') \gset
SELECT outcome FROM cscp.confirm('rk', 'c1', 'u', 'm6', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'f', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized', 'started', 'executed']) s) t;
SELECT command_id AS fc, state FROM cscp.command_recover(:'f', 'compensate', 'f1:comp') \gset
SELECT :'state' AS compensation_state;
SELECT outcome FROM cscp.confirm('rk', 'c1', 'u', 'm7', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'fc', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized']) s) t;
SELECT accepted, state FROM cscp.command_transition(:'fc', 'started');

SELECT command_id AS w2 FROM cscp.command_submit('rk', 'c1', 'u', 'w2', 'wire', true, '{m8}') \gset
SELECT pg_temp.run(:'w2', 'boss', 'm8');
SELECT count(*) FROM (SELECT cscp.command_transition(:'w2', s::cscp.command_state)
                        FROM unnest(ARRAY['started', 'executed']) s) t;
SELECT command_id AS wc FROM cscp.command_recover(:'w2', 'compensate', 'w2:comp') \gset
SELECT outcome FROM cscp.confirm('rk', 'c1', 'u', 'm9', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'wc', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized']) s) t;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'wc', 'started');

---------------------------------------------------------------------------------------------------
-- 4. Risk critical needs an approval going forward, declared needs_approval or not.
SELECT command_id AS p FROM cscp.command_submit('rk', 'c1', 'u', 'p1', 'purge', true, '{m10}') \gset
SELECT outcome FROM cscp.confirm('rk', 'c1', 'u', 'm11', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'p', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized']) s) t;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'p', 'started');

---------------------------------------------------------------------------------------------------
-- 5. Direct SQL cannot file a recovery of such a command as read-only (22023, nothing written);
-- a normal command's cancel is still carried out in one call.
SELECT try(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                              mutating, recovery_kind, target_command_id)
                    VALUES ('rk', 'p1:x', 'c1', 'u', 'purge:cancel', false, 'cancel', %L)$$, :'p'));
SELECT count(*) AS rows FROM cscp.command WHERE idempotency_key = 'p1:x';
SELECT command_id AS n FROM cscp.command_submit('rk', 'c1', 'u', 'n1', 'note', true, '{m12}') \gset
SELECT state FROM cscp.command_recover(:'n', 'cancel', 'n1:cancel');
SELECT state FROM cscp.command WHERE command_id = :'n';
RESET ROLE;
RESET cscp.tenant_id;
SELECT count(*) AS problems FROM cscp.check_invariants('rk');
DROP OWNED BY rk_app;
DROP ROLE rk_app;
RESET cscp.clock;
