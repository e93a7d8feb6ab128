\i sql/include/helpers.sql
-- Slot rules: the minimum set, x_* names, registered extension slots, policy
-- stored/derived/forbidden, size limits, the pending_confirmation shape.
SET cscp.clock = '2026-03-01 10:00:00+00';
SELECT context_id AS id FROM cscp.context_open('s', 'slots', 'a') \gset

-- Each minimum slot is accepted.
SELECT slot, try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', slot, value)) AS result
  FROM (VALUES ('active_intent', '"transfer_money"'),
               ('active_target', '{"account_id": "acct-42"}'),
               ('pending_confirmation', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d",
                   "idempotency_key": "msg-17", "target_fingerprint": "sha256:ab12",
                   "expires_at": "2026-03-01T10:05:00Z"}'),
               ('pending_approval', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d",
                   "approver_id": "manager-1", "expires_at": "2026-03-01T11:00:00Z"}'),
               ('last_result', '{"ok": true}'),
               ('work_item_id', '"wi-9"')) AS s(slot, value);
SELECT jsonb_object_keys(slots) AS slot FROM cscp.context_get('s', 'slots', 'a') ORDER BY 1;

-- x_* names are accepted; unknown names refused (22023), nothing written.
SELECT slot, try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', slot, '1')) AS result
  FROM unnest(ARRAY['x_anything', 'x_a1_b2', 'x_', 'x-dash', 'x_a-b', 'color', 'Active_Intent', '']) slot;
SELECT version AS version_after_refusals FROM cscp.context WHERE context_id = :'id';

-- Extension slots are names registered in policy.
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'crm_id', '"c-1"')) AS before_registration;
SELECT cscp.policy_set('s', '{"extension_slots": ["crm_id"]}') -> 'extension_slots';
SELECT slots -> 'crm_id' AS crm_id FROM cscp.slot_set(:'id', 'crm_id', '"c-1"');

-- Unknown slots already in stored data are ignored by readers: unregister crm_id.
SELECT cscp.policy_set('s', '{"extension_slots": []}') -> 'extension_slots';
SELECT slots ? 'crm_id' AS crm_id_visible FROM cscp.context_get('s', 'slots', 'a');
SELECT slots ? 'crm_id' AS crm_id_stored FROM cscp.context WHERE context_id = :'id';
-- ... and do not block writes of other slots.
SELECT slots -> 'x_anything' AS x_anything, slots ? 'crm_id' AS crm_id_visible
  FROM cscp.slot_set(:'id', 'x_anything', '2');

-- SQL NULL removes a slot; JSON null stores null.
SELECT slots ? 'work_item_id' AS has_work_item FROM cscp.slot_set(:'id', 'work_item_id', NULL);
SELECT slots -> 'last_result' AS last_result FROM cscp.slot_set(:'id', 'last_result', 'null');

-- Policy: forbidden slots refused, derived slots stored as a digest, size limited.
SELECT cscp.policy_set('s', '{"slot_rules": {"x_card_number": "forbidden", "active_target": "derived"},
                              "max_slot_bytes": 64}') -> 'slot_rules';
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT cscp.slot_set(:'id', 'x_card_number', '"4111111111111111"');
SELECT cscp.slot_set(:'id', 'x_note', to_jsonb(repeat('n', 80)));
\set VERBOSITY terse
SELECT slots -> 'active_target' AS derived FROM cscp.slot_set(:'id', 'active_target', '{"account_id": "acct-43"}');
-- The same value digests the same; a digest written back is kept as it is.
SELECT (cscp.slot_set(:'id', 'active_target', '{"account_id": "acct-43"}')).slots -> 'active_target'
     = (SELECT slots -> 'active_target' FROM cscp.context WHERE context_id = :'id') AS stable_digest;
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'x_note', to_jsonb(repeat('n', 62)))) AS at_limit,
       try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'x_note', to_jsonb(repeat('n', 63)))) AS over_limit;
-- Forbidden applies to direct SQL too.
SELECT try(format('UPDATE cscp.context SET slots = slots || %L WHERE context_id = %L',
                  '{"x_card_number": "4111"}', :'id')) AS direct;

-- The pending_confirmation and pending_approval shapes (with the default size limit again).
SELECT cscp.policy_set('s', '{"max_slot_bytes": null}') ->> 'max_slot_bytes' AS max_slot_bytes;
SELECT label, try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'pending_confirmation', value)) AS result
  FROM (VALUES
    ('not an object', '"yes"'),
    ('missing key', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "expires_at": "2026-03-01T10:05:00Z"}'),
    ('bad uuid', '{"command_id": "42", "idempotency_key": "k", "expires_at": "2026-03-01T10:05:00Z"}'),
    ('bad expiry', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "idempotency_key": "k", "expires_at": "soon"}'),
    ('empty key', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "idempotency_key": "", "expires_at": "2026-03-01T10:05:00Z"}'),
    ('extra key', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "idempotency_key": "k", "expires_at": "2026-03-01T10:05:00Z", "text": "yes please"}'),
    ('numeric fingerprint', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "idempotency_key": "k", "target_fingerprint": 7, "expires_at": "2026-03-01T10:05:00Z"}'),
    ('null fingerprint', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d", "idempotency_key": "k", "target_fingerprint": null, "expires_at": "2026-03-01T10:05:00Z"}'),
    ('cleared', 'null'),
    ('approval without expiry', NULL)) AS c(label, value)
 WHERE value IS NOT NULL;
SELECT try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'pending_approval', '{"command_id": "5b0c4a6e-8f7a-4c1e-9d2b-3e4f5a6b7c8d"}')) AS approval_without_expiry;

-- slots must be an object, on open and on direct writes.
SELECT try($$SELECT cscp.context_open('s', 'slots-2', 'a', '[1]')$$);
SELECT try(format('UPDATE cscp.context SET slots = %L WHERE context_id = %L', '"text"', :'id'));
DELETE FROM cscp.policy WHERE tenant_id = 's';
