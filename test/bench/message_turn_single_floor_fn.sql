-- The floor's single-call function for W1 of `make bench`: bench_floor.message_turn does, in one
-- call, the row writes of the first five statements of message_turn_floor.sql (the turn and its
-- event, the conversation's counters, the sender's context linked, opened, its slots set and the
-- command recorded; 11 writes), in plain PL/pgSQL with no checks.  Same signature as
-- cscp.message_turn.  Loaded after floor_schema.sql as bench_floor:
--   psql -v role=<the role pgbench connects as> -f message_turn_single_floor_fn.sql
CREATE FUNCTION bench_floor.message_turn(p_tenant_id text, p_conversation_id text, p_actor_id text, p_turn jsonb,
                                         p_slots jsonb DEFAULT '{}', p_command jsonb DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_turn int;
    v_seq int;
    v_msg text := p_turn ->> 'messageId';
    v_ctx uuid;
    v_slots jsonb;
    v_frame uuid;
    v_hash text;
    v_cmd uuid;
    k text;
BEGIN
    UPDATE bench_floor.conversation x
       SET next_turn_index = x.next_turn_index + 1, next_event_seq = x.next_event_seq + 1, updated_at = now()
     WHERE x.tenant_id = p_tenant_id AND x.conversation_id = p_conversation_id AND x.state = 'open'
    RETURNING x.next_turn_index - 1, x.next_event_seq - 1 INTO v_turn, v_seq;
    INSERT INTO bench_floor.turn (tenant_id, conversation_id, turn_index, message_id, role, sender, content,
                                  content_hash, content_size, ts, event_id)
    VALUES (p_tenant_id, p_conversation_id, v_turn, v_msg, p_turn ->> 'role', p_turn ->> 'from', p_turn -> 'content',
            md5((p_turn -> 'content')::text), octet_length((p_turn -> 'content')::text), (p_turn ->> 'ts')::numeric,
            p_conversation_id || ':e' || v_seq);
    INSERT INTO bench_floor.event (tenant_id, conversation_id, event_id, seq, type, causation_id, turn_index,
                                   payload, created_at)
    VALUES (p_tenant_id, p_conversation_id, p_conversation_id || ':e' || v_seq, v_seq, 'conversation.exchanged',
            p_conversation_id || ':e' || (v_seq - 1), v_turn,
            jsonb_build_object('messageId', v_msg, 'turnIndex', v_turn, 'role', p_turn ->> 'role',
                               'from', p_turn ->> 'from', 'contentHash', md5((p_turn -> 'content')::text)),
            now());
    UPDATE bench_floor.context x
       SET last_message_id = v_msg, updated_at = now(), version = x.version + 1
     WHERE x.tenant_id = p_tenant_id AND x.conversation_id = p_conversation_id AND x.actor_id = p_turn ->> 'from'
       AND x.status IN ('active', 'pending', 'blocked') AND x.expires_at > now();
    INSERT INTO bench_floor.context AS x (tenant_id, conversation_id, actor_id, expires_at, ttl)
    VALUES (p_tenant_id, p_conversation_id, p_actor_id, now() + interval '30 minutes', interval '30 minutes')
    ON CONFLICT (tenant_id, conversation_id, actor_id) WHERE status IN ('active', 'pending', 'blocked')
    DO UPDATE SET expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
    RETURNING x.context_id INTO v_ctx;
    -- one write per slot, as slot_set does
    FOR k IN SELECT jsonb_object_keys(p_slots) LOOP
        UPDATE bench_floor.context x
           SET slots = x.slots || jsonb_build_object(k, p_slots -> k),
               expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
         WHERE x.tenant_id = p_tenant_id AND x.context_id = v_ctx
        RETURNING x.slots INTO v_slots;
    END LOOP;
    IF p_command IS NULL THEN
        RETURN jsonb_build_object('turn_index', v_turn, 'message_id', v_msg, 'context_id', v_ctx);
    END IF;
    INSERT INTO bench_floor.frame (tenant_id, conversation_id, context_id, state, context_hash)
    SELECT p_tenant_id, p_conversation_id, v_ctx, s, md5(s::text)
      FROM (SELECT jsonb_build_object('tenant_id', p_tenant_id, 'conversation_id', p_conversation_id,
                                      'actor_id', p_actor_id, 'status', 'active', 'slots', v_slots,
                                      'message_ids', jsonb_build_array(v_msg)) AS s) q
    RETURNING frame_id, context_hash INTO v_frame, v_hash;
    INSERT INTO bench_floor.command (tenant_id, idempotency_key, conversation_id, actor_id, context_id, frame_id,
                                     context_ref, message_ids, command_name, mutating, payload,
                                     target_fingerprint, state)
    VALUES (p_tenant_id, p_command ->> 'idempotency_key', p_conversation_id, p_actor_id, v_ctx, v_frame,
            jsonb_build_object('context_id', v_ctx, 'frame_id', v_frame, 'context_hash', v_hash),
            ARRAY[v_msg], p_command ->> 'name', (p_command ->> 'mutating')::boolean,
            coalesce(p_command -> 'payload', '{}'), p_command ->> 'target_fingerprint', 'canonicalized')
    RETURNING command_id INTO v_cmd;
    INSERT INTO bench_floor.evidence (tenant_id, conversation_id, command_id, seq, stage, event_type,
                                      from_state, to_state, message_ids, context_ref, hash)
    VALUES (p_tenant_id, p_conversation_id, v_cmd, 1, 'accepted', 'command.accepted', 'received', 'canonicalized',
            ARRAY[v_msg], jsonb_build_object('context_id', v_ctx, 'frame_id', v_frame, 'context_hash', v_hash),
            md5(v_cmd::text || '1'));
    UPDATE bench_floor.context x
       SET last_command_id = v_cmd, last_message_id = v_msg,
           expires_at = greatest(x.expires_at, now() + x.ttl), updated_at = now(), version = x.version + 1
     WHERE x.tenant_id = p_tenant_id AND x.context_id = v_ctx;
    RETURN jsonb_build_object('event_id', p_conversation_id || ':e' || v_seq, 'turn_index', v_turn,
                              'message_id', v_msg, 'outcome', 'exchanged', 'context_id', v_ctx,
                              'command_id', v_cmd, 'state', 'canonicalized', 'replayed', false);
END
$$;
GRANT EXECUTE ON FUNCTION bench_floor.message_turn(text, text, text, jsonb, jsonb, jsonb) TO :"role";
