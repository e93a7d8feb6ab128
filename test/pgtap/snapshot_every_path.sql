-- Snapshot on every path (issue 39, item 10): a command row at canonicalized or later, inserted
-- or updated by any writer, names a frame of its own context whose hash matches, or is refused.
-- The API records a command refused as it is formed by inserting it rejected (no row ever stands
-- at canonicalized without its frame); the application role's own INSERT of a frameless
-- canonicalized row without its context, and its UPDATE of a received row to canonicalized, get
-- 55000 and write nothing; one that names its context and message ids alone gets its frame from
-- the trigger, which records it from the context it reads (refused, 55000, when that context is
-- another conversation's or no longer usable).  And one judge per step (issue 41): command_transition's refusal is the trigger's,
-- whose 55000 names the rule's reason code as its constraint for a direct UPDATE too.
BEGIN;
SELECT plan(27);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_sep_app;
SELECT cscp.grant_app('tap_sep_app', ARRAY['sep']);
SELECT cscp.command_declare('sep', 'lookup', false);
SELECT cscp.command_declare('sep', 'transfer', true);

CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    con text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS con = CONSTRAINT_NAME;
    RETURN SQLSTATE || coalesce(' ' || nullif(con, ''), '');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO tap_sep_app;

SET ROLE tap_sep_app;
SET cscp.tenant_id = 'sep';

-- 1. Through the API: refused as formed, the row is born rejected, with the evidence as before.
SELECT is((cscp.command_submit('sep', 'none', 'ana', 'k-none', 'lookup', false, '{m1}')).state,
          'rejected'::cscp.command_state, 'a command with no context is rejected as it is formed');
SELECT is((SELECT reason_code || ' v' || version FROM cscp.command WHERE idempotency_key = 'k-none'),
          'no_context v2', '... born rejected with its reason, two steps in its version');
SELECT is((SELECT outcome ->> 'reason_code' FROM cscp.command WHERE idempotency_key = 'k-none'),
          'no_context', '... and its outcome');
SELECT is((SELECT array_agg(e.event_type || ':' || e.from_state || '>' || e.to_state || ':' || coalesce(e.reason_code, '-')
                            ORDER BY e.seq)
             FROM cscp.evidence e JOIN cscp.command c USING (tenant_id, command_id)
            WHERE c.idempotency_key = 'k-none'),
          ARRAY['command.accepted:received>canonicalized:-', 'execution.rejected:canonicalized>rejected:no_context'],
          '... its evidence: accepted, then rejected');
SELECT is((SELECT r.state || ' ' || r.replayed
             FROM cscp.command_submit('sep', 'none', 'ana', 'k-none', 'lookup', false, '{m1}') r),
          'rejected true', '... and its key replays the refusal');
SELECT is((SELECT count(*) FROM cscp.command_retired r JOIN cscp.command c USING (tenant_id, command_id)
            WHERE c.idempotency_key = 'k-none'), 1::bigint, '... listed as finished');

SELECT isnt((cscp.context_open('sep', 'c1', 'ana')).context_id, NULL, 'a context opens');
SELECT is((cscp.command_submit('sep', 'c1', 'ana', 'k1', 'lookup', false, '{m1}')).state,
          'canonicalized'::cscp.command_state, 'a command formed against it is canonicalized');
SELECT ok((SELECT f.context_hash = c.context_ref ->> 'context_hash' AND f.context_id = c.context_id
             FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
            WHERE c.idempotency_key = 'k1'), '... with a frame of its own context whose hash matches');
SELECT is_empty($$SELECT 1 FROM cscp.command WHERE tenant_id = 'sep' AND frame_id IS NULL
                   AND state NOT IN ('received', 'rejected', 'canceled')$$,
                'no API row stands past received without its frame');

-- 2. Direct SQL as the application role.
SELECT is(pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                  command_name, mutating, message_ids, state)
                        VALUES ('sep', 'bare', 'c1', 'ana', 'lookup', false, '{m1}', 'canonicalized')$$),
          '55000', 'a canonicalized row with no context and no frame is refused');
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                         command_name, mutating, message_ids, context_id, state)
                               VALUES ('sep', 'ctx-only', 'c1', 'ana', 'lookup', false, '{m9}', %L, 'canonicalized')$$,
                             (SELECT context_id FROM cscp.command WHERE idempotency_key = 'k1'))),
          'ok', 'a canonicalized row with its context and message ids but no frame gets one from its trigger');
SELECT ok((SELECT f.context_hash = c.context_ref ->> 'context_hash' AND f.context_id = c.context_id
                  AND f.frame_id::text = c.context_ref ->> 'frame_id' AND f.state -> 'message_ids' = '["m9"]'
                  AND f.state ->> 'actor_id' = 'ana' AND c.context_live_until IS NOT NULL
             FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
            WHERE c.idempotency_key = 'ctx-only'),
          '... the frame of its context''s state and its message ids, named by its context_ref, with its promise');
SELECT isnt((cscp.context_open('sep', 'c2', 'ana')).context_id, NULL, 'a context of another conversation opens');
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                         command_name, mutating, message_ids, context_id, state)
                               VALUES ('sep', 'ctx-other', 'c1', 'ana', 'lookup', false, '{m1}', %L, 'canonicalized')$$,
                             (SELECT context_id FROM cscp.context WHERE conversation_id = 'c2'))),
          '55000', 'a row naming another conversation''s context gets no frame: refused');
SELECT is((cscp.context_transition((SELECT context_id FROM cscp.context WHERE conversation_id = 'c2'), 'closed')).status,
          'closed'::cscp.context_status, 'that context closes');
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                         command_name, mutating, message_ids, context_id, state)
                               VALUES ('sep', 'ctx-closed', 'c2', 'ana', 'lookup', false, '{m1}', %L, 'canonicalized')$$,
                             (SELECT context_id FROM cscp.context WHERE conversation_id = 'c2'))),
          '55000', 'a row naming its own context, closed, gets no frame: refused');
SELECT is(pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                  command_name, mutating, message_ids, state)
                        VALUES ('sep', 'mut-bare', 'c1', 'ana', 'transfer', true, '{m1}', 'canonicalized')$$),
          '55000', 'a mutating one too');
SELECT is((SELECT count(*) FROM cscp.command WHERE idempotency_key IN ('bare', 'ctx-other', 'ctx-closed', 'mut-bare')),
          0::bigint, '... no row written');
SELECT is(pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                  command_name, mutating, message_ids, state)
                        VALUES ('sep', 'rcv', 'c1', 'ana', 'lookup', false, '{m1}', 'received')$$),
          'ok', 'a received row needs no frame yet');
SELECT is(pg_temp.err($$UPDATE cscp.command SET state = 'canonicalized' WHERE idempotency_key = 'rcv'$$),
          '55000 snapshot_missing', '... but its UPDATE to canonicalized without one is refused');
SELECT is((SELECT state FROM cscp.command WHERE idempotency_key = 'rcv'), 'received'::cscp.command_state,
          '... and it stays received');
SELECT is(pg_temp.err($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                  command_name, mutating, message_ids, state, reason_code)
                        VALUES ('sep', 'rej', 'c1', 'ana', 'lookup', false, '{m1}', 'rejected', 'mine')$$),
          'ok', 'a row born rejected is accepted: it goes nowhere');
SELECT is(pg_temp.err(format($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                         command_name, mutating, message_ids, context_id, frame_id,
                                                         context_ref, state)
                               SELECT 'sep', 'copy', 'c1', 'ana', 'lookup', false, '{m1}', context_id, frame_id,
                                      context_ref, 'canonicalized' FROM cscp.command WHERE idempotency_key = 'k1'$$)),
          'ok', 'a canonicalized row naming its own context''s matching frame is accepted');

-- 3. One judge: the refusal command_transition returns is the trigger's, as a direct UPDATE meets it.
SELECT is((SELECT r.accepted || ' ' || r.state || ' ' || r.reason_code
             FROM cscp.command_transition((SELECT command_id FROM cscp.command WHERE idempotency_key = 'k1'),
                                          'started') r),
          'false canonicalized invalid_transition', 'command_transition returns the trigger''s refusal');
SELECT is(pg_temp.err($$UPDATE cscp.command SET state = 'started' WHERE idempotency_key = 'k1'$$),
          '55000 invalid_transition', '... which a direct UPDATE meets as 55000 naming the same reason');
SELECT is((SELECT array_agg(e.reason_code ORDER BY e.seq) FROM cscp.evidence e JOIN cscp.command c USING (tenant_id, command_id)
            WHERE c.idempotency_key = 'k1' AND e.event_type = 'invalid_transition_attempt'),
          ARRAY['invalid_transition'], '... the API''s refusal recorded once, the direct one raised');

RESET ROLE;
SELECT * FROM finish();
ROLLBACK;
