-- pgbench, W1 of `make bench`: the floor under message_turn_cscp.sql -- the same message turn as
-- plain SQL on the plain tables of floor_schema.sql (schema bench_floor), with no lock, lookup,
-- check, policy or hash: nine round trips, each one statement (writable CTEs) in its own
-- transaction, like the cscp script, and the same row writes (19): conversation 1 update, turn 1
-- insert, event 1 insert, context 5 updates (the turn's last_message_id, the open, two slots, the
-- command), frame 1 insert, command 1 insert and 4 updates, evidence 5 inserts.
-- (event ids are conversation_id || ':e' || seq, spelled with chr(58): pgbench would take a colon
-- followed by a name for a variable)
\set n random(1, 9000000000000000000)
WITH c AS (
    UPDATE bench_floor.conversation x
       SET next_turn_index = x.next_turn_index + 1, next_event_seq = x.next_event_seq + 1, updated_at = now()
     WHERE x.tenant_id = 'bench' AND x.conversation_id = :conv::text || '-' || :client_id::text AND x.state = 'open'
    RETURNING x.conversation_id, x.next_turn_index - 1 AS turn_index, x.next_event_seq - 1 AS seq
), t AS (
    INSERT INTO bench_floor.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content,
                                  content_hash, content_size, ts, event_id)
    SELECT 'bench', c.conversation_id, c.turn_index, 'm-' || :n::text, 'user', 'customer',
           '{"text": "where is my order 123?"}', md5('{"text":"where is my order 123?"}'), 32, 1795269600000,
           c.conversation_id || chr(58) || 'e' || c.seq
      FROM c
), e AS (
    INSERT INTO bench_floor.event (tenant_id, conversation_id, event_id, seq, type, causation_id, turn_index,
                                   payload, created_at)
    SELECT 'bench', c.conversation_id, c.conversation_id || chr(58) || 'e' || c.seq, c.seq, 'conversation.exchanged',
           c.conversation_id || chr(58) || 'e' || (c.seq - 1), c.turn_index,
           jsonb_build_object('messageId', 'm-' || :n::text, 'turnIndex', c.turn_index, 'role', 'user',
                              'from', 'customer', 'contentHash', md5('{"text":"where is my order 123?"}')),
           now()
      FROM c
), x AS (
    UPDATE bench_floor.context x
       SET last_message_id = 'm-' || :n::text, updated_at = now(), version = x.version + 1
      FROM c
     WHERE x.tenant_id = 'bench' AND x.conversation_id = c.conversation_id AND x.actor_id = 'customer'
       AND x.status IN ('active', 'pending', 'blocked') AND x.expires_at > now()
)
SELECT 'exchanged' AS outcome FROM c;
INSERT INTO bench_floor.context AS x (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('bench', :conv::text || '-' || :client_id::text, 'customer', now() + interval '30 minutes', interval '30 minutes')
ON CONFLICT (tenant_id, conversation_id, actor_id) WHERE status IN ('active', 'pending', 'blocked')
DO UPDATE SET expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
RETURNING context_id AS ctx \gset
UPDATE bench_floor.context x
   SET slots = x.slots || '{"active_intent": "track_order"}', expires_at = greatest(x.expires_at, now() + x.ttl),
       updated_at = now(), version = x.version + 1
 WHERE x.tenant_id = 'bench' AND x.context_id = :ctx::uuid
RETURNING status;
UPDATE bench_floor.context x
   SET slots = x.slots || jsonb_build_object('active_target', 'order:' || :n::text),
       expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
 WHERE x.tenant_id = 'bench' AND x.context_id = :ctx::uuid
RETURNING status;
WITH f AS (
    INSERT INTO bench_floor.frame (tenant_id, conversation_id, context_id, state, context_hash)
    SELECT 'bench', s ->> 'conversation_id', :ctx::uuid, s, md5(s::text)
      FROM (SELECT jsonb_build_object('tenant_id', 'bench', 'conversation_id', :conv::text || '-' || :client_id::text,
                                      'actor_id', 'customer', 'status', 'active',
                                      'slots', jsonb_build_object('active_intent', 'track_order',
                                                                  'active_target', 'order:' || :n::text),
                                      'message_ids', jsonb_build_array('m-' || :n::text)) AS s) q
    RETURNING frame_id, context_hash
), c AS (
    INSERT INTO bench_floor.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id,
                                     frame_id, context_ref, message_ids, command_name, mutating, payload,
                                     target_fingerprint, state)
    SELECT 'bench', 'key-' || :n::text, :conv::text || '-' || :client_id::text, 'customer', :ctx::uuid, f.frame_id,
           jsonb_build_object('context_id', :ctx::uuid, 'frame_id', f.frame_id, 'context_hash', f.context_hash),
           ARRAY['m-' || :n::text], 'track_order', false, '{"order_id": "123"}', 'order:' || :n::text,
           'canonicalized'
      FROM f
    RETURNING command_id, conversation_id, context_ref, message_ids
), e AS (
    INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type,
                                      from_state, to_state, message_ids, context_ref, hash)
    SELECT 'bench', c.conversation_id, c.command_id, 1, 'accepted', 'command.accepted', 'received',
           'canonicalized', c.message_ids, c.context_ref, md5(c.command_id::text || '1')
      FROM c
), u AS (
    UPDATE bench_floor.context x
       SET last_command_id = c.command_id, last_message_id = 'm-' || :n::text,
           expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
      FROM c
     WHERE x.tenant_id = 'bench' AND x.context_id = :ctx::uuid
)
SELECT command_id AS cid FROM c \gset
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
