-- The first part of `make demo`: a bank's WhatsApp assistant keeps its conversation state in
-- cscp (contexts, slots, expiry, tenancy, the sweep).  Each statement is printed before its
-- result; steps marked "refused" are meant to fail, and each outcome is checked (checks.sql).
\ir checks.sql

\echo
\echo '== 1. Install cscp; an application role for the bot and an operator role for support staff'
CREATE EXTENSION cscp;
CREATE ROLE whatsapp_bot;
CREATE ROLE support_desk;
SELECT 'application' AS whatsapp_bot, 'operator' AS support_desk
  FROM cscp.grant_app('whatsapp_bot'), cscp.grant_operator('support_desk');

\echo
\echo '== 2. The bank sets its policy: contexts live 15 minutes; card numbers may never be stored'
SELECT jsonb_pretty(cscp.policy_set('acme-bank', '{"context_ttl": "15 minutes",
        "slot_rules": {"x_card_number": "forbidden", "active_target": "derived"}}')
       - ARRAY['retention_turns', 'retention_evidence', 'turn_content', 'replay_divergence',
               'fact_budget_share', 'supersede_same_key', 'auto_confirm']) AS policy;

\echo
\echo '== 3. The demo pins the clock (superusers only), another bank has a customer, and we act as the bot for acme-bank'
SET cscp.clock = '2026-11-21 09:00:00+00';
SELECT status FROM cscp.context_open('other-bank', 'wa:+4915112345', 'jonas');
SET ROLE whatsapp_bot;
SET cscp.tenant_id = 'acme-bank';

\echo
\echo '== 4. 09:00  Maria: "I want to send 50 euros to my mum"  -> the bot opens a context'
SELECT context_id AS ctx FROM cscp.context_open('acme-bank', 'wa:+31612345678', 'maria',
        '{"active_intent": "transfer_money"}', correlation_id => 'msg-0001') \gset
SELECT status, expires_at, slots FROM cscp.context_get('acme-bank', 'wa:+31612345678', 'maria');

\echo
\echo '== 5. The bot resolves "my mum" to a payee and records the amount (identifiers only, no message text)'
SELECT status, slots FROM cscp.slot_set(:'ctx', 'x_amount_cents', '5000');
-- active_target is "derived" by policy: stored as a digest, comparable but not readable back.
SELECT status, jsonb_pretty(slots) AS slots FROM cscp.slot_set(:'ctx', 'active_target', '{"payee_id": "payee-17"}');

\echo
\echo '== 6. Refused: a bug tries to keep the card number, and an unknown slot name'
\set ON_ERROR_STOP 0
SELECT cscp.slot_set(:'ctx', 'x_card_number', '"4111111111111111"');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '22023', 'a slot forbidden by policy is refused') \g /dev/null
\set ECHO queries
\set ON_ERROR_STOP 0
SELECT cscp.slot_set(:'ctx', 'message_text', '"send 50 to mum"');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '22023', 'an unknown slot name is refused') \g /dev/null
\set ECHO queries
SELECT version, slots ? 'x_card_number' AS card_stored FROM cscp.context_get('acme-bank', 'wa:+31612345678', 'maria');
\set ECHO none
SELECT pg_temp.check(NOT (slots ? 'x_card_number'), 'the card number was not stored')
  FROM cscp.context_get('acme-bank', 'wa:+31612345678', 'maria') \g /dev/null
\set ECHO queries

\echo
\echo '== 7. 09:01  The bot asks "Send EUR 50.00 to Ana Silva?" and waits: the context is pending'
SELECT status, expires_at FROM cscp.context_transition(:'ctx', 'pending', 'confirmation asked');
\echo '   09:02  Maria: "yes"  -> the input arrived, the context is active again'
SELECT status, expires_at FROM cscp.context_transition(:'ctx', 'active', 'answered');
\echo '   Refused: the lifecycle has no edge from blocked to pending'
SELECT status FROM cscp.context_transition(:'ctx', 'blocked', 'waiting for the bank');
\set ON_ERROR_STOP 0
SELECT cscp.context_transition(:'ctx', 'pending');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '55000', 'a transition off the lifecycle is refused') \g /dev/null
\set ECHO queries
SELECT status FROM cscp.context_transition(:'ctx', 'active', 'bank answered');

\echo
\echo '== 8. Session documents: the bot keeps a small profile for this WhatsApp session (a merge, not a replace)'
SELECT cscp.doc_put('acme-bank', 'wa-session-88', 'profile', '{"language": "pt", "channel": "whatsapp"}', 3600);
SELECT cscp.doc_put('acme-bank', 'wa-session-88', 'profile', '{"last_menu": "transfers"}', 3600);
SELECT cscp.doc_get('acme-bank', 'wa-session-88', 'profile');
\set ECHO none
SELECT pg_temp.expect(cscp.doc_get('acme-bank', 'wa-session-88', 'profile')::text,
                      '{"channel": "whatsapp", "language": "pt", "last_menu": "transfers"}',
                      'a second doc_put merges into the document') \g /dev/null
\set ECHO queries

\echo
\echo '== 9. Maria goes quiet. At 09:17 the context is past its 15 minutes: expired, before any sweep'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-21 09:17:00+00';
SET ROLE whatsapp_bot;
\set ECHO queries
SELECT status, expires_at FROM cscp.context_get('acme-bank', 'wa:+31612345678', 'maria');
\set ECHO none
SELECT pg_temp.expect(status::text, 'expired', 'a context past its TTL reads expired before any sweep')
  FROM cscp.context_get('acme-bank', 'wa:+31612345678', 'maria') \g /dev/null
\set ECHO queries
\echo '   Refused: nothing may use an expired context to pick a target; the bot must ask again'
\set ON_ERROR_STOP 0
SELECT cscp.slot_set(:'ctx', 'x_amount_cents', '7000');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '55000', 'an expired context takes no slot') \g /dev/null
\set ECHO queries

\echo
\echo '== 10. Maria: "hi again"  -> a fresh context; the old one is recorded as expired'
SELECT status, slots FROM cscp.context_open('acme-bank', 'wa:+31612345678', 'maria');
SELECT tenant_id, status, reason, count(*) FROM cscp.context GROUP BY 1, 2, 3 ORDER BY 1, 2;

\echo
\echo '== 11. Refused: the bot cannot reach another tenant, through the API or through the tables'
\set ON_ERROR_STOP 0
SELECT cscp.context_get('other-bank', 'wa:+31612345678', 'maria');
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '42501', 'another tenant is refused through the API') \g /dev/null
\set ECHO queries
\set ON_ERROR_STOP 0
SET cscp.clock = '2030-01-01 00:00:00+00';
\set ON_ERROR_STOP 1
\set ECHO none
SELECT pg_temp.expect(:'SQLSTATE', '42501', 'an application role cannot move the clock') \g /dev/null
\set ECHO queries
SELECT count(*) AS other_tenants_rows FROM cscp.context WHERE tenant_id <> 'acme-bank';
\set ECHO none
SELECT pg_temp.expect(count(*)::text, '0', 'another tenant''s rows are invisible in the tables')
  FROM cscp.context WHERE tenant_id <> 'acme-bank' \g /dev/null
\set ECHO queries

\echo
\echo '== 12. Support staff look at live contexts of every bank: redacted, no slot values'
\set ECHO none
RESET ROLE;
RESET cscp.tenant_id;
\set ECHO queries
SET ROLE support_desk;
SELECT tenant_id, conversation_id, actor, status, slots FROM cscp.active_context;
\set ECHO none
SELECT pg_temp.check(bool_and(slots::text = '[]') AND count(*) = 2, 'an operator sees live contexts redacted')
  FROM cscp.active_context \g /dev/null
\set ECHO queries

\echo
\echo '== 13. Two days later, the nightly sweep (as the database owner) tidies up'
\set ECHO none
RESET ROLE;
SET cscp.clock = '2026-11-23 09:00:00+00';
\set ECHO queries
SELECT key AS swept, value AS count FROM jsonb_each(cscp.sweep()) WHERE value <> '0' ORDER BY 1;
\set ECHO none
SELECT pg_temp.expect(count(*)::text, '0', 'the sweep deletes the expired document')
  FROM cscp.document WHERE tenant_id = 'acme-bank' \g /dev/null
\set ECHO queries
