\i sql/include/helpers.sql
-- A new command's birth is decided once, by the command trigger (issue 41, item 1): command_submit
-- inserts what it was asked for with auto_confirm and state left null, and the trigger decides
-- them (auto_confirm from the tenant's policy; rejected, canonicalized, or confirmation_required
-- with its window), superseding the question the context asks when the new command asks.  A
-- direct INSERT as the application role that leaves them null is decided the same way; one that
-- names them is held to the same rules as before (forged values refused, a second waiting
-- command refused).
SET cscp.clock = '2026-08-01 10:00:00+00';
SET cscp.tenant_id = 'bn';
CREATE ROLE bn_app;
SELECT cscp.grant_app('bn_app', ARRAY['bn']);
SELECT cscp.policy_set('bn', '{"auto_confirm": ["ping"], "confirmation_ttl": "3 minutes"}') IS NOT NULL AS policy_set;
SELECT cscp.command_declare('bn', 'read', false) IS NOT NULL AS declared;

-- The commands of a conversation, by idempotency key.
CREATE FUNCTION pg_temp.cmds(conv text)
RETURNS TABLE(key text, state cscp.command_state, mutating boolean, auto_confirm boolean,
              reason_code text, superseded_by text, window_minutes double precision)
LANGUAGE sql AS $$
    SELECT x.idempotency_key, x.state, x.mutating, x.auto_confirm, x.reason_code,
           (SELECT s.idempotency_key FROM cscp.command s
             WHERE s.tenant_id = x.tenant_id AND s.command_id::text = x.detail ->> 'superseded_by'),
           extract(epoch FROM x.window_expires_at - x.created_at) / 60
      FROM cscp.command x
     WHERE x.tenant_id = 'bn' AND x.conversation_id = conv ORDER BY x.created_at, x.idempotency_key
$$;
GRANT EXECUTE ON FUNCTION pg_temp.cmds(text) TO bn_app;
-- The evidence of a command: event, decision and reason.
CREATE FUNCTION pg_temp.events(key text)
RETURNS TABLE(event_type text, decision text, reason_code text)
LANGUAGE sql AS $$
    SELECT e.event_type, e.decision, e.reason_code FROM cscp.evidence e
      JOIN cscp.command x ON x.tenant_id = e.tenant_id AND x.command_id = e.command_id
     WHERE x.tenant_id = 'bn' AND x.idempotency_key = key ORDER BY e.created_at, e.evidence_id
$$;
GRANT EXECUTE ON FUNCTION pg_temp.events(text) TO bn_app;
-- The key of the command the pending_confirmation slot of a conversation's live context names.
CREATE FUNCTION pg_temp.pending(conv text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(c.idempotency_key, 'none')
      FROM cscp.context x
      LEFT JOIN cscp.command c ON c.tenant_id = x.tenant_id
           AND c.command_id::text = x.slots -> 'pending_confirmation' ->> 'command_id'
     WHERE x.tenant_id = 'bn' AND x.conversation_id = conv AND x.status IN ('active', 'pending', 'blocked')
$$;
GRANT EXECUTE ON FUNCTION pg_temp.pending(text) TO bn_app;
-- The SQLSTATE and message of the error sql raises (ids masked), or ok.
CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN regexp_replace(SQLSTATE || ' ' || SQLERRM,
                          '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO bn_app;
-- A direct INSERT as the application role of a command of conversation conv-b named name, with the
-- frame, context_ref and message ids (one more) of the command keyed like_key, and the given
-- mutating, auto_confirm, state and reason_code (null: left to the trigger).
CREATE FUNCTION pg_temp.direct(key text, name text, like_key text, mutating boolean,
                               auto_confirm boolean, state cscp.command_state, reason text)
RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.err(format($f$
        INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                  frame_id, context_ref, message_ids, command_name, mutating,
                                  auto_confirm, state, reason_code)
        SELECT tenant_id, %L, conversation_id, actor_id, context_id, frame_id, context_ref,
               message_ids || %L::text, %L, %L, %L, %L, %L
          FROM cscp.command WHERE tenant_id = 'bn' AND idempotency_key = %L$f$,
        key, 'b:' || key, name, mutating, auto_confirm, state, reason, like_key))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.direct(text, text, text, boolean, boolean, cscp.command_state, text) TO bn_app;

SELECT status FROM cscp.context_open('bn', 'conv-b', 'maria');
SET ROLE bn_app;
-- 1. Through the API: a mutating command asks (window from the policy's confirmation_ttl), an
-- auto-confirmed one is canonicalized (the policy recorded with its acceptance), a read-only one
-- is canonicalized; the context's slot names the one that asks.
SELECT state FROM cscp.command_submit('bn', 'conv-b', 'maria', 'b-pay-1', 'pay', true, '{b:m1}');
SELECT state FROM cscp.command_submit('bn', 'conv-b', 'maria', 'b-ping-1', 'ping', true, '{b:m2}');
SELECT state FROM cscp.command_submit('bn', 'conv-b', 'maria', 'b-read-1', 'read', false, '{b:m3}');
SELECT * FROM pg_temp.cmds('conv-b');
SELECT * FROM pg_temp.events('b-ping-1');
SELECT pg_temp.pending('conv-b') AS pending;
-- The next question through the API supersedes the one that waits.
SELECT state FROM cscp.command_submit('bn', 'conv-b', 'maria', 'b-pay-2', 'pay', true, '{b:m4}');
SELECT * FROM pg_temp.cmds('conv-b');
SELECT pg_temp.pending('conv-b') AS pending;

-- 2. Direct SQL, birth left to the trigger (auto_confirm and state null): decided as
-- command_submit's.  A mutating command with its frame asks and supersedes the question that
-- waits (the context's slot names it, as the trigger of a command born asking writes it);
-- a listed one is auto-confirmed and canonicalized; a read-only one is canonicalized; one with a
-- reason_code is rejected with its outcome.
SELECT pg_temp.direct('b-pay-3', 'pay', 'b-pay-2', true, NULL, NULL, NULL) AS direct_pay;
SELECT pg_temp.direct('b-ping-2', 'ping', 'b-pay-2', true, NULL, NULL, NULL) AS direct_ping;
SELECT pg_temp.direct('b-read-2', 'read', 'b-pay-2', false, NULL, NULL, NULL) AS direct_read;
SELECT pg_temp.direct('b-pay-4', 'pay', 'b-pay-2', true, NULL, NULL, 'context_expired') AS direct_refused;
SELECT * FROM pg_temp.cmds('conv-b');
SELECT * FROM pg_temp.events('b-ping-2');
SELECT * FROM pg_temp.events('b-pay-2');
SELECT outcome ->> 'reason_code' AS refused_outcome FROM cscp.command WHERE idempotency_key = 'b-pay-4';
SELECT pg_temp.pending('conv-b') AS pending;
RESET ROLE;
SELECT kind, count(*) FROM cscp.check_invariants('bn') GROUP BY kind ORDER BY kind;
SET ROLE bn_app;
SELECT w.question, x.idempotency_key AS waits FROM cscp.command_window w
  JOIN cscp.command x ON x.tenant_id = w.tenant_id AND x.command_id = w.command_id
 WHERE w.tenant_id = 'bn' AND w.context_id IS NOT NULL;

-- 3. Direct SQL, forged or unfounded: each refused with the SQLSTATE of before, nothing written.
-- auto_confirm true for a command the policy does not list (22023); read-only for an undeclared
-- command (22023); a mutating command without a frame, left to the trigger, cannot be born
-- canonicalized (55000, snapshot_missing); confirmation_required named beside the waiting question
-- (55000: a named state does not supersede).
SELECT pg_temp.direct('b-pay-5', 'pay', 'b-pay-2', true, true, NULL, NULL) AS forged_auto_confirm;
SELECT pg_temp.direct('b-pay-6', 'pay', 'b-pay-2', false, NULL, NULL, NULL) AS forged_read_only;
SELECT pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                               message_ids, command_name, mutating, auto_confirm, state)
                     VALUES ('bn', 'b-pay-7', 'conv-b', 'maria', '{b:m7}', 'pay', true, NULL, NULL)$$) AS no_frame;
SELECT pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                               context_id, frame_id, context_ref, message_ids,
                                               command_name, mutating, state, window_expires_at)
                     SELECT tenant_id, 'b-pay-8', conversation_id, actor_id, context_id, frame_id,
                            context_ref, message_ids || '{b:m8}', 'pay', true, 'confirmation_required',
                            window_expires_at
                       FROM cscp.command WHERE tenant_id = 'bn' AND idempotency_key = 'b-pay-3'$$) AS named_question;
SELECT count(*) AS refused_written FROM cscp.command
 WHERE tenant_id = 'bn' AND idempotency_key IN ('b-pay-5', 'b-pay-6', 'b-pay-7', 'b-pay-8');
SELECT x.idempotency_key AS still_waits FROM cscp.command_window w
  JOIN cscp.command x ON x.tenant_id = w.tenant_id AND x.command_id = w.command_id
 WHERE w.tenant_id = 'bn' AND w.context_id IS NOT NULL;

-- 4. The API's next question supersedes the directly inserted one, and the slot follows it.
SELECT state FROM cscp.command_submit('bn', 'conv-b', 'maria', 'b-pay-9', 'pay', true, '{b:m9}');
SELECT key, state, reason_code, superseded_by FROM pg_temp.cmds('conv-b') WHERE key IN ('b-pay-3', 'b-pay-9');
SELECT pg_temp.pending('conv-b') AS pending;
RESET ROLE;
SELECT kind, count(*) FROM cscp.check_invariants('bn') GROUP BY kind ORDER BY kind;

DROP FUNCTION pg_temp.cmds(text), pg_temp.events(text), pg_temp.pending(text), pg_temp.err(text),
              pg_temp.direct(text, text, text, boolean, boolean, cscp.command_state, text);
SELECT cscp.revoke_app('bn_app');
DROP ROLE bn_app;
RESET cscp.tenant_id;
RESET cscp.clock;
