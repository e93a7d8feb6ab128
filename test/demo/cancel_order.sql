-- The second part of `make demo`, run after conversation.sql in the same cluster (it reuses the
-- extension and the whatsapp_bot role created there): the story RFC-WF-0018 and RFC-WF-0034 were
-- written for. A shop's WhatsApp bot asks "Cancel order 123?", the customer goes quiet, the
-- context expires, and a late "yes" must not cancel anything; the bot asks again, and this time
-- the "yes" is confirmed and the command runs to the end. WhatsApp delivers a message twice;
-- nothing happens twice. Every step leaves evidence, and the trail verifies.
--
-- Every outcome the story tells is checked (checks.sql, run with ECHO off): the demo stops with an
-- error when one is not the one the story expects.
\ir checks.sql

\echo
\echo '== 14. A shop joins: contexts live 15 minutes, a question waits at most 5 minutes for its answer'
SELECT p ->> 'context_ttl' AS context_ttl, p ->> 'confirmation_ttl' AS confirmation_ttl
  FROM cscp.policy_set('acme-shop', '{"context_ttl": "15 minutes", "confirmation_ttl": "5 minutes"}') p;
SET cscp.clock = '2026-11-24 10:00:00+00';
SET ROLE whatsapp_bot;
SET cscp.tenant_id = 'acme-shop';

\echo
\echo '== 15. 10:00  Joao: "please cancel my order"  -> the bot opens a context, finds order 123'
SELECT context_id AS ctx1, status, expires_at
  FROM cscp.context_open('acme-shop', 'wa:+351912345678', 'joao', '{"active_intent": "cancel_order"}',
                         correlation_id => 'wamid.0100') \gset
SELECT status, expires_at, slots FROM cscp.context_get('acme-shop', 'wa:+351912345678', 'joao');

\echo
\echo '== 16. 10:00  The bot asks "Cancel order 123?": a mutating command waits for confirmation'
\echo '   (the idempotency key comes from the inbound message, so a redelivery cannot form a second command)'
SELECT command_id AS cmd1, state, replayed
  FROM cscp.command_submit('acme-shop', 'wa:+351912345678', 'joao', 'wamid.0100/cancel_order',
                           'cancel_order', true, ARRAY['wamid.0100'], '{"order_id": "123"}',
                           target_fingerprint => 'order:123') \gset
SELECT state, reason_code, terminal FROM cscp.command_status(:'cmd1');
\echo '   The context is pending; its pending_confirmation slot names the command, the target and the window'
SELECT status, expires_at AS context_expires_at,
       slots -> 'pending_confirmation' ->> 'target_fingerprint' AS pending_target,
       slots -> 'pending_confirmation' ->> 'expires_at' AS answer_by,
       slots -> 'pending_confirmation' ->> 'command_id' = :'cmd1' AS names_this_command
  FROM cscp.context_get('acme-shop', 'wa:+351912345678', 'joao');
\set ECHO none
SELECT pg_temp.expect(state::text, 'confirmation_required', 'a mutating command waits for confirmation')
  FROM cscp.command_status(:'cmd1') \g /dev/null
\set ECHO queries

\echo
\echo '== 17. Joao goes quiet. At 10:20 the context is past its 15 minutes: expired, though no sweep ran'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-24 10:20:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT status, expires_at FROM cscp.context_get('acme-shop', 'wa:+351912345678', 'joao');

\echo
\echo '== 18. 10:20  A late "yes" arrives. Refused: an expired context never interprets a yes'
SELECT outcome, command_id = :'cmd1' AS about_first_ask
  FROM cscp.confirm('acme-shop', 'wa:+351912345678', 'joao', 'wamid.0101', true, 'order:123');
\echo '   The first ask is rejected (context_expired): order 123 was NOT cancelled by that yes'
SELECT state, reason_code, terminal FROM cscp.command_status(:'cmd1');
\set ECHO none
SELECT pg_temp.expect(outcome, 'expired', 'a late "yes" to an expired context is refused')
  FROM cscp.answer WHERE message_id = 'wamid.0101' \g /dev/null
SELECT pg_temp.expect(state || '/' || reason_code, 'rejected/context_expired', 'the first ask is rejected as context_expired')
  FROM cscp.command_status(:'cmd1') \g /dev/null
\set ECHO queries

\echo
\echo '== 19. The bot opens a fresh context and asks again "Cancel order 123?" (a new command, a new key)'
SELECT context_id AS ctx2 FROM cscp.context_open('acme-shop', 'wa:+351912345678', 'joao',
                                                 '{"active_intent": "cancel_order"}') \gset
SELECT context_id = :'ctx1' AS is_first, status, reason, expires_at
  FROM cscp.context WHERE conversation_id = 'wa:+351912345678' ORDER BY created_at;
SELECT command_id AS cmd2 FROM cscp.command_submit('acme-shop', 'wa:+351912345678', 'joao',
        'wamid.0101/cancel_order', 'cancel_order', true, ARRAY['wamid.0101'], '{"order_id": "123"}',
        target_fingerprint => 'order:123') \gset
SELECT state, reason_code FROM cscp.command_status(:'cmd2');

\echo
\echo '== 20. 10:21  Joao: "yes"  -> confirmed (inside the window, and for the target the bot asked about)'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-24 10:21:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT outcome, command_id = :'cmd2' AS about_second_ask
  FROM cscp.confirm('acme-shop', 'wa:+351912345678', 'joao', 'wamid.0102', true, 'order:123');
SELECT status, slots ? 'pending_confirmation' AS still_pending
  FROM cscp.context_get('acme-shop', 'wa:+351912345678', 'joao');
\set ECHO none
SELECT pg_temp.expect(outcome, 'confirmed', 'a "yes" inside the window confirms the command')
  FROM cscp.answer WHERE message_id = 'wamid.0102' \g /dev/null
\set ECHO queries

\echo
\echo '== 21. The order service authorizes and runs the cancellation'
SELECT * FROM cscp.command_transition(:'cmd2', 'authz_pending', 'order_policy_check');
SELECT * FROM cscp.command_transition(:'cmd2', 'authorized', 'order_not_shipped');
SELECT * FROM cscp.command_transition(:'cmd2', 'started');
SELECT * FROM cscp.command_transition(:'cmd2', 'executed', 'order_cancelled',
                                      '{"refund": "EUR 42.00", "order_id": "123"}');
SELECT state, terminal, outcome ->> 'reason_code' AS outcome_reason, outcome -> 'detail' AS outcome_detail
  FROM cscp.command_status(:'cmd2');
\set ECHO none
SELECT pg_temp.expect(state::text, 'executed', 'the confirmed command runs to executed') FROM cscp.command_status(:'cmd2') \g /dev/null
SELECT count(*) AS evidence_before FROM cscp.evidence \gset
\set ECHO queries

\echo
\echo '== 22. WhatsApp delivers the "yes" again, and the bot''s worker retries its submit: both replay'
SELECT outcome, command_id = :'cmd2' AS same_command
  FROM cscp.confirm('acme-shop', 'wa:+351912345678', 'joao', 'wamid.0102', true, 'order:123');
SELECT command_id = :'cmd2' AS same_command, state, replayed, outcome ->> 'reason_code' AS outcome_reason,
       outcome -> 'detail' AS outcome_detail
  FROM cscp.command_submit('acme-shop', 'wa:+351912345678', 'joao', 'wamid.0101/cancel_order',
                           'cancel_order', true, ARRAY['wamid.0101'], '{"order_id": "123"}',
                           target_fingerprint => 'order:123');
\echo '   Nothing ran twice: no new command, no new evidence'
SELECT count(*) AS commands, count(*) FILTER (WHERE state = 'executed') AS executed,
       (SELECT count(*) FROM cscp.evidence) - :evidence_before AS new_evidence_rows
  FROM cscp.command WHERE conversation_id = 'wa:+351912345678';
\set ECHO none
SELECT pg_temp.expect(count(*)::text, :'evidence_before', 'a redelivered "yes" and a retried submit write nothing')
  FROM cscp.evidence \g /dev/null
\set ECHO queries

\echo
\echo '== 23. The evidence trail of the conversation: one row per transition and per refused attempt'
SELECT CASE command_id WHEN :'cmd1' THEN '1st ask' WHEN :'cmd2' THEN '2nd ask' END AS ask, seq,
       event_type, from_state || ' -> ' || to_state AS transition, decision, reason_code,
       array_to_string(message_ids, ',') AS messages
  FROM cscp.evidence WHERE conversation_id = 'wa:+351912345678' ORDER BY evidence_id;
\echo '   Every chain is intact (no altered, missing or re-linked rows): evidence_verify returns nothing'
\pset footer on
SELECT * FROM cscp.evidence_verify('acme-shop');
\pset footer off
SELECT CASE WHEN count(*) = 0 THEN 'trail intact' ELSE 'TRAIL BROKEN' END AS verdict
  FROM cscp.evidence_verify('acme-shop');
\set ECHO none
SELECT pg_temp.expect(count(*)::text, '0', 'the evidence trail verifies') FROM cscp.evidence_verify('acme-shop') \g /dev/null
