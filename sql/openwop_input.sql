\i sql/include/helpers.sql
-- What OpenWOP's published schemas forbid is refused on input (conversation-turn.schema.json,
-- conversation-event.schema.json), so that every accepted conversation exports valid: a turn's
-- ts is an integer from 0 (here at most 2^53 - 1, the largest a JSON reader holds exactly), its
-- messageId 1 to 256 characters, whether sent or made up as "conversationId:turnIndex:role";
-- a conversation's id and agent at most 256 bytes.  22023, nothing written; through the API and
-- by direct SQL as the application role.  (The openwop suite feeds random turns and validates
-- the export with ajv.)
SET cscp.clock = '2026-07-01 10:00:00+00';
CREATE ROLE oi_app;
SELECT cscp.grant_app('oi_app', ARRAY['oi']);
SET cscp.tenant_id = 'oi';
SET ROLE oi_app;
SELECT turn_index FROM cscp.conversation_start('oi', 'c1', 'bot', '{"from": "bot", "role": "agent", "content": "hi", "ts": 0}');

-- ts through the API: negative, fractional, too large refused; 1.0 and 2^53 - 1 are integers.
SELECT ts, public.try(format($$SELECT cscp.conversation_exchange('oi', 'c1', %L)$$,
                             jsonb_build_object('from', 'ana', 'role', 'user', 'content', 'x', 'ts', ts::jsonb)))
  FROM unnest(ARRAY['-5', '1.5', '-0.5', '9007199254740992', '1e400', '"12"', '5', '1.0', '9007199254740991']) ts;
-- ts by direct SQL.
SELECT ts, public.try(format($$INSERT INTO cscp.turn (tenant_id, conversation_id, role, sender, content, ts)
                               VALUES ('oi', 'c1', 'user', 'ana', '"x"', %s)$$, ts))
  FROM unnest(ARRAY['-5', '1.5', '''NaN''', '9007199254740992', '7']) ts;

-- messageId: 1 to 256 characters (not bytes), sent or made up.
SELECT label, public.try(format($$SELECT cscp.conversation_exchange('oi', 'c1', %L)$$,
                                jsonb_build_object('from', 'ana', 'role', 'user', 'content', 'x', 'ts', 9,
                                                   'messageId', id)))
  FROM (VALUES ('256 x', repeat('x', 256)), ('257 x', repeat('x', 257)), ('256 é', repeat('é', 256)),
               ('257 é', repeat('é', 257)), ('empty', '')) AS v(label, id);
SELECT public.try(format($$INSERT INTO cscp.turn (tenant_id, conversation_id, message_id, role, sender, content, ts)
                           VALUES ('oi', 'c1', %L, 'user', 'ana', '"x"', 10)$$, repeat('m', 257))) AS direct_257;
-- A conversation whose id makes a message id over 256 characters needs turns that bring their own.
SELECT turn_index FROM cscp.conversation_start('oi', repeat('c', 250), 'bot',
    '{"messageId": "first", "from": "bot", "role": "agent", "content": "hi", "ts": 0}');
SELECT public.try(format($$SELECT cscp.conversation_exchange('oi', %L, %L)$$, repeat('c', 250),
                         '{"from": "ana", "role": "user", "content": "x", "ts": 1}')) AS made_up_too_long,
       public.try(format($$SELECT cscp.conversation_exchange('oi', %L, %L)$$, repeat('c', 250),
                         '{"messageId": "m-2", "from": "ana", "role": "user", "content": "x", "ts": 1}')) AS own_id;

-- Conversation and agent ids by direct SQL: at most 256 bytes, as the API holds them.
SELECT public.try(format($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('oi', %L, 'bot')$$,
                         repeat('c', 257))) AS long_conversation_id,
       public.try(format($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('oi', 'c9', %L)$$,
                         repeat('a', 257))) AS long_agent_id;

-- Nothing refused was written; the export holds integers only.
SELECT c.conversation_id = 'c1' AS c1, count(t.*) AS turns,
       bool_and(jsonb_typeof(cscp.turn_json(t) -> 'ts') = 'number' AND t.ts = trunc(t.ts) AND t.ts >= 0) AS integral_ts
  FROM cscp.conversation c LEFT JOIN cscp.turn t USING (tenant_id, conversation_id)
 WHERE c.tenant_id = 'oi' GROUP BY 1 ORDER BY 1;
RESET ROLE;

RESET cscp.tenant_id;
RESET cscp.clock;
DELETE FROM cscp.turn WHERE tenant_id = 'oi';
DELETE FROM cscp.event WHERE tenant_id = 'oi';
DELETE FROM cscp.conversation WHERE tenant_id = 'oi';
DROP OWNED BY oi_app;
DROP ROLE oi_app;
