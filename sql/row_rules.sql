\i sql/include/helpers.sql
-- Column rules of the guarded tables (context, command, conversation, turn, document): what CHECK
-- constraints would say, held by the C guard triggers (rowguard.c).  Each rule refuses a direct
-- INSERT or UPDATE with 23514 naming the column, and the refused statement changes nothing.
\set VERBOSITY terse
SELECT cscp.routing_id('r') IS NOT NULL AS ready;

-- context: tenant, ids, ttl
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('', cscp.routing_id('r'), 'r', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('*', cscp.routing_id('r'), 'r', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('rr', cscp.routing_id(''), '', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('rr', cscp.routing_id('r'), 'r', '', cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('rr', cscp.routing_id('r'), 'r', 'a', cscp.now() + interval '1 hour', interval '0')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('rr', cscp.routing_id('r'), 'r', 'a', cscp.now() + interval '1 hour', interval '-1 month')$$);
SELECT count(*) AS contexts FROM cscp.context WHERE tenant_id IN ('', '*', 'rr');
-- the rules hold on UPDATE too
SELECT (cscp.context_open('rr', 'r', 'a')).status AS opened;
SELECT try($$UPDATE cscp.context SET ttl = interval '-5 minutes' WHERE tenant_id = 'rr'$$);
SELECT ttl FROM cscp.context WHERE tenant_id = 'rr';

-- command: tenant, ids, name, payload, recovery kind, target with kind
SELECT cscp.command_declare('rr', 'x', false) IS NOT NULL AS declared;
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('rr', '', 'r', 'a', 'x', false)$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('rr', 'k', 'r', '', 'x', false)$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('rr', 'k', 'r', 'a', '', false)$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating, payload)
             VALUES ('rr', 'k', 'r', 'a', 'x', false, '[1]')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                                      recovery_kind, target_command_id)
             VALUES ('rr', 'k', 'r', 'a', 'x', false, 'undo', cscp.routing_id('r'))$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                                      recovery_kind)
             VALUES ('rr', 'k', 'r', 'a', 'x', false, 'retry')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                                      target_command_id)
             VALUES ('rr', 'k', 'r', 'a', 'x', false, cscp.routing_id('r'))$$);
SELECT count(*) AS commands FROM cscp.command WHERE tenant_id = 'rr';

-- conversation: tenant, ids, timeout
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('*', 'r', 'bot')$$);
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('rr', '', 'bot')$$);
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id) VALUES ('rr', 'r', '')$$);
SELECT try($$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, timeout_ms) VALUES ('rr', 'r', 'bot', 0)$$);
SELECT count(*) AS conversations FROM cscp.conversation WHERE tenant_id IN ('*', 'rr');

-- document: tenant, ids, payload
SELECT try($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
             VALUES ('*', 's', 'n', '{}', cscp.now() + interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
             VALUES ('rr', '', 'n', '{}', cscp.now() + interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
             VALUES ('rr', 's', '', '{}', cscp.now() + interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
             VALUES ('rr', 's', 'n', '"text"', cscp.now() + interval '1 hour')$$);
SELECT cscp.doc_put('rr', 's', 'n', '{"a": 1}', 60) AS put;
SELECT try($$UPDATE cscp.document SET payload = '[1]' WHERE tenant_id = 'rr'$$);
SELECT payload FROM cscp.document WHERE tenant_id = 'rr';

-- turn: message id, role, sender, index (checked by the turn guard itself, with 22023)
SELECT turn_index FROM cscp.conversation_start('rr', 'r', 'bot',
    '{"from": "bot", "role": "agent", "content": "Hello", "ts": 1}');
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts)
             VALUES ('rr', 'r', 1, '', 'user', 'ana', '"hi"', 1)$$);
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts)
             VALUES ('rr', 'r', 1, 'm1', 'robot', 'ana', '"hi"', 1)$$);
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts)
             VALUES ('rr', 'r', 1, 'm1', 'user', '', '"hi"', 1)$$);
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, ts)
             VALUES ('rr', 'r', -1, 'm1', 'user', 'ana', '"hi"', 1)$$);
SELECT count(*) AS turns FROM cscp.turn WHERE tenant_id = 'rr';

-- conversation: closed exactly with closed_at and close_reason (the API keeps them together)
SELECT try($$UPDATE cscp.conversation SET close_reason = 'closed' WHERE tenant_id = 'rr'$$);
SELECT state, close_reason FROM cscp.conversation WHERE tenant_id = 'rr';
