-- A command born asking asks its context from its own trigger (issue 41, item 2: opening a
-- command does not re-read what it just wrote).  The command trigger that decides a birth in
-- confirmation_required writes the context's question itself, as the owner, from the row it has
-- just judged: the context becomes pending, its pending_confirmation slot names the command with
-- its key, fingerprint and window, the command becomes its last and the last of its message ids
-- its last message.  The context's trigger does not read the command back for that write, and
-- holds every other write of a pending slot to its command as before: the application role's,
-- a superuser's typed SQL, a SECURITY DEFINER function's, the gateway's.  The same on the API's
-- path and on a direct INSERT as the application role; a statement that fails after the trigger
-- asked leaves the context as it was.
BEGIN;
SELECT plan(22);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_qab_app;
SELECT cscp.grant_app('tap_qab_app', ARRAY['qab']);
SELECT cscp.policy_set('qab', '{"confirmation_ttl": "4 minutes"}') IS NOT NULL AS policy_set \gset
SELECT cscp.api_key_create('qab', 'qab gateway') AS key \gset

CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO tap_qab_app;
-- The question a conversation's live context asks, as text: status, the command its slot names
-- (by key), and whether the slot's key, fingerprint and expires_at are that command's; the
-- context's last command (by key) and last message.
CREATE FUNCTION pg_temp.question(conv text) RETURNS text LANGUAGE sql AS $$
    SELECT x.status || ' ' || coalesce(c.idempotency_key, 'none') || ' '
           || coalesce((x.slots -> 'pending_confirmation' ->> 'idempotency_key') = c.idempotency_key
                       AND (x.slots -> 'pending_confirmation' ->> 'target_fingerprint')
                           IS NOT DISTINCT FROM c.target_fingerprint
                       AND (x.slots -> 'pending_confirmation' ->> 'expires_at')::timestamptz = c.window_expires_at, false)
           || ' last=' || coalesce(l.idempotency_key, 'none') || ' msg=' || coalesce(x.last_message_id, 'none')
      FROM cscp.context x
      LEFT JOIN cscp.command c ON c.tenant_id = x.tenant_id
           AND c.command_id::text = x.slots -> 'pending_confirmation' ->> 'command_id'
      LEFT JOIN cscp.command l ON l.tenant_id = x.tenant_id AND l.command_id = x.last_command_id
     WHERE x.tenant_id = 'qab' AND x.conversation_id = conv AND x.status IN ('active', 'pending', 'blocked')
$$;
GRANT EXECUTE ON FUNCTION pg_temp.question(text) TO tap_qab_app;
-- A SECURITY DEFINER function owned by the superuser that owns cscp's tables: it writes a slot as
-- the owner, as the gateway's functions do, and is judged as any other writer.
CREATE FUNCTION pg_temp.definer_slot(ctx uuid, slot jsonb) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE cscp.context x SET slots = x.slots || jsonb_build_object('pending_confirmation', slot)
     WHERE x.tenant_id = 'qab' AND x.context_id = ctx
$$;
GRANT EXECUTE ON FUNCTION pg_temp.definer_slot(uuid, jsonb) TO tap_qab_app;

SET ROLE tap_qab_app;
SET cscp.tenant_id = 'qab';

-- 1. Through the API.
SELECT context_id AS ctx_a, expires_at AS opened_until FROM cscp.context_open('qab', 'conv-a', 'ana') \gset
RESET ROLE;
SET cscp.clock = '2026-08-01 10:01:00+00';
SET ROLE tap_qab_app;
SELECT is((cscp.command_submit('qab', 'conv-a', 'ana', 'a-pay', 'pay', true, '{a:m1,a:m2}', '{}', 'acct:1')).state,
          'confirmation_required'::cscp.command_state, 'a mutating command submitted asks');
SELECT is(pg_temp.question('conv-a'), 'pending a-pay true last=a-pay msg=a:m2',
          '... its context is pending, the slot names it with its key, fingerprint and window, it is the last command, its last message the last');
SELECT ok((SELECT expires_at > :'opened_until'::timestamptz FROM cscp.context WHERE context_id = :'ctx_a'),
          '... and the context''s TTL slid');
SELECT is((SELECT window_expires_at - created_at FROM cscp.command WHERE idempotency_key = 'a-pay'),
          interval '4 minutes', '... with the policy''s window');
SELECT is((cscp.command_submit('qab', 'conv-a', 'ana', 'a-pay-2', 'pay', true, '{a:m3}')).state,
          'confirmation_required'::cscp.command_state, 'the next question through the API');
SELECT is(pg_temp.question('conv-a') || ' ' || (SELECT state || ':' || reason_code FROM cscp.command WHERE idempotency_key = 'a-pay'),
          'pending a-pay-2 true last=a-pay-2 msg=a:m3 rejected:confirmation_superseded',
          '... the slot follows it, the one before is superseded');

-- 2. Direct SQL as the application role, its birth (auto_confirm and state null) and frame left to
-- the trigger.
SELECT context_id AS ctx_b FROM cscp.context_open('qab', 'conv-b', 'ben') \gset
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                           context_id, message_ids, command_name, mutating,
                                                           auto_confirm, state)
                                VALUES ('qab', 'b-pay', 'conv-b', 'ben', %L, '{b:m1,b:m7}', 'pay', true, NULL, NULL)$$, :'ctx_b')),
          'ok', 'a direct INSERT of a mutating command naming its context and messages');
SELECT is((SELECT state FROM cscp.command WHERE idempotency_key = 'b-pay'), 'confirmation_required'::cscp.command_state,
          '... is born asking');
SELECT is(pg_temp.question('conv-b'), 'pending b-pay true last=b-pay msg=b:m7',
          '... and has asked its context, as command_submit''s does');
SELECT is((cscp.confirm('qab', 'conv-b', 'ben', 'b:m8', true)).outcome, 'confirmed',
          '... so the user''s yes confirms it');
-- A statement that fails after the trigger asked (its key taken: the unique index refuses the
-- row) leaves the context as it was.
SELECT context_id AS ctx_c FROM cscp.context_open('qab', 'conv-c', 'cy') \gset
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                           context_id, message_ids, command_name, mutating,
                                                           auto_confirm, state)
                                VALUES ('qab', 'a-pay', 'conv-c', 'cy', %L, '{c:m1}', 'pay', true, NULL, NULL)$$, :'ctx_c')),
          '23505', 'a direct INSERT asking with a key already taken is refused');
SELECT is(pg_temp.question('conv-c'), 'active none false last=none msg=none', '... and its context asks nothing');
-- A row that names its state is held to the rules, and asks nothing of its context.
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                           context_id, message_ids, command_name, mutating, state,
                                                           window_expires_at)
                                VALUES ('qab', 'c-named', 'conv-c', 'cy', %L, '{c:m2}', 'pay', true,
                                        'confirmation_required', cscp.now() + interval '1 minute')$$, :'ctx_c')),
          'ok', 'a direct INSERT naming confirmation_required');
SELECT is(pg_temp.question('conv-c'), 'active none false last=none msg=none', '... does not ask its context');

-- 3. Every other write of the slot is still held to its command: c-named waits in conv-c, and a
-- slot of conv-c naming a-pay-2 (conv-a's) is refused whoever writes it, and changes nothing.
SELECT (SELECT jsonb_build_object('command_id', command_id, 'idempotency_key', idempotency_key,
                                  'target_fingerprint', target_fingerprint,
                                  'expires_at', to_char(window_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
          FROM cscp.command WHERE idempotency_key = 'a-pay-2') AS foreign_slot \gset
SELECT is(pg_temp.err(format($$UPDATE cscp.context x SET slots = x.slots || jsonb_build_object('pending_confirmation', %L::jsonb)
                                WHERE x.context_id = %L$$, :'foreign_slot', :'ctx_c')),
          '22023', 'the application role''s UPDATE of a slot naming another conversation''s command: 22023');
SELECT is(pg_temp.err(format('SELECT pg_temp.definer_slot(%L, %L)', :'ctx_c', :'foreign_slot')),
          '22023', 'the same through a SECURITY DEFINER function of the tables'' owner: 22023');
RESET ROLE;
SELECT is(pg_temp.err(format($$UPDATE cscp.context x SET slots = x.slots || jsonb_build_object('pending_confirmation', %L::jsonb)
                                WHERE x.context_id = %L$$, :'foreign_slot', :'ctx_c')),
          '22023', 'the same by a superuser''s typed SQL: 22023');
SELECT isnt((SELECT status FROM cscp.http_slot_put('Bearer ' || :'key', 'conv-c', 'cy', 'pending_confirmation',
                                                   'application/json', :'foreign_slot')),
            200, 'the same through the gateway''s slot endpoint is refused');
SELECT is((SELECT body -> 'error' ->> 'sqlstate'
             FROM cscp.http_slot_put('Bearer ' || :'key', 'conv-c', 'cy', 'pending_confirmation',
                                     'application/json', :'foreign_slot')),
          '22023', '... with 22023');
SELECT is(pg_temp.question('conv-c'), 'active none false last=none msg=none', 'and conv-c''s context asks nothing still');
SELECT is((SELECT state FROM cscp.command WHERE idempotency_key = 'a-pay-2'), 'confirmation_required'::cscp.command_state,
          'a-pay-2 still waits in its own conversation');
SELECT is_empty($$SELECT * FROM cscp.check_invariants('qab')$$, 'and every invariant holds');

SELECT * FROM finish();
ROLLBACK;
