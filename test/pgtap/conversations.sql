-- Conversations (OpenWOP RFC 0005) through an application role: the four conformance
-- scenarios of the RFC, and tenancy — another tenant's conversations, turns and events can be
-- neither read nor written, through the API or direct SQL, and direct SQL cannot get around the
-- rules the C triggers keep.
BEGIN;
SELECT plan(61);

CREATE ROLE tap_conv;
SELECT cscp.grant_app('tap_conv');
SET cscp.clock = '2026-09-01 10:00:00+00';

-- Another tenant's conversation, made by the superuser, with a timeout of one second: past its
-- deadline by the time the timeout helper is tried on it below.
SELECT cscp.conversation_start('globex', 'g-conv', 'g-agent',
    '{"from": "g-agent", "role": "agent", "content": {"salary": 1}, "ts": 1}', timeout_ms => 1000);
CREATE TEMP TABLE globex_before AS
    SELECT (SELECT count(*) FROM cscp.turn WHERE tenant_id = 'globex') AS turns,
           (SELECT count(*) FROM cscp.event WHERE tenant_id = 'globex') AS events,
           (SELECT c::text FROM cscp.conversation c WHERE tenant_id = 'globex') AS conversation;
GRANT SELECT ON globex_before TO tap_conv;

SET ROLE tap_conv;

-- Fail closed without cscp.tenant_id.
SELECT is((SELECT count(*) FROM cscp.conversation), 0::bigint, 'without cscp.tenant_id no conversation is visible');
SELECT is((SELECT count(*) FROM cscp.turn), 0::bigint, 'without cscp.tenant_id no turn is visible');
SELECT is((SELECT count(*) FROM cscp.event), 0::bigint, 'without cscp.tenant_id no event is visible');
SELECT throws_ok($$SELECT cscp.conversation_start('acme', 'c', 'a', '{"from": "a", "role": "agent", "content": 1, "ts": 1}')$$,
                 '42501', 'cscp.tenant_id is not set', 'without cscp.tenant_id conversation_start refuses');

SET cscp.tenant_id = 'acme';

-- Scenario 1: start, three exchanges, close; turnIndex monotonic from 0.
SELECT results_eq($$SELECT event_id, turn_index, message_id FROM cscp.conversation_start('acme', 's1', 'supervisor',
                       '{"from": "supervisor", "role": "agent", "content": "How can I help?", "ts": 1}', causation_id => 'run-1')$$,
                  $$VALUES ('s1:e0', 0, 's1:0:agent')$$, 'scenario 1: start records turn 0 and conversation.opened');
SELECT results_eq($$SELECT turn_index, outcome FROM cscp.conversation_exchange('acme', 's1', '{"from": "maria", "role": "user", "content": "Cancel 17", "ts": 2}')$$,
                  $$VALUES (1, 'exchanged')$$, 'scenario 1: first exchange is turn 1');
SELECT results_eq($$SELECT turn_index, outcome FROM cscp.conversation_exchange('acme', 's1', '{"from": "supervisor", "role": "agent", "content": "Sure?", "ts": 3}')$$,
                  $$VALUES (2, 'exchanged')$$, 'scenario 1: second exchange is turn 2');
SELECT results_eq($$SELECT turn_index, outcome FROM cscp.conversation_exchange('acme', 's1', '{"from": "maria", "role": "user", "content": "Yes", "ts": 4}')$$,
                  $$VALUES (3, 'exchanged')$$, 'scenario 1: third exchange is turn 3');
SELECT results_eq($$SELECT turn_index, result FROM cscp.conversation_close('acme', 's1', '{"from": "supervisor", "role": "agent", "content": "Done", "ts": 5}', '{"ok": true}')$$,
                  $$VALUES (4, 'closed')$$, 'scenario 1: the closing turn carries the highest index');
SELECT results_eq($$SELECT turn_index FROM cscp.conversation_turns('acme', 's1')$$, $$VALUES (0), (1), (2), (3), (4)$$,
                  'scenario 1: the transcript is gapless and in order');
SELECT results_eq($$SELECT type, causation_id FROM cscp.conversation_events('acme', 's1')$$,
                  $$VALUES ('conversation.opened', 'run-1'), ('conversation.exchanged', 's1:e0'), ('conversation.exchanged', 's1:e1'),
                           ('conversation.exchanged', 's1:e2'), ('conversation.closed', 's1:e3')$$,
                  'scenario 1: each event is caused by the one before');
SELECT is((SELECT outcome FROM cscp.conversation WHERE conversation_id = 's1'), '{"ok": true}'::jsonb, 'scenario 1: the outcome is kept');
SELECT throws_ok($$SELECT cscp.conversation_exchange('acme', 's1', '{"from": "maria", "role": "user", "content": "?", "ts": 6}')$$,
                 '22023', 'conversation "s1" is closed', 'scenario 1: no exchange after close (a validation error, RFC 0005 §E)');

-- Scenario 2: timeout, with a system final turn and a null outcome.
SELECT lives_ok($$SELECT cscp.conversation_start('acme', 's2', 'supervisor', '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1}', timeout_ms => 1000)$$,
                'scenario 2: a conversation with a one-second timeout');
RESET ROLE;
SET cscp.clock = '2026-09-01 10:00:05+00';
SET ROLE tap_conv;
SELECT results_eq($$SELECT turn_index, message_id, outcome FROM cscp.conversation_exchange('acme', 's2', '{"from": "maria", "role": "user", "content": "late", "ts": 2}')$$,
                  $$VALUES (1, 's2:1:system', 'timed_out')$$, 'scenario 2: the late exchange answers timed_out');
SELECT results_eq($$SELECT role, sender FROM cscp.conversation_turns('acme', 's2') WHERE turn_index = 1$$,
                  $$VALUES ('system', 'cscp')$$, 'scenario 2: the final turn is a system turn');
SELECT results_eq($$SELECT state::text, close_reason, outcome FROM cscp.conversation WHERE conversation_id = 's2'$$,
                  $$VALUES ('closed', 'timeout', NULL::jsonb)$$, 'scenario 2: closed with a null outcome');
SELECT is((SELECT count(*) FROM cscp.turn WHERE conversation_id = 's2' AND content = '"late"'), 0::bigint,
          'scenario 2: the late turn is not recorded');

-- Scenario 3: replay without re-prompting.
SELECT lives_ok($$SELECT cscp.conversation_start('acme', 's3', 'supervisor', '{"from": "supervisor", "role": "agent", "content": "Which order?", "ts": 1}')$$,
                'scenario 3: a conversation');
SELECT results_eq($$SELECT turn_index, outcome FROM cscp.conversation_exchange('acme', 's3', '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "17", "ts": 2}')$$,
                  $$VALUES (1, 'exchanged')$$, 'scenario 3: the delivery is recorded');
SELECT results_eq($$SELECT event_id, turn_index, outcome FROM cscp.conversation_exchange('acme', 's3', '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "17", "ts": 2}')$$,
                  $$VALUES ('s3:e1', 1, 'replayed')$$, 'scenario 3: the re-delivery is a replay of the recorded turn');
SELECT is((SELECT count(*) FROM cscp.event WHERE conversation_id = 's3'), 2::bigint, 'scenario 3: a replay adds no event');
SELECT results_eq($$SELECT outcome FROM cscp.conversation_exchange('acme', 's3', '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "18", "ts": 2}')$$,
                  $$VALUES ('diverged')$$, 'scenario 3: other content under the same messageId diverges');
SELECT results_eq($$SELECT content FROM cscp.conversation_turns('acme', 's3') WHERE turn_index = 1$$, $$VALUES ('"17"'::jsonb)$$,
                  'scenario 3: the original turn stands');

-- Scenario 4: schema rejection.
SELECT throws_ok($$SELECT cscp.conversation_start('acme', 's4', 'supervisor', '{"from": "supervisor", "role": "agent", "content": {}, "ts": 1}', '{"type": "object", "dependentSchemas": {}}')$$,
                 '22023', 'schema keyword "dependentSchemas" is not supported', 'scenario 4: an unsupported keyword is refused at start');
SELECT lives_ok($$SELECT cscp.conversation_start('acme', 's4', 'supervisor', '{"from": "supervisor", "role": "agent", "content": {"q": "amount?"}, "ts": 1}', '{"type": "object", "properties": {"amount": {"type": "number", "minimum": 0}}}')$$,
                'scenario 4: a conversation with a schema');
SELECT throws_ok($$SELECT cscp.conversation_exchange('acme', 's4', '{"from": "maria", "role": "user", "content": {"amount": -5}, "ts": 2}')$$,
                 '22023', 'turn content does not match the schema of conversation "s4"', 'scenario 4: a violating turn is refused');
SELECT is((SELECT next_turn_index FROM cscp.conversation WHERE conversation_id = 's4'), 1, 'scenario 4: nothing was written');

-- The application role writes events only through cscp (as their owner), never itself.
SELECT throws_ok($$INSERT INTO cscp.event (tenant_id, conversation_id, seq, type, created_at) VALUES ('acme', 's4', 9, 'x', now())$$,
                 '42501', NULL, 'direct INSERT of an event is refused');
SELECT throws_ok($$DELETE FROM cscp.turn WHERE conversation_id = 's3'$$, '42501', NULL, 'direct DELETE of turns is refused');
SELECT throws_ok($$UPDATE cscp.turn SET content = '"x"' WHERE conversation_id = 's3'$$, '42501', NULL, 'direct UPDATE of turns is refused');

-- Direct SQL on its own rows is held to the triggers' rules.
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, role, sender, content, ts) VALUES ('acme', 's3', 7, 'user', 'maria', '1', 1)$$,
                 '22023', 'turn index 7 of conversation "s3" would leave a gap', 'a direct INSERT cannot leave a gap');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, role, sender, content, ts) VALUES ('acme', 's3', 1, 'user', 'maria', '1', 1)$$,
                 '23505', NULL, 'a direct INSERT cannot reuse an index');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('acme', 's4', 'user', 'maria', '{"amount": "a lot"}', 1)$$,
                 '22023', NULL, 'a direct INSERT cannot get around the schema');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('acme', 's1', 'user', 'maria', '1', 1)$$,
                 '55000', NULL, 'a direct INSERT cannot reopen a closed conversation');
SELECT throws_ok($$UPDATE cscp.conversation SET next_turn_index = 0 WHERE conversation_id = 's3'$$,
                 '55000', NULL, 'a direct UPDATE cannot move the turn counter');
SELECT throws_ok($$UPDATE cscp.conversation SET state = 'open' WHERE conversation_id = 's1'$$,
                 '55000', NULL, 'a direct UPDATE cannot reopen a conversation');
SELECT throws_ok($$UPDATE cscp.conversation SET state = 'closed', closed_at = now(), close_reason = 'closed' WHERE conversation_id = 's3'$$,
                 '55000', NULL, 'a direct UPDATE cannot close a conversation without its final turn');
SELECT results_eq($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('acme', 's3', 'user', 'maria', '"19"', 3) RETURNING turn_index, message_id, event_id$$,
                  $$VALUES (2, 's3:2:user', 's3:e3')$$, 'a valid direct INSERT is numbered and recorded like an exchange');
-- The conversation row follows its event log: counters and state move only as far as the event
-- cscp recorded at next_event_seq says, and application roles cannot record events.
SELECT throws_ok($$UPDATE cscp.conversation SET next_turn_index = next_turn_index + 1, next_event_seq = next_event_seq + 1 WHERE conversation_id = 's3'$$,
                 '55000', 'column "next_turn_index" of a conversation changes only with its turns',
                 'a direct UPDATE moving the counters as a turn would, without its event, is refused');
SELECT throws_ok($$UPDATE cscp.conversation SET state = 'closed', closed_at = cscp.now(), close_reason = 'closed', outcome = '{"ok": true}',
                          next_turn_index = next_turn_index + 1, next_event_seq = next_event_seq + 1 WHERE conversation_id = 's3'$$,
                 '55000', 'column "state" of a conversation changes only with its turns',
                 'a direct UPDATE closing a conversation as a close would, without its event, is refused');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts) VALUES ('acme', 's1', 4, 's1:4:agent', 'agent', 'supervisor', '"Done"', 5)$$,
                 '55000', 'conversation "s1" is closed', 'a copy of the final turn cannot be added to the closed conversation');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts) VALUES ('acme', 's2', 1, 's2:1:system', 'system', 'cscp', '{"reason": "timeout"}', 5)$$,
                 '55000', 'conversation "s2" is closed', 'nor a second final turn to a conversation closed by its timeout');
SELECT results_eq($$SELECT next_turn_index, next_event_seq, state::text FROM cscp.conversation WHERE conversation_id IN ('s1', 's3') ORDER BY conversation_id$$,
                  $$VALUES (5, 5, 'closed'), (3, 4, 'open')$$, 'the refused writes left the counters where the turns put them');
-- An event's id is written by cscp (no generated column): conversation_id:e<seq>, its seq the
-- conversation's counter, numbered from 0 without gaps; the application cannot rename one.
SELECT is((SELECT count(*) FROM cscp.event e
            WHERE e.event_id IS DISTINCT FROM e.conversation_id || ':e' || e.seq
               OR e.seq <> (SELECT count(*) FROM cscp.event p
                             WHERE p.tenant_id = e.tenant_id AND p.conversation_id = e.conversation_id AND p.seq < e.seq)),
          0::bigint, 'every event''s id is conversation_id:e<seq>, its seq numbered from 0 without gaps');
SELECT throws_ok($$UPDATE cscp.event SET event_id = 's3:e99' WHERE conversation_id = 's3' AND seq = 0$$,
                 '42501', NULL, 'direct UPDATE of an event''s id is refused');
-- A turn written by direct SQL becomes the last message of its sender's live context, as an
-- exchange's does (the note rides on the conversation's UPDATE), and only of the sender's.
SELECT cscp.context_open('acme', 's3', 'maria');
SELECT cscp.context_open('acme', 's3', 'bob');
INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('acme', 's3', 'user', 'maria', '"20"', 4);
SELECT results_eq($$SELECT actor_id, last_message_id FROM cscp.context WHERE conversation_id = 's3' ORDER BY actor_id$$,
                  $$VALUES ('bob', NULL::text), ('maria', 's3:3:user')$$,
                  'a direct INSERT of a turn notes it on its sender''s live context only');
SELECT results_eq($$SELECT next_turn_index, next_event_seq FROM cscp.conversation WHERE conversation_id = 's3'$$,
                  $$VALUES (4, 5)$$, 'and advances the conversation by one turn and one event');

-- Another tenant, through the API.
SELECT throws_ok($$SELECT cscp.conversation_exchange('globex', 'g-conv', '{"from": "x", "role": "user", "content": 1, "ts": 1}')$$,
                 '42501', 'permission denied for tenant "globex"', 'conversation_exchange for another tenant');
SELECT throws_ok($$SELECT cscp.conversation_close('globex', 'g-conv', '{"from": "x", "role": "user", "content": 1, "ts": 1}')$$,
                 '42501', NULL, 'conversation_close for another tenant');
SELECT throws_ok($$SELECT cscp.conversation_start('globex', 'g-2', 'x', '{"from": "x", "role": "agent", "content": 1, "ts": 1}')$$,
                 '42501', NULL, 'conversation_start for another tenant');
SELECT throws_ok($$SELECT * FROM cscp.conversation_turns('globex', 'g-conv')$$, '42501', NULL, 'conversation_turns for another tenant');
SELECT throws_ok($$SELECT * FROM cscp.conversation_events('globex', 'g-conv')$$, '42501', NULL, 'conversation_events for another tenant');
SELECT throws_ok($$SELECT cscp.conversation_exchange('acme', 'g-conv', '{"from": "x", "role": "user", "content": 1, "ts": 1}')$$,
                 '22023', 'conversation "g-conv" does not exist', 'another tenant''s conversation id does not exist for this tenant');

-- Another tenant, through direct SQL.
SELECT is((SELECT count(*) FROM cscp.conversation WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s conversations');
SELECT is((SELECT count(*) FROM cscp.turn WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s turns');
SELECT is((SELECT count(*) FROM cscp.event WHERE tenant_id = 'globex'), 0::bigint, 'direct SELECT of another tenant''s events');
SELECT throws_ok($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('globex', 'g-conv', 'user', 'x', '1', 1)$$,
                 '42501', 'permission denied for tenant "globex"', 'direct INSERT of a turn into another tenant''s conversation');
SELECT throws_ok($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('globex', 'g-3', 'x')$$,
                 '42501', NULL, 'direct INSERT of a conversation for another tenant');
WITH u AS (UPDATE cscp.conversation SET agent_id = 'x' WHERE tenant_id = 'globex' RETURNING 1)
SELECT is(count(*), 0::bigint, 'direct UPDATE of another tenant''s conversation touches nothing') FROM u;

RESET ROLE;
SELECT results_eq($$SELECT (SELECT count(*) FROM cscp.turn WHERE tenant_id = 'globex'), (SELECT count(*) FROM cscp.event WHERE tenant_id = 'globex'),
                           (SELECT c::text FROM cscp.conversation c WHERE tenant_id = 'globex')$$,
                  $$SELECT turns, events, conversation FROM globex_before$$, 'another tenant''s conversation is unchanged');

SELECT * FROM finish();
ROLLBACK;
