\i sql/include/helpers.sql
-- Operators' redacted view and its audited lookup: no idempotency keys, fingerprints or raw
-- slot values at any detail level.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 10:00:00+00';
SELECT cscp.policy_set(t, jsonb_build_object('detail_level', t)) ->> 'detail_level' AS level
  FROM unnest(ARRAY['none', 'summary', 'full']) t;
SELECT (cscp.context_open(t, 'conv-v', '+15550001',
        '{"active_intent": "transfer", "active_target": {"iban": "NL00BANK0123456789"}}')).status AS prepared
  FROM unnest(ARRAY['none', 'summary', 'full']) t;
-- A pending confirmation, written around the triggers (which hold the slot to a command that
-- waits for it; only the view's redaction matters here).
SET session_replication_role = replica;
UPDATE cscp.context x
   SET slots = x.slots || '{"pending_confirmation": {"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d",
            "idempotency_key": "secret-key", "target_fingerprint": "sha256:feed",
            "expires_at": "2026-05-01T10:05:00Z"}}'
 WHERE x.conversation_id = 'conv-v';
RESET session_replication_role;

SELECT tenant_id, conversation_id, actor, status, detail_level, jsonb_pretty(slots) AS slots
  FROM cscp.active_context WHERE conversation_id = 'conv-v' ORDER BY tenant_id;
-- Intent from summary up; the target only as a marker or a short digest; pending flags always.
SELECT tenant_id, intent, target, confirmation_pending, approval_pending, last_command_state
  FROM cscp.active_context WHERE conversation_id = 'conv-v' ORDER BY tenant_id;
SELECT count(*) AS leaks FROM cscp.active_context a
 WHERE row(a.*)::text ~ '(secret-key|feed|NL00BANK)';

-- Commands: a mutating one waiting for its confirmation, per detail level.
SELECT t, (cscp.context_open(t, 'conv-c', '+15550002', '{"active_intent": "transfer"}')).status
  FROM unnest(ARRAY['none', 'summary', 'full']) t;
SELECT t, s.state, s.replayed
  FROM unnest(ARRAY['none', 'summary', 'full']) t,
       cscp.command_submit(t, 'conv-c', '+15550002', 'key-secret-' || t, 'transfer_funds', true,
                           '{wamid.1}', '{"iban": "NL00BANK0123456789"}', 'fp-secret') s;
SELECT tenant_id, actor, command_name, mutating, state, terminal, reason_code, confirmed,
       authorized, detail_level, events
  FROM cscp.command_lifecycle WHERE conversation_id = 'conv-c' ORDER BY tenant_id;
SELECT tenant_id, intent, target, confirmation_pending, last_command_state
  FROM cscp.active_context WHERE conversation_id = 'conv-c' ORDER BY tenant_id;
SELECT count(*) AS leaks FROM cscp.command_lifecycle l
 WHERE row(l.*)::text ~ '(key-secret|fp-secret|NL00BANK|wamid)';

-- An operator role sees the view and the audited lookup, and nothing else.
CREATE ROLE ops_viewer;
SELECT cscp.grant_operator('ops_viewer');
SET ROLE ops_viewer;
SELECT tenant_id, status FROM cscp.show_active_context('full', 'conv-v');
SELECT count(*) AS visible FROM cscp.active_context WHERE tenant_id IN ('none', 'summary', 'full');
SET cscp.tenant_id = 'summary';
SELECT tenant_id FROM cscp.active_context;
SELECT tenant_id, state FROM cscp.command_lifecycle;
RESET cscp.tenant_id;
SELECT try($$SELECT * FROM cscp.context$$);
SELECT try($$SELECT * FROM cscp.inspection_log$$);
SELECT try($$SELECT * FROM cscp.command$$);
SELECT try($$SELECT * FROM cscp.evidence$$);
SELECT try($$SELECT cscp.context_open('full', 'x', 'y')$$);
-- A read whose transaction rolls back leaves no audit row, but its LOG line is in the server
-- log all the same (shown here by client_min_messages).
SET client_min_messages = log;
BEGIN;
SELECT count(*) AS shown FROM cscp.show_active_context('full', 'conv-v');
ROLLBACK;
RESET client_min_messages;
RESET ROLE;
-- Every read of the operator's is recorded, one row per conversation shown, naming the role.
SELECT tenant_id, inspector, conversation_id, rows_shown, source FROM cscp.inspection_log
 WHERE inspector = 'ops_viewer' AND tenant_id IN ('none', 'summary', 'full')
 ORDER BY source, tenant_id, conversation_id;
SELECT try($$SELECT cscp.grant_operator('no_such_role')$$);
DROP OWNED BY ops_viewer;
DROP ROLE ops_viewer;
DELETE FROM cscp.policy WHERE tenant_id IN ('none', 'summary', 'full');
