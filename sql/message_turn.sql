\i sql/include/helpers.sql
-- cscp.message_turn: the turn, the sender's context with its slots, and the command, in one
-- call; the same rows as conversation_exchange + context_open + command_submit.
\set VERBOSITY terse
SET cscp.clock = '2026-11-01 09:00:00+00';
SELECT cscp.policy_set('mt', '{"auto_confirm": []}') IS NOT NULL AS policy;
SELECT turn_index FROM cscp.conversation_start('mt', 'mt-1', 'bot',
    '{"from": "bot", "role": "agent", "content": {"text": "Hello, how can I help?"}, "ts": 1}');
SELECT turn_index FROM cscp.conversation_start('mt', 'mt-2', 'bot',
    '{"from": "bot", "role": "agent", "content": {"text": "Hello, how can I help?"}, "ts": 1}');

-- One call ...
SELECT r - 'context_id' - 'command_id' AS one_call
  FROM cscp.message_turn('mt', 'mt-1', 'ana',
         '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where is order 123?"}, "ts": 2}',
         '{"active_intent": "track_order", "active_target": "order:123"}',
         '{"idempotency_key": "mt-1:k1", "name": "track_order", "payload": {"order_id": "123"},
           "target_fingerprint": "order:123"}') r;
-- ... against the three calls it stands for.
SELECT outcome FROM cscp.conversation_exchange('mt', 'mt-2',
    '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where is order 123?"}, "ts": 2}');
SELECT status FROM cscp.context_open('mt', 'mt-2', 'ana', '{"active_intent": "track_order", "active_target": "order:123"}');
SELECT state FROM cscp.command_submit('mt', 'mt-2', 'ana', 'mt-2:k1', 'track_order', false, '{m1}',
                                      '{"order_id": "123"}', 'order:123');
-- The same rows: context, command, evidence, turns, events (ids and keys aside).
SELECT conversation_id, status, slots, last_message_id, version,
       last_command_id = (SELECT command_id FROM cscp.command c WHERE c.conversation_id = x.conversation_id) AS last_command
  FROM cscp.context x WHERE tenant_id = 'mt' ORDER BY conversation_id;
SELECT conversation_id, state, message_ids, payload, target_fingerprint, version, context_ref ? 'frame_id' AS framed
  FROM cscp.command WHERE tenant_id = 'mt' ORDER BY conversation_id;
SELECT conversation_id, seq, event_type, from_state || '->' || to_state AS step, message_ids
  FROM cscp.evidence WHERE tenant_id = 'mt' ORDER BY conversation_id, seq;
SELECT conversation_id, turn_index, message_id, role, sender FROM cscp.turn WHERE tenant_id = 'mt'
 ORDER BY conversation_id, turn_index;
SELECT conversation_id, seq, type FROM cscp.event WHERE tenant_id = 'mt' ORDER BY conversation_id, seq;

-- The same message delivered twice: the turn and the command replay; nothing new is written.
SELECT r - 'context_id' - 'command_id' AS redelivered
  FROM cscp.message_turn('mt', 'mt-1', 'ana',
         '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "where is order 123?"}, "ts": 2}',
         '{"active_intent": "track_order", "active_target": "order:123"}',
         '{"idempotency_key": "mt-1:k1", "name": "track_order", "payload": {"order_id": "123"},
           "target_fingerprint": "order:123"}') r;
SELECT (SELECT count(*) FROM cscp.command WHERE conversation_id = 'mt-1') AS commands,
       (SELECT count(*) FROM cscp.turn WHERE conversation_id = 'mt-1') AS turns;

-- A mutating command asks for confirmation, as command_submit does.
SELECT r ->> 'outcome' AS outcome, r ->> 'state' AS state
  FROM cscp.message_turn('mt', 'mt-1', 'ana',
         '{"messageId": "m2", "from": "ana", "role": "user", "content": {"text": "cancel it"}, "ts": 3}',
         '{}', '{"idempotency_key": "mt-1:k2", "name": "cancel_order", "mutating": true,
                 "target_fingerprint": "order:123"}') r;
SELECT status, slots ? 'pending_confirmation' AS pending FROM cscp.context WHERE conversation_id = 'mt-1';
-- No slots and no command: the turn, and the context used.
SELECT r ->> 'turn_index' AS turn_index, r ->> 'command_id' AS command_id, r -> 'replayed' AS replayed
  FROM cscp.message_turn('mt', 'mt-1', 'ana',
         '{"messageId": "m3", "from": "ana", "role": "user", "content": {"text": "hm"}, "ts": 4}') r;

-- A conversation past its deadline: the turn times it out, and nothing else happens.
SELECT turn_index FROM cscp.conversation_start('mt', 'mt-3', 'bot',
    '{"from": "bot", "role": "agent", "content": {"text": "Quick!"}, "ts": 1}', timeout_ms => 60000);
SET cscp.clock = '2026-11-01 09:05:00+00';
SELECT r - 'event_id' AS timed_out
  FROM cscp.message_turn('mt', 'mt-3', 'ana',
         '{"messageId": "t1", "from": "ana", "role": "user", "content": {"text": "too late"}, "ts": 5}',
         '{"active_intent": "x"}', '{"idempotency_key": "mt-3:k1", "name": "noop"}') r;
SELECT count(*) AS contexts, (SELECT count(*) FROM cscp.command WHERE conversation_id = 'mt-3') AS commands
  FROM cscp.context WHERE conversation_id = 'mt-3';

-- A reused context is written once for the turn and its command: as the application role, a
-- message_turn leaves the same context and frame as the three calls (but one write fewer: version),
-- the context naming its command and message; a replayed command leaves last_command_id alone; on a
-- blocked context a refused mutating command leaves it alone and a read-only one is its last.
SET cscp.clock = '2026-11-01 10:00:00+00';
CREATE ROLE mt_app;
SELECT cscp.grant_app('mt_app', ARRAY['mt']) IS NOT NULL AS granted;
SET cscp.tenant_id = 'mt';
SET ROLE mt_app;
SELECT turn_index FROM cscp.conversation_start('mt', 'mt-4', 'bot',
    '{"from": "bot", "role": "agent", "content": {"text": "Hi"}, "ts": 1}');
SELECT turn_index FROM cscp.conversation_start('mt', 'mt-5', 'bot',
    '{"from": "bot", "role": "agent", "content": {"text": "Hi"}, "ts": 1}');
SELECT r ->> 'state' AS state FROM cscp.message_turn('mt', 'mt-4', 'ana',
    '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "order 1?"}, "ts": 2}',
    '{"active_intent": "track_order", "active_target": "order:1"}',
    '{"idempotency_key": "mt-4:k1", "name": "track_order", "payload": {"order_id": "1"}}') r;
SELECT outcome FROM cscp.conversation_exchange('mt', 'mt-5',
    '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "order 1?"}, "ts": 2}');
SELECT status FROM cscp.context_open('mt', 'mt-5', 'ana', '{"active_intent": "track_order", "active_target": "order:1"}');
SELECT state FROM cscp.command_submit('mt', 'mt-5', 'ana', 'mt-5:k1', 'track_order', false, '{m1}', '{"order_id": "1"}');
RESET ROLE;
SET cscp.clock = '2026-11-01 10:01:00+00';
SET ROLE mt_app;
SELECT r ->> 'state' AS state, r -> 'replayed' AS replayed FROM cscp.message_turn('mt', 'mt-4', 'ana',
    '{"messageId": "m2", "from": "ana", "role": "user", "content": {"text": "and order 2?"}, "ts": 3}',
    '{"active_target": "order:2"}',
    '{"idempotency_key": "mt-4:k2", "name": "track_order", "payload": {"order_id": "2"}}') r;
SELECT outcome FROM cscp.conversation_exchange('mt', 'mt-5',
    '{"messageId": "m2", "from": "ana", "role": "user", "content": {"text": "and order 2?"}, "ts": 3}');
SELECT status FROM cscp.context_open('mt', 'mt-5', 'ana', '{"active_target": "order:2"}');
SELECT state FROM cscp.command_submit('mt', 'mt-5', 'ana', 'mt-5:k2', 'track_order', false, '{m2}', '{"order_id": "2"}');
CREATE TEMP VIEW mt_last AS
  SELECT x.conversation_id, x.status, x.slots, x.last_message_id, x.expires_at, x.version,
         (SELECT c.idempotency_key FROM cscp.command c
           WHERE c.tenant_id = x.tenant_id AND c.command_id = x.last_command_id) AS last_command
    FROM cscp.context x WHERE x.tenant_id = 'mt' AND x.conversation_id IN ('mt-4', 'mt-5')
   ORDER BY x.conversation_id;
SELECT * FROM mt_last;
SELECT (SELECT f.state - 'conversation_id' FROM cscp.frame f JOIN cscp.command c
          ON c.tenant_id = f.tenant_id AND c.frame_id = f.frame_id WHERE c.idempotency_key = 'mt-4:k2')
     = (SELECT f.state - 'conversation_id' FROM cscp.frame f JOIN cscp.command c
          ON c.tenant_id = f.tenant_id AND c.frame_id = f.frame_id WHERE c.idempotency_key = 'mt-5:k2')
       AS same_frame;
-- the command mt-4:k1 replayed by a new message: not the context's last again
SELECT r ->> 'state' AS state, r -> 'replayed' AS replayed FROM cscp.message_turn('mt', 'mt-4', 'ana',
    '{"messageId": "m3", "from": "ana", "role": "user", "content": {"text": "order 1 again?"}, "ts": 4}',
    '{}', '{"idempotency_key": "mt-4:k1", "name": "track_order", "payload": {"order_id": "1"}}') r;
SELECT conversation_id, last_message_id, last_command FROM mt_last WHERE conversation_id = 'mt-4';
-- blocked: a mutating command is refused and leaves it alone; a read-only one becomes its last
SELECT status FROM cscp.context_transition((SELECT context_id FROM cscp.context
    WHERE tenant_id = 'mt' AND conversation_id = 'mt-4' AND status = 'active'), 'blocked');
SELECT r ->> 'state' AS state FROM cscp.message_turn('mt', 'mt-4', 'ana',
    '{"messageId": "m4", "from": "ana", "role": "user", "content": {"text": "cancel it"}, "ts": 5}',
    '{}', '{"idempotency_key": "mt-4:k4", "name": "cancel_order", "mutating": true}') r;
SELECT conversation_id, status, last_message_id, last_command FROM mt_last WHERE conversation_id = 'mt-4';
SELECT r ->> 'state' AS state FROM cscp.message_turn('mt', 'mt-4', 'ana',
    '{"messageId": "m5", "from": "ana", "role": "user", "content": {"text": "where is it?"}, "ts": 6}',
    '{}', '{"idempotency_key": "mt-4:k5", "name": "track_order", "payload": {"order_id": "2"}}') r;
SELECT conversation_id, status, last_message_id, last_command FROM mt_last WHERE conversation_id = 'mt-4';
RESET ROLE;
DROP VIEW mt_last;
RESET cscp.tenant_id;
SET cscp.clock = '2026-11-01 09:05:00+00';

-- Bad input: 22023, and nothing is written (the turn m9 never appears).
CREATE TEMP TABLE before AS
  SELECT (SELECT count(*) FROM cscp.turn) AS turns, (SELECT count(*) FROM cscp.command) AS commands,
         (SELECT count(*) FROM cscp.evidence) AS evidence, (SELECT sum(version) FROM cscp.context) AS ctx_versions;
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '[1]')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '"cmd"')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '{"name": "x"}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '{"idempotency_key": "k", "name": "x", "mutating": "yes"}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '{"idempotency_key": "k", "name": "x", "payload": [1]}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '{"idempotency_key": "k", "name": "x", "force": true}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{}', '{"idempotency_key": "", "name": "x"}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', NULL, '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "role": "user", "content": "x", "ts": 9}')$$);
SELECT try($$SELECT cscp.message_turn('mt', 'no-such', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}')$$);
-- a slot the trigger refuses rolls the turn back too
SELECT try($$SELECT cscp.message_turn('mt', 'mt-1', 'ana', '{"messageId": "m9", "from": "ana", "role": "user", "content": "x", "ts": 9}', '{"no_such_slot": 1}')$$);
SELECT b.turns = (SELECT count(*) FROM cscp.turn) AND b.commands = (SELECT count(*) FROM cscp.command)
       AND b.evidence = (SELECT count(*) FROM cscp.evidence)
       AND b.ctx_versions = (SELECT sum(version) FROM cscp.context) AS nothing_changed
  FROM before b;
RESET cscp.clock;
SELECT cscp.revoke_app('mt_app') IS NOT NULL AS revoked;
DROP ROLE mt_app;
