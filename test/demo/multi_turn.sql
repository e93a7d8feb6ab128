-- The third part of `make demo`, run after cancel_order.sql in the same cluster (it reuses the
-- extension and the whatsapp_bot role): a multi-turn conversation (OpenWOP RFC 0005). An
-- insurer's supervisor agent and a person exchange several turns under a schema; a turn that
-- breaks the schema is refused; WhatsApp delivers a message twice and it is replayed, not
-- recorded again; the supervisor closes with an outcome, which closes the person's context;
-- a second conversation is left unanswered and times out; last, the bot's hot loop in one round
-- trip (cscp.message_turn: the turn, the slots and the command) and its replay.
--
-- Every outcome the story tells is checked (checks.sql, run with ECHO off): the demo stops with an
-- error when one is not the one the story expects.
\ir checks.sql

\echo
\echo '== 24. The insurer declares its commands: claim_status is a read-only lookup, run without asking'
SELECT command_name, mutating, needs_approval FROM cscp.command_declare('acme-insure', 'claim_status', false);

\echo
\echo '== 25. What this cscp advertises to an agent runtime'
SELECT jsonb_pretty(cscp.capabilities() - 'conversation') AS capabilities,
       jsonb_array_length(cscp.capabilities() -> 'conversation' -> 'schemaKeywords') AS schema_keywords;

\echo
\echo '== 26. 14:00  The insurer''s supervisor agent opens a claim conversation with Ana; every turn must match a schema'
SET cscp.clock = '2026-11-21 14:00:00+00';
SET ROLE whatsapp_bot;
SET cscp.tenant_id = 'acme-insure';
SELECT status FROM cscp.context_open('acme-insure', 'claim-881', 'ana', '{"active_intent": "file_claim"}');
SELECT * FROM cscp.conversation_start('acme-insure', 'claim-881', 'claims-supervisor',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "What happened to your car?"}, "ts": 1795269600000}',
    schema => '{"type": "object", "required": ["text"], "additionalProperties": false,
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 500},
                               "photos": {"type": "array", "maxItems": 5, "items": {"type": "string", "pattern": "^photo-[0-9]+$"}},
                               "amount_eur": {"type": "number", "exclusiveMinimum": 0}}}',
    timeout_ms => 3600000, causation_id => 'claims-run-5');

\echo
\echo '== 27. Ana answers, the agent asks for photos, Ana sends two (indexes and message ids are assigned)'
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A1", "from": "ana", "role": "user", "content": {"text": "A tree fell on it"}, "ts": 1795269660000}');
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "Sorry to hear. Can you send photos?"}, "ts": 1795269665000}');
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A2", "from": "ana", "role": "user", "content": {"text": "Here", "photos": ["photo-1", "photo-2"]}, "ts": 1795269720000}');
\echo '   Ana''s context now names her last message (identifiers only, never the text)'
SELECT status, last_message_id FROM cscp.context_get('acme-insure', 'claim-881', 'ana');

\echo
\echo '== 28. Refused: a turn that breaks the schema (a negative amount); the error names the JSON path, nothing is written'
\set ON_ERROR_STOP 0
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A3", "from": "ana", "role": "user", "content": {"text": "About", "amount_eur": -300}, "ts": 1795269780000}');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '22023', 'a turn that breaks its schema is refused') \g /dev/null
\set ECHO queries
SELECT count(*) AS turns_so_far FROM cscp.conversation_turns('acme-insure', 'claim-881');
\set ECHO none
SELECT pg_temp.expect(count(*)::text, '4', 'the refused turn wrote nothing')
  FROM cscp.conversation_turns('acme-insure', 'claim-881') \g /dev/null
\set ECHO queries

\echo
\echo '== 29. Ana corrects it; WhatsApp then delivers that message twice more: one replay, and one with altered content'
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A4", "from": "ana", "role": "user", "content": {"text": "About", "amount_eur": 300}, "ts": 1795269800000}');
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A4", "from": "ana", "role": "user", "content": {"text": "About", "amount_eur": 300}, "ts": 1795269800000}');
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A4", "from": "ana", "role": "user", "content": {"text": "About", "amount_eur": 3000}, "ts": 1795269800000}');
\echo '   The replay re-prompted nobody and added nothing; the altered copy left a replay.diverged event and the original stands'
SELECT turn_index, content ->> 'amount_eur' AS amount_eur FROM cscp.conversation_turns('acme-insure', 'claim-881')
 WHERE message_id = 'wamid.A4';
\set ECHO none
SELECT pg_temp.expect(string_agg(outcome, ','), 'replayed', 'a redelivered message is replayed, not recorded again')
  FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"messageId": "wamid.A4", "from": "ana", "role": "user", "content": {"text": "About", "amount_eur": 300}, "ts": 1795269800000}') \g /dev/null
\set ECHO queries

\echo
\echo '== 30. 14:10  The supervisor closes the claim with an outcome; Ana''s live context is closed with it, with evidence'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-21 14:10:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT * FROM cscp.conversation_close('acme-insure', 'claim-881',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "Claim 881 filed, we will call you tomorrow."}, "ts": 1795270200000}',
    '{"claim_id": 881, "status": "filed", "amount_eur": 300}');
SELECT status, reason FROM cscp.context_get('acme-insure', 'claim-881', 'ana');
SELECT event_type, from_state || ' -> ' || to_state AS transition, reason_code, detail ->> 'event_id' AS closing_event
  FROM cscp.evidence WHERE tenant_id = 'acme-insure' AND conversation_id = 'claim-881';
\echo '   Refused: a turn after the close (22023), nothing written'
\set ON_ERROR_STOP 0
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-881',
    '{"from": "ana", "role": "user", "content": {"text": "Thanks!"}, "ts": 1795270300000}');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '22023', 'a turn after the close is refused') \g /dev/null
\set ECHO queries

\echo
\echo '== 31. The transcript, in order and the same on every call, and its events, each caused by the one before'
SELECT turn_index, message_id, role, sender, content ->> 'text' AS text
  FROM cscp.conversation_turns('acme-insure', 'claim-881');
SELECT event_id, type, causation_id, turn_index
  FROM cscp.conversation_events('acme-insure', 'claim-881');

\echo
\echo '== 32. 15:00  A second claim: the agent asks, Marco never answers within the 30-minute timeout'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-21 15:00:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT * FROM cscp.conversation_start('acme-insure', 'claim-882', 'claims-supervisor',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "Is anyone hurt?"}, "ts": 1795273200000}',
    timeout_ms => 1800000);
\echo '   15:45  Marco''s late answer is not recorded: the call records the timeout and answers timed_out'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-21 15:45:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT * FROM cscp.conversation_exchange('acme-insure', 'claim-882',
    '{"from": "marco", "role": "user", "content": {"text": "No, all fine"}, "ts": 1795275900000}');
SELECT turn_index, role, sender, content ->> 'text' AS text FROM cscp.conversation_turns('acme-insure', 'claim-882');
SELECT state, close_reason, outcome IS NULL AS outcome_is_null FROM cscp.conversation WHERE conversation_id = 'claim-882';
\set ECHO none
SELECT pg_temp.expect(close_reason, 'timeout', 'a late answer finds the conversation timed out')
  FROM cscp.conversation WHERE conversation_id = 'claim-882' \g /dev/null
\set ECHO queries
\echo '   15:45  A third claim nobody answers for its one-minute timeout: the sweep closes it the same way'
SELECT * FROM cscp.conversation_start('acme-insure', 'claim-883', 'claims-supervisor',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "Do you need a tow truck?"}, "ts": 1795275900000}',
    timeout_ms => 60000);
\echo '   15:47  The sweep runs (as the database owner)'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-21 15:47:00+00';
\set ECHO queries
SELECT cscp.sweep() -> 'conversations_timed_out' AS conversations_timed_out;
SELECT turn_index, role, content ->> 'text' AS text FROM cscp.conversation_turns('acme-insure', 'claim-883');
\set ECHO none
SELECT pg_temp.expect(string_agg(close_reason || '/' || coalesce(outcome::text, 'null'), ','), 'timeout/null',
                      'the sweep times out an unanswered conversation')
  FROM cscp.conversation WHERE conversation_id = 'claim-883' \g /dev/null
\set ECHO queries

\echo
\echo '== 33. 16:00  The hot loop in one round trip: Ana asks about her claim; cscp.message_turn records the turn,'
\echo '   sets her context''s slots and submits the read-only lookup bound to her message; the lookup runs to executed'
SET cscp.clock = '2026-11-21 16:00:00+00';
SET ROLE whatsapp_bot;
SELECT turn_index FROM cscp.conversation_start('acme-insure', 'claim-884', 'claims-supervisor',
    '{"from": "claims-supervisor", "role": "agent", "content": {"text": "How can I help with claim 881?"}, "ts": 1795276800000}');
SELECT r ->> 'outcome' AS outcome, r ->> 'turn_index' AS turn_index, r ->> 'state' AS command_state,
       r -> 'replayed' AS replayed
  FROM cscp.message_turn('acme-insure', 'claim-884', 'ana',
         '{"messageId": "wamid.A9", "from": "ana", "role": "user", "content": {"text": "Any news on my claim?"}, "ts": 1795276860000}',
         '{"active_intent": "claim_status", "active_target": "claim:881"}',
         '{"idempotency_key": "wamid.A9:status", "name": "claim_status", "payload": {"claim_id": 881}}') r;
SELECT string_agg(t.state::text, ' -> ' ORDER BY u.n) AS lookup
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL cscp.command_transition((SELECT command_id FROM cscp.command
                                         WHERE idempotency_key = 'wamid.A9:status'), u.s) t;
\echo '   WhatsApp delivers the same message again: the turn and the lookup replay; nothing is written twice'
SELECT r ->> 'outcome' AS outcome, r ->> 'state' AS command_state, r -> 'replayed' AS replayed
  FROM cscp.message_turn('acme-insure', 'claim-884', 'ana',
         '{"messageId": "wamid.A9", "from": "ana", "role": "user", "content": {"text": "Any news on my claim?"}, "ts": 1795276860000}',
         '{"active_intent": "claim_status", "active_target": "claim:881"}',
         '{"idempotency_key": "wamid.A9:status", "name": "claim_status", "payload": {"claim_id": 881}}') r;
SELECT slots, last_message_id FROM cscp.context WHERE conversation_id = 'claim-884' AND actor_id = 'ana';
\set ECHO none
SELECT pg_temp.expect(string_agg(state::text, ','), 'executed', 'message_turn submits the lookup, which runs to executed')
  FROM cscp.command WHERE conversation_id = 'claim-884' \g /dev/null
SELECT pg_temp.expect(count(*)::text, '2', 'a redelivered message_turn writes no second turn')
  FROM cscp.turn WHERE conversation_id = 'claim-884' \g /dev/null
\set ECHO none
RESET ROLE;
