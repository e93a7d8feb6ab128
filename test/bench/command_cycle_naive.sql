-- pgbench, W2 of `make bench`: the naive baseline -- command_cycle_floor.sql's statements on the
-- tables of schema bench_naive, where the hand-written PL/pgSQL triggers of baseline_plpgsql.sql
-- check transitions, expiry and the confirmed/authorized order, and write the evidence (so the
-- statements here write none).  Seven round trips, the same row writes as the floor.
\set n random(1, 9000000000000000000)
INSERT INTO bench_naive.context AS x (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('bench', 'conv-' || :client_id::text, 'customer', now() + interval '30 minutes', interval '30 minutes')
ON CONFLICT (tenant_id, conversation_id, actor_id) WHERE status IN ('active', 'pending', 'blocked')
DO UPDATE SET expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
RETURNING context_id AS ctx, status \gset
WITH f AS (
    INSERT INTO bench_naive.frame (tenant_id, conversation_id, context_id, state, context_hash)
    SELECT 'bench', s ->> 'conversation_id', :ctx::uuid, s, md5(s::text)
      FROM (SELECT jsonb_build_object('tenant_id', 'bench', 'conversation_id', 'conv-' || :client_id::text,
                                      'actor_id', 'customer', 'status', 'active', 'slots', '{}'::jsonb,
                                      'message_ids', jsonb_build_array('ask-' || :n::text)) AS s) q
    RETURNING frame_id, context_hash
), c AS (
    INSERT INTO bench_naive.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                     frame_id, context_ref, message_ids, command_name, mutating, payload,
                                     target_fingerprint, state, window_expires_at)
    SELECT 'bench', 'key-' || :n::text, 'conv-' || :client_id::text, 'customer', :ctx::uuid, f.frame_id,
           jsonb_build_object('context_id', :ctx::uuid, 'frame_id', f.frame_id, 'context_hash', f.context_hash),
           ARRAY['ask-' || :n::text], 'cancel_order', true, '{"order_id": "123"}', 'order:' || :n::text,
           'confirmation_required', now() + interval '5 minutes'
      FROM f
    RETURNING command_id, conversation_id, context_ref, message_ids, window_expires_at
), u AS (
    UPDATE bench_naive.context x
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
    UPDATE bench_naive.command x
       SET state = 'confirmed', reason_code = 'confirmed_by_user', message_ids = x.message_ids || ('yes-' || :n::text),
           confirmed_at = now(), updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_id, context_ref, message_ids
), u AS (
    UPDATE bench_naive.context x
       SET status = 'active', slots = x.slots - 'pending_confirmation', reason = 'confirmed',
           expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
      FROM c
     WHERE x.tenant_id = 'bench' AND x.context_id = c.context_id
), a AS (
    INSERT INTO bench_naive.answer (tenant_id, conversation_id, kind, message_id, answered_by, outcome,
                                    command_id, context_id)
    SELECT 'bench', c.conversation_id, 'confirm', 'yes-' || :n::text, 'customer', 'confirmed', c.command_id, c.context_id
      FROM c
)
SELECT 'confirmed' AS outcome FROM c;
UPDATE bench_naive.command x
   SET state = 'authz_pending', reason_code = 'policy_check', detail = NULL
 WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
RETURNING true AS accepted;
UPDATE bench_naive.command x
   SET state = 'authorized', reason_code = 'order_not_shipped', detail = NULL, authorized_at = now()
 WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
RETURNING true AS accepted;
UPDATE bench_naive.command x
   SET state = 'started', reason_code = NULL, detail = NULL
 WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
RETURNING true AS accepted;
UPDATE bench_naive.command x
   SET state = 'executed', reason_code = 'order_cancelled', detail = '{"refund": "EUR 42.00"}',
       outcome = jsonb_build_object('state', 'executed', 'reason_code', 'order_cancelled',
                                    'detail', '{"refund": "EUR 42.00"}'::jsonb)
 WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
RETURNING true AS accepted;
