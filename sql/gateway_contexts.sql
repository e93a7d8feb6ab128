\i sql/include/helpers.sql
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
SELECT count(*) AS contexts_of_conv_2 FROM cscp.context WHERE tenant_id = 'gc1' AND conversation_id = 'conv-2';

-- An expired context: 200 with its effective status, and a slot can no longer be set.
SET cscp.clock = '2026-05-02 10:00:00+00';
SELECT (cscp.http_context_get('Bearer ' || :'k1', 'conv-1', 'ana')).body ->> 'status' AS status_after_ttl;
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_slot_put('Bearer ' || :'k1', 'conv-1', 'ana', 'active_intent', 'application/json', '"late"');

-- Commands: submitted under their conversation and actor (201, a replay 200), read and moved by
-- id for the key's tenant only.
SET cscp.clock = '2026-05-02 11:00:00+00';
SELECT cscp.api_key_create('gc1', 'commander', ARRAY['commands:read', 'commands:write', 'confirmations:write']) AS kcmd \gset
SELECT (cscp.http_context_open('Bearer ' || :'kcmd', 'conv-3', 'ana', NULL, NULL)).status AS open_with_commands_key;
SELECT pg_temp.shape(cscp.http_context_open('Bearer ' || :'k1', 'conv-3', 'ana', NULL, NULL)) IS NOT NULL AS opened;
SELECT cscp.http_command_submit('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json',
    '{"idempotencyKey": "ship-1", "commandName": "ship", "messageIds": ["m1"], "payload": {"n": 1}, "targetFingerprint": "addr:1"}') AS r \gset
SELECT (:'r'::cscp.http_response).status, (:'r'::cscp.http_response).body - 'commandId' AS body,
       (:'r'::cscp.http_response).headers ->> 'Location' = '/v1/commands/' || ((:'r'::cscp.http_response).body ->> 'commandId') AS location_ok;
SELECT ((:'r'::cscp.http_response).body ->> 'commandId')::uuid AS cmd \gset
SELECT status, body - 'commandId' AS body FROM cscp.http_command_submit('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json',
    '{"idempotencyKey": "ship-1", "commandName": "ship", "messageIds": ["m1"], "payload": {"n": 1}, "targetFingerprint": "addr:1"}');
SELECT status, body - 'commandId' - 'lastTransitionAt' AS body FROM cscp.http_command_status('Bearer ' || :'kcmd', :'cmd');
-- A refused step is an answer (accepted false, evidence written); after the answer, it moves.
SELECT status, body FROM cscp.http_command_transition('Bearer ' || :'kcmd', :'cmd', 'application/json', '{"toState": "started"}');
SELECT pg_temp.shape(cscp.http_confirm('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json', '{"messageId": "m2", "answer": true}'));
SELECT status, body FROM cscp.http_command_transition('Bearer ' || :'kcmd', :'cmd', 'application/json', '{"toState": "authz_pending"}');
SELECT event_type, decision FROM cscp.evidence WHERE command_id = :'cmd' ORDER BY evidence_id;
-- Another tenant: not found, nothing moves.
SELECT cscp.api_key_create('gc2', 'commander') AS k2cmd \gset
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_command_status('Bearer ' || :'k2cmd', :'cmd');
SELECT status, body -> 'error' ->> 'code' AS code
  FROM cscp.http_command_transition('Bearer ' || :'k2cmd', :'cmd', 'application/json', '{"toState": "canceled"}');
SELECT state FROM cscp.command WHERE command_id = :'cmd';
-- Bad input.
SELECT snap();
SELECT label, (r).status, (r).body -> 'error' ->> 'code' AS code, (r).body -> 'error' ->> 'sqlstate' AS sqlstate,
       (r).body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('submit: no idempotencyKey', cscp.http_command_submit('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json',
        '{"commandName": "ship", "messageIds": []}')),
    ('submit: messageIds of numbers', cscp.http_command_submit('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json',
        '{"idempotencyKey": "k", "commandName": "ship", "messageIds": [1]}')),
    ('submit: payload a string', cscp.http_command_submit('Bearer ' || :'kcmd', 'conv-3', 'ana', 'application/json',
        '{"idempotencyKey": "k", "commandName": "ship", "messageIds": ["m"], "payload": "x"}')),
    ('transition: unknown state', cscp.http_command_transition('Bearer ' || :'kcmd', :'cmd', 'application/json', '{"toState": "flying"}')),
    ('transition: no toState', cscp.http_command_transition('Bearer ' || :'kcmd', :'cmd', 'application/json', '{}')),
    ('status: unknown id', cscp.http_command_status('Bearer ' || :'kcmd', '00000000-0000-4000-8000-000000000000'))
  ) AS t(label, r);
SELECT changes();

DELETE FROM cscp.api_key;
RESET cscp.clock;
