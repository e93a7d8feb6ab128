-- Contexts, confirmations and approvals through the gateway's functions, without a network:
-- each keeps the SQL function's guarantees for the bearer key's tenant only.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-02 09:00:00+00';
SELECT cscp.api_key_create('gc1', 'bot') AS k1 \gset
SELECT cscp.api_key_create('gc2', 'bot') AS k2 \gset
SELECT cscp.api_key_create('gc1', 'docs-only', ARRAY['documents:read', 'documents:write']) AS kdocs \gset
SELECT cscp.api_key_create('gc1', 'confirmer', ARRAY['confirmations:write']) AS kconfirm \gset
-- Ids vary: show the shape of a context, not its ids and times.
CREATE FUNCTION pg_temp.shape(r cscp.http_response) RETURNS text LANGUAGE sql AS $$
    SELECT r.status || ' ' || coalesce(r.body - 'contextId' - 'createdAt' - 'updatedAt' - 'expiresAt'
                                       - 'lastCommandId' - 'commandId', 'null'::jsonb)::text
$$;

-- Open (no body, or a body with slots, TTL and correlation id), read, set and remove a slot.
SELECT pg_temp.shape(cscp.http_context_open('Bearer ' || :'k1', 'conv-1', 'ana', NULL, NULL));
SELECT pg_temp.shape(cscp.http_context_open('Bearer ' || :'k1', 'conv-1', 'ana', 'application/json',
    '{"slots": {"active_intent": "pay"}, "ttlSeconds": 600, "correlationId": "corr-1"}'));
SELECT pg_temp.shape(cscp.http_context_get('Bearer ' || :'k1', 'conv-1', 'ana'));
SELECT (cscp.http_context_get('Bearer ' || :'k1', 'conv-1', 'ana')).body ->> 'expiresAt' AS expires_at;
SELECT pg_temp.shape(cscp.http_slot_put('Bearer ' || :'k1', 'conv-1', 'ana', 'active_target', 'application/json', '"acct:1"'));
SELECT pg_temp.shape(cscp.http_slot_delete('Bearer ' || :'k1', 'conv-1', 'ana', 'active_target'));
SELECT slots FROM cscp.context WHERE tenant_id = 'gc1' AND conversation_id = 'conv-1';

-- A confirmation bound to the answering message: a mutating command waits, the answer
-- confirms it, the same message answers the same again, evidence is written.
SELECT state FROM cscp.command_submit('gc1', 'conv-1', 'ana', 'pay-1', 'pay', true, '{m1}', '{"amount": 5}', 'acct:1');
SELECT pg_temp.shape(cscp.http_confirm('Bearer ' || :'kconfirm', 'conv-1', 'ana', 'application/json',
    '{"messageId": "m2", "answer": true, "targetFingerprint": "acct:1"}'));
SELECT pg_temp.shape(cscp.http_confirm('Bearer ' || :'kconfirm', 'conv-1', 'ana', 'application/json',
    '{"messageId": "m2", "answer": true, "targetFingerprint": "acct:1"}'));
SELECT pg_temp.shape(cscp.http_confirm('Bearer ' || :'k1', 'conv-1', 'ana', 'application/json',
    '{"messageId": "m3", "answer": true}'));
SELECT state FROM cscp.command WHERE tenant_id = 'gc1' AND idempotency_key = 'pay-1';
SELECT event_type, message_ids FROM cscp.evidence
 WHERE tenant_id = 'gc1' AND event_type LIKE 'command.confirmation%' ORDER BY evidence_id;
-- An approval: none is pending.
SELECT pg_temp.shape(cscp.http_approve('Bearer ' || :'k1', 'conv-1', 'application/json',
    '{"approverId": "boss", "messageId": "m4", "decision": true}'));

-- Another tenant's key reaches nothing of gc1: no context, nothing pending.
SELECT pg_temp.shape(cscp.http_context_get('Bearer ' || :'k2', 'conv-1', 'ana'));
SELECT pg_temp.shape(cscp.http_slot_put('Bearer ' || :'k2', 'conv-1', 'ana', 'active_intent', 'application/json', '"steal"'));
SELECT pg_temp.shape(cscp.http_confirm('Bearer ' || :'k2', 'conv-1', 'ana', 'application/json',
    '{"messageId": "m9", "answer": true}'));
SELECT slots FROM cscp.context WHERE tenant_id = 'gc1' AND conversation_id = 'conv-1';

-- Scopes: a documents-only key, a confirmations-only key.
SELECT (cscp.http_context_get('Bearer ' || :'kdocs', 'conv-1', 'ana')).status AS ctx_get_docs_key,
       (cscp.http_context_open('Bearer ' || :'kconfirm', 'conv-1', 'ana', NULL, NULL)).status AS open_confirm_key,
       (cscp.http_approve('Bearer ' || :'kconfirm', 'conv-1', 'application/json', '{}')).status AS approve_confirm_key;

-- Bad requests: 400 or 415 with the SQLSTATE, nothing changed.
SELECT snap();
SELECT label, (r).status, (r).body -> 'error' ->> 'code' AS code, (r).body -> 'error' ->> 'sqlstate' AS sqlstate,
       (r).body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('open: slots not an object', cscp.http_context_open('Bearer ' || :'k1', 'conv-2', 'bo', 'application/json', '{"slots": [1]}')),
    ('open: ttl a string', cscp.http_context_open('Bearer ' || :'k1', 'conv-2', 'bo', 'application/json', '{"ttlSeconds": "1"}')),
    ('open: unknown slot', cscp.http_context_open('Bearer ' || :'k1', 'conv-2', 'bo', 'application/json', '{"slots": {"nope": 1}}')),
    ('open: text/plain', cscp.http_context_open('Bearer ' || :'k1', 'conv-2', 'bo', 'text/plain', '{}')),
    ('slot: unknown', cscp.http_slot_put('Bearer ' || :'k1', 'conv-1', 'ana', 'nope', 'application/json', '1')),
    ('slot: bad json', cscp.http_slot_put('Bearer ' || :'k1', 'conv-1', 'ana', 'active_intent', 'application/json', '{')),
    ('slot: no context', cscp.http_slot_put('Bearer ' || :'k1', 'conv-9', 'ana', 'active_intent', 'application/json', '"x"')),
    ('confirm: no messageId', cscp.http_confirm('Bearer ' || :'k1', 'conv-1', 'ana', 'application/json', '{"answer": true}')),
    ('confirm: answer a string', cscp.http_confirm('Bearer ' || :'k1', 'conv-1', 'ana', 'application/json', '{"messageId": "m", "answer": "yes"}')),
    ('approve: bad commandId', cscp.http_approve('Bearer ' || :'k1', 'conv-1', 'application/json',
        '{"approverId": "boss", "messageId": "m5", "decision": true, "commandId": "not-a-uuid"}'))
  ) AS t(label, r);
SELECT changes();
SELECT count(*) AS contexts_of_conv_2 FROM cscp.context WHERE conversation_id = 'conv-2';

-- An expired context: 200 with its effective status, and a slot can no longer be set.
SET cscp.clock = '2026-05-02 10:00:00+00';
SELECT (cscp.http_context_get('Bearer ' || :'k1', 'conv-1', 'ana')).body ->> 'status' AS status_after_ttl;
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_slot_put('Bearer ' || :'k1', 'conv-1', 'ana', 'active_intent', 'application/json', '"late"');

DELETE FROM cscp.api_key;
RESET cscp.clock;
