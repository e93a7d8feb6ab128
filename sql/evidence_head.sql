-- The head of each command's evidence chain, kept in the command's row (evidence_seq,
-- evidence_hash), so that a transition appends its evidence without reading the chain: set by
-- every transition to the row it appends, whoever writes; a refused attempt appends without
-- writing the command, and the next transition appends after it all the same; neither an INSERT
-- nor an UPDATE can choose the head.  Rows of this file belong to tenant 'eh'.
SET cscp.clock = '2026-05-01 09:00:00+00';
SET timezone = 'UTC';
\set SHOW_CONTEXT never
CREATE ROLE eh_app;
SELECT cscp.grant_app('eh_app', ARRAY['eh']);

-- Per command of 'eh': its state, its head, and whether the head is its chain's last row.
CREATE FUNCTION public.eh_heads()
RETURNS TABLE (key text, state text, evidence_seq int, chain_rows bigint, head_is_last boolean)
LANGUAGE sql AS $$
    SELECT c.idempotency_key, c.state::text, c.evidence_seq,
           (SELECT count(*) FROM cscp.evidence e WHERE e.tenant_id = c.tenant_id AND e.command_id = c.command_id),
           c.evidence_hash IS NOT DISTINCT FROM
             (SELECT e.hash FROM cscp.evidence e WHERE e.tenant_id = c.tenant_id AND e.command_id = c.command_id
               ORDER BY e.seq DESC LIMIT 1)
      FROM cscp.command c WHERE c.tenant_id = 'eh' ORDER BY c.idempotency_key
$$;
GRANT EXECUTE ON FUNCTION public.eh_heads() TO eh_app;

---------------------------------------------------------------------------------------------------
-- 1. Through the API, as the application role: two rows born asking (one INSERT of evidence),
-- a "yes", a refused step, the steps to executed; a second command refused by an answer.
SET ROLE eh_app;
SET cscp.tenant_id = 'eh';
SELECT (cscp.context_open('eh', 'eh-1', 'alice')).status;
SELECT state FROM cscp.command_submit('eh', 'eh-1', 'alice', 'pay', 'transfer', true, '{eh-1:m1}',
                                      '{"amount": 25}', 'acct:7');
SELECT * FROM public.eh_heads();
SELECT outcome FROM cscp.confirm('eh', 'eh-1', 'alice', 'eh-1:m2', true, 'acct:7');
SELECT * FROM public.eh_heads();
-- a refused step appends its invalid_transition_attempt, and leaves the command's row as it was
SELECT accepted, reason_code FROM cscp.command_transition(
    (SELECT command_id FROM cscp.command WHERE idempotency_key = 'pay'), 'executed');
SELECT * FROM public.eh_heads();
SELECT s, t.accepted
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY u(s, i),
       LATERAL cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'pay'), s) t
 ORDER BY i;
SELECT * FROM public.eh_heads();
-- (the next steps append after it: the chain stays whole)
-- a "yes" to a question that lapsed is refused and recorded on the command it names
SELECT state FROM cscp.command_submit('eh', 'eh-1', 'alice', 'late', 'transfer', true, '{eh-1:m3}');
RESET ROLE;
SET cscp.clock = '2026-05-01 10:00:00+00';
SET ROLE eh_app;
SELECT outcome FROM cscp.confirm('eh', 'eh-1', 'alice', 'eh-1:m4', true);
SELECT * FROM public.eh_heads();
SELECT count(*) AS problems FROM cscp.evidence_verify('eh');
RESET ROLE;
SET cscp.clock = '2026-05-01 09:00:00+00';
SET ROLE eh_app;

---------------------------------------------------------------------------------------------------
-- 2. Direct SQL, as the application role.
-- An INSERT cannot choose the head: the trigger sets it from the rows the insert is born through.
-- (The row is formed from a context and its frame, which a command needs to go on from
-- canonicalized: those of a command the API formed in the same conversation.)
SELECT (cscp.context_open('eh', 'eh-2', 'bob')).status;
SELECT state FROM cscp.command_submit('eh', 'eh-2', 'bob', 'direct-base', 'lookup', false, '{eh-2:m1}');
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                          state, evidence_seq, evidence_hash, context_id, frame_id, context_ref, message_ids)
SELECT 'eh', 'direct', 'eh-2', 'bob', 'lookup', false, 'canonicalized', 42, 'forged',
       b.context_id, b.frame_id, b.context_ref, b.message_ids
  FROM cscp.command b WHERE b.idempotency_key = 'direct-base';
SELECT * FROM public.eh_heads() WHERE key = 'direct';
-- Nor does a transition: the head it gives is replaced by the row it appends.
UPDATE cscp.command SET state = 'authz_pending', evidence_seq = 99, evidence_hash = 'forged'
 WHERE idempotency_key = 'direct';
SELECT * FROM public.eh_heads() WHERE key = 'direct';
-- An UPDATE of the head alone is no step, and refused as any such UPDATE (55000).
SELECT try($$UPDATE cscp.command SET evidence_seq = evidence_seq + 1 WHERE idempotency_key = 'direct'$$);
SELECT try($$UPDATE cscp.command c SET evidence_seq = 1,
                    evidence_hash = (SELECT e.hash FROM cscp.evidence e WHERE e.command_id = c.command_id AND e.seq = 1)
              WHERE idempotency_key = 'direct'$$);
SELECT try($$UPDATE cscp.command SET evidence_seq = 0, evidence_hash = NULL WHERE idempotency_key = 'direct'$$);
-- A refused step as direct SQL changes nothing; one through the API is recorded, and the next
-- step appends after it.
SELECT try($$UPDATE cscp.command SET state = 'executed' WHERE idempotency_key = 'direct'$$);
SELECT * FROM public.eh_heads() WHERE key = 'direct';
SELECT accepted FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'direct'),
                                             'executed');
SELECT * FROM public.eh_heads() WHERE key = 'direct';
UPDATE cscp.command SET state = 'authorized', reason_code = 'ok' WHERE idempotency_key = 'direct';
SELECT * FROM public.eh_heads();
SELECT count(*) AS problems FROM cscp.evidence_verify('eh');
RESET ROLE;
RESET cscp.tenant_id;

-- The superuser is held to the same rule.
SELECT try($$UPDATE cscp.command SET evidence_seq = 1, evidence_hash = 'x' WHERE tenant_id = 'eh' AND state = 'executed'$$);
SELECT * FROM public.eh_heads();

-- A command whose row carries no head (as after the upgrade from 0.1.0, or a head left behind by
-- hand with the triggers off): its next transition finds the chain past it and appends after the
-- chain's last row, and the row carries the head again.
ALTER TABLE cscp.command DISABLE TRIGGER command_guard;
UPDATE cscp.command SET evidence_seq = 0, evidence_hash = NULL WHERE idempotency_key = 'direct';
ALTER TABLE cscp.command ENABLE TRIGGER command_guard;
SELECT * FROM public.eh_heads() WHERE key = 'direct';
SELECT accepted FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'direct'),
                                             'started');
SELECT * FROM public.eh_heads() WHERE key = 'direct';
SELECT count(*) AS problems FROM cscp.evidence_verify('eh');

DROP FUNCTION public.eh_heads();
RESET cscp.clock;
