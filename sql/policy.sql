\i sql/include/helpers.sql
-- Policies: defaults in tenant '*', per-tenant keys merged over them, types checked.
SELECT jsonb_pretty(cscp.policy_effective('nobody-yet'));

SELECT e ->> 'context_ttl' AS context_ttl, e ->> 'detail_level' AS detail_level,
       e ->> 'confirmation_ttl' AS confirmation_ttl
  FROM cscp.policy_set('p1', '{"context_ttl": "10 minutes", "detail_level": "full"}') e;
SELECT settings FROM cscp.policy WHERE tenant_id = 'p1';
-- Merge: earlier keys stay.
SELECT settings FROM cscp.policy WHERE tenant_id = 'p1'
   AND cscp.policy_set('p1', '{"max_slot_bytes": 100}') IS NOT NULL;
SELECT settings FROM cscp.policy WHERE tenant_id = 'p1';
-- null removes a key: the default applies again.
SELECT cscp.policy_set('p1', '{"detail_level": null}') ->> 'detail_level' AS detail_level;
SELECT settings FROM cscp.policy WHERE tenant_id = 'p1';

-- Unknown keys and wrong types: 22023, nothing changes.
SELECT try($$SELECT cscp.policy_set('p1', '{"context_tll": "10 minutes"}')$$);
SELECT k, try(format('SELECT cscp.policy_set(%L, %L)', 'p1', jsonb_build_object(k, v))) AS result
  FROM (VALUES ('context_ttl', '"soon"'::jsonb), ('context_ttl', '"-5 minutes"'), ('context_ttl', '0'),
               ('confirmation_ttl', '"0 seconds"'), ('approval_ttl', 'true'),
               ('context_ttl_mode', '"rolling"'), ('max_ttl', '[]'),
               ('retention_closed', '"forever"'), ('retention_expired', '3'),
               ('retention_turns', '"P"'), ('retention_evidence', '{}'),
               ('max_slot_bytes', '0'), ('max_slot_bytes', '1.5'), ('max_slot_bytes', '"10"'),
               ('max_slot_bytes', '99999999'),
               ('slot_rules', '{"x_a": "secret"}'), ('slot_rules', '[]'), ('slot_rules', '{"x_a": 1}'),
               ('extension_slots', '"crm_id"'), ('extension_slots', '[""]'), ('extension_slots', '[1]'),
               ('detail_level', '"verbose"'), ('auto_confirm', '"lookup"'),
               ('turn_content', '"hash"'), ('replay_divergence', '"ignore"'),
               ('fact_budget_share', '0'), ('fact_budget_share', '1.5'), ('fact_budget_share', '"0.5"'),
               ('supersede_same_key', '"yes"')) AS bad(k, v);
SELECT settings FROM cscp.policy WHERE tenant_id = 'p1';
SELECT try($$SELECT cscp.policy_set('p1', '[1, 2]')$$);
SELECT try($$SELECT cscp.policy_set('p1', NULL)$$);
SELECT try($$SELECT cscp.policy_set(NULL, '{}')$$);

-- Every kind accepted with a right value.
SELECT cscp.policy_set('p2', '{"context_ttl": "PT15M", "confirmation_ttl": "2 minutes",
    "approval_ttl": "1 day", "context_ttl_mode": "fixed", "max_ttl": "90 days",
    "retention_closed": "1 day", "retention_expired": "2 hours", "retention_turns": "7 days",
    "retention_evidence": "1 year", "max_slot_bytes": 1024,
    "slot_rules": {"active_target": "derived", "x_card": "forbidden", "last_result": "stored"},
    "extension_slots": ["crm_id"], "detail_level": "none", "auto_confirm": ["lookup_balance"],
    "turn_content": "reference", "replay_divergence": "error", "fact_budget_share": 0.5,
    "supersede_same_key": true}') ->> 'turn_content' AS turn_content;
SELECT cscp.policy_effective('p2') = (SELECT p.settings FROM cscp.policy p WHERE p.tenant_id = '*')
    || (SELECT p.settings FROM cscp.policy p WHERE p.tenant_id = 'p2') AS merged,
       (SELECT count(*) FROM jsonb_object_keys((SELECT p.settings FROM cscp.policy p WHERE p.tenant_id = 'p2'))) AS keys_set;

-- Defaults: the superuser changes them; they cannot be removed.
SELECT cscp.policy_set('*', '{"context_ttl": "20 minutes"}') ->> 'context_ttl' AS default_ttl;
SELECT cscp.policy_effective('p3') ->> 'context_ttl' AS inherited;
SELECT try($$SELECT cscp.policy_set('*', '{"context_ttl": null}')$$);
SELECT cscp.policy_set('*', '{"context_ttl": "30 minutes"}') ->> 'context_ttl' AS default_ttl;
DELETE FROM cscp.policy WHERE tenant_id IN ('p1', 'p2');
