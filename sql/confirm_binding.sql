\i sql/include/helpers.sql
-- A yes confirms only what it should, on every path (issue 34, items 1, 2, 3 and 8): the pending
-- slots are bound to their commands; confirmed needs the user's recorded answer; nothing moves
-- forward on a dead context; the answer record cannot be forged.  Each rule through the API and
-- through direct SQL as an application role bound to tenant 'tb' (cscp.grant_app, SET ROLE,
-- cscp.tenant_id); writes around the triggers (session_replication_role = replica) are the
-- superuser's and show what confirm and approve answer to a slot no rule would have let in.
SET cscp.clock = '2026-06-01 10:00:00+00';
SET cscp.tenant_id = 'tb';
CREATE ROLE cb_app;
SELECT cscp.grant_app('cb_app', ARRAY['tb']);

-- The state of the commands of a conversation, by idempotency key.
CREATE FUNCTION pg_temp.cmds(conv text)
RETURNS TABLE(key text, state cscp.command_state, reason_code text, message_ids text[])
LANGUAGE sql AS $$
    SELECT x.idempotency_key, x.state, x.reason_code, x.message_ids FROM cscp.command x
     WHERE x.tenant_id = 'tb' AND x.conversation_id = conv ORDER BY x.created_at, x.idempotency_key
$$;
GRANT EXECUTE ON FUNCTION pg_temp.cmds(text) TO cb_app;
-- The pending_confirmation slot of a conversation's live context, with its command id named by key.
CREATE FUNCTION pg_temp.pending(conv text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(replace(x.slots -> 'pending_confirmation' ->> 'command_id',
                            c.command_id::text, 'cmd:' || c.idempotency_key), 'none')
      FROM cscp.context x
      LEFT JOIN cscp.command c ON c.tenant_id = x.tenant_id
           AND c.command_id::text = x.slots -> 'pending_confirmation' ->> 'command_id'
     WHERE x.tenant_id = 'tb' AND x.conversation_id = conv AND x.status IN ('active', 'pending', 'blocked')
$$;
GRANT EXECUTE ON FUNCTION pg_temp.pending(text) TO cb_app;
-- The refusals recorded for a conversation's answers (invalid_transition_attempt evidence).
CREATE FUNCTION pg_temp.refusals(conv text) RETURNS TABLE(reason_code text, message_ids text[])
LANGUAGE sql AS $$
    SELECT e.reason_code, e.message_ids FROM cscp.evidence e
     WHERE e.tenant_id = 'tb' AND e.conversation_id = conv AND e.event_type = 'invalid_transition_attempt'
     ORDER BY e.created_at, e.evidence_id
$$;
GRANT EXECUTE ON FUNCTION pg_temp.refusals(text) TO cb_app;
-- The SQLSTATE, message and hint of the error sql raises (ids masked).
CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN regexp_replace(SQLSTATE || ' ' || SQLERRM || ' | hint: ' || coalesce(hint, ''),
                          '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO cb_app;

-- Conversation X (maria) has a close_account command waiting for her yes; conversation Y (eve)
-- has a context of her own and a command waiting in it too.
SELECT status FROM cscp.context_open('tb', 'conv-x', 'maria');
SELECT command_id AS x_cmd FROM cscp.command_submit('tb', 'conv-x', 'maria', 'x-close', 'close_account',
                                                    true, '{x:m1}', '{}', 'acct:x') \gset
SELECT context_id AS y_ctx FROM cscp.context_open('tb', 'conv-y', 'eve') \gset
SELECT command_id AS y_cmd FROM cscp.command_submit('tb', 'conv-y', 'eve', 'y-pay', 'pay', true,
                                                    '{y:m1}', '{}', 'acct:y') \gset
SELECT window_expires_at AS y_window FROM cscp.command WHERE command_id = :'y_cmd' \gset

---------------------------------------------------------------------------------------------------
-- 1. The pending slot names only a command of its own tenant, conversation, actor and context,
-- waiting for that answer, with the command's window, key and fingerprint.
SET ROLE cb_app;
-- Y's slot pointed at X's command: through slot_set and through a direct UPDATE.
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'y_ctx', 'pending_confirmation',
                  jsonb_build_object('command_id', :'x_cmd', 'idempotency_key', 'x-close',
                                     'target_fingerprint', 'acct:x', 'expires_at', :'y_window'))) AS foreign_command;
SELECT try(format($$UPDATE cscp.context x SET slots = x.slots || jsonb_build_object('pending_confirmation',
                      jsonb_build_object('command_id', %L, 'idempotency_key', 'x-close',
                                         'target_fingerprint', 'acct:x', 'expires_at', %L))
                    WHERE x.context_id = %L$$, :'x_cmd', :'y_window', :'y_ctx')) AS foreign_command_direct;
-- Y's own command, but with another window, key or fingerprint than the command has.
SELECT label, try(format('SELECT cscp.slot_set(%L, %L, %L)', :'y_ctx', slot, v)) AS result
  FROM (VALUES
    ('later window', 'pending_confirmation',
     jsonb_build_object('command_id', :'y_cmd', 'idempotency_key', 'y-pay',
                        'target_fingerprint', 'acct:y', 'expires_at', '2026-06-01T11:00:00Z')),
    ('other key', 'pending_confirmation',
     jsonb_build_object('command_id', :'y_cmd', 'idempotency_key', 'x-close',
                        'target_fingerprint', 'acct:y', 'expires_at', :'y_window')),
    ('other fingerprint', 'pending_confirmation',
     jsonb_build_object('command_id', :'y_cmd', 'idempotency_key', 'y-pay',
                        'target_fingerprint', 'acct:x', 'expires_at', :'y_window')),
    ('as an approval', 'pending_approval',
     jsonb_build_object('command_id', :'y_cmd', 'approver_id', NULL, 'expires_at', :'y_window'))
  ) t(label, slot, v);
-- The same slot, exactly as the command has it, is accepted (a no-op rewrite of the question).
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'y_ctx', 'pending_confirmation',
                  jsonb_build_object('command_id', :'y_cmd', 'idempotency_key', 'y-pay',
                                     'target_fingerprint', 'acct:y',
                                     'expires_at', :'y_window'))) AS own_command;
-- Nothing changed: each slot still names its own command, both commands wait.
SELECT pg_temp.pending('conv-x') AS x_pending, pg_temp.pending('conv-y') AS y_pending;
SELECT * FROM pg_temp.cmds('conv-x') UNION ALL SELECT * FROM pg_temp.cmds('conv-y');
RESET ROLE;

-- At most one command per context waits for a yes: a new question supersedes the old one.
SELECT state FROM cscp.command_submit('tb', 'conv-y', 'eve', 'y-pay-2', 'pay', true, '{y:m2}', '{}', 'acct:y2');
SELECT * FROM pg_temp.cmds('conv-y');
SELECT pg_temp.pending('conv-y') AS y_pending;

---------------------------------------------------------------------------------------------------
-- 2. confirm and approve re-check the binding when the answer comes, and answer every state of
-- the slot with an outcome and evidence, never an error.  The slots below are written around the
-- triggers, as a careless owner could.
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || jsonb_build_object('pending_confirmation',
                  jsonb_build_object('command_id', :'x_cmd', 'idempotency_key', 'x-close',
                                     'target_fingerprint', 'acct:x', 'expires_at', :'y_window'))
 WHERE x.context_id = :'y_ctx';
RESET session_replication_role;
SET ROLE cb_app;
-- Eve's yes in Y does not reach X's command.
SELECT outcome, command_id IS NULL AS no_command FROM cscp.confirm('tb', 'conv-y', 'eve', 'y:m3', true);
SELECT * FROM pg_temp.cmds('conv-x');
SELECT * FROM pg_temp.refusals('conv-y');
RESET ROLE;
-- A new question in Y replaces that slot, and supersedes the command of Y's own context that
-- still waited (y-pay-2, which the slot no longer named): X's command still waits.
SELECT state FROM cscp.command_submit('tb', 'conv-y', 'eve', 'y-pay-3', 'pay', true, '{y:m7}', '{}', 'acct:y3');
SELECT * FROM pg_temp.cmds('conv-x') UNION ALL SELECT * FROM pg_temp.cmds('conv-y');
SELECT pg_temp.pending('conv-y') AS y_pending;
-- A slot whose command id is not a uuid, and one that is not an object: nothing_pending.
SET session_replication_role = replica;
UPDATE cscp.context x SET slots = x.slots || '{"pending_confirmation": {"command_id": "cmd-7", "expires_at": "soon"}}'
 WHERE x.context_id = :'y_ctx';
RESET session_replication_role;
SELECT outcome FROM cscp.confirm('tb', 'conv-y', 'eve', 'y:m4', true);
SET session_replication_role = replica;
UPDATE cscp.context x SET slots = x.slots || '{"pending_confirmation": [1, 2]}' WHERE x.context_id = :'y_ctx';
RESET session_replication_role;
SELECT outcome FROM cscp.confirm('tb', 'conv-y', 'eve', 'y:m5', true);

-- A slot expires_at later than the command's window: the command's window decides.  Past it,
-- the yes answers confirmation_expired (and the question lapses), never 55000.
SELECT command_id AS y3_cmd, window_expires_at AS y3_window FROM cscp.command
 WHERE idempotency_key = 'y-pay-3' AND tenant_id = 'tb' \gset
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || jsonb_build_object('pending_confirmation',
                  jsonb_build_object('command_id', :'y3_cmd', 'idempotency_key', 'y-pay-3',
                                     'target_fingerprint', 'acct:y3',
                                     'expires_at', :'y3_window'::timestamptz + interval '20 minutes'))
 WHERE x.context_id = :'y_ctx';
RESET session_replication_role;
SELECT set_config('cscp.clock', (:'y3_window'::timestamptz + interval '1 minute')::text, false) IS NOT NULL
    AS past_y3_window;
SET ROLE cb_app;
SELECT outcome FROM cscp.confirm('tb', 'conv-y', 'eve', 'y:m6', true);
SELECT * FROM pg_temp.cmds('conv-y');
SELECT * FROM pg_temp.refusals('conv-y');
RESET ROLE;

-- approve: a pending_approval slot of Y naming X's command waiting for an approval.
SET cscp.clock = '2026-06-01 10:00:00+00';
SELECT context_id AS a_ctx FROM cscp.context_open('tb', 'conv-ax', 'maria') \gset
SELECT command_id AS ax_cmd FROM cscp.command_submit('tb', 'conv-ax', 'maria', 'ax-read', 'read', false,
                                                     '{ax:m1}') \gset
SELECT accepted FROM cscp.command_transition(:'ax_cmd', 'authz_pending', 'approval_required',
                                             '{"approver_id": "mgr-1"}');
SELECT context_id AS ay_ctx FROM cscp.context_open('tb', 'conv-ay', 'eve') \gset
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'ay_ctx', 'pending_approval',
                  jsonb_build_object('command_id', :'ax_cmd', 'approver_id', 'mgr-1',
                                     'expires_at', '2026-06-01T11:00:00Z'))) AS foreign_approval;
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || jsonb_build_object('pending_approval',
                  jsonb_build_object('command_id', :'ax_cmd', 'approver_id', 'mgr-1',
                                     'expires_at', '2026-06-01T11:00:00Z'))
 WHERE x.context_id = :'ay_ctx';
RESET session_replication_role;
SET ROLE cb_app;
SELECT outcome FROM cscp.approve('tb', 'conv-ay', 'mgr-1', 'ay:m1', true);
SELECT state FROM cscp.command WHERE command_id = :'ax_cmd';
-- X's own approval still works.
SELECT outcome FROM cscp.approve('tb', 'conv-ax', 'mgr-1', 'ax:m2', true);
SELECT state FROM cscp.command WHERE command_id = :'ax_cmd';
-- The answers were kept (by cscp, as the owner) and replay.
SELECT outcome FROM cscp.approve('tb', 'conv-ax', 'mgr-1', 'ax:m2', false);
SELECT kind, message_id, outcome FROM cscp.answer WHERE conversation_id IN ('conv-ax', 'conv-ay') ORDER BY 1, 2;
RESET ROLE;

---------------------------------------------------------------------------------------------------
-- 3. confirmed needs the user's recorded answer; the answer table is written by cscp only.
SET ROLE cb_app;
-- command_transition to confirmed raises, with a hint to use cscp.confirm.
SELECT pg_temp.err(format('SELECT * FROM cscp.command_transition(%L, %L)', :'x_cmd', 'confirmed')) AS by_function;
SELECT pg_temp.err(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'confirmed', :'x_cmd')) AS by_update;
-- A direct UPDATE, with or without a message id of its own.
SELECT try(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'confirmed', :'x_cmd')) AS direct;
SELECT try(format($$UPDATE cscp.command x SET state = 'confirmed', message_ids = x.message_ids || '{x:m9}'
                    WHERE x.command_id = %L$$, :'x_cmd')) AS direct_with_message;
-- An answer row cannot be forged: neither a yes nor a no planted before the real answer.
SELECT try(format($$INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id, answered_by,
                                             outcome, command_id)
                    VALUES ('tb', 'conv-x', 'confirm', 'x:m9', 'maria', 'confirmed', %L)$$, :'x_cmd')) AS forged_yes;
SELECT try($$INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id, answered_by, outcome)
             VALUES ('tb', 'conv-x', 'confirm', 'x:m2', 'maria', 'declined')$$) AS forged_no;
SELECT try($$UPDATE cscp.answer SET outcome = 'declined' WHERE tenant_id = 'tb'$$) AS rewrite_answer;
SELECT * FROM pg_temp.cmds('conv-x');
-- The real yes confirms, and the confirmation step's evidence carries its message id.
SELECT outcome FROM cscp.confirm('tb', 'conv-x', 'maria', 'x:m2', true, 'acct:x');
SELECT * FROM pg_temp.cmds('conv-x');
SELECT e.event_type, e.reason_code, e.message_ids FROM cscp.evidence e
 WHERE e.command_id = :'x_cmd' AND e.to_state = 'confirmed';
RESET ROLE;
-- Even the superuser's UPDATE is refused without the answer (a command in confirmation_required
-- entered by a direct UPDATE gets the policy's window but no slot: nothing can confirm it, and
-- the context's next question supersedes it, below).
SELECT command_id AS z_cmd FROM cscp.command_submit('tb', 'conv-x', 'maria', 'x-read', 'read', false,
                                                    '{x:m3}') \gset
SELECT try(format($$UPDATE cscp.command SET state = 'confirmation_required' WHERE command_id = %L$$, :'z_cmd')) AS ask;
SELECT try(format($$UPDATE cscp.command SET state = 'confirmed' WHERE command_id = %L$$, :'z_cmd')) AS direct;
SELECT outcome FROM cscp.confirm('tb', 'conv-x', 'maria', 'x:m4', true);
SELECT state FROM cscp.command WHERE command_id = :'z_cmd';
-- command_transition to confirmation_required asks the question as command_submit does: a
-- window, the pending slot naming the command, and the yes then confirms it.
SELECT command_id AS q_cmd FROM cscp.command_submit('tb', 'conv-x', 'maria', 'x-ask', 'read', false,
                                                    '{x:m6}', '{}', 'acct:q') \gset
SET ROLE cb_app;
SELECT accepted, state FROM cscp.command_transition(:'q_cmd', 'confirmation_required', 'ask_first');
SELECT pg_temp.pending('conv-x') AS x_pending, window_expires_at FROM cscp.command WHERE command_id = :'q_cmd';
SELECT outcome FROM cscp.confirm('tb', 'conv-x', 'maria', 'x:m7', true, 'acct:q');
SELECT state, reason_code, message_ids FROM cscp.command WHERE command_id = :'q_cmd';
RESET ROLE;
-- The auto-confirm policy stays, recorded as such (no confirmed step at all).
SELECT cscp.policy_set('tb', '{"auto_confirm": ["refresh"]}') -> 'auto_confirm' AS auto_confirm;
SELECT command_id AS r_cmd FROM cscp.command_submit('tb', 'conv-x', 'maria', 'x-refresh', 'refresh', true,
                                                    '{x:m5}') \gset
SELECT accepted, state FROM cscp.command_transition(:'r_cmd', 'authz_pending');
SELECT e.event_type, e.decision, e.reason_code FROM cscp.evidence e WHERE e.command_id = :'r_cmd' ORDER BY e.seq;

---------------------------------------------------------------------------------------------------
-- 4. Nothing moves forward on a dead context: X's confirmed command, its context closed.
SELECT context_id AS x_ctx FROM cscp.context_get('tb', 'conv-x', 'maria') \gset
SELECT status FROM cscp.context_transition(:'x_ctx', 'closed', 'done');
SET ROLE cb_app;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'x_cmd', 'authz_pending');
SELECT e.reason_code, e.detail ->> 'requested_reason_code' AS requested FROM cscp.evidence e
 WHERE e.command_id = :'x_cmd' AND e.event_type = 'invalid_transition_attempt';
SELECT try(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'authz_pending', :'x_cmd')) AS direct;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'r_cmd', 'authorized');
SELECT * FROM pg_temp.cmds('conv-x');
-- It may still be canceled.
SELECT accepted, state FROM cscp.command_transition(:'x_cmd', 'canceled');
RESET ROLE;

-- An expired context (past expires_at, swept or not): context_expired, through both ways; a
-- command already started still finishes.
SET cscp.clock = '2026-06-01 12:00:00+00';
SELECT status FROM cscp.context_open('tb', 'conv-e', 'maria');
SELECT command_id AS e1 FROM cscp.command_submit('tb', 'conv-e', 'maria', 'e-read', 'read', false, '{e:m1}') \gset
SELECT command_id AS e2 FROM cscp.command_submit('tb', 'conv-e', 'maria', 'e-read-2', 'read', false, '{e:m2}') \gset
SELECT string_agg(s::text || '=' || t.accepted, ' ' ORDER BY n)
  FROM unnest('{authz_pending,authorized,started}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL cscp.command_transition(:'e2', u.s) t;
SELECT accepted FROM cscp.command_transition(:'e1', 'authz_pending');
SELECT command_id AS e3 FROM cscp.command_submit('tb', 'conv-e', 'maria', 'e-pay', 'pay', true, '{e:m3}') \gset
SET cscp.clock = '2026-06-01 12:45:00+00';
SET ROLE cb_app;
SELECT accepted, state, reason_code FROM cscp.command_transition(:'e1', 'authorized');
SELECT try(format('UPDATE cscp.command SET state = %L WHERE command_id = %L', 'authorized', :'e1')) AS direct;
SELECT outcome FROM cscp.confirm('tb', 'conv-e', 'maria', 'e:m4', true);
SELECT accepted, state FROM cscp.command_transition(:'e2', 'executed');
SELECT * FROM pg_temp.cmds('conv-e');
RESET ROLE;

-- What command_status offers on a dead context.
SELECT next_allowed FROM cscp.command_status(:'e1');

---------------------------------------------------------------------------------------------------
-- 5. A context asks one question of each kind at a time, whoever writes.  As the application
-- role: a command made to wait by direct SQL beside the context's question is refused (55000,
-- naming the one that waits); the API's next question supersedes whatever waits, slot or not.
SET cscp.clock = '2026-06-01 14:00:00+00';
SELECT context_id AS q_ctx FROM cscp.context_open('tb', 'conv-q', 'maria') \gset
SET ROLE cb_app;
SELECT command_id AS q1 FROM cscp.command_submit('tb', 'conv-q', 'maria', 'q-pay-1', 'pay', true,
                                                 '{q:m1}', '{}', 'acct:q1') \gset
SELECT command_id AS q2 FROM cscp.command_submit('tb', 'conv-q', 'maria', 'q-read', 'read', false,
                                                 '{q:m2}') \gset
-- A second waiting command by UPDATE, and by INSERT (born waiting, with its frame and window).
SELECT pg_temp.err(format('UPDATE cscp.command SET state = %L WHERE command_id = %L',
                          'confirmation_required', :'q2')) AS second_by_update;
SELECT pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                  context_id, frame_id, context_ref, message_ids, command_name,
                                  mutating, state, window_expires_at)
                          SELECT tenant_id, 'q-pay-2', conversation_id, actor_id, context_id, frame_id,
                                 context_ref, message_ids || '{q:m3}', 'pay', true, 'confirmation_required',
                                 window_expires_at
                            FROM cscp.command WHERE command_id = %L$$, :'q1')) AS second_by_insert;
SELECT * FROM pg_temp.cmds('conv-q');
-- The waiting command's row in cscp.command_window names its context and its question.
SELECT question, context_id = :'q_ctx' AS of_context FROM cscp.command_window WHERE command_id = :'q1';
-- The API's own question supersedes it, before the new command starts to wait.
SELECT state FROM cscp.command_submit('tb', 'conv-q', 'maria', 'q-pay-3', 'pay', true, '{q:m4}', '{}', 'acct:q3');
SELECT * FROM pg_temp.cmds('conv-q');
SELECT pg_temp.pending('conv-q') AS q_pending;
RESET ROLE;
-- A command made to wait around the slot (by the owner, in a context with no question) is
-- superseded by the next question all the same: the rule is the context's, not the slot's.
SELECT accepted FROM cscp.command_transition(:'q2', 'canceled');
SELECT command_id AS q5 FROM cscp.command_submit('tb', 'conv-q', 'maria', 'q-read-5', 'read', false,
                                                 '{q:m5}') \gset
SELECT state FROM cscp.command_transition((SELECT command_id FROM cscp.command
                                            WHERE tenant_id = 'tb' AND idempotency_key = 'q-pay-3'),
                                          'rejected', 'user_changed_mind');
UPDATE cscp.command SET state = 'confirmation_required' WHERE command_id = :'q5';
SELECT pg_temp.pending('conv-q') AS q_pending, window_expires_at IS NOT NULL AS has_window
  FROM cscp.command WHERE command_id = :'q5';
SET ROLE cb_app;
SELECT state FROM cscp.command_submit('tb', 'conv-q', 'maria', 'q-pay-6', 'pay', true, '{q:m6}', '{}', 'acct:q6');
SELECT * FROM pg_temp.cmds('conv-q');
RESET ROLE;
SELECT count(*) AS multiple_waiting FROM cscp.check_invariants('tb') WHERE kind = 'multiple_waiting_commands';

DROP FUNCTION pg_temp.cmds(text), pg_temp.pending(text), pg_temp.refusals(text), pg_temp.err(text);
SELECT cscp.revoke_app('cb_app');
DROP ROLE cb_app;
RESET cscp.tenant_id;
RESET cscp.clock;
