\i sql/include/helpers.sql
-- Conversations (OpenWOP RFC 0005): every outcome of start, exchange and close; events and
-- their causation; replay and divergence; the timeout by exchange, close and sweep; linking to
-- contexts; privacy and retention; direct SQL held to the same rules.
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();
SET cscp.clock = '2026-07-01 09:00:00+00';

-- What a call left behind: the rows of one conversation.
CREATE FUNCTION public.conv_turns(conv text)
RETURNS TABLE(turn_index int, message_id text, role text, sender text, content jsonb, ts numeric,
              event_id text)
LANGUAGE sql STABLE AS $$
    SELECT t.turn_index, t.message_id, t.role, t.sender, t.content, t.ts, t.event_id
      FROM cscp.conversation_turns('cv', conv) t
$$;
CREATE FUNCTION public.conv_events(conv text)
RETURNS TABLE(event_id text, type text, causation_id text, turn_index int, payload jsonb)
LANGUAGE sql STABLE AS $$
    SELECT e.event_id, e.type, e.causation_id, e.turn_index, e.payload - 'contentHash'
      FROM cscp.conversation_events('cv', conv) e
$$;
CREATE FUNCTION public.conv_state(conv text)
RETURNS TABLE(state cscp.conversation_state, outcome jsonb, close_reason text, closed_at timestamptz,
              next_turn_index int, next_event_seq int)
LANGUAGE sql STABLE AS $$
    SELECT c.state, c.outcome, c.close_reason, c.closed_at, c.next_turn_index, c.next_event_seq
      FROM cscp.conversation c WHERE c.tenant_id = 'cv' AND c.conversation_id = conv
$$;
-- Row counts and a digest of the three tables: a refused call must leave them as they were.
CREATE FUNCTION public.conv_digest() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('conversations %s, turns %s, events %s, evidence %s, contexts %s',
                  (SELECT count(*) FROM cscp.conversation), (SELECT count(*) FROM cscp.turn),
                  (SELECT count(*) FROM cscp.event), (SELECT count(*) FROM cscp.evidence),
                  (SELECT count(*) FROM cscp.context))
        || ' ' || md5((SELECT coalesce(string_agg(x::text, ',' ORDER BY x::text), '') FROM cscp.conversation x)
                   || (SELECT coalesce(string_agg(x::text, ',' ORDER BY x::text), '') FROM cscp.context x))
$$;

SELECT jsonb_pretty(cscp.capabilities()) AS capabilities;

-- 1. Start, three exchanges, close (RFC 0005 conformance scenario 1): monotonic turn indexes,
-- assigned message ids, one event per turn, each caused by the one before.
SELECT * FROM cscp.conversation_start('cv', 'c1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": {"text": "How can I help?"}, "ts": 1000}',
    causation_id => 'run-42');
SELECT * FROM cscp.conversation_exchange('cv', 'c1',
    '{"from": "maria", "role": "user", "content": {"text": "Cancel order 17"}, "ts": 2000}');
SELECT * FROM cscp.conversation_exchange('cv', 'c1',
    '{"from": "supervisor", "role": "agent", "content": {"text": "Order 17, the blue lamp?"}, "ts": 3000, "turnIndex": 2}');
SELECT * FROM cscp.conversation_exchange('cv', 'c1',
    '{"messageId": "wa-0003", "from": "maria", "role": "user", "content": {"text": "yes"}, "ts": 4000}');
SELECT * FROM cscp.conversation_close('cv', 'c1',
    '{"from": "supervisor", "role": "agent", "content": {"text": "Canceled."}, "ts": 5000}',
    '{"status": "done", "order": 17}');
SELECT * FROM conv_turns('c1');
SELECT * FROM conv_events('c1');
SELECT * FROM conv_state('c1');
-- The transcript is the same on every call.
SELECT (SELECT array_agg(t ORDER BY turn_index) FROM cscp.conversation_turns('cv', 'c1') t)
     = (SELECT array_agg(t ORDER BY turn_index) FROM cscp.conversation_turns('cv', 'c1') t) AS same_transcript;

-- 2. After close: exchange and close are refused (55000) and write nothing, a re-sent close too.
SELECT conv_digest() AS before \gset
SELECT try($$SELECT cscp.conversation_exchange('cv', 'c1', '{"from": "maria", "role": "user", "content": {"text": "and?"}, "ts": 6000}')$$);
SELECT try($$SELECT cscp.conversation_close('cv', 'c1', '{"from": "supervisor", "role": "agent", "content": {"text": "Canceled."}, "ts": 5000}')$$);
SELECT conv_digest() = :'before' AS nothing_written;

-- 3. Replay (conformance scenario 3): the same messageId with the same content answers
-- "replayed" with the recorded turn and no new event; other content answers "diverged" and
-- records replay.diverged; the original stands.
SELECT * FROM cscp.conversation_start('cv', 'c2', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Which order?", "ts": 1000}');
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "order 18", "ts": 2000}');
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "order 18", "ts": 2500}');
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "order 19", "ts": 2600}');
-- A turn sent again by its index (no messageId) replays by its assigned message id.
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"from": "supervisor", "role": "agent", "content": "Order 18 canceled.", "ts": 3000}');
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"from": "supervisor", "role": "agent", "content": "Order 18 canceled.", "ts": 3000, "turnIndex": 2}');
SELECT * FROM conv_turns('c2');
SELECT * FROM conv_events('c2');
-- With the policy replay_divergence = error, divergence still records replay.diverged (RFC 0005
-- §G: the event MUST be emitted), then the replay is aborted: outcome "aborted", a returned value,
-- so the event is kept; the original turn stands and no turn is written.
SELECT cscp.policy_set('cv', '{"replay_divergence": "error"}') ->> 'replay_divergence' AS replay_divergence;
SELECT count(*) AS turns_before FROM cscp.turn WHERE tenant_id = 'cv' AND conversation_id = 'c2';
SELECT event_id, turn_index, message_id, outcome, recorded_turn ->> 'content' AS recorded_content
  FROM cscp.conversation_exchange('cv', 'c2', '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "order 20", "ts": 2700}');
SELECT count(*) AS turns_after FROM cscp.turn WHERE tenant_id = 'cv' AND conversation_id = 'c2';
SELECT event_id, type, causation_id, payload ->> 'policy' AS policy
  FROM cscp.conversation_events('cv', 'c2') WHERE type = 'replay.diverged' ORDER BY seq;
SELECT * FROM cscp.conversation_exchange('cv', 'c2',
    '{"messageId": "wa-1", "from": "maria", "role": "user", "content": "order 18", "ts": 2800}');
SELECT cscp.policy_set('cv', '{"replay_divergence": null}') ->> 'replay_divergence' AS replay_divergence;

-- 4. Gaps and duplicate indexes: never recorded.
SELECT conv_digest() AS before \gset
SELECT try($$SELECT cscp.conversation_exchange('cv', 'c2', '{"from": "maria", "role": "user", "content": "skip", "ts": 1, "turnIndex": 5}')$$) AS gap;
SELECT try($$SELECT cscp.conversation_exchange('cv', 'c2', '{"from": "maria", "role": "user", "content": "again", "ts": 1, "turnIndex": 2}')$$) AS taken_index;
SELECT try($$SELECT cscp.conversation_exchange('cv', 'c2', '{"from": "maria", "role": "user", "content": "first", "ts": 1, "turnIndex": 0}')$$) AS taken_index_zero;
SELECT conv_digest() = :'before' AS nothing_written;

-- 5. Start sent again: the same start replays; another one for the id is a clash (23505).
SELECT * FROM cscp.conversation_start('cv', 'c2', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Which order?", "ts": 1000}');
SELECT try($$SELECT cscp.conversation_start('cv', 'c2', 'supervisor', '{"from": "supervisor", "role": "agent", "content": "Hello!", "ts": 1000}')$$);
SELECT try($$SELECT cscp.conversation_start('cv', 'c2', 'other-agent', '{"from": "supervisor", "role": "agent", "content": "Which order?", "ts": 1000}')$$);

-- 6. Schema validation (conformance scenario 4): checked whole at start, an unknown keyword
-- refused naming it; content that violates it refused naming the JSON path; nothing written.
SELECT conv_digest() AS before \gset
SELECT try($$SELECT cscp.conversation_start('cv', 's0', 'supervisor', '{"from": "supervisor", "role": "agent", "content": {}, "ts": 1}', '{"type": "object", "properties": {"when": {"format": "date-time"}}}')$$) AS unknown_keyword;
SELECT try($$SELECT cscp.conversation_start('cv', 's0', 'supervisor', '{"from": "supervisor", "role": "agent", "content": {}, "ts": 1}', '[{"type": "object"}]')$$) AS not_a_schema;
SELECT try($$SELECT cscp.conversation_start('cv', 's0', 'supervisor', '{"from": "supervisor", "role": "agent", "content": {}, "ts": 1}', '{"required": ["text"]}')$$) AS first_turn_violates;
SELECT conv_digest() = :'before' AS nothing_written;
SELECT * FROM cscp.conversation_start('cv', 's1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": {"text": "Pick a slot", "options": [1, 2]}, "ts": 1}',
    '{"type": "object", "required": ["text"], "additionalProperties": false,
      "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 40},
                     "options": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                     "choice": {"type": "integer", "enum": [1, 2]}}}');
SELECT conv_digest() AS before \gset
SELECT try($$SELECT cscp.conversation_exchange('cv', 's1', '{"from": "maria", "role": "user", "content": {"text": "two", "choice": 3}, "ts": 2}')$$) AS bad_enum;
SELECT try($$SELECT cscp.conversation_exchange('cv', 's1', '{"from": "maria", "role": "user", "content": {"text": "two", "options": [1, 0]}, "ts": 2}')$$) AS bad_item;
SELECT try($$SELECT cscp.conversation_exchange('cv', 's1', '{"from": "maria", "role": "user", "content": {"choice": 2}, "ts": 2}')$$) AS missing_text;
SELECT try($$SELECT cscp.conversation_exchange('cv', 's1', '{"from": "maria", "role": "user", "content": {"text": "2", "emoji": "ok"}, "ts": 2}')$$) AS extra_property;
SELECT try($$SELECT cscp.conversation_close('cv', 's1', '{"from": "supervisor", "role": "agent", "content": "bye", "ts": 2}')$$) AS close_violates;
SELECT conv_digest() = :'before' AS nothing_written;
SELECT * FROM cscp.conversation_exchange('cv', 's1',
    '{"from": "maria", "role": "user", "content": {"text": "the second", "choice": 2}, "ts": 2}');

-- Every schema keyword, through a conversation: the first content passes, the second fails
-- with the path and reason of its first violation.
CREATE TEMP TABLE kw (label text, schema jsonb, ok jsonb, bad jsonb);
INSERT INTO kw VALUES
    ('type',                 '{"type": "string"}',                                   '"a"',              '1'),
    ('type array',           '{"type": ["integer", "null"]}',                        'null',             '1.5'),
    ('integer vs number',    '{"type": "integer"}',                                  '2.0',              '2.5'),
    ('properties',           '{"properties": {"a": {"type": "number"}}}',            '{"a": 1}',         '{"a": "1"}'),
    ('required',             '{"required": ["a", "b"]}',                             '{"a": 1, "b": 2}', '{"a": 1}'),
    ('additionalProperties false', '{"properties": {"a": {}}, "additionalProperties": false}', '{"a": 1}', '{"a": 1, "b": 2}'),
    ('additionalProperties schema', '{"additionalProperties": {"type": "string"}}', '{"x": "1"}',       '{"x": 1}'),
    ('items',                '{"items": {"type": "string"}}',                        '["a", "b"]',       '["a", 2]'),
    ('enum',                 '{"enum": ["red", "green"]}',                           '"red"',            '"blue"'),
    ('const',                '{"const": {"v": 1}}',                                  '{"v": 1.0}',       '{"v": 2}'),
    ('minLength',            '{"minLength": 3}',                                     '"ñañ"',            '"ñ"'),
    ('maxLength',            '{"maxLength": 3}',                                     '"ñañ"',            '"ñaña"'),
    ('minimum',              '{"minimum": 1}',                                       '1',                '0.5'),
    ('maximum',              '{"maximum": 1}',                                       '1',                '1.5'),
    ('exclusiveMinimum',     '{"exclusiveMinimum": 1}',                              '1.5',              '1'),
    ('exclusiveMaximum',     '{"exclusiveMaximum": 1}',                              '0.5',              '1'),
    ('minItems',             '{"minItems": 2}',                                      '[1, 2]',           '[1]'),
    ('maxItems',             '{"maxItems": 1}',                                      '[1]',              '[1, 2]'),
    ('uniqueItems',          '{"uniqueItems": true}',                                '[1, 2]',           '[1, {"a": 1}, 1.0]'),
    ('pattern',              '{"pattern": "^[A-Z]{2}[0-9]+$"}',                      '"NL42"',           '"nl42"'),
    ('allOf',                '{"allOf": [{"type": "integer"}, {"minimum": 10}]}',    '10',               '9'),
    ('anyOf',                '{"anyOf": [{"type": "string"}, {"minimum": 10}]}',     '"x"',              '9'),
    ('oneOf',                '{"oneOf": [{"type": "integer"}, {"minimum": 0}]}',     '-1',               '5'),
    ('not',                  '{"not": {"type": "null"}}',                            '0',                'null');
SELECT k.label,
       (SELECT s.turn_index FROM cscp.conversation_start('cv', 'kw:' || k.label, 'supervisor',
            jsonb_build_object('from', 'supervisor', 'role', 'agent', 'content', k.ok, 'ts', 1),
            k.schema) s) = 0 AS started,
       (SELECT x.outcome FROM cscp.conversation_exchange('cv', 'kw:' || k.label,
            jsonb_build_object('from', 'maria', 'role', 'user', 'content', k.ok, 'ts', 2)) x) AS ok,
       try(format('SELECT cscp.conversation_exchange(%L, %L, %L)', 'cv', 'kw:' || k.label,
            jsonb_build_object('from', 'maria', 'role', 'user', 'content', k.bad, 'ts', 3))) AS bad
  FROM kw k ORDER BY k.label;
-- Every keyword outside the subset is refused at start, naming it.
SELECT k AS keyword,
       try(format('SELECT cscp.conversation_start(%L, %L, %L, %L, %L)', 'cv', 'kw-bad', 'supervisor',
                  '{"from": "supervisor", "role": "agent", "content": 1, "ts": 1}',
                  jsonb_build_object('properties', jsonb_build_object('a', jsonb_build_object(k, '1'::jsonb))))) AS refused
  FROM unnest(ARRAY['$ref', 'format', 'patternProperties', 'if', 'dependentRequired', 'contains',
                    'propertyNames', 'multipleOf']) k;

-- 7. Timeout by the next exchange (conformance scenario 2): past opened_at + timeout_ms the
-- conversation is closed with a system final turn and a null outcome; the late turn is not
-- recorded and the answer is timed_out (returned, so the close is kept).
SET cscp.clock = '2026-07-01 10:00:00+00';
SELECT * FROM cscp.conversation_start('cv', 't1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1}', timeout_ms => 120000);
SET cscp.clock = '2026-07-01 10:01:59.999+00';
SELECT * FROM cscp.conversation_exchange('cv', 't1',
    '{"from": "maria", "role": "user", "content": "yes", "ts": 2}');
SET cscp.clock = '2026-07-01 10:02:00+00';
SELECT * FROM cscp.conversation_exchange('cv', 't1',
    '{"from": "maria", "role": "user", "content": "hello?", "ts": 3}');
SELECT * FROM conv_turns('t1');
SELECT * FROM conv_events('t1');
SELECT * FROM conv_state('t1');
SELECT try($$SELECT cscp.conversation_exchange('cv', 't1', '{"from": "maria", "role": "user", "content": "hello?", "ts": 3}')$$) AS after_timeout;
-- A close past the deadline records the timeout instead (result timed_out).
SELECT * FROM cscp.conversation_start('cv', 't2', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1}', timeout_ms => 1000);
SET cscp.clock = '2026-07-01 10:02:01+00';
SELECT * FROM cscp.conversation_close('cv', 't2',
    '{"from": "supervisor", "role": "agent", "content": "bye", "ts": 2}', '{"status": "done"}');
SELECT * FROM conv_state('t2');
-- Timeout by the sweep, whichever comes first; an open conversation without a deadline stays.
SELECT * FROM cscp.conversation_start('cv', 't3', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1}', timeout_ms => 60000);
SELECT * FROM cscp.conversation_start('cv', 't4', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1}');
SET cscp.clock = '2026-07-01 10:03:01+00';
SELECT s ->> 'conversations_timed_out' AS timed_out FROM cscp.sweep() s;
SELECT * FROM conv_turns('t3');
SELECT conversation_id, state, close_reason, outcome FROM cscp.conversation
 WHERE tenant_id = 'cv' AND conversation_id IN ('t3', 't4') ORDER BY 1;
SELECT s ->> 'conversations_timed_out' AS timed_out_again FROM cscp.sweep() s;

-- 8. Linking: a turn becomes the last message of its sender's live context; closing the
-- conversation closes its live contexts (one that expired meanwhile is recorded expired), each
-- with evidence naming the closing event.
SET cscp.clock = '2026-07-02 09:00:00+00';
SELECT status FROM cscp.context_open('cv', 'l1', 'maria');
SELECT status FROM cscp.context_open('cv', 'l1', 'bob', ttl => '1 minute');
SELECT status FROM cscp.context_open('cv', 'l1', 'supervisor');
SELECT * FROM cscp.conversation_start('cv', 'l1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Hi both", "ts": 1}');
SELECT * FROM cscp.conversation_exchange('cv', 'l1',
    '{"messageId": "wa-77", "from": "maria", "role": "user", "content": "hi", "ts": 2}');
SELECT actor_id, status, last_message_id FROM cscp.context WHERE tenant_id = 'cv' AND conversation_id = 'l1' ORDER BY actor_id;
SET cscp.clock = '2026-07-02 09:05:00+00';
-- bob's context expired at 09:01: a turn from bob does not touch it.
SELECT * FROM cscp.conversation_exchange('cv', 'l1',
    '{"from": "bob", "role": "user", "content": "me too", "ts": 3}');
SELECT * FROM cscp.conversation_close('cv', 'l1',
    '{"from": "supervisor", "role": "agent", "content": "Bye", "ts": 4}');
SELECT actor_id, status, reason, last_message_id FROM cscp.context WHERE tenant_id = 'cv' AND conversation_id = 'l1' ORDER BY actor_id;
SELECT e.event_type, e.from_state || '->' || e.to_state AS transition, e.reason_code, e.message_ids,
       e.detail, e.context_ref ? 'context_id' AS has_context_ref
  FROM cscp.evidence e WHERE e.tenant_id = 'cv' AND e.conversation_id = 'l1' ORDER BY e.reason_code, e.from_state, e.message_ids::text;
SELECT jsonb_array_length(payload -> 'contexts') AS contexts_in_closed_event
  FROM cscp.conversation_events('cv', 'l1') WHERE type = 'conversation.closed';
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('cv');

-- 9. Privacy: with turn_content = reference only the hash and size are stored; replays are
-- still recognised by the hash; events never carry content.
SELECT cscp.policy_set('cv', '{"turn_content": "reference"}') ->> 'turn_content' AS turn_content;
SELECT * FROM cscp.conversation_start('cv', 'p1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": {"iban": "NL91ABNA0417164300"}, "ts": 1}');
SELECT * FROM cscp.conversation_exchange('cv', 'p1',
    '{"messageId": "m1", "from": "maria", "role": "user", "content": {"pin": "1234"}, "ts": 2}');
SELECT * FROM cscp.conversation_exchange('cv', 'p1',
    '{"messageId": "m1", "from": "maria", "role": "user", "content": {"pin": "1234"}, "ts": 2}');
SELECT * FROM cscp.conversation_exchange('cv', 'p1',
    '{"messageId": "m1", "from": "maria", "role": "user", "content": {"pin": "9999"}, "ts": 2}');
SELECT turn_index, content, content_hash = cscp.canonical_hash(c) AS hash_matches, content_size,
       content_size = octet_length(cscp.canonical_json(c)) AS size_matches
  FROM cscp.conversation_turns('cv', 'p1') t
  JOIN (VALUES (0, '{"iban": "NL91ABNA0417164300"}'::jsonb), (1, '{"pin": "1234"}')) v(i, c) ON v.i = t.turn_index;
SELECT count(*) AS events_mentioning_content FROM cscp.event
 WHERE tenant_id = 'cv' AND (payload::text LIKE '%1234%' OR payload::text LIKE '%NL91%');
SELECT cscp.policy_set('cv', '{"turn_content": null}') ->> 'turn_content' AS turn_content;

-- 10. Direct SQL is held to the same rules by the triggers.
SELECT * FROM cscp.conversation_start('cv', 'd1', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": {"n": 0}, "ts": 1}', '{"properties": {"n": {"type": "integer"}}}');
INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts)
VALUES ('cv', 'd1', 'user', 'maria', '{"n": 1}', 2)
RETURNING turn_index, message_id, event_id, content_hash IS NOT NULL AS hashed;
SELECT conv_digest() AS before \gset
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, role, sender, content, ts) VALUES ('cv', 'd1', 9, 'user', 'maria', '{}', 3)$$) AS gap;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, role, sender, content, ts) VALUES ('cv', 'd1', 1, 'user', 'maria', '{}', 3)$$) AS taken;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'd1', 'robot', 'maria', '{}', 3)$$) AS bad_role;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'd1', 'user', '', '{}', 3)$$) AS empty_sender;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'd1', 'user', 'maria', '{"n": "x"}', 3)$$) AS schema;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'd1', 'user', 'maria', NULL, 3)$$) AS null_content;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, message_id, role, sender, content, ts) VALUES ('cv', 'd1', 'd1:1:user', 'user', 'maria', '{}', 3)$$) AS duplicate_message_id;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'nope', 'user', 'maria', '{}', 3)$$) AS no_conversation;
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts) VALUES ('cv', 'c1', 'user', 'maria', '{}', 3)$$) AS closed;
SELECT try($$UPDATE cscp.turn SET content = '{"n": 5}' WHERE tenant_id = 'cv' AND conversation_id = 'd1' AND turn_index = 1$$) AS turn_update;
SELECT try($$UPDATE cscp.conversation SET next_turn_index = 7 WHERE tenant_id = 'cv' AND conversation_id = 'd1'$$) AS counter_update;
SELECT try($$UPDATE cscp.conversation SET state = 'closed', closed_at = cscp.now(), close_reason = 'closed' WHERE tenant_id = 'cv' AND conversation_id = 'd1'$$) AS close_by_update;
SELECT try($$UPDATE cscp.conversation SET schema = NULL WHERE tenant_id = 'cv' AND conversation_id = 'd1'$$) AS schema_update;
SELECT try($$UPDATE cscp.conversation SET agent_id = 'x' WHERE tenant_id = 'cv' AND conversation_id = 'c1'$$) AS closed_update;
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, schema) VALUES ('cv', 'd2', 'a', '{"if": {}}')$$) AS bad_schema;
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, state) VALUES ('cv', 'd2', 'a', 'closed')$$) AS born_closed;
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, timeout_ms) VALUES ('cv', 'd2', 'a', 0)$$) AS zero_timeout;
SELECT conv_digest() = :'before' AS nothing_written;

-- 11. Reading the last turns of a long conversation reads only those rows: "last" starts the
-- index scan at next_turn_index - last, and a WHERE on turn_index reaches the index too (the
-- function is inlined).
SELECT * FROM cscp.conversation_start('cv', 'long', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": 0, "ts": 0}');
SELECT count(*) AS appended FROM generate_series(1, 300) i,
       LATERAL cscp.conversation_exchange('cv', 'long',
           jsonb_build_object('from', 'maria', 'role', 'user', 'content', i, 'ts', i)) x;
SELECT array_agg(turn_index) AS last_three FROM cscp.conversation_turns('cv', 'long', 3);
SELECT count(*) AS last_zero FROM cscp.conversation_turns('cv', 'long', 0);
SELECT count(*) AS all_turns FROM cscp.conversation_turns('cv', 'long');
-- (Sequential and bitmap scans off: the plans below must not depend on this small table's statistics.)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- (An InitPlan's value is "$0" up to PostgreSQL 16 and "(InitPlan 1).col1" from 17 on; the plan
-- is shown in the newer notation so that one expected output serves every version.)
CREATE FUNCTION pg_temp.explain(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        RETURN NEXT replace(replace(line, ' (returns $0)', ''), '$0', '(InitPlan 1).col1');
    END LOOP;
END $$;
SELECT pg_temp.explain($$SELECT * FROM cscp.conversation_turns('cv', 'long', 20)$$) AS "QUERY PLAN";
EXPLAIN (COSTS OFF)
SELECT * FROM cscp.conversation_turns('cv', 'long') WHERE turn_index >= 280;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- 12. Retention: closed conversations past retention_turns go with their turns and events.
SELECT cscp.policy_set('cv', '{"retention_turns": "1 day"}') ->> 'retention_turns' AS retention_turns;
SET cscp.clock = '2026-07-03 09:04:00+00';
SELECT s ->> 'conversations_purged' AS conversations, s ->> 'turns_purged' AS turns,
       s ->> 'events_purged' AS events FROM cscp.sweep() s;
SET cscp.clock = '2026-07-03 09:06:00+00';
SELECT s ->> 'conversations_purged' AS conversations, s ->> 'turns_purged' AS turns,
       s ->> 'events_purged' AS events, s ->> 'conversations_timed_out' AS timed_out FROM cscp.sweep() s;
SELECT conversation_id, state FROM cscp.conversation WHERE tenant_id = 'cv' ORDER BY 1;
SELECT count(*) AS orphan_turns FROM cscp.turn t
 WHERE NOT EXISTS (SELECT 1 FROM cscp.conversation c WHERE c.tenant_id = t.tenant_id AND c.conversation_id = t.conversation_id);

-- 13. A user's trigger on cscp.turn that records another turn of the same conversation before
-- the one being inserted: that turn takes the next index, and the outer one the index after it
-- (the turn trigger does not reuse the conversation as the API read it before the inner turn).
SELECT * FROM cscp.conversation_start('cv', 'nest', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": 0, "ts": 0}');
CREATE FUNCTION nest_first() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cscp.conversation_exchange('cv', 'nest',
        '{"from": "echo", "role": "user", "content": "inner", "ts": 1}');
    RETURN NEW;
END $$;
CREATE TRIGGER a_nest_first BEFORE INSERT ON cscp.turn
    FOR EACH ROW WHEN (NEW.sender = 'maria' AND NEW.conversation_id = 'nest') EXECUTE FUNCTION nest_first();
SELECT outcome, turn_index FROM cscp.conversation_exchange('cv', 'nest',
    '{"from": "maria", "role": "user", "content": "outer", "ts": 2}');
DROP TRIGGER a_nest_first ON cscp.turn;
DROP FUNCTION nest_first();
SELECT turn_index, sender, content FROM cscp.turn WHERE tenant_id = 'cv' AND conversation_id = 'nest' ORDER BY 1;
SELECT next_turn_index, next_event_seq FROM cscp.conversation WHERE tenant_id = 'cv' AND conversation_id = 'nest';
SELECT count(*) AS problems FROM cscp.check_invariants('cv');

-- 14. Optional ConversationTurn fields (conversation-turn.schema.json): to, groupId, speakerId
-- and agent are accepted, stored in "extra" and given back; wrong shapes are 22023 and write
-- nothing, through the API and through a direct INSERT.
SELECT * FROM cscp.conversation_start('cv', 'grp', 'council',
    '{"from": "user", "role": "user", "content": "Q3 or Q4?", "ts": 1000, "groupId": "board", "to": "host:cfo"}');
SELECT outcome, turn_index FROM cscp.conversation_exchange('cv', 'grp',
    '{"from": "host:cfo", "role": "agent", "content": "Q4.", "ts": 2000, "groupId": "board", "speakerId": "host:cfo",
      "agent": {"agentId": "advisor-cfo", "agentSharing": "shared:%shared%", "memoryRef": "mem-1"}}');
SELECT turn_index, extra FROM cscp.turn WHERE tenant_id = 'cv' AND conversation_id = 'grp' ORDER BY 1;
SELECT conv_digest() AS before \gset
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "u", "role": "user", "content": 1, "ts": 1, "groupId": 7}')$$);
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "u", "role": "user", "content": 1, "ts": 1, "speakerId": ""}')$$);
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "u", "role": "user", "content": 1, "ts": 1, "agent": {"agentSharing": "public"}}')$$);
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "u", "role": "user", "content": 1, "ts": 1, "agent": "cfo"}')$$);
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "u", "role": "user", "content": 1, "ts": 1, "channel": "x"}')$$);
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts, extra)
             VALUES ('cv', 'grp', 2, 'd-1', 'user', 'u', '1', 1, '{"colour": "red"}')$$);
SELECT conv_digest() = :'before' AS nothing_written;

-- 15. After close (RFC 0005 §E): a new turn is a validation error (22023) and writes nothing; a
-- turn of the conversation sent again with the same content replays it, with the cached turn.
SELECT result FROM cscp.conversation_close('cv', 'grp', '{"from": "host:cfo", "role": "agent", "content": "Done.", "ts": 3000, "speakerId": "host:cfo"}');
SELECT conv_digest() AS before \gset
SELECT event_id, turn_index, outcome, recorded_turn ->> 'groupId' AS group_id
  FROM cscp.conversation_exchange('cv', 'grp',
    '{"from": "host:cfo", "role": "agent", "content": "Q4.", "ts": 2000, "messageId": "grp:1:agent"}');
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "host:cfo", "role": "agent", "content": "Q3!", "ts": 2000, "messageId": "grp:1:agent"}')$$);
SELECT try($$SELECT cscp.conversation_exchange('cv', 'grp', '{"from": "user", "role": "user", "content": "and?", "ts": 4000}')$$);
SELECT conv_digest() = :'before' AS nothing_written;

-- 16. The deadline holds on every read: past it, conversation_get reads closed (timeout) before
-- any sweep or late turn has recorded it; then the record agrees.
SET cscp.clock = '2026-07-01 10:00:00+00';
SELECT * FROM cscp.conversation_start('cv', 'late', 'supervisor',
    '{"from": "supervisor", "role": "agent", "content": "Still there?", "ts": 1000}', timeout_ms => 60000);
SELECT state, close_reason, closed_at FROM cscp.conversation_get('cv', 'late');
SET cscp.clock = '2026-07-01 10:01:00+00';
SELECT c.state AS stored, g.state AS effective, g.close_reason, g.closed_at
  FROM cscp.conversation c, cscp.conversation_get('cv', 'late') g
 WHERE c.tenant_id = 'cv' AND c.conversation_id = 'late';
SELECT outcome FROM cscp.conversation_exchange('cv', 'late', '{"from": "maria", "role": "user", "content": "yes", "ts": 2}');
SELECT state, close_reason, closed_at FROM cscp.conversation_get('cv', 'late');
SELECT count(*) AS none FROM cscp.conversation_get('cv', 'no-such');
SELECT try($$SELECT * FROM cscp.conversation_get('cv', '')$$);

-- 17. Export as OpenWOP wire shapes (validated by ajv in test/scripts/openwop-schemas.sh).
SELECT jsonb_pretty(cscp.conversation_export('cv', 'grp'));
SELECT cscp.conversation_export('cv', 'no-such') IS NULL AS none;

-- Leave nothing for the suites after this one.
DELETE FROM cscp.turn WHERE tenant_id = 'cv';
DELETE FROM cscp.event WHERE tenant_id = 'cv';
DELETE FROM cscp.conversation WHERE tenant_id = 'cv';
DELETE FROM cscp.context WHERE tenant_id = 'cv';
DELETE FROM cscp.policy WHERE tenant_id = 'cv';
DROP FUNCTION conv_turns(text), conv_events(text), conv_state(text), conv_digest();
RESET cscp.clock;
