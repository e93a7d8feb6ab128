-- Operators' redacted view and its audited lookup: no idempotency keys, fingerprints or raw
-- slot values at any detail level.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 10:00:00+00';
SELECT cscp.policy_set(t, jsonb_build_object('detail_level', t)) ->> 'detail_level' AS level
  FROM unnest(ARRAY['none', 'summary', 'full']) t;
SELECT (cscp.slot_set((cscp.context_open(t, 'conv-v', '+15550001',
        '{"active_intent": "transfer", "active_target": {"iban": "NL00BANK0123456789"}}')).context_id,
        'pending_confirmation', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d",
            "idempotency_key": "secret-key", "target_fingerprint": "sha256:feed",
            "expires_at": "2026-05-01T10:05:00Z"}')).status AS prepared
  FROM unnest(ARRAY['none', 'summary', 'full']) t;

SELECT tenant_id, conversation_id, actor, status, detail_level, jsonb_pretty(slots) AS slots
  FROM cscp.active_context WHERE conversation_id = 'conv-v' ORDER BY tenant_id;
SELECT count(*) AS leaks FROM cscp.active_context
 WHERE slots::text ~ '(secret-key|feed|NL00BANK|transfer)';

-- An operator role sees the view and the audited lookup, and nothing else.
CREATE ROLE ops_viewer;
SELECT cscp.grant_operator('ops_viewer');
SET ROLE ops_viewer;
SELECT tenant_id, status FROM cscp.show_active_context('full', 'conv-v');
SELECT count(*) AS visible FROM cscp.active_context;
SET cscp.tenant_id = 'summary';
SELECT tenant_id FROM cscp.active_context;
RESET cscp.tenant_id;
SELECT try($$SELECT * FROM cscp.context$$);
SELECT try($$SELECT * FROM cscp.inspection_log$$);
SELECT try($$SELECT cscp.context_open('full', 'x', 'y')$$);
RESET ROLE;
SELECT tenant_id, inspector, conversation_id, rows_shown FROM cscp.inspection_log;
SELECT try($$SELECT cscp.grant_operator('no_such_role')$$);
DROP OWNED BY ops_viewer;
DROP ROLE ops_viewer;
DELETE FROM cscp.policy WHERE tenant_id IN ('none', 'summary', 'full');
