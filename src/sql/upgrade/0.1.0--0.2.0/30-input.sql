
-- 30-input: minimal data in contexts.  Two policy keys, slot_max_length and
-- slot_refuse_card_numbers, with their defaults in tenant '*' (a key the
-- owner already set there is kept).  Their checks are C (slots.c,
-- context_fsm.c); rows stored before are checked only when they change.
UPDATE cscp.policy
   SET settings = '{"slot_max_length": 256, "slot_refuse_card_numbers": true}'::jsonb OPERATOR(pg_catalog.||) settings
 WHERE tenant_id OPERATOR(pg_catalog.=) '*';
