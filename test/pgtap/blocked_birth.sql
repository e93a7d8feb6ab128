-- A mutating command is not formed while its context is blocked (waiting on an external completion
-- or an operator), on every path: command_submit records it rejected with context_blocked, and the
-- command trigger refuses a direct INSERT of one born canonicalized or confirmation_required
-- against a blocked context as the application role, 55000, writing nothing, whether its frame is
-- left to the trigger or named.  A read-only command is formed as before, and a mutating one once
-- the context is active again.
BEGIN;
SELECT plan(12);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_blk_app;
SELECT cscp.grant_app('tap_blk_app', ARRAY['blk']);
SELECT cscp.command_declare('blk', 'lookup', false) IS NOT NULL AS declared \gset
SELECT cscp.policy_set('blk', '{"auto_confirm": ["ping"]}') IS NOT NULL AS policy_set \gset

CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO tap_blk_app;
-- A direct INSERT as the application role of a command of conv-k named name (mutating or not)
-- against ctx, its birth left to the trigger; with frame_of, the frame, context_ref and message
-- ids of that command (one more message) instead of the trigger's frame.
CREATE FUNCTION pg_temp.direct(key text, ctx uuid, name text, mutating boolean, frame_of text DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.err(CASE WHEN frame_of IS NULL THEN format($f$
        INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                  message_ids, command_name, mutating, auto_confirm, state)
        VALUES ('blk', %L, 'conv-k', 'kim', %L, ARRAY[%L], %L, %L, NULL, NULL)$f$,
        key, ctx, 'm:' || key, name, mutating)
    ELSE format($f$
        INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                  frame_id, context_ref, message_ids, command_name, mutating,
                                  auto_confirm, state)
        SELECT tenant_id, %L, conversation_id, actor_id, context_id, frame_id, context_ref,
               message_ids || %L::text, %L, %L, NULL, NULL
          FROM cscp.command WHERE tenant_id = 'blk' AND idempotency_key = %L$f$,
        key, 'm:' || key, name, mutating, frame_of) END)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.direct(text, uuid, text, boolean, text) TO tap_blk_app;

SET ROLE tap_blk_app;
SET cscp.tenant_id = 'blk';
SELECT context_id AS ctx FROM cscp.context_open('blk', 'conv-k', 'kim') \gset
SELECT is((cscp.command_submit('blk', 'conv-k', 'kim', 'k-read', 'lookup', false, '{m:1}')).state,
          'canonicalized'::cscp.command_state, 'a read-only command formed while the context is active');
SELECT is((SELECT status FROM cscp.context_transition(:'ctx', 'blocked', 'waiting on the bank')),
          'blocked'::cscp.context_status, 'the context is blocked');

-- Through the API.
SELECT is((SELECT state || ' ' || (outcome ->> 'reason_code')
             FROM cscp.command_submit('blk', 'conv-k', 'kim', 'k-api', 'pay', true, '{m:2}')),
          'rejected context_blocked', 'command_submit of a mutating command: rejected, context_blocked');

-- Direct SQL as the application role.
SELECT alike(pg_temp.direct('k-pay', :'ctx', 'pay', true),
            '55000 a mutating command cannot be formed while its context is blocked (context_blocked)%',
            'a direct INSERT of a mutating command that would ask, its frame left to the trigger: 55000');
SELECT alike(pg_temp.direct('k-ping', :'ctx', 'ping', true),
            '55000 %(context_blocked)',
            '... of an auto-confirmed mutating one, that would be canonicalized: 55000');
SELECT alike(pg_temp.direct('k-named', :'ctx', 'pay', true, 'k-read'),
            '55000 %(context_blocked)',
            '... of a mutating one naming a frame of that context: 55000');
SELECT is(pg_temp.direct('k-read-2', :'ctx', 'lookup', false), 'ok',
          '... of a read-only one: formed');
SELECT is(pg_temp.direct('k-read-3', :'ctx', 'lookup', false, 'k-read'), 'ok',
          '... of a read-only one naming a frame: formed');
SELECT is((SELECT array_agg(idempotency_key ORDER BY idempotency_key) FROM cscp.command WHERE tenant_id = 'blk'),
          ARRAY['k-api', 'k-read', 'k-read-2', 'k-read-3'], 'the refused INSERTs wrote nothing');
SELECT is((SELECT status::text || ' ' || (slots ? 'pending_confirmation') FROM cscp.context WHERE context_id = :'ctx'),
          'blocked false', 'the context is as it was');

-- Active again: a mutating command is formed, and asks.
SELECT is((SELECT status FROM cscp.context_transition(:'ctx', 'active')), 'active'::cscp.context_status,
          'the context is active again');
SELECT is(pg_temp.direct('k-pay-2', :'ctx', 'pay', true), 'ok',
          'a direct INSERT of a mutating command is formed then');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
