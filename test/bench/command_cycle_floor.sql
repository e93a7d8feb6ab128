-- pgbench: the floor under command_cycle_cscp.sql -- the same command cycle as plain SQL on the
-- plain tables of floor_schema.sql, with no lock, lookup, check, policy or hash chain: seven
-- round trips (each one statement, writable CTEs, its own transaction), like the cscp script.
-- Row writes per cycle: context 3 updates (1 insert on a client's first cycle, as in cscp),
-- frame 1 insert, command 1 insert + 5 updates, evidence 7 inserts, answer 1 insert = 18.
-- cscp does 19: it inserts the command as canonicalized and updates it to
-- confirmation_required, and one SQL statement cannot write the same row twice, so here the
-- command is inserted directly as confirmation_required (one write fewer: the floor is a
-- little lower than the exact one).
\set n random(1, 9000000000000000000)
INSERT INTO bench_floor.context AS x (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('bench', 'conv-' || :client_id::text, 'customer', now() + interval '30 minutes', interval '30 minutes')
ON CONFLICT (tenant_id, conversation_id, actor_id) WHERE status IN ('active', 'pending', 'blocked')
DO UPDATE SET expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
RETURNING context_id AS ctx, status \gset
WITH f AS (
    INSERT INTO bench_floor.frame (tenant_id, conversation_id, context_id, state, context_hash)
    SELECT 'bench', s ->> 'conversation_id', :ctx::uuid, s, md5(s::text)
      FROM (SELECT jsonb_build_object('tenant_id', 'bench', 'conversation_id', 'conv-' || :client_id::text,
                                      'actor_id', 'customer', 'status', 'active', 'slots', '{}'::jsonb,
                                      'message_ids', jsonb_build_array('ask-' || :n::text)) AS s) q
    RETURNING frame_id, context_hash
), c AS (
    INSERT INTO bench_floor.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                     frame_id, context_ref, message_ids, command_name, mutating, payload,
                                     target_fingerprint, state, window_expires_at)
    SELECT 'bench', 'key-' || :n::text, 'conv-' || :client_id::text, 'customer', :ctx::uuid, f.frame_id,
           jsonb_build_object('context_id', :ctx::uuid, 'frame_id', f.frame_id, 'context_hash', f.context_hash),
           ARRAY['ask-' || :n::text], 'cancel_order', true, '{"order_id": "123"}', 'order:' || :n::text,
           'confirmation_required', now() + interval '5 minutes'
      FROM f
    RETURNING command_id, conversation_id, context_ref, message_ids, window_expires_at
), e AS (
    INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type,
                                      from_state, to_state, message_ids, context_ref, hash)
    SELECT 'bench', c.conversation_id, c.command_id, v.seq, v.stage, v.event_type, v.from_state, v.to_state,
           c.message_ids, c.context_ref, md5(c.command_id::text || v.seq::text)
      FROM c, (VALUES (1, 'accepted', 'command.accepted', 'received', 'canonicalized'),
                      (2, 'confirmation', 'command.confirmation.requested', 'canonicalized', 'confirmation_required'))
              AS v(seq, stage, event_type, from_state, to_state)
), u AS (
    UPDATE bench_floor.context x
       SET status = 'pending',
           slots = x.slots || jsonb_build_object('pending_confirmation', jsonb_build_object(
                       'command_id', c.command_id, 'idempotency_key', 'key-' || :n::text,
                       'target_fingerprint', 'order:' || :n::text, 'expires_at', c.window_expires_at)),
           last_command_id = c.command_id, last_message_id = 'ask-' || :n::text,
           expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
      FROM c
     WHERE x.tenant_id = 'bench' AND x.context_id = :ctx::uuid
)
SELECT command_id AS cid FROM c \gset
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'confirmed', reason_code = 'confirmed_by_user', message_ids = x.message_ids || ('yes-' || :n::text),
           confirmed_at = now(), updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_id, context_ref, message_ids
), e AS (
    INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                      to_state, message_ids, context_ref, decision, reason_code, hash)
    SELECT 'bench', c.conversation_id, c.command_id, 3, 'confirmation', 'command.confirmation.satisfied',
           'confirmation_required', 'confirmed', c.message_ids, c.context_ref, 'confirmed', 'confirmed_by_user',
           md5(c.command_id::text || '3')
      FROM c
), u AS (
    UPDATE bench_floor.context x
       SET status = 'active', slots = x.slots - 'pending_confirmation', reason = 'confirmed',
           expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
      FROM c
     WHERE x.tenant_id = 'bench' AND x.context_id = c.context_id
), a AS (
    INSERT INTO bench_floor.answer (tenant_id, conversation_id, kind, message_id, answered_by, outcome,
                                    command_id, context_id)
    SELECT 'bench', c.conversation_id, 'confirm', 'yes-' || :n::text, 'customer', 'confirmed', c.command_id, c.context_id
      FROM c
)
SELECT 'confirmed' AS outcome FROM c;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'authz_pending', reason_code = 'policy_check', detail = NULL,
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, reason_code, hash)
SELECT 'bench', c.conversation_id, c.command_id, 4, 'authorization', 'authz.requested', 'confirmed',
       'authz_pending', c.message_ids, c.context_ref, 'policy_check', md5(c.command_id::text || '4')
  FROM c
RETURNING true AS accepted;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'authorized', reason_code = 'order_not_shipped', detail = NULL, authorized_at = now(),
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, decision, reason_code, hash)
SELECT 'bench', c.conversation_id, c.command_id, 5, 'authorization', 'authz.decided', 'authz_pending',
       'authorized', c.message_ids, c.context_ref, 'allow', 'order_not_shipped', md5(c.command_id::text || '5')
  FROM c
RETURNING true AS accepted;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'started', reason_code = NULL, detail = NULL,
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, hash)
SELECT 'bench', c.conversation_id, c.command_id, 6, 'execution', 'execution.started', 'authorized',
       'started', c.message_ids, c.context_ref, md5(c.command_id::text || '6')
  FROM c
RETURNING true AS accepted;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'executed', reason_code = 'order_cancelled', detail = '{"refund": "EUR 42.00"}',
           outcome = jsonb_build_object('state', 'executed', 'reason_code', 'order_cancelled',
                                        'detail', '{"refund": "EUR 42.00"}'::jsonb),
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids, detail
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, reason_code, detail, hash)
SELECT 'bench', c.conversation_id, c.command_id, 7, 'execution', 'execution.executed', 'started',
       'executed', c.message_ids, c.context_ref, 'order_cancelled', c.detail, md5(c.command_id::text || '7')
  FROM c
RETURNING true AS accepted;
