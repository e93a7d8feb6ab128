-- Backup and restore (test/scripts/backup-restore.sh): one of every kind of row cscp keeps, made
-- through the API as the superuser, in the database that is then dumped.
\set ON_ERROR_STOP 1
SET cscp.clock = '2026-09-01 10:00:00+00';

-- A shard's place (scale-out): one partition of one, which holds every row; a restored shard
-- must keep it.
SELECT cscp.shard_set(1, ARRAY[0]) IS NOT NULL;

SELECT cscp.policy_set('bk', '{"detail_level": "full", "auto_confirm": ["ping"], "context_ttl": "1 hour"}') IS NOT NULL;
SELECT cscp.authority_set('bk', 'cfo', 350);
SELECT cscp.command_declare('bk', 'pay', true, false, 'high') IS NOT NULL;

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
-- Roles bound to tenants (roles belong to the cluster: both databases see them).
DO $$
BEGIN
    CREATE ROLE cscp_backup_app;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
DO $$
BEGIN
    CREATE ROLE cscp_backup_ops;
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;
SELECT cscp.grant_app('cscp_backup_app', ARRAY['bk']);
SELECT cscp.grant_operator('cscp_backup_ops', ARRAY['bk', 'bk2']);
-- A role held to an authority in a tenant (cscp.authority_binding).
SELECT cscp.authority_bind('bk', 'cscp_backup_app', 'cfo');

-- A hostile tenant (issue 30, finding 5) tries to store times beyond PostgreSQL's range, or in
-- the past, through the API and direct SQL as its application role, so that pg_restore of every
-- tenant's rows would fail: each attempt must be refused (22023), and the most extreme values
-- allowed, stored instead, must dump and restore like any others.
DO $$ BEGIN CREATE ROLE bk_evil; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
SELECT cscp.grant_app('bk_evil');
SET cscp.tenant_id = 'evil';
SET ROLE bk_evil;
DO $$
DECLARE
    attempt text;
BEGIN
    FOREACH attempt IN ARRAY ARRAY[
        $a$SELECT cscp.policy_set('evil', '{"max_ttl": "178000000 years"}')$a$,
        $a$SELECT cscp.policy_set('evil', '{"max_ttl": "2147483647 days"}')$a$,
        $a$SELECT cscp.policy_set('evil', '{"retention_closed": "1000000 years"}')$a$,
        $a$SELECT cscp.policy_set('evil', '{"context_ttl": "-1 mon 30 days 1 hour"}')$a$,
        $a$INSERT INTO cscp.policy (tenant_id, settings) VALUES ('evil', '{"max_ttl": "178000000 years"}')$a$,
        $a$SELECT cscp.conversation_start('evil', 'e-0', 'agent', '{"from": "agent", "role": "agent", "content": "q", "ts": 1}', NULL, 9223372036854775807)$a$,
        $a$INSERT INTO cscp.conversation (tenant_id, conversation_id, agent_id, timeout_ms) VALUES ('evil', 'e-0', 'agent', 9223372036854775807)$a$,
        $a$SELECT cscp.context_open('evil', 'e-0', 'mal', '{}', interval '178000000 years')$a$,
        $a$SELECT cscp.ws_put('evil', 'e-0', 'k', '1', interval '2147483647 days')$a$,
        $a$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl) VALUES ('evil', 'e-0', 'mal', '294276-12-31 23:59:59+00', '1 hour')$a$,
        $a$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at) VALUES ('evil', 'e-0', 'ns', '{}', 'infinity')$a$,
        $a$INSERT INTO cscp.working_set (tenant_id, session_id, key, value, expires_at) VALUES ('evil', 'e-0', 'k', '1', '294276-12-31 23:59:59+00')$a$
    ] LOOP
        BEGIN
            EXECUTE attempt;
            RAISE EXCEPTION 'a hostile value was not refused: %', attempt;
        EXCEPTION WHEN invalid_parameter_value THEN
            NULL;
        END;
    END LOOP;
END
$$;
SELECT cscp.policy_set('evil', '{"max_ttl": "10 years", "context_ttl": "10 years", "confirmation_ttl": "10 years",
                                 "retention_closed": "100 years", "retention_expired": "100 years",
                                 "retention_turns": "100 years", "retention_evidence": "100 years"}') IS NOT NULL;
SELECT (cscp.context_open('evil', 'e-1', 'mal', '{}', interval '10 years')).status;
SELECT state FROM cscp.command_submit('evil', 'e-1', 'mal', 'evil-1', 'pay', true, '{e-1:m1}');
SELECT turn_index FROM cscp.conversation_start('evil', 'e-1', 'agent', '{"from": "agent", "role": "agent", "content": "q", "ts": 1}', NULL, 315360000000);
SELECT cscp.doc_put('evil', 'e-1', 'ns', '{"a": 1}', 315360000);
SELECT cscp.ws_put('evil', 'e-1', 'k', '1', interval '10 years');
RESET ROLE;
RESET cscp.tenant_id;
-- LangGraph's checkpoints (a blob, a pending write), a store item with a TTL, an agent session.
SELECT cscp.checkpoint_put('bk', 'thread-1', '', 'cp-1', NULL, '{"v": 4, "channel_versions": {"messages": 1}}',
                           '{"step": 0}', '{messages}', '{1}', '{json}', ARRAY['\x5b5d'::bytea]) IS NOT NULL;
SELECT cscp.checkpoint_put_writes('bk', 'thread-1', '', 'cp-1', 'task-1', '', '{messages}', '{json}',
                                  ARRAY['\x5b315d'::bytea], '{0}');
SELECT cscp.store_put('bk', '{users,ana}', 'prefs', '{"tea": "green"}', interval '1 day');
SELECT cscp.session_add_items('bk', 'agent-1', '[{"role": "user", "content": "hi"}]');
-- An API key of the HTTPS gateway (kept in a table of its own here, so that the restored
-- database can show that the key still opens the tenant's documents).
CREATE TABLE public.bk_api_key AS SELECT cscp.api_key_create('bk', 'http-bot', ARRAY['documents:read']) AS key;
