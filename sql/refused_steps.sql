\i sql/include/helpers.sql
-- A refused direct-SQL step leaves evidence a rollback cannot erase (SMCL VI.B, XIII): the
-- trigger that refuses a command's or a context's step writes one LOG line to the server log
-- (shown here by client_min_messages) naming the role, the tenant, the row and the step, and
-- then raises; the transaction's rows, evidence included, roll back, the line stays.
SET timezone = 'UTC';
SET cscp.clock = '2026-09-01 09:00:00+00';
\set SHOW_CONTEXT never
CREATE ROLE rs_app;
SELECT cscp.grant_app('rs_app', '{rs}');
CREATE FUNCTION pg_temp.fixed_id(conv text, n int) RETURNS uuid LANGUAGE sql AS $$
    SELECT (lpad(to_hex(cscp.routing_conversation_hash(conv)), 8, '0') || '-0000-4000-8000-'
            || lpad(n::text, 12, '0'))::uuid
$$;
CREATE TEMP TABLE ids AS SELECT pg_temp.fixed_id('c1', 1) AS cmd, pg_temp.fixed_id('c2', 2) AS ctx;
GRANT SELECT ON ids TO rs_app;
SET cscp.tenant_id = 'rs';
-- The session's own role, so that the line names no other.
SET SESSION AUTHORIZATION rs_app;
INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id, command_name,
                          mutating, state)
SELECT 'rs', cmd, 'k1', 'c1', 'ana', 'transfer', true, 'received' FROM ids;
INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
SELECT 'rs', ctx, 'c2', 'ana', cscp.now() + interval '30 minutes', interval '30 minutes' FROM ids;

SET client_min_messages = log;
-- Commands: a step the lifecycle does not have, a step its rules refuse, a birth past
-- canonicalized, the same state again.
UPDATE cscp.command SET state = 'started' WHERE idempotency_key = 'k1';
UPDATE cscp.command SET state = 'canonicalized' WHERE idempotency_key = 'k1';
INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id, command_name,
                          mutating, state)
SELECT 'rs', pg_temp.fixed_id('c1', 3), 'k3', 'c1', 'ana', 'transfer', true, 'executed';
UPDATE cscp.command SET state = 'received' WHERE idempotency_key = 'k1';
-- Contexts: a step the lifecycle does not have, and any step of a closed context.
UPDATE cscp.context SET status = 'blocked' WHERE conversation_id = 'c2';
UPDATE cscp.context SET status = 'pending' WHERE conversation_id = 'c2';
UPDATE cscp.context SET status = 'closed' WHERE conversation_id = 'c2';
UPDATE cscp.context SET status = 'active' WHERE conversation_id = 'c2';
RESET client_min_messages;

-- The refusals changed nothing: the command is still received, with no evidence of a step.
SELECT state, (SELECT count(*) FROM cscp.evidence e WHERE e.command_id = c.command_id) AS evidence_rows
  FROM cscp.command c WHERE idempotency_key = 'k1';
SELECT count(*) AS k3_rows FROM cscp.command WHERE idempotency_key = 'k3';
RESET SESSION AUTHORIZATION;
RESET cscp.tenant_id;
DROP TABLE ids;
SELECT cscp.revoke_app('rs_app');
DROP ROLE rs_app;
