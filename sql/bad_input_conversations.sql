\i sql/include/helpers.sql
-- Bad input to the conversation functions: every call below raises an ERROR with the SQLSTATE
-- of DESIGN.md section 10 and changes nothing.
SET cscp.clock = '2026-08-01 09:00:00+00';
SELECT * FROM cscp.conversation_start('bi', 'open-1', 'agent-1',
    '{"from": "agent-1", "role": "agent", "content": "hi", "ts": 1}', '{"type": "string"}');
SELECT * FROM cscp.conversation_start('bi', 'closed-1', 'agent-1',
    '{"from": "agent-1", "role": "agent", "content": "hi", "ts": 1}');
SELECT result FROM cscp.conversation_close('bi', 'closed-1',
    '{"from": "agent-1", "role": "agent", "content": "bye", "ts": 2}');

CREATE TEMP TABLE bi_before AS
    SELECT (SELECT count(*) FROM cscp.conversation) AS conversations,
           (SELECT count(*) FROM cscp.turn) AS turns,
           (SELECT count(*) FROM cscp.event) AS events,
           (SELECT md5(string_agg(c::text, ',' ORDER BY c::text)) FROM cscp.conversation c) AS digest;

SELECT label, try(sql) AS result FROM (VALUES
    -- Turns that are not ConversationTurns.
    ('turn null',               $$SELECT cscp.conversation_exchange('bi', 'open-1', NULL)$$),
    ('turn array',              $$SELECT cscp.conversation_exchange('bi', 'open-1', '[{"from": "u"}]')$$),
    ('turn string',             $$SELECT cscp.conversation_exchange('bi', 'open-1', '"hello"')$$),
    ('turn json null',          $$SELECT cscp.conversation_exchange('bi', 'open-1', 'null')$$),
    ('missing from',            $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"role": "user", "content": "x", "ts": 1}')$$),
    ('missing role',            $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "content": "x", "ts": 1}')$$),
    ('missing content',         $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "ts": 1}')$$),
    ('missing ts',              $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x"}')$$),
    ('unknown field',           $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "text": "x"}')$$),
    ('from empty',              $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "", "role": "user", "content": "x", "ts": 1}')$$),
    ('from number',             $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": 7, "role": "user", "content": "x", "ts": 1}')$$),
    ('from too long',           format($$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "%s", "role": "user", "content": "x", "ts": 1}')$$, repeat('u', 257))),
    ('role unknown',            $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "assistant", "content": "x", "ts": 1}')$$),
    ('role upper case',         $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "USER", "content": "x", "ts": 1}')$$),
    ('role null',               $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": null, "content": "x", "ts": 1}')$$),
    ('ts string',               $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": "2026-08-01"}')$$),
    ('ts null',                 $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": null}')$$),
    ('turnIndex negative',      $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": -1}')$$),
    ('turnIndex fractional',    $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": 1.5}')$$),
    ('turnIndex huge',          $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": 1e30}')$$),
    ('turnIndex int max',       $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": 2147483647}')$$),
    ('turnIndex string',        $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": "1"}')$$),
    ('turnIndex gap',           $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": 2}')$$),
    ('turnIndex taken',         $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1, "turnIndex": 0}')$$),
    ('messageId empty',         $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"messageId": "", "from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('messageId number',        $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"messageId": 5, "from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('messageId too long',      format($$SELECT cscp.conversation_exchange('bi', 'open-1', '{"messageId": "%s", "from": "u", "role": "user", "content": "x", "ts": 1}')$$, repeat('m', 545))),
    -- Content: schema, size, depth.
    ('content violates schema', $$SELECT cscp.conversation_exchange('bi', 'open-1', '{"from": "u", "role": "user", "content": 5, "ts": 1}')$$),
    ('content too large',       format($$SELECT cscp.conversation_exchange('bi', 'open-1', jsonb_build_object('from', 'u', 'role', 'user', 'ts', 1, 'content', repeat('x', %s)))$$, 1100000)),
    ('content too deep',        format($$SELECT cscp.conversation_exchange('bi', 'open-1', jsonb_build_object('from', 'u', 'role', 'user', 'ts', 1, 'content', '%s%s'::jsonb))$$, repeat('[', 70), repeat(']', 70))),
    -- Arguments.
    ('tenant null',             $$SELECT cscp.conversation_exchange(NULL, 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('tenant *',                $$SELECT cscp.conversation_exchange('*', 'open-1', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('conversation empty',      $$SELECT cscp.conversation_exchange('bi', '', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('conversation unknown',    $$SELECT cscp.conversation_exchange('bi', 'nope', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('conversation closed',     $$SELECT cscp.conversation_exchange('bi', 'closed-1', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('close closed',            $$SELECT cscp.conversation_close('bi', 'closed-1', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('close unknown',           $$SELECT cscp.conversation_close('bi', 'nope', '{"from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('close bad turn',          $$SELECT cscp.conversation_close('bi', 'open-1', '{"from": "u", "role": "user"}')$$),
    ('close reuses messageId',  $$SELECT cscp.conversation_close('bi', 'open-1', '{"messageId": "open-1:0:agent", "from": "u", "role": "user", "content": "x", "ts": 1}')$$),
    ('start agent null',        $$SELECT cscp.conversation_start('bi', 'new-1', NULL, '{"from": "a", "role": "agent", "content": "x", "ts": 1}')$$),
    ('start turn null',         $$SELECT cscp.conversation_start('bi', 'new-1', 'a', NULL)$$),
    ('start turn not object',   $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '[]')$$),
    ('start turnIndex 1',       $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1, "turnIndex": 1}')$$),
    ('start schema string',     $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', '"string"')$$),
    ('start schema number',     $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', '5')$$),
    ('start schema bad value',  $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', '{"minLength": -1}')$$),
    ('start schema $ref',       $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', '{"$ref": "#/defs/x"}')$$),
    ('start schema deep',       format($$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', '%s')$$, repeat('{"not": ', 2000) || '{}' || repeat('}', 2000))),
    ('start timeout zero',      $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', NULL, 0)$$),
    ('start timeout negative',  $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', NULL, -5)$$),
    ('start timeout too long',  $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', NULL, 9223372036854775807)$$),
    ('start causation empty',   $$SELECT cscp.conversation_start('bi', 'new-1', 'a', '{"from": "a", "role": "agent", "content": "x", "ts": 1}', causation_id => '')$$),
    ('start clashes',           $$SELECT cscp.conversation_start('bi', 'open-1', 'agent-1', '{"from": "agent-1", "role": "agent", "content": "other", "ts": 1}')$$),
    ('turns tenant *',          $$SELECT cscp.conversation_turns('*', 'open-1')$$),
    ('events conversation null', $$SELECT cscp.conversation_events('bi', NULL)$$)
) AS t(label, sql);

SELECT (SELECT count(*) FROM cscp.conversation) = conversations AS conversations_unchanged,
       (SELECT count(*) FROM cscp.turn) = turns AS turns_unchanged,
       (SELECT count(*) FROM cscp.event) = events AS events_unchanged,
       (SELECT md5(string_agg(c::text, ',' ORDER BY c::text)) FROM cscp.conversation c) = digest AS rows_unchanged
  FROM bi_before;

DELETE FROM cscp.turn WHERE tenant_id = 'bi';
DELETE FROM cscp.event WHERE tenant_id = 'bi';
DELETE FROM cscp.conversation WHERE tenant_id = 'bi';
RESET cscp.clock;
