\i sql/include/helpers.sql
-- Minimal data (CSCP G4, XI.A): a context holds identifiers, never message text or card numbers.
-- Policy slot_max_length (default 256 characters) caps the longest string anywhere in a slot's
-- value and in a context's text fields; slot_refuse_card_numbers (default true) refuses a run of
-- 13 to 19 digits passing the Luhn check, spaces or dashes between its digits.  The context's row
-- guard enforces both, so the API and direct SQL as the application role meet them alike; the
-- refusal is 22023 naming the slot or field, never echoing the value, and writes nothing.
SET cscp.clock = '2026-05-01 09:00:00+00';
CREATE ROLE md_app;
SELECT cscp.grant_app('md_app', ARRAY['md']);
SELECT cscp.policy_effective('md') -> 'slot_max_length' AS default_max_length,
       cscp.policy_effective('md') -> 'slot_refuse_card_numbers' AS default_refuse_cards;

SET cscp.tenant_id = 'md';
SET ROLE md_app;
SELECT context_id AS id FROM cscp.context_open('md', 'md-1', 'maria') \gset

-- Through the API: each value in a slot, alone and nested in an object or array.
SELECT label, public.try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'x_note', value)) AS api
  FROM (VALUES ('visa, spaces', to_jsonb('my card 4111 1111 1111 1111 thanks'::text)),
               ('visa, dashes', to_jsonb('4111-1111-1111-1111'::text)),
               ('amex 15', to_jsonb('card: 378282246310005.'::text)),
               ('19 digits', to_jsonb('6011 0009 9013 9424 009'::text)),
               ('13 digits', to_jsonb('4222222222222'::text)),
               ('nested', '{"payment": [{"pan": "5555555555554444"}]}'::jsonb),
               ('as a key', '{"5105105105105100": true}'::jsonb),
               ('a number is no text', '4111111111111111'::jsonb),
               ('non-Luhn 16 digits', to_jsonb('id 4111111111111112'::text)),
               ('12 digits, Luhn', to_jsonb('411111111117'::text)),
               ('20 digits, Luhn', to_jsonb('41111111111111111115'::text)),
               ('glued to a word', to_jsonb('order-4111111111111111'::text)),
               ('an id after a colon', to_jsonb('order:4111111111111111'::text)),
               ('in brackets', to_jsonb('paid with (4111 1111 1111 1111)'::text)),
               ('hex digest', to_jsonb('sha256:ab4111111111111111cd'::text)),
               ('uuid', to_jsonb('12345678-1234-4123-a123-123456789012'::text)),
               ('256 characters', to_jsonb(repeat('é', 256))),
               ('257 characters', to_jsonb(repeat('é', 257))),
               ('257 nested', jsonb_build_object('a', jsonb_build_array(repeat('x', 257)))),
               ('long key', jsonb_build_object(repeat('k', 300), 1))) AS v(label, value);
SELECT version AS version_after, length(slots ->> 'x_note') AS x_note_length FROM cscp.context WHERE context_id = :'id';

-- By direct SQL as the application role: the same guard.
SELECT label, public.try(format('UPDATE cscp.context SET slots = slots || %L WHERE context_id = %L', value, :'id')) AS direct
  FROM (VALUES ('visa, spaces', '{"x_note": "4111 1111 1111 1111"}'::jsonb),
               ('nested visa', '{"active_target": {"card": "4012-8888-8888-1881"}}'::jsonb),
               ('non-Luhn', '{"x_note": "4111 1111 1111 1112"}'::jsonb),
               ('257 characters', jsonb_build_object('x_note', repeat('a', 257)))) AS v(label, value);
SELECT label, public.try(format($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, slots, ttl, expires_at)
                                  VALUES ('md', %L, %L, %L, '10 minutes', '2026-05-01 09:10:00+00')$$, conv, actor, slots)) AS direct_insert
  FROM (VALUES ('slot', 'md-2', 'ana', '{"x_card": "4111111111111111"}'::jsonb),
               ('conversation_id', 'chat 4111 1111 1111 1111', 'ana', '{}'::jsonb),
               ('actor_id', 'md-3', repeat('a', 300), '{}'::jsonb),
               ('all fine', 'md-4', 'ana', '{"x_ref": "card-token-9"}'::jsonb)) AS v(label, conv, actor, slots);
-- The fields a caller writes after the open: reason and correlation_id.
SELECT public.try(format($$UPDATE cscp.context SET reason = 'card 4111 1111 1111 1111' WHERE context_id = %L$$, :'id')) AS reason,
       public.try(format($$UPDATE cscp.context SET correlation_id = repeat('c', 257) WHERE context_id = %L$$, :'id')) AS correlation_id,
       public.try(format($$UPDATE cscp.context SET correlation_id = 'corr-1' WHERE context_id = %L$$, :'id')) AS correlation_ok;
-- Through the API's open: the conversation and actor ids.
SELECT public.try($$SELECT cscp.context_open('md', '4111 1111 1111 1111', 'maria')$$) AS open_card_conversation,
       public.try(format('SELECT cscp.context_open(%L, %L, %L)', 'md', 'md-5', repeat('z', 257))) AS open_long_actor;
SELECT count(*) AS contexts FROM cscp.context WHERE tenant_id = 'md';

-- A slot already stored is not checked again when another slot changes (rows of a looser policy).
RESET ROLE;
SELECT cscp.policy_set('md', '{"slot_refuse_card_numbers": false, "slot_max_length": 1000}') ->> 'slot_max_length' AS loosened;
SET ROLE md_app;
SELECT slots -> 'x_card' AS stored_when_off
  FROM cscp.slot_set(:'id', 'x_card', '"4111 1111 1111 1111"');
SELECT length(slots ->> 'x_long') AS stored_long
  FROM cscp.slot_set(:'id', 'x_long', to_jsonb(repeat('a', 900)));
RESET ROLE;
SELECT cscp.policy_set('md', '{"slot_refuse_card_numbers": null, "slot_max_length": 20}') ->> 'slot_max_length' AS tightened;
SET ROLE md_app;
SELECT slots ? 'x_card' AS card_kept, slots -> 'x_ok' AS x_ok
  FROM cscp.slot_set(:'id', 'x_ok', '"short"');
SELECT public.try(format('SELECT cscp.slot_set(%L, %L, %L)', :'id', 'x_ok', to_jsonb(repeat('b', 21)))) AS over_20;

-- The keys' values are checked where the policy is set (22023).
RESET ROLE;
SELECT key, public.try(format('SELECT cscp.policy_set(%L, %L)', 'md', jsonb_build_object(key, value))) AS result
  FROM (VALUES ('slot_max_length', '0'::jsonb), ('slot_max_length', '1.5'), ('slot_max_length', '"256"'),
               ('slot_max_length', '2000000'), ('slot_refuse_card_numbers', '"yes"'),
               ('slot_refuse_card_numbers', '1')) AS v(key, value);

RESET cscp.tenant_id;
RESET cscp.clock;
DELETE FROM cscp.context WHERE tenant_id = 'md';
DELETE FROM cscp.policy WHERE tenant_id = 'md';
DROP OWNED BY md_app;
DROP ROLE md_app;
