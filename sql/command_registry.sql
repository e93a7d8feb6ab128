\i sql/include/helpers.sql
-- The command registry (issue 34, item 4): whether a command mutates comes from the tenant's
-- declarations (else tenant '*'s), not from the caller; an undeclared command follows the policy
-- key undeclared_commands.  Through the API and through direct SQL as an application role.
-- Commands of this file belong to tenants 'cr' and 'cr2'.  And started -> canceled (item 5).
SET cscp.clock = '2026-03-02 10:00:00+00';
\set SHOW_CONTEXT never

-- Declaring: an upsert; risk is one of a small set; nulls and bad names are refused.
SELECT tenant_id, command_name, mutating, needs_approval, risk
  FROM cscp.command_declare('cr', 'transfer_money', true, true, 'high');
SELECT tenant_id, command_name, mutating, needs_approval, risk
  FROM cscp.command_declare('cr', 'get_balance', false);
SELECT tenant_id, command_name, mutating, needs_approval, risk
  FROM cscp.command_declare('cr', 'get_balance', false, false, 'low');
SELECT try($$SELECT cscp.command_declare('cr', 'x', true, false, 'extreme')$$);
SELECT try($$SELECT cscp.command_declare('cr', 'x', NULL)$$);
SELECT try($$SELECT cscp.command_declare('cr', '', true)$$);
SELECT try($$SELECT cscp.command_declare(NULL, 'x', true)$$);
SELECT try($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating, risk)
             VALUES ('cr', 'y', true, 'extreme')$$);
SELECT command_name, mutating, needs_approval, risk FROM cscp.command_registry
 WHERE tenant_id = 'cr' ORDER BY command_name;

-- A declared command takes its flags from the registry; a contradicting argument is 22023 and
-- writes nothing.
SELECT (cscp.context_open('cr', 'c1', 'u')).status;
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:1', 'transfer_money', false, '{m1}')$$);
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:2', 'get_balance', true, '{m1}')$$);
SELECT count(*) AS commands_after_refusals FROM cscp.command WHERE tenant_id = 'cr';
SELECT state FROM cscp.command_submit('cr', 'c1', 'u', 'c1:3', 'get_balance', false, '{m1}');
SELECT state FROM cscp.command_submit('cr', 'c1', 'u', 'c1:4', 'transfer_money', true, '{m2}');

-- Undeclared, under the default 'mutating': mutating whatever the caller says.
SELECT cscp.policy_effective('cr')->>'undeclared_commands' AS default_mode;
SELECT (cscp.context_open('cr', 'c2', 'u')).status;
SELECT state FROM cscp.command_submit('cr', 'c2', 'u', 'c2:1', 'close_account', false, '{m1}');
SELECT mutating FROM cscp.command WHERE tenant_id = 'cr' AND idempotency_key = 'c2:1';
-- ... and its replay with the same (ignored) flag is the same command, not a conflict.
SELECT state, replayed FROM cscp.command_submit('cr', 'c2', 'u', 'c2:1', 'close_account', false, '{m1}');

-- 'caller': the caller's flag, as before the registry.
SELECT cscp.policy_set('cr', '{"undeclared_commands": "caller"}')->>'undeclared_commands' AS mode;
SELECT (cscp.context_open('cr', 'c3', 'u')).status;
SELECT state FROM cscp.command_submit('cr', 'c3', 'u', 'c3:1', 'close_account', false, '{m1}');
-- A declaration still wins over the caller under 'caller'.
SELECT try($$SELECT cscp.command_submit('cr', 'c3', 'u', 'c3:2', 'transfer_money', false, '{m1}')$$);

-- 'refuse': an undeclared command is 22023 and writes nothing; declared ones go on.
SELECT cscp.policy_set('cr', '{"undeclared_commands": "refuse"}')->>'undeclared_commands' AS mode;
SELECT count(*) AS before FROM cscp.command WHERE tenant_id = 'cr' \gset
SELECT try($$SELECT cscp.command_submit('cr', 'c3', 'u', 'c3:3', 'close_account', true, '{m2}')$$);
SELECT count(*) - :before AS written FROM cscp.command WHERE tenant_id = 'cr';
SELECT state FROM cscp.command_submit('cr', 'c3', 'u', 'c3:4', 'get_balance', false, '{m2}');
SELECT try($$SELECT cscp.policy_set('cr', '{"undeclared_commands": "sometimes"}')$$);
SELECT cscp.policy_set('cr', '{"undeclared_commands": null}')->>'undeclared_commands' AS back_to_default;

-- A tenant's declaration overrides the defaults of tenant '*' ('lookup' is read-only there).
SELECT cscp.command_declare('cr', 'lookup', true) IS NOT NULL AS declared;
SELECT try($$SELECT cscp.command_submit('cr', 'c3', 'u', 'c3:5', 'lookup', false, '{m3}')$$);

-- message_turn forms its command as command_submit does.
SELECT count(*) FROM cscp.conversation_start('cr', 'c7', 'bot', '{"from": "bot", "content": "hello", "role": "agent", "ts": 0}');
SELECT try($$SELECT cscp.message_turn('cr', 'c7', 'u', '{"messageId": "m1", "from": "u", "content": "hi", "role": "user", "ts": 1}',
                                      '{}', '{"idempotency_key": "c7:1", "name": "transfer_money", "mutating": false}')$$);

---------------------------------------------------------------------------------------------------
-- Direct SQL as an application role: the same rules on the tables.
CREATE ROLE cr_app;
SELECT cscp.grant_app('cr_app', ARRAY['cr', 'cr2']);
SET ROLE cr_app;
SET cscp.tenant_id = 'cr';
-- Reads its own declarations and the defaults, not another tenant's.
SELECT tenant_id, command_name, mutating FROM cscp.command_registry
 WHERE command_name IN ('transfer_money', 'lookup') ORDER BY tenant_id, command_name;
-- A declared mutating command cannot be inserted read-only; nor an undeclared one (default mode).
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:1', 'd', 'u', 'transfer_money', false)$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:2', 'd', 'u', 'wipe_disk', false)$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:3', 'd', 'u', 'get_balance', false)$$);
-- Nor filed read-only as a cancel recovery under a name that is not "<name>:cancel".
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                                      recovery_kind, target_command_id)
             SELECT 'cr', 'd:5', 'd', 'u', 'transfer_money', false, 'cancel', command_id
               FROM cscp.command WHERE tenant_id = 'cr' AND idempotency_key = 'd:3'$$);
-- Under 'refuse', an undeclared command cannot be inserted at all, even as mutating.
SELECT cscp.policy_set('cr', '{"undeclared_commands": "refuse"}')->>'undeclared_commands' AS mode;
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:4', 'd', 'u', 'wipe_disk', true)$$);
SELECT cscp.policy_set('cr', '{"undeclared_commands": null}')->>'undeclared_commands' AS mode;
-- Nor through the API with a contradicting flag.
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:9', 'transfer_money', false, '{m9}')$$);
-- It declares for its own tenant (API and direct SQL), never for '*' nor another tenant.
SELECT command_name, mutating FROM cscp.command_declare('cr', 'report', true);
UPDATE cscp.command_registry SET risk = 'critical' WHERE tenant_id = 'cr' AND command_name = 'report';
SELECT try($$SELECT cscp.command_declare('*', 'report', false)$$);
SELECT try($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('*', 'z', false)$$);
SELECT try($$UPDATE cscp.command_registry SET mutating = true WHERE tenant_id = '*'$$);
SELECT try($$SELECT cscp.command_declare('cr3', 'report', false)$$);
SELECT try($$INSERT INTO cscp.command_registry (tenant_id, command_name, mutating) VALUES ('cr3', 'z', false)$$);
SELECT command_name, mutating, risk FROM cscp.command_registry WHERE tenant_id = 'cr' AND command_name = 'report';
-- 'report' is now mutating for 'cr': a read-only submit is refused.
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:10', 'report', false, '{m10}')$$);
-- Each backend caches the declarations it reads (registry.c); a change is seen at once, by the
-- API and by the trigger: 'report' made read-only, mutating again, then undeclared for 'cr' (the
-- defaults of '*' declare it read-only).
UPDATE cscp.command_registry SET mutating = false WHERE tenant_id = 'cr' AND command_name = 'report';
SELECT state FROM cscp.command_submit('cr', 'c1', 'u', 'c1:11', 'report', false, '{m11}');
UPDATE cscp.command_registry SET mutating = true WHERE tenant_id = 'cr' AND command_name = 'report';
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:12', 'report', false, '{m12}')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:6', 'd', 'u', 'report', false)$$);
DELETE FROM cscp.command_registry WHERE tenant_id = 'cr' AND command_name = 'report';
SELECT state FROM cscp.command_submit('cr', 'c1', 'u', 'c1:13', 'report', false, '{m13}');
SELECT mutating FROM cscp.command WHERE tenant_id = 'cr' AND idempotency_key = 'c1:13';
-- A declaration made and rolled back is not kept by the cache either.
BEGIN;
SELECT command_name, mutating FROM cscp.command_declare('cr', 'report', true);
SELECT try($$SELECT cscp.command_submit('cr', 'c1', 'u', 'c1:14', 'report', false, '{m14}')$$);
ROLLBACK;
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('cr', 'd:7', 'd', 'u', 'report', false)$$);
RESET ROLE;
RESET cscp.tenant_id;
SELECT count(*) AS star_rows_made_mutating FROM cscp.command_registry WHERE tenant_id = '*' AND mutating;

---------------------------------------------------------------------------------------------------
-- started -> canceled (RFC-WF-0018 section VI.A): through command_transition, with its evidence,
-- and offered by command_status as a recovery.
SELECT (cscp.context_open('cr2', 's1', 'u')).status;
SELECT cscp.command_declare('cr2', 'ship', true) IS NOT NULL AS declared;
SELECT command_id AS s1 FROM cscp.command_submit('cr2', 's1', 'u', 's1:1', 'ship', true, '{m1}') \gset
SELECT outcome FROM cscp.confirm('cr2', 's1', 'u', 'm2', true);
SELECT accepted, state FROM cscp.command_transition(:'s1', 'authz_pending');
SELECT accepted, state FROM cscp.command_transition(:'s1', 'authorized');
SELECT accepted, state FROM cscp.command_transition(:'s1', 'started');
SELECT state, next_allowed, recovery_options FROM cscp.command_status(:'s1');
SELECT cscp.command_transition_allowed('started', 'canceled') AS allowed;
SELECT accepted, state FROM cscp.command_transition(:'s1', 'canceled', 'operator_stop', '{"why": "stuck"}');
SELECT state, terminal, outcome, recovery_options FROM cscp.command_status(:'s1');
SELECT from_state, to_state, event_type, decision, reason_code FROM cscp.evidence
 WHERE tenant_id = 'cr2' AND command_id = :'s1' AND to_state = 'canceled';

-- ... through a cancel recovery: the running target is canceled, the recovery executed.
SELECT command_id AS s2 FROM cscp.command_submit('cr2', 's1', 'u', 's1:2', 'ship', true, '{m3}') \gset
SELECT outcome FROM cscp.confirm('cr2', 's1', 'u', 'm4', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'s2', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized', 'started']) s) t;
SELECT state FROM cscp.command_recover(:'s2', 'cancel', 's1:2:cancel');
SELECT command_name, recovery_kind, state FROM cscp.command WHERE target_command_id = :'s2';
SELECT state, reason_code FROM cscp.command_status(:'s2');

-- ... and as the application role, by a direct UPDATE.
SELECT command_id AS s3 FROM cscp.command_submit('cr2', 's1', 'u', 's1:3', 'ship', true, '{m5}') \gset
SELECT outcome FROM cscp.confirm('cr2', 's1', 'u', 'm6', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'s3', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized', 'started']) s) t;
SET ROLE cr_app;
SET cscp.tenant_id = 'cr2';
UPDATE cscp.command SET state = 'canceled', reason_code = 'operator_stop' WHERE command_id = :'s3';
SELECT state FROM cscp.command WHERE command_id = :'s3';
-- A canceled command stays canceled.
SELECT try(format($$UPDATE cscp.command SET state = 'started' WHERE command_id = %L$$, :'s3'));
RESET ROLE;
RESET cscp.tenant_id;

---------------------------------------------------------------------------------------------------
-- needs_approval: a command so declared starts only after cscp.approve approved it.  Authorized
-- without an approval, it is refused at started (not_approved): through command_transition as a
-- refusal with evidence, and by a direct UPDATE as the application role with 55000.
SELECT cscp.command_declare('cr2', 'wire', true, true, 'critical') IS NOT NULL AS declared;
SELECT command_id AS w1 FROM cscp.command_submit('cr2', 's1', 'u', 's1:w1', 'wire', true, '{m7}') \gset
SELECT outcome FROM cscp.confirm('cr2', 's1', 'u', 'm8', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'w1', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized']) s) t;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'w1', 'started');
SELECT event_type, reason_code FROM cscp.evidence
 WHERE tenant_id = 'cr2' AND command_id = :'w1' AND event_type = 'invalid_transition_attempt';
SELECT next_allowed FROM cscp.command_status(:'w1');
SET ROLE cr_app;
SET cscp.tenant_id = 'cr2';
SELECT try(format($$UPDATE cscp.command SET state = 'started' WHERE command_id = %L$$, :'w1'));
RESET ROLE;
RESET cscp.tenant_id;
-- The approval flow: authz_pending asking for an approval, cscp.approve, then it starts.
SELECT command_id AS w2 FROM cscp.command_submit('cr2', 's1', 'u', 's1:w2', 'wire', true, '{m9}') \gset
SELECT outcome FROM cscp.confirm('cr2', 's1', 'u', 'm10', true);
SELECT accepted, state FROM cscp.command_transition(:'w2', 'authz_pending', 'approval_required',
                                                    '{"approver_id": "boss"}');
SELECT outcome FROM cscp.approve('cr2', 's1', 'boss', 'm11', true);
SELECT accepted, state FROM cscp.command_transition(:'w2', 'started');

DROP OWNED BY cr_app;
DROP ROLE cr_app;
RESET cscp.clock;
