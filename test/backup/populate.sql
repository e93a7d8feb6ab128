-- Backup and restore (test/scripts/backup-restore.sh): one of every kind of row cscp keeps, made
-- through the API as the superuser, in the database that is then dumped.
\set ON_ERROR_STOP 1
SET cscp.clock = '2026-09-01 10:00:00+00';

-- A shard's place (scale-out): one partition of one, which holds every row; a restored shard
-- must keep it.
SELECT cscp.shard_set(1, ARRAY[0]) IS NOT NULL;

SELECT cscp.policy_set('bk', '{"detail_level": "full", "auto_confirm": ["ping"], "context_ttl": "1 hour"}') IS NOT NULL;
SELECT cscp.authority_set('bk', 'cfo', 350);

-- Contexts in every status; commands run to the end, auto-confirmed, refused, waiting for a
-- confirmation and for an approval; answers; a compensation.
SELECT (cscp.context_open('bk', 'c-1', 'ana', '{"active_intent": "pay", "x_note": "n"}')).status;
SELECT state FROM cscp.command_submit('bk', 'c-1', 'ana', 'pay-1', 'pay', true, '{c-1:m1}', '{"amount": 10}', 'acct:1');
SELECT outcome FROM cscp.confirm('bk', 'c-1', 'ana', 'c-1:m2', true, 'acct:1');
SELECT string_agg(t.state::text, ' ' ORDER BY n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, n),
       LATERAL cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'pay-1'), s) t;
SELECT state FROM cscp.command_submit('bk', 'c-1', 'ana', 'ping-1', 'ping', true, '{c-1:m3}');
SELECT state FROM cscp.command_submit('bk', 'c-1', 'ana', 'pay-2', 'pay', true, '{c-1:m4}', '{"amount": 20}');
SELECT outcome FROM cscp.confirm('bk', 'c-1', 'ana', 'c-1:m5', false);
SELECT state FROM cscp.command_submit('bk', 'c-1', 'ana', 'pay-3', 'pay', true, '{c-1:m6}', '{"amount": 30}');
SELECT (cscp.context_transition((cscp.context_open('bk', 'c-2', 'bob')).context_id, 'closed')).status;
SELECT (cscp.context_open('bk', 'c-3', 'cy', '{}', interval '1 minute')).status;

-- A conversation closed, one open; documents, working set, environment.
SELECT turn_index FROM cscp.conversation_start('bk', 'c-1', 'agent', '{"from": "agent", "role": "agent", "content": {"text": "hello"}, "ts": 1}');
SELECT outcome FROM cscp.conversation_exchange('bk', 'c-1', '{"from": "ana", "role": "user", "content": {"text": "hi"}, "ts": 2}');
SELECT turn_index FROM cscp.conversation_start('bk', 'c-4', 'agent', '{"from": "agent", "role": "agent", "content": "q", "ts": 1}', NULL, 600000);
SELECT result FROM cscp.conversation_close('bk', 'c-4', '{"from": "agent", "role": "agent", "content": "bye", "ts": 2}', '{"ok": true}');
SELECT cscp.doc_put('bk', 'c-1', 'cart', '{"items": 2}', 3600);
SELECT cscp.ws_put('bk', 'c-1', 'draft', '{"to": "payee-1"}');
SELECT cscp.env_set('bk', 'c-1', '{"device": "phone"}');

-- Identity, facts with a supersession chain, an operator's inspection, a forgotten conversation.
SELECT cscp.identity_set('bk', 'ana', '{"user_name": "Ana", "authority": "employee"}');
SELECT (cscp.fact_write('bk', 'ana', 'home-1', 'home', '"Porto"')).fact_id;
SELECT (cscp.fact_write('bk', 'ana', 'home-2', 'home', '"Lisbon"', supersedes => 'home-1')).fact_id;
SELECT (cscp.fact_write('bk', 'ana', 'rule-1', 'travel', '"economy only"', '{"type": "policy", "authority": "cfo"}', is_constraint => true)).fact_id;
SELECT count(*) FROM cscp.show_active_context('bk', 'c-1');
SELECT (cscp.context_open('bk', 'c-gone', 'dan')).status;
SELECT cscp.forget_conversation('bk', 'c-gone') IS NOT NULL;
-- A second tenant.
SELECT (cscp.context_open('bk2', 'z-1', 'zoe')).status;
SELECT cscp.doc_put('bk2', 'z-1', 'ns', '{"a": 1}', 3600);
-- An API key of the HTTPS gateway (kept in a table of its own here, so that the restored
-- database can show that the key still opens the tenant's documents).
CREATE TABLE public.bk_api_key AS SELECT cscp.api_key_create('bk', 'http-bot', ARRAY['documents:read']) AS key;
