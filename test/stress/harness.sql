-- The stress harness (test/scripts/stress.sh): one pgbench transaction = one call of
-- stress.step(op, client), which makes one cscp API call with arguments drawn from a small set
-- of conversations, actors, subjects and the commands that exist, so that 16 clients keep
-- running into each other. Outcomes that are the API's answer to a race (22023 unknown or
-- refused input, 55000 wrong state, 23505 a uniqueness rule) are caught and counted in
-- stress.outcome; anything else (deadlock 40P01, serialization failure 40001, an internal
-- error) propagates to pgbench, which fails the run.
-- Run by the superuser; pgbench connects as the application role stress_app (tenant 'stress').
CREATE SCHEMA stress;
CREATE UNLOGGED TABLE stress.outcome (op text NOT NULL, sqlstate text NOT NULL);
GRANT USAGE ON SCHEMA stress TO stress_app;
GRANT INSERT ON stress.outcome TO stress_app;

-- The ops, in the order of their numbers.
CREATE FUNCTION stress.ops() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['context_open', 'slot_set', 'context_transition', 'context_get',
                 'submit_read', 'submit_mutating', 'confirm', 'approve_request', 'approve',
                 'transition', 'recover', 'command_status', 'exchange', 'close', 'turns',
                 'doc_put', 'doc_get', 'doc_delete', 'fact_write', 'fact_supersede', 'fact_current',
                 'identity_set', 'ws_put', 'env_set', 'build_context', 'sweep', 'evidence_verify']
$$;

CREATE FUNCTION stress.step(op_no int, client int) RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
    op   text := (stress.ops())[op_no];
    t    text := 'stress';
    -- the conversation set changes every 20 s, so that closed conversations do not pile up
    gen  bigint := floor(extract(epoch FROM clock_timestamp()) / 20);
    conv text := 's' || (1 + floor(random() * 4))::int || '-' || gen;
    act  text := 'user-' || (1 + floor(random() * 2))::int;
    subj text := 'subject-' || (1 + floor(random() * 2))::int;
    n    text := client || '-' || floor(random() * 1e12)::bigint;
    ctx  uuid;
    cmd  uuid;
    nxt  cscp.command_state[];
    st   text := 'ok';
BEGIN
    BEGIN
        CASE op
        WHEN 'context_open' THEN
            PERFORM cscp.context_open(t, conv, act, '{"active_intent": "cancel_order"}',
                                      CASE WHEN random() < 0.2 THEN interval '2 seconds' END);
        WHEN 'slot_set' THEN
            SELECT c.context_id INTO ctx FROM cscp.context c
             WHERE c.tenant_id = t AND c.conversation_id = conv AND c.actor_id = act
             ORDER BY c.created_at DESC LIMIT 1;
            PERFORM cscp.slot_set(ctx, 'x_note', to_jsonb(n));
        WHEN 'context_transition' THEN
            SELECT c.context_id INTO ctx FROM cscp.context c
             WHERE c.tenant_id = t AND c.conversation_id = conv AND c.actor_id = act
             ORDER BY c.created_at DESC LIMIT 1;
            PERFORM cscp.context_transition(ctx, (ARRAY['active', 'pending', 'blocked', 'closed',
                                                        'expired'])[1 + floor(random() * 5)]::cscp.context_status);
        WHEN 'context_get' THEN
            PERFORM cscp.context_get(t, conv, act);
        WHEN 'submit_read' THEN
            PERFORM cscp.command_submit(t, conv, act, 'r-' || n, 'lookup_order', false, ARRAY['m-' || n]);
        WHEN 'submit_mutating' THEN
            PERFORM cscp.command_submit(t, conv, act, 'w-' || n, 'cancel_order', true, ARRAY['m-' || n],
                                        '{"order_id": 1}', 'order:' || conv);
        WHEN 'confirm' THEN
            PERFORM cscp.confirm(t, conv, act, 'y-' || n, random() < 0.9,
                                 CASE WHEN random() < 0.8 THEN 'order:' || conv END);
        WHEN 'approve_request' THEN
            SELECT c.command_id INTO cmd FROM cscp.command c
             WHERE c.tenant_id = t AND c.conversation_id = conv AND c.state IN ('confirmed', 'canonicalized')
             ORDER BY random() LIMIT 1;
            PERFORM cscp.command_transition(cmd, 'authz_pending', 'approval_required', '{"approver_id": "boss"}');
        WHEN 'approve' THEN
            PERFORM cscp.approve(t, conv, 'boss', 'a-' || n, random() < 0.8);
        WHEN 'transition' THEN
            SELECT c.command_id INTO cmd FROM cscp.command c
             WHERE c.tenant_id = t AND c.conversation_id = conv AND c.state NOT IN ('rejected', 'canceled', 'compensated')
             ORDER BY random() LIMIT 1;
            SELECT s.next_allowed INTO nxt FROM cscp.command_status(cmd) s;
            IF cardinality(nxt) > 0 THEN
                PERFORM cscp.command_transition(cmd, nxt[1 + floor(random() * cardinality(nxt))], 'stress');
            END IF;
        WHEN 'recover' THEN
            SELECT c.command_id INTO cmd FROM cscp.command c
             WHERE c.tenant_id = t AND c.conversation_id = conv ORDER BY random() LIMIT 1;
            PERFORM cscp.command_recover(cmd, (ARRAY['retry', 'cancel', 'reprocess', 'compensate'])[1 + floor(random() * 4)],
                                         'rec-' || n);
        WHEN 'command_status' THEN
            SELECT c.command_id INTO cmd FROM cscp.command c
             WHERE c.tenant_id = t AND c.conversation_id = conv ORDER BY random() LIMIT 1;
            PERFORM cscp.command_status(cmd);
        WHEN 'exchange' THEN
            PERFORM cscp.conversation_start(t, conv, 'agent',
                    '{"from": "agent", "role": "agent", "ts": 1700000000000, "content": {"text": "hi"}}',
                    NULL, CASE WHEN conv LIKE 's4-%' THEN 15000 END);
            PERFORM cscp.conversation_exchange(t, conv, jsonb_build_object(
                    'messageId', CASE WHEN random() < 0.1 THEN 'dup-' || conv ELSE 'm-' || n END,
                    'from', act, 'role', 'user', 'ts', 1700000000001, 'content', jsonb_build_object('text', n)));
        WHEN 'close' THEN
            IF random() < 0.03 THEN
                PERFORM cscp.conversation_close(t, conv, jsonb_build_object(
                        'from', 'agent', 'role', 'agent', 'ts', 1700000000002, 'content', '{"text": "bye"}'::jsonb),
                        '{"resolved": true}');
            END IF;
        WHEN 'turns' THEN
            PERFORM cscp.conversation_turns(t, conv, 20);
            PERFORM cscp.conversation_events(t, conv);
        WHEN 'doc_put' THEN
            PERFORM cscp.doc_put(t, conv, 'cart', jsonb_build_object('k' || floor(random() * 5), n),
                                 (1 + floor(random() * 3))::int);
        WHEN 'doc_get' THEN
            PERFORM cscp.doc_get(t, conv, 'cart');
        WHEN 'doc_delete' THEN
            PERFORM cscp.doc_delete(t, conv, 'cart');
        WHEN 'fact_write' THEN
            PERFORM cscp.fact_write(t, subj, NULL, 'k' || floor(random() * 3), to_jsonb(n));
        WHEN 'fact_supersede' THEN
            n := 'k' || floor(random() * 3);
            PERFORM cscp.fact_write(t, subj, NULL, n, to_jsonb(n), supersedes => n);
        WHEN 'fact_current' THEN
            PERFORM cscp.fact_current(t, subj, f.fact_id)
               FROM cscp.fact f WHERE f.tenant_id = t AND f.subject_id = subj ORDER BY random() LIMIT 1;
        WHEN 'identity_set' THEN
            PERFORM cscp.identity_set(t, subj, jsonb_build_object('user_name', subj, 'user_id', subj,
                                                                  'authority', 'employee'));
        WHEN 'ws_put' THEN
            PERFORM cscp.ws_put(t, conv, 'draft', to_jsonb(n), interval '3 seconds');
        WHEN 'env_set' THEN
            PERFORM cscp.env_set(t, conv, jsonb_build_object('channel', 'whatsapp', 'n', n));
        WHEN 'build_context' THEN
            PERFORM cscp.build_context(t, subj, conv, 'where do I live', 200);
        WHEN 'sweep' THEN
            IF random() < 0.2 THEN
                PERFORM cscp.sweep(50);
            END IF;
        WHEN 'evidence_verify' THEN
            SELECT c.command_id INTO cmd FROM cscp.command c
             WHERE c.tenant_id = t AND c.conversation_id = conv ORDER BY random() LIMIT 1;
            IF cmd IS NOT NULL AND EXISTS (SELECT FROM cscp.evidence_verify(t, cmd)) THEN
                RAISE EXCEPTION 'evidence of command % does not verify', cmd USING ERRCODE = 'XX001';
            END IF;
        END CASE;
    EXCEPTION
        WHEN invalid_parameter_value OR object_not_in_prerequisite_state OR unique_violation THEN
            st := SQLSTATE;
    END;
    INSERT INTO stress.outcome VALUES (op, st);
    RETURN st;
END
$f$;
GRANT EXECUTE ON FUNCTION stress.step(int, int), stress.ops() TO stress_app;
