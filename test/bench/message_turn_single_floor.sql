-- pgbench, W1 through the single-call path of `make bench`: the floor under
-- message_turn_single_cscp.sql -- bench_floor.message_turn (message_turn_single_floor_fn.sql,
-- the row writes of message_turn_floor.sql's first five statements in one PL/pgSQL call), then
-- the same four transitions as message_turn_floor.sql: five round trips.
\set n random(1, 9000000000000000000)
SELECT r ->> 'command_id' AS cid FROM bench_floor.message_turn('bench', :conv::text || '-' || :client_id::text, 'customer', jsonb_build_object('messageId', 'm-' || :n::text, 'from', 'customer', 'role', 'user', 'content', '{"text": "where is my order 123?"}'::jsonb, 'ts', 1795269600000), jsonb_build_object('active_intent', 'track_order', 'active_target', 'order:' || :n::text), jsonb_build_object('idempotency_key', 'key-' || :n::text, 'name', 'track_order', 'mutating', false, 'payload', '{"order_id": "123"}'::jsonb, 'target_fingerprint', 'order:' || :n::text)) r \gset
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'authz_pending', reason_code = 'policy_check', detail = NULL,
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, reason_code, hash)
SELECT 'bench', c.conversation_id, c.command_id, 2, 'authorization', 'authz.requested', 'canonicalized',
       'authz_pending', c.message_ids, c.context_ref, 'policy_check', md5(c.command_id::text || '2')
  FROM c
RETURNING true AS accepted;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'authorized', reason_code = 'read_only', detail = NULL, authorized_at = now(),
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, decision, reason_code, hash)
SELECT 'bench', c.conversation_id, c.command_id, 3, 'authorization', 'authz.decided', 'authz_pending',
       'authorized', c.message_ids, c.context_ref, 'allow', 'read_only', md5(c.command_id::text || '3')
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
SELECT 'bench', c.conversation_id, c.command_id, 4, 'execution', 'execution.started', 'authorized',
       'started', c.message_ids, c.context_ref, md5(c.command_id::text || '4')
  FROM c
RETURNING true AS accepted;
WITH c AS (
    UPDATE bench_floor.command x
       SET state = 'executed', reason_code = 'order_found', detail = '{"status": "shipped"}',
           outcome = jsonb_build_object('state', 'executed', 'reason_code', 'order_found',
                                        'detail', '{"status": "shipped"}'::jsonb),
           updated_at = now(), last_transition_at = now(), version = x.version + 1
     WHERE x.tenant_id = 'bench' AND x.command_id = :cid::uuid
    RETURNING command_id, conversation_id, context_ref, message_ids, detail
)
INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type, from_state,
                                  to_state, message_ids, context_ref, reason_code, detail, hash)
SELECT 'bench', c.conversation_id, c.command_id, 5, 'execution', 'execution.executed', 'started',
       'executed', c.message_ids, c.context_ref, 'order_found', c.detail, md5(c.command_id::text || '5')
  FROM c
RETURNING true AS accepted;
