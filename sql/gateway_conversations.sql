\i sql/include/helpers.sql
-- Conversations (OpenWOP RFC 0005) through the gateway's functions, without a network: start,
-- exchange and close by ConversationResolve bodies, read back as OpenWOP wire shapes; replay,
-- divergence, a closed conversation (400 validation_error), the schema, the timeout; the bearer
-- key's tenant only; the gateway's role and an application role held to the same rules.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-03 09:00:00+00';
SELECT cscp.api_key_create('gc1', 'support-bot', ARRAY['conversations:read', 'conversations:write']) AS k1 \gset
SELECT cscp.api_key_create('gc2', 'support-bot') AS k2 \gset
SELECT cscp.api_key_create('gc1', 'reader', ARRAY['conversations:read']) AS kread \gset
SELECT cscp.api_key_create('gc1', 'docs-only', ARRAY['documents:read']) AS kdocs \gset

-- Start: 201 with its Location; the same start again replays it (200), nothing new written.
SELECT status, headers, body
  FROM cscp.http_conversation_start('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"agentId": "supervisor", "causationId": "run-7", "initialTurn": {"from": "supervisor", "role": "agent", "content": {"text": "How can I help?"}, "ts": 1000}}');
SELECT status, body
  FROM cscp.http_conversation_start('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"agentId": "supervisor", "causationId": "run-7", "initialTurn": {"from": "supervisor", "role": "agent", "content": {"text": "How can I help?"}, "ts": 1000}}');
SELECT count(*) AS events FROM cscp.event WHERE tenant_id = 'gc1';

-- Exchange: a ConversationResolve with operation "exchange"; the same turn again is a replay,
-- other content under its messageId diverges (replay.diverged recorded, the original stands).
SELECT status, body
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "exchange", "turn": {"messageId": "wa-1", "from": "maria", "role": "user", "content": {"text": "Cancel order 17"}, "ts": 2000}}');
SELECT status, body ->> 'result' AS result, body -> 'turn' ->> 'turnIndex' AS turn_index
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "exchange", "turn": {"messageId": "wa-1", "from": "maria", "role": "user", "content": {"text": "Cancel order 17"}, "ts": 2500}}');
SELECT status, body ->> 'result' AS result, body -> 'turn' -> 'content' AS kept
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "exchange", "turn": {"messageId": "wa-1", "from": "maria", "role": "user", "content": {"text": "Cancel order 18"}, "ts": 2600}}');

-- Close: operation "close" with the final turn and the outcome.
SELECT status, body
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "close", "turn": {"messageId": "bye-1", "from": "supervisor", "role": "agent", "content": {"text": "Canceled."}, "ts": 3000}, "outcome": {"status": "done", "order": 17}}');

-- After close (RFC 0005 section E): a new turn is a validation error, 400, nothing written; the
-- final turn sent again is still a replay.
SELECT count(*) AS turns_before FROM cscp.turn WHERE tenant_id = 'gc1';
SELECT status, body -> 'error' ->> 'code' AS code, body -> 'error' ->> 'sqlstate' AS sqlstate,
       body -> 'error' ->> 'message' AS message
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "exchange", "turn": {"from": "maria", "role": "user", "content": {"text": "and?"}, "ts": 4000}}');
SELECT status, body -> 'error' ->> 'code' AS code, body -> 'error' ->> 'sqlstate' AS sqlstate
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "close", "turn": {"from": "supervisor", "role": "agent", "content": {"text": "Bye."}, "ts": 4000}}');
SELECT status, body ->> 'result' AS result, body -> 'turn' ->> 'messageId' AS message_id
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv/1', 'application/json',
       '{"operation": "close", "turn": {"messageId": "bye-1", "from": "supervisor", "role": "agent", "content": {"text": "Canceled."}, "ts": 3000}, "outcome": {"status": "done", "order": 17}}');
SELECT count(*) AS turns_after FROM cscp.turn WHERE tenant_id = 'gc1';

-- Read: the conversation as OpenWOP wire shapes, with its effective state.
SELECT status, headers, body - 'turns' - 'events' AS conversation,
       jsonb_path_query_array(body, '$.turns[*].turnIndex') AS turn_indexes,
       jsonb_path_query_array(body, '$.events[*].type') AS event_types,
       jsonb_path_query_array(body, '$.events[*].causationId') AS causation
  FROM cscp.http_conversation_get('Bearer ' || :'kread', 'conv/1');

-- The schema given at start: a turn whose content violates it is 400, nothing written; a schema
-- with keywords cscp does not implement is refused at start.
SELECT status FROM cscp.http_conversation_start('Bearer ' || :'k1', 'conv-2', 'application/json',
       '{"agentId": "bot", "schema": {"type": "object", "required": ["text"]}, "initialTurn": {"from": "bot", "role": "agent", "content": {"text": "Hi"}, "ts": 1}}');
SELECT status, body -> 'error' ->> 'code' AS code, body -> 'error' ->> 'sqlstate' AS sqlstate
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json',
       '{"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": {"txt": "no"}, "ts": 2}}');
SELECT count(*) AS turns_of_conv2 FROM cscp.turn WHERE tenant_id = 'gc1' AND conversation_id = 'conv-2';
SELECT status, body -> 'error' ->> 'code' AS code, body -> 'error' ->> 'sqlstate' AS sqlstate
  FROM cscp.http_conversation_start('Bearer ' || :'k1', 'conv-3', 'application/json',
       '{"agentId": "bot", "schema": {"type": "object", "if": {}}, "initialTurn": {"from": "bot", "role": "agent", "content": 1, "ts": 1}}');

-- The timeout: a late exchange closes the conversation and answers timed_out (kept: a result,
-- not an error); the read shows it closed by timeout.
SELECT status FROM cscp.http_conversation_start('Bearer ' || :'k1', 'conv-4', 'application/json',
       '{"agentId": "bot", "timeoutMs": 60000, "initialTurn": {"from": "bot", "role": "agent", "content": "Hi", "ts": 1}}');
SET cscp.clock = '2026-05-03 09:05:00+00';
SELECT status, body ->> 'result' AS result, body -> 'turn' ->> 'role' AS final_role
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-4', 'application/json',
       '{"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": "late", "ts": 2}}');
SELECT status, body ->> 'state' AS state, body ->> 'closeReason' AS close_reason, body -> 'outcome' AS outcome
  FROM cscp.http_conversation_get('Bearer ' || :'k1', 'conv-4');
SET cscp.clock = '2026-05-03 09:00:00+00';

-- Another tenant's key: not found (no existence leak), and its start makes its own conversation.
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_conversation_get('Bearer ' || :'k2', 'conv/1');
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_conversation_resolve('Bearer ' || :'k2', 'conv/1', 'application/json',
       '{"operation": "exchange", "turn": {"from": "eve", "role": "user", "content": "hi", "ts": 1}}');
SELECT status FROM cscp.http_conversation_start('Bearer ' || :'k2', 'conv/1', 'application/json',
       '{"agentId": "other", "initialTurn": {"from": "other", "role": "agent", "content": "Hi", "ts": 1}}');
SELECT tenant_id, conversation_id, agent_id, state FROM cscp.conversation
 WHERE tenant_id IN ('gc1', 'gc2') ORDER BY 1, 2;

-- Scopes: a read-only key cannot write, a documents key cannot read conversations.
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_conversation_resolve('Bearer ' || :'kread', 'conv-2', 'application/json',
       '{"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": {"text": "x"}, "ts": 3}}');
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_conversation_get('Bearer ' || :'kdocs', 'conv-2');

-- Bad requests, nothing written.
SELECT count(*) AS turns_before FROM cscp.turn WHERE tenant_id = 'gc1';
SELECT label, (r).status, (r).body -> 'error' ->> 'code' AS code, (r).body -> 'error' ->> 'sqlstate' AS sqlstate,
       (r).body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('start: no agentId', cscp.http_conversation_start('Bearer ' || :'k1', 'c-x', 'application/json', '{"initialTurn": {"from": "b", "role": "agent", "content": 1, "ts": 1}}')),
    ('start: no initialTurn', cscp.http_conversation_start('Bearer ' || :'k1', 'c-x', 'application/json', '{"agentId": "b"}')),
    ('start: turn without role', cscp.http_conversation_start('Bearer ' || :'k1', 'c-x', 'application/json', '{"agentId": "b", "initialTurn": {"from": "b", "content": 1, "ts": 1}}')),
    ('start: other content again', cscp.http_conversation_start('Bearer ' || :'k1', 'conv-2', 'application/json', '{"agentId": "bot", "initialTurn": {"from": "bot", "role": "agent", "content": {"text": "Hello"}, "ts": 1}}')),
    ('resolve: no operation', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"turn": {"from": "a", "role": "user", "content": {"text": "x"}, "ts": 1}}')),
    ('resolve: unknown operation', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation": "start", "turn": {"from": "a", "role": "user", "content": {"text": "x"}, "ts": 1}}')),
    ('resolve: no turn', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation": "exchange"}')),
    ('resolve: outcome on exchange', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation": "exchange", "turn": {"from": "a", "role": "user", "content": {"text": "x"}, "ts": 1}, "outcome": 1}')),
    ('resolve: bad role', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation": "exchange", "turn": {"from": "a", "role": "robot", "content": {"text": "x"}, "ts": 1}}')),
    ('resolve: gap in turnIndex', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation": "exchange", "turn": {"from": "a", "role": "user", "content": {"text": "x"}, "ts": 1, "turnIndex": 9}}')),
    ('resolve: unknown conversation', cscp.http_conversation_resolve('Bearer ' || :'k1', 'nope', 'application/json', '{"operation": "exchange", "turn": {"from": "a", "role": "user", "content": 1, "ts": 1}}')),
    ('resolve: not JSON', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json', '{"operation":')),
    ('resolve: text/plain', cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'text/plain', '{}')),
    ('get: unknown', cscp.http_conversation_get('Bearer ' || :'k1', 'nope')),
    ('get: no key', cscp.http_conversation_get(NULL, 'conv-2'))
  ) AS t(label, r);
SELECT count(*) AS turns_after FROM cscp.turn WHERE tenant_id = 'gc1';

-- The gateway's role calls the endpoints and cannot call the conversation API itself; an
-- application role bound to its tenant reads what the endpoints wrote, and another tenant's
-- application role does not.
CREATE ROLE regress_gc_gateway LOGIN;
SELECT cscp.grant_gateway('regress_gc_gateway');
SET ROLE regress_gc_gateway;
SELECT status, body ->> 'result' AS result
  FROM cscp.http_conversation_resolve('Bearer ' || :'k1', 'conv-2', 'application/json',
       '{"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": {"text": "via gateway"}, "ts": 5}}');
SELECT label, try(sql) AS result FROM (VALUES
    ('exchange', $$SELECT cscp.conversation_exchange('gc1', 'conv-2', '{"from": "x", "role": "user", "content": {"text": "x"}, "ts": 1}')$$),
    ('read turns', $$SELECT * FROM cscp.turn$$)) AS b(label, sql);
RESET ROLE;
CREATE ROLE regress_gc_app;
SELECT cscp.grant_app('regress_gc_app');
SET ROLE regress_gc_app;
SET cscp.tenant_id = 'gc1';
SELECT turn_index, sender, content FROM cscp.conversation_turns('gc1', 'conv-2');
SELECT try($$SELECT cscp.conversation_exchange('gc1', 'conv/1', '{"from": "maria", "role": "user", "content": {"text": "direct"}, "ts": 9}')$$) AS direct_after_close;
SET cscp.tenant_id = 'gc2';
SELECT count(*) AS gc1_turns_seen_by_gc2 FROM cscp.turn WHERE tenant_id = 'gc1';
RESET cscp.tenant_id;
RESET ROLE;

DROP OWNED BY regress_gc_gateway, regress_gc_app;
DROP ROLE regress_gc_gateway, regress_gc_app;
DELETE FROM cscp.api_key;
RESET cscp.clock;
