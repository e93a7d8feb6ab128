\i sql/include/helpers.sql
-- Data lifecycle: cscp.forget_conversation and cscp.forget_subject erase every row about a
-- conversation or a subject and leave a tombstone without personal data; a late write for what
-- was forgotten is refused (55000) through the API and through direct SQL; the sweep purges
-- evidence only in whole command chains, past retention_evidence, and counts every purge.
-- Rows of this file belong to tenants 'fg' and 'fr'.
SET cscp.clock = '2026-07-01 09:00:00+00';
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- Rows of every table that name a conversation (or session) or a subject.
CREATE FUNCTION pg_temp.rows_of(tenant text, conv text, subject text)
RETURNS TABLE (tbl text, n bigint) LANGUAGE sql AS $$
    SELECT 'context', count(*) FROM cscp.context WHERE tenant_id = tenant AND (conversation_id = conv OR actor_id = subject)
    UNION ALL SELECT 'command', count(*) FROM cscp.command WHERE tenant_id = tenant AND (conversation_id = conv OR actor_id = subject)
    UNION ALL SELECT 'frame', count(*) FROM cscp.frame WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'answer', count(*) FROM cscp.answer WHERE tenant_id = tenant AND (conversation_id = conv OR answered_by = subject)
    UNION ALL SELECT 'evidence', count(*) FROM cscp.evidence WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'conversation', count(*) FROM cscp.conversation WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'turn', count(*) FROM cscp.turn WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'event', count(*) FROM cscp.event WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'document', count(*) FROM cscp.document WHERE tenant_id = tenant AND session_id = conv
    UNION ALL SELECT 'working_set', count(*) FROM cscp.working_set WHERE tenant_id = tenant AND session_id = conv
    UNION ALL SELECT 'environment', count(*) FROM cscp.environment WHERE tenant_id = tenant AND session_id = conv
    UNION ALL SELECT 'inspection_log', count(*) FROM cscp.inspection_log WHERE tenant_id = tenant AND conversation_id = conv
    UNION ALL SELECT 'identity', count(*) FROM cscp.identity WHERE tenant_id = tenant AND subject_id = subject
    UNION ALL SELECT 'fact', count(*) FROM cscp.fact WHERE tenant_id = tenant AND subject_id = subject
$$;
CREATE FUNCTION pg_temp.cmd(tenant text, key text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.command_id FROM cscp.command c WHERE c.tenant_id = tenant AND c.idempotency_key = key
$$;
-- A conversation of tenant fg with one of everything: a context, a command run to the end (its
-- frame, answer and evidence), turns and events, a document, working set, environment, an
-- operator's inspection.
CREATE FUNCTION pg_temp.populate(tenant text, conv text, actor text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cscp.context_open(tenant, conv, actor, '{"active_intent": "pay"}');
    PERFORM cscp.command_submit(tenant, conv, actor, conv || ':k1', 'pay', true, ARRAY[conv || ':m1'], '{"iban": "NL00"}');
    PERFORM cscp.confirm(tenant, conv, actor, conv || ':m2', true);
    PERFORM cscp.command_transition(pg_temp.cmd(tenant, conv || ':k1'), s)
       FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) s;
    PERFORM cscp.conversation_start(tenant, conv, 'agent', jsonb_build_object('from', 'agent', 'role', 'agent', 'content', 'hello', 'ts', 1));
    PERFORM cscp.conversation_exchange(tenant, conv, jsonb_build_object('from', actor, 'role', 'user', 'content', 'my card is 4111', 'ts', 2));
    PERFORM cscp.doc_put(tenant, conv, 'cart', '{"items": 2}', 600);
    PERFORM cscp.ws_put(tenant, conv, 'draft', '"refund"');
    PERFORM cscp.env_set(tenant, conv, '{"device": "phone"}');
    PERFORM cscp.show_active_context(tenant, conv);
    RETURN 'populated';
END
$$;

---------------------------------------------------------------------------------------------------
-- 1. forget_conversation.
SELECT pg_temp.populate('fg', 'conv-gone', 'ana');
SELECT pg_temp.populate('fg', 'conv-kept', 'ana');
SELECT tbl, n FROM pg_temp.rows_of('fg', 'conv-gone', NULL) WHERE n > 0 ORDER BY tbl;

-- Every row of the conversation and its session goes; the counts say how many of each.
SELECT cscp.forget_conversation('fg', 'conv-gone') AS erased;
SELECT tbl, n FROM pg_temp.rows_of('fg', 'conv-gone', NULL) WHERE n > 0 ORDER BY tbl;
-- The other conversation of the same person and tenant is untouched.
SELECT tbl, n FROM pg_temp.rows_of('fg', 'conv-kept', NULL) WHERE n > 0 ORDER BY tbl;
-- The chains left verify; no invariant is broken.
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('fg');
SELECT count(*) AS invariant_problems FROM cscp.check_invariants('fg');

-- The tombstone: tenant, kind, a hash, time, role and counts; never the id.
SELECT tenant_id, kind, id_hash = cscp.forget_hash('fg', 'conversation', 'conv-gone') AS hashed,
       forgotten_at, forgotten_by, counts ->> 'turns' AS turns
  FROM cscp.tombstone WHERE tenant_id = 'fg';
SELECT count(*) AS tombstones_naming_the_id FROM cscp.tombstone t WHERE t::text LIKE '%conv-gone%';

-- Evidence goes before its retention only with what an erasure forgets: a row whose conversation
-- (or subject) has a tombstone may be deleted, whoever deletes it (the erasure's own deletes are
-- judged so: the tombstone comes first); any other row is kept (55000), and an application role
-- deletes none (42501).  (A row of the forgotten conversation, written with the triggers off.)
SET session_replication_role = replica;
INSERT INTO cscp.evidence (tenant_id, conversation_id, seq, stage, event_type, created_at, hash)
VALUES ('fg', 'conv-gone', 1, 'late', 'late', cscp.now(), '');
RESET session_replication_role;
SELECT try($$DELETE FROM cscp.evidence WHERE tenant_id = 'fg' AND conversation_id = 'conv-kept'$$) AS kept_conversation;
CREATE ROLE fg_app;
SELECT cscp.grant_app('fg_app') IS NOT NULL AS granted;
SET ROLE fg_app;
SET cscp.tenant_id = 'fg';
SELECT try($$DELETE FROM cscp.evidence WHERE tenant_id = 'fg' AND conversation_id = 'conv-gone'$$) AS as_application;
RESET cscp.tenant_id;
RESET ROLE;
DROP OWNED BY fg_app;
DROP ROLE fg_app;
WITH gone AS (DELETE FROM cscp.evidence WHERE tenant_id = 'fg' AND conversation_id = 'conv-gone' RETURNING 1)
SELECT count(*) AS forgotten_conversation FROM gone;

-- A late write is refused, with a hint, through the API and through direct SQL; nothing changes.
SELECT try($$SELECT cscp.context_open('fg', 'conv-gone', 'ana')$$);
SELECT try($$SELECT cscp.conversation_start('fg', 'conv-gone', 'agent', '{"from": "agent", "role": "agent", "content": "hi", "ts": 3}')$$);
SELECT try($$SELECT cscp.conversation_exchange('fg', 'conv-gone', '{"from": "ana", "role": "user", "content": "hi", "ts": 3}')$$);
SELECT try($$SELECT cscp.doc_put('fg', 'conv-gone', 'cart', '{"items": 3}', 600)$$);
SELECT try($$SELECT cscp.ws_put('fg', 'conv-gone', 'draft', '"again"')$$);
SELECT try($$SELECT cscp.env_set('fg', 'conv-gone', '{}')$$);
SELECT try($$SELECT cscp.show_active_context('fg', 'conv-gone')$$);
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('fg', cscp.routing_id('conv-gone'), 'conv-gone', 'ana', cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating)
             VALUES ('fg', 'late', 'conv-gone', 'ana', 'pay', true)$$);
SELECT try($$INSERT INTO cscp.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content, content_hash, content_size, ts, event_id)
             VALUES ('fg', 'conv-gone', 0, 'm', 'user', 'ana', '"x"', '', 0, 1, '')$$);
SELECT try($$UPDATE cscp.document SET session_id = 'conv-gone' WHERE tenant_id = 'fg' AND session_id = 'conv-kept'$$);
SELECT tbl, n FROM pg_temp.rows_of('fg', 'conv-gone', NULL) WHERE n > 0 ORDER BY tbl;
-- Another tenant's conversation of the same id is another conversation.
SELECT (cscp.context_open('fg-other', 'conv-gone', 'ana')).status AS other_tenant;

-- Forgetting again erases nothing more; the tombstone keeps the totals.
SELECT cscp.forget_conversation('fg', 'conv-gone') ->> 'turns' AS turns_again;
SELECT count(*) AS tombstones, sum((counts ->> 'turns')::int) AS turns FROM cscp.tombstone WHERE tenant_id = 'fg';

---------------------------------------------------------------------------------------------------
-- 2. forget_subject: identity, facts (whole chains), and what the subject did as an actor.
SELECT cscp.identity_set('fg', 'ana', '{"user_name": "Ana", "authority": "employee"}');
SELECT (cscp.fact_write('fg', 'ana', 'home-1', 'home', '"Porto"')).fact_id;
SELECT (cscp.fact_write('fg', 'ana', 'home-2', 'home', '"Lisbon"', supersedes => 'home-1')).fact_id;
SELECT (cscp.fact_write('fg', 'bea', 'home-1', 'home', '"Faro"')).fact_id;
SELECT tbl, n FROM pg_temp.rows_of('fg', NULL, 'ana') WHERE n > 0 ORDER BY tbl;
SELECT cscp.forget_subject('fg', 'ana') AS erased;
SELECT tbl, n FROM pg_temp.rows_of('fg', NULL, 'ana') WHERE n > 0 ORDER BY tbl;
SELECT subject_id, fact_id FROM cscp.fact WHERE tenant_id = 'fg' ORDER BY 1, 2;
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('fg');
SELECT count(*) AS invariant_problems FROM cscp.check_invariants('fg');
SELECT try($$SELECT cscp.identity_set('fg', 'ana', '{"user_name": "Ana"}')$$);
SELECT try($$SELECT cscp.fact_write('fg', 'ana', 'home-3', 'home', '"Braga"')$$);
SELECT try($$SELECT cscp.context_open('fg', 'conv-new', 'ana')$$);
SELECT try($$INSERT INTO cscp.identity (tenant_id, subject_id, identity) VALUES ('fg', 'ana', '{}')$$);

-- Bad input: 22023 (42501 for a tenant the session does not act for is in test/pgtap).
SELECT try($$SELECT cscp.forget_conversation('fg', NULL)$$);
SELECT try($$SELECT cscp.forget_conversation('fg', '')$$);
SELECT try($$SELECT cscp.forget_subject(NULL, 'ana')$$);
SELECT try($$SELECT cscp.forget_subject('*', 'ana')$$);

---------------------------------------------------------------------------------------------------
-- 3. Retention: the sweep purges a command with its whole evidence chain (and its answers and
-- frames) once it is terminal and older than retention_evidence; a command still under way keeps
-- its chain, however old.  Every purge is counted.
-- (The sweep counts over the whole database: what earlier tests left is made inert first.)
SELECT settle();
SELECT cscp.policy_set('fr', '{"retention_evidence": "1 day", "retention_turns": "1 day", "retention_closed": "1 day"}') IS NOT NULL AS policy;
SELECT pg_temp.populate('fr', 'old', 'cy');
SELECT result FROM cscp.conversation_close('fr', 'old', '{"from": "agent", "role": "agent", "content": "bye", "ts": 3}');
SELECT (cscp.context_open('fr', 'open', 'cy')).status;
SELECT state FROM cscp.command_submit('fr', 'open', 'cy', 'open:k1', 'lookup', false, '{open:m1}');
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('fr', 'open:k1'), 'authz_pending');
SET cscp.clock = '2026-07-03 09:00:00+00';
SELECT s ->> 'commands_purged' AS commands, s ->> 'evidence_purged' AS evidence,
       s ->> 'answers_purged' AS answers, s ->> 'frames_purged' AS frames,
       s ->> 'conversations_purged' AS conversations, s ->> 'turns_purged' AS turns,
       s ->> 'events_purged' AS events, s ->> 'contexts_purged' AS contexts
  FROM cscp.sweep() s WHERE true;
SELECT idempotency_key, state FROM cscp.command WHERE tenant_id = 'fr' ORDER BY 1;
SELECT count(*) AS evidence_left FROM cscp.evidence WHERE tenant_id = 'fr' AND command_id IS NOT NULL;
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('fr');
SELECT count(*) AS invariant_problems FROM cscp.check_invariants('fr');

---------------------------------------------------------------------------------------------------
-- 4. A bulk load: one transaction writing 6,000 sessions' documents takes the erasure locks of
-- 64 ids, then one lock of its tenant, not one per session (which ran out of the shared lock
-- table at a few thousand).  The locks are advisory lock tags of cscp's own classes (field4,
-- pg_locks.objsubid): 25446 an id's, 25460 a tenant's; no SQL advisory lock (1 or 2) is taken.
BEGIN;
SELECT count(cscp.doc_put('fr-bulk', 's' || i, 'profile', '{"n": 1}', 3600)) AS documents
  FROM generate_series(1, 6000) i;
SELECT count(*) FILTER (WHERE objsubid = 25446) AS id_locks,
       count(*) FILTER (WHERE objsubid = 25460 AND mode = 'RowExclusiveLock') AS tenant_locks,
       count(*) FILTER (WHERE objsubid NOT IN (25446, 25460)) AS other_advisory_locks
  FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
ROLLBACK;
-- An erasure holds its id's lock exclusively and its tenant's in ShareLock mode, until commit.
BEGIN;
SELECT cscp.forget_conversation('fr-bulk', 'gone') ->> 'contexts' AS contexts_erased;
SELECT objsubid, mode, count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() GROUP BY 1, 2 ORDER BY 1, 2;
ROLLBACK;

---------------------------------------------------------------------------------------------------
-- 5. The tombstones a backend knows (it looks up only an id whose key is among them), as the
-- application role: an erasure rolled back above leaves no tombstone, and the same conversation is
-- written again; one committed in this session is known at the next write, through the API and
-- through direct SQL; the same id in another tenant, and another id, are not refused.
CREATE ROLE fg_late;
SELECT cscp.grant_app('fg_late', '{fg}') IS NOT NULL AS granted;
SET ROLE fg_late;
SET cscp.tenant_id = 'fg';
SELECT (cscp.context_open('fg', 'late-1', 'cy')).status AS before_erasure;
BEGIN;
SELECT cscp.forget_conversation('fg', 'late-2') IS NOT NULL AS erased;
ROLLBACK;
SELECT (cscp.context_open('fg', 'late-2', 'cy')).status AS after_rollback;
SELECT cscp.forget_conversation('fg', 'late-1') ->> 'contexts' AS contexts_erased;
SELECT try($$SELECT cscp.context_open('fg', 'late-1', 'cy')$$) AS api_write;
SELECT try($$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
             VALUES ('fg', 'late-1', 'profile', '{}', cscp.now() + interval '1 hour')$$) AS direct_write;
SELECT (cscp.context_open('fg', 'late-3', 'cy')).status AS other_conversation;
RESET ROLE;
RESET cscp.tenant_id;
DROP OWNED BY fg_late;
DROP ROLE fg_late;
SELECT (cscp.context_open('fr', 'late-1', 'cy')).status AS other_tenant;
-- Leave no policy for the suites after this one.
DELETE FROM cscp.policy WHERE tenant_id = 'fr';
