\i sql/include/helpers.sql
-- cscp.check_invariants: nothing to report for a healthy tenant that used every part of cscp;
-- each kind of violation, planted by the superuser around the triggers
-- (session_replication_role = replica, cscp.context_live written by hand) in a transaction
-- rolled back, is found.
-- Rows of this file belong to tenants 'inv' and 'inv-other'; random ids are masked.
SET cscp.clock = '2026-06-01 09:00:00+00';
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- What check_invariants reports for tenant 'inv', ids masked.
CREATE FUNCTION pg_temp.found(tenant text DEFAULT 'inv')
RETURNS TABLE (kind text, object_id text, detail text)
LANGUAGE sql AS $$
    SELECT i.kind,
           regexp_replace(i.object_id, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
           regexp_replace(regexp_replace(i.detail,
               '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<uuid>', 'g'),
               'evidence_id [0-9]+', 'evidence_id <n>', 'g')
      FROM cscp.check_invariants(tenant) i
     ORDER BY 1, 2, 3
$$;
CREATE FUNCTION pg_temp.cmd(key text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.command_id FROM cscp.command c WHERE c.tenant_id = 'inv' AND c.idempotency_key = key
$$;

---------------------------------------------------------------------------------------------------
-- A healthy tenant: contexts, a command run to the end, one refused, one auto-confirmed, a
-- compensation, a conversation with turns and a close, facts with a supersession chain.
SELECT cscp.policy_set('inv', '{"auto_confirm": ["ping"]}') IS NOT NULL AS policy_set;
SELECT (cscp.context_open('inv', 'conv-1', 'alice')).status;
SELECT state FROM cscp.command_submit('inv', 'conv-1', 'alice', 'pay', 'transfer', true, '{m1}', '{"amount": 5}');
SELECT outcome FROM cscp.confirm('inv', 'conv-1', 'alice', 'm2', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('pay'), s.st) t;
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('pay'), 'started');
SELECT state FROM cscp.command_submit('inv', 'conv-1', 'alice', 'ping-1', 'ping', true, '{m3}');
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,failed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('ping-1'), s.st) t;
SELECT state FROM cscp.command_recover(pg_temp.cmd('pay'), 'compensate', 'undo-pay');
SELECT outcome FROM cscp.confirm('inv', 'conv-1', 'alice', 'm4', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('undo-pay'), s.st) t;
-- The compensation's execution compensated the command it aims at.
SELECT state FROM cscp.command_status(pg_temp.cmd('pay'));
SELECT turn_index FROM cscp.conversation_start('inv', 'conv-1', 'agent-1',
       '{"from": "agent-1", "role": "agent", "content": "hello", "ts": 1}');
SELECT outcome FROM cscp.conversation_exchange('inv', 'conv-1',
       '{"from": "alice", "role": "user", "content": "hi", "ts": 2}');
SELECT result FROM cscp.conversation_close('inv', 'conv-1',
       '{"from": "agent-1", "role": "agent", "content": "bye", "ts": 3}');
SELECT (cscp.fact_write('inv', 'alice', 'home-1', 'home', '"Porto"')).is_valid;
SELECT (cscp.fact_write('inv', 'alice', 'home-2', 'home', '"Lisbon"', supersedes => 'home-1')).is_valid;
SELECT (cscp.fact_write('inv', 'alice', 'home-3', 'home', '"Braga"', supersedes => 'home')).is_valid;
SELECT (cscp.fact_write('inv', 'alice', 'pet', 'pet', '"cat"')).is_valid;
SELECT (cscp.context_open('inv', 'conv-2', 'bob')).status;

-- Nothing to report, for the tenant or for every tenant of this file.
SELECT * FROM pg_temp.found();
SELECT count(*) AS problems FROM cscp.check_invariants() WHERE tenant_id LIKE 'inv%';
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('inv');

---------------------------------------------------------------------------------------------------
-- Each violation, planted around the triggers and rolled back.

-- multiple_live_contexts: without the trigger (which keeps cscp.context_live, whose key is the
-- rule), a second live context; cscp.context_live does not name it.
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('inv', cscp.routing_id('conv-2'), 'conv-2', 'bob', cscp.now() + interval '1 hour', interval '1 hour');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- unlisted_live_context: a live context whose row in cscp.context_live is gone; a row there
-- naming a context closed around the trigger; a row expecting its context later than it does.
BEGIN;
DELETE FROM cscp.context_live WHERE tenant_id = 'inv' AND conversation_id = 'conv-2';
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.context SET status = 'closed' WHERE tenant_id = 'inv' AND conversation_id = 'conv-2';
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
UPDATE cscp.context_live SET expires_at = expires_at + interval '1 day'
 WHERE tenant_id = 'inv' AND conversation_id = 'conv-2';
SELECT * FROM pg_temp.found();
ROLLBACK;

-- unlisted_command: a finished command whose row in cscp.command_retired is gone; a command in
-- its confirmation window whose row in cscp.command_window is gone; a row there naming no
-- command; a row giving another time than the command's.
BEGIN;
DELETE FROM cscp.command_retired WHERE command_id = pg_temp.cmd('pay');
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
SELECT state FROM cscp.command_submit('inv', 'conv-2', 'bob', 'win-1', 'transfer', true, '{m9}');
SELECT * FROM pg_temp.found();
DELETE FROM cscp.command_window WHERE command_id = pg_temp.cmd('win-1');
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
INSERT INTO cscp.command_window VALUES ('inv', 'conv-1', cscp.routing_id('conv-1'), cscp.now(), NULL, 'approval');
UPDATE cscp.command_retired SET retired_at = retired_at - interval '1 day'
 WHERE command_id = pg_temp.cmd('ping-1');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- unexplained_command_state: a state changed without its transition (and so without evidence).
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET state = 'canceled' WHERE command_id = pg_temp.cmd('ping-1');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- unexplained_command_state: a well-hashed evidence row recording a step the lifecycle lacks
-- (the chain verifies, its path does not).
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET state = 'started' WHERE command_id = pg_temp.cmd('ping-1');
DELETE FROM cscp.command_retired WHERE command_id = pg_temp.cmd('ping-1');
WITH last AS (SELECT * FROM cscp.evidence WHERE command_id = pg_temp.cmd('ping-1') ORDER BY seq DESC LIMIT 1),
     fake AS (SELECT (row(l.tenant_id, 0, l.conversation_id, l.command_id, l.seq + 1, 'started',
                          'execution.started', 'failed', 'started', l.message_ids, l.context_ref,
                          NULL, NULL, NULL, l.created_at, l.hash, ''))::cscp.evidence AS e FROM last l)
INSERT INTO cscp.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                           to_state, message_ids, context_ref, created_at, prev_hash, hash)
SELECT (f.e).tenant_id, (f.e).conversation_id, (f.e).command_id, (f.e).seq, (f.e).stage,
       (f.e).event_type, (f.e).from_state, (f.e).to_state, (f.e).message_ids, (f.e).context_ref,
       (f.e).created_at, (f.e).prev_hash, cscp.evidence_hash(f.e)
  FROM fake f;
SELECT count(*) AS evidence_problems FROM cscp.evidence_verify('inv');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- start_without_confirmation: a mutating command that ran, its confirmation erased.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET confirmed_at = NULL WHERE command_id = pg_temp.cmd('pay');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- start_without_confirmation: claimed auto-confirmed after the fact (its acceptance records no policy).
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET auto_confirm = true WHERE command_id = pg_temp.cmd('undo-pay');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- start_without_confirmation: confirmed_at set, but the evidence never saw a confirmation.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET auto_confirm = false, confirmed_at = cscp.now() WHERE command_id = pg_temp.cmd('ping-1');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- start_without_authorization: a command that ran, its authorization erased.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET authorized_at = NULL WHERE command_id = pg_temp.cmd('ping-1');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- broken_evidence_chain: a row altered, a row deleted.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.evidence SET reason_code = 'forged' WHERE command_id = pg_temp.cmd('pay') AND seq = 2;
DELETE FROM cscp.evidence WHERE command_id = pg_temp.cmd('ping-1') AND seq = 3;
SELECT * FROM pg_temp.found();
ROLLBACK;

-- turn_index_gap: a turn deleted from the middle; then the last one too, so the conversation's
-- counter no longer matches.
BEGIN;
DELETE FROM cscp.turn WHERE tenant_id = 'inv' AND conversation_id = 'conv-1' AND turn_index = 1;
SELECT * FROM pg_temp.found();
DELETE FROM cscp.turn WHERE tenant_id = 'inv' AND conversation_id = 'conv-1' AND turn_index = 2;
SELECT * FROM pg_temp.found();
ROLLBACK;

-- valid_fact_with_valid_successor: a superseded fact made valid again.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.fact SET is_valid = true, superseded_by = NULL
 WHERE tenant_id = 'inv' AND subject_id = 'alice' AND fact_id = 'home-2';
SELECT * FROM pg_temp.found();
ROLLBACK;

-- cyclic_fact_chain: the head of the chain made to be superseded by its first fact.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.fact SET is_valid = false, superseded_by = 'home-1'
 WHERE tenant_id = 'inv' AND subject_id = 'alice' AND fact_id = 'home-3';
UPDATE cscp.fact SET supersedes = 'home-3'
 WHERE tenant_id = 'inv' AND subject_id = 'alice' AND fact_id = 'home-1';
SELECT * FROM pg_temp.found();
-- cscp's own chain walker agrees: the chain loops.
SELECT try($$SELECT cscp.fact_current('inv', 'alice', 'home-2')$$);
ROLLBACK;

-- foreign_pending_slot: bob's context in conv-2 made to wait for alice's command of conv-1.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.context
   SET slots = slots || jsonb_build_object('pending_confirmation',
                            jsonb_build_object('command_id', pg_temp.cmd('pay'), 'idempotency_key', 'pay',
                                               'target_fingerprint', NULL, 'expires_at', '2026-06-01T09:05:00Z'))
 WHERE tenant_id = 'inv' AND conversation_id = 'conv-2';
SELECT * FROM pg_temp.found();
ROLLBACK;

-- multiple_waiting_commands: every command of conv-1's context made to wait for confirmation.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET state = 'confirmation_required', window_expires_at = cscp.now() + interval '5 minutes'
 WHERE tenant_id = 'inv' AND conversation_id = 'conv-1' AND context_id IS NOT NULL;
SELECT kind, object_id, regexp_replace(detail, ': .*', '') AS detail FROM pg_temp.found()
 WHERE kind = 'multiple_waiting_commands';
ROLLBACK;

-- confirmed_without_answer: the yes that confirmed a command erased.
BEGIN;
DELETE FROM cscp.answer WHERE tenant_id = 'inv' AND command_id = pg_temp.cmd('pay');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- moved_after_context_ended: the context of conv-1 made to have expired before its commands
-- moved on (every step to confirmed, authz_pending, authorized or started is then late).
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.context SET expires_at = cscp.now() - interval '1 minute'
 WHERE tenant_id = 'inv' AND conversation_id = 'conv-1';
SELECT kind, count(*) FROM pg_temp.found() GROUP BY kind ORDER BY kind;
SELECT detail FROM pg_temp.found() WHERE detail LIKE 'evidence seq 3 records confirmation_required%' LIMIT 1;
ROLLBACK;

-- unbounded_expiry: a live context that never expires, a document beyond max_ttl (30 days by
-- default), a working-set item that never expires.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.context SET expires_at = 'infinity' WHERE tenant_id = 'inv' AND conversation_id = 'conv-2';
INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
VALUES ('inv', 's-1', 'cart', '{}', cscp.now() + interval '1 year');
INSERT INTO cscp.working_set (tenant_id, session_id, key, value, expires_at)
VALUES ('inv', 's-1', 'focus', '1', 'infinity');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- max_ttl bounds what a write may ask for: lowering it leaves the rows written before healthy (a
-- document of 20 days under the default 30, then max_ttl 1 day).  Rows written after every policy
-- change (the clock moved past those of other tests' '*' changes too) are held to the new bound.
BEGIN;
SELECT cscp.doc_put('inv', 's-2', 'cart', '{"n": 1}', 20 * 86400);
SELECT cscp.policy_set('inv', '{"max_ttl": "1 day"}') ->> 'max_ttl' AS max_ttl;
SELECT * FROM pg_temp.found();
SET LOCAL session_replication_role = replica;
SET LOCAL cscp.clock = '2035-01-01 09:00:00+00';
INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
VALUES ('inv', 's-3', 'cart', '{}', cscp.now() + interval '1 year'),
       ('inv', 's-4', 'cart', '{}', cscp.now() + interval '2 days'),
       ('inv', 's-5', 'cart', '{}', cscp.now() + interval '1 day');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- frame_hash_mismatch: a frame rewritten (its generated hash follows the state, so the command's
-- context_ref no longer matches it); a stored hash that is not its state's.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.frame SET state = state || '{"status": "forged"}'
 WHERE tenant_id = 'inv' AND frame_id = (SELECT frame_id FROM cscp.command WHERE command_id = pg_temp.cmd('pay'));
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
ALTER TABLE cscp.frame ALTER COLUMN context_hash DROP EXPRESSION;
SET LOCAL session_replication_role = replica;
UPDATE cscp.frame SET context_hash = 'sha256:00'
 WHERE tenant_id = 'inv' AND frame_id = (SELECT frame_id FROM cscp.command WHERE command_id = pg_temp.cmd('ping-1'));
SELECT * FROM pg_temp.found();
ROLLBACK;

-- unframed_command: a mutating command that ran, its frame taken away.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET frame_id = NULL, context_ref = NULL WHERE command_id = pg_temp.cmd('pay');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- invalid_recovery: a compensation that skipped confirmation (not mutating); a recovery aimed
-- at a command of another conversation.
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET mutating = false WHERE command_id = pg_temp.cmd('undo-pay');
SELECT * FROM pg_temp.found();
ROLLBACK;
BEGIN;
SELECT state FROM cscp.command_submit('inv', 'conv-2', 'bob', 'bob-1', 'lookup', false, '{m20}');
SET LOCAL session_replication_role = replica;
UPDATE cscp.command SET target_command_id = pg_temp.cmd('bob-1') WHERE command_id = pg_temp.cmd('undo-pay');
SELECT * FROM pg_temp.found();
ROLLBACK;

-- Another tenant's violation is not this tenant's; a call for every tenant finds it.
BEGIN;
SELECT (cscp.fact_write('inv-other', 'carol', 'x-1', 'k', '1')).is_valid;
SELECT (cscp.fact_write('inv-other', 'carol', 'x-2', 'k', '2', supersedes => 'x-1')).is_valid;
SET LOCAL session_replication_role = replica;
UPDATE cscp.fact SET is_valid = true, superseded_by = NULL WHERE tenant_id = 'inv-other' AND fact_id = 'x-1';
SELECT count(*) AS inv_problems FROM cscp.check_invariants('inv');
SELECT kind, tenant_id, object_id FROM cscp.check_invariants() WHERE tenant_id LIKE 'inv%';
ROLLBACK;

-- Bad input: 22023, as for every id.
SELECT try($$SELECT * FROM cscp.check_invariants('')$$);
SELECT try($$SELECT * FROM cscp.check_invariants(repeat('x', 300))$$);
RESET session_replication_role;
