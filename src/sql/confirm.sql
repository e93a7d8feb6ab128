-- confirm.sql: answers to a pending confirmation ("yes"/"no") and to a pending approval.
--
-- Both are idempotent by message id (cscp.answer keeps the first outcome of each message), both
-- return business outcomes instead of raising, and every outcome leaves evidence: the transition
-- the answer caused, or an invalid_transition_attempt saying why it caused none.

CREATE TABLE cscp.answer (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('confirm', 'approve')),
    message_id       text        NOT NULL,
    answered_by      text        NOT NULL,
    outcome          text        NOT NULL,
    command_id       uuid,
    context_id       uuid,
    created_at       timestamptz NOT NULL DEFAULT cscp.now(),
    PRIMARY KEY (tenant_id, conversation_id, kind, message_id)
);
COMMENT ON TABLE cscp.answer IS
  'The first outcome of each confirmation or approval message, replayed when the message comes again';

-- Lapse the pending question of cmd for reason (confirmation_expired, approval_expired,
-- context_expired): the command is rejected and the context's slot cleared, or, when the
-- context itself has expired, its expiry recorded.  cmd may be null (nothing was pending).
CREATE FUNCTION cscp._lapse(c cscp.context, cmd cscp.command, why text) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF cmd.state IN ('confirmation_required', 'authz_pending') THEN
        UPDATE cscp.command x SET state = 'rejected', reason_code = why
         WHERE x.tenant_id = cmd.tenant_id AND x.command_id = cmd.command_id;
    END IF;
    IF c.context_id IS NOT NULL THEN
        IF c.expires_at <= cscp.now() THEN
            PERFORM cscp._context_record_expiry(c);
        ELSE
            PERFORM cscp._context_release(c, cmd.command_id, why);
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._lapse(cscp.context, cscp.command, text) IS
  'Internal: reject a command whose confirmation or approval window (or context) has lapsed, and clear its slot';

-- Apply an answer that moves the pending command: to_state with reason (and detail), the
-- answer's message id appended, the context's slot released.
CREATE FUNCTION cscp._answer_apply(c cscp.context, cmd cscp.command, message_id text,
                                   to_state cscp.command_state, why text, detail jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE cscp.command x
       SET state = to_state, reason_code = why, detail = _answer_apply.detail,
           message_ids = x.message_ids || message_id
     WHERE x.tenant_id = cmd.tenant_id AND x.command_id = cmd.command_id;
    PERFORM cscp._context_release(c, cmd.command_id, why);
END
$$;
COMMENT ON FUNCTION cscp._answer_apply(cscp.context, cscp.command, text, cscp.command_state, text, jsonb) IS
  'Internal: move the command an answer decided, and release its context slot';

-- Record an answer: the evidence of an outcome that moved nothing (the transitions of one that
-- did are the trigger's), then the outcome replayed for the message from now on.
CREATE FUNCTION cscp._answer_record(kind text, c cscp.context, tenant_id text, conversation_id text,
                                    message_id text, who text, outcome text, moved boolean,
                                    command_id uuid, to_state text, detail jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF NOT moved THEN
        PERFORM cscp._evidence_refusal(tenant_id, conversation_id, command_id, to_state, outcome,
                                       ARRAY[message_id],
                                       CASE WHEN c.context_id IS NOT NULL THEN
                                           jsonb_build_object('context_id', c.context_id,
                                                              'expires_at', cscp._utc(c.expires_at)) END,
                                       detail);
    END IF;
    INSERT INTO cscp.answer (tenant_id, conversation_id, kind, message_id, answered_by, outcome,
                             command_id, context_id, created_at)
    VALUES (tenant_id, conversation_id, kind, message_id, who, outcome, command_id, c.context_id,
            cscp.now());
END
$$;
COMMENT ON FUNCTION cscp._answer_record(text, cscp.context, text, text, text, text, text, boolean, uuid, text, jsonb) IS
  'Internal: the evidence and the replay record of a confirm or approve answer';

CREATE FUNCTION cscp._answer_args(tenant_id text, conversation_id text, who_arg text, who text,
                                  message_id text, answer_arg text, answer boolean) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM cscp._tenant(tenant_id);
    PERFORM cscp._id('conversation_id', conversation_id);
    PERFORM cscp._id(who_arg, who);
    PERFORM cscp._id('message_id', message_id);
    IF answer IS NULL THEN
        RAISE EXCEPTION '% must not be null', answer_arg
            USING ERRCODE = '22023', HINT = 'Pass true for yes, false for no.';
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._answer_args(text, text, text, text, text, text, boolean) IS
  'Internal: argument checks shared by confirm and approve';

-- C (src/confirm.c): the rules of a yes, the evidence of every outcome, the answer kept.
CREATE FUNCTION cscp.confirm(tenant_id text, conversation_id text, actor_id text, message_id text,
                             answer boolean, target_fingerprint text DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
    AS 'MODULE_PATHNAME', 'cscp_confirm' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.confirm(text, text, text, text, boolean, text) IS
  'Answer the pending confirmation of a conversation''s actor: confirmed, declined, no_context, expired, nothing_pending, confirmation_expired or target_mismatch';

-- The body of cscp.approve, whose output column command_id has the name of an argument.
CREATE FUNCTION cscp._approve(tenant_id text, conversation_id text, approver_id text, message_id text,
                              decision boolean, command_id uuid,
                              OUT o_outcome text, OUT o_command_id uuid, OUT o_context_id uuid)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    v_now timestamptz := cscp.now();
    c cscp.context;
    cmd cscp.command;
    a cscp.answer;
    pa jsonb;
    v_context uuid;
    n int;
BEGIN
    PERFORM cscp._answer_args(tenant_id, conversation_id, 'approver_id', approver_id, message_id,
                              'decision', decision);
    PERFORM cscp._key_lock(tenant_id, 'approve' || chr(1) || conversation_id || chr(1) || message_id);

    IF command_id IS NOT NULL THEN
        SELECT x.context_id INTO v_context FROM cscp.command x
         WHERE x.tenant_id = tenant_id AND x.command_id = command_id AND x.conversation_id = conversation_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'command % does not exist in conversation "%"', command_id, conversation_id
                USING ERRCODE = '22023',
                      HINT = 'Pass the id of a command of this conversation, or null for its pending approval.';
        END IF;
    ELSE
        SELECT count(*), min(x.context_id::text)::uuid INTO n, v_context
          FROM cscp.context_live l JOIN cscp.context x
               ON x.tenant_id = l.tenant_id AND x.context_id = l.context_id
         WHERE l.tenant_id = tenant_id AND l.conversation_id = conversation_id
           AND x.status IN ('active', 'pending', 'blocked')
           AND jsonb_typeof(x.slots -> 'pending_approval') = 'object';
        IF n > 1 THEN
            v_context := NULL;
        END IF;
    END IF;
    IF v_context IS NOT NULL THEN
        SELECT * INTO c FROM cscp.context x
         WHERE x.tenant_id = tenant_id AND x.context_id = v_context FOR UPDATE;
    END IF;

    SELECT * INTO a FROM cscp.answer x
     WHERE x.tenant_id = tenant_id AND x.conversation_id = conversation_id
       AND x.kind = 'approve' AND x.message_id = message_id;
    IF FOUND THEN
        o_outcome := a.outcome;
        o_command_id := a.command_id;
        o_context_id := a.context_id;
        RETURN;
    END IF;

    pa := CASE WHEN jsonb_typeof(c.slots -> 'pending_approval') = 'object'
               THEN c.slots -> 'pending_approval' END;
    IF pa IS NOT NULL AND (command_id IS NULL OR pa ->> 'command_id' = command_id::text) THEN
        SELECT * INTO cmd FROM cscp.command x
         WHERE x.tenant_id = c.tenant_id AND x.command_id = (pa ->> 'command_id')::uuid FOR UPDATE;
    ELSIF command_id IS NOT NULL THEN
        SELECT * INTO cmd FROM cscp.command x
         WHERE x.tenant_id = tenant_id AND x.command_id = _approve.command_id FOR UPDATE;
    END IF;

    IF command_id IS NULL AND n > 1 THEN
        o_outcome := 'ambiguous';
    ELSIF c.context_id IS NULL AND command_id IS NULL THEN
        -- No live context waits for an approval: answer from the conversation's latest context.
        SELECT * INTO c FROM cscp.context y
         WHERE y.tenant_id = tenant_id AND y.conversation_id = conversation_id
         ORDER BY y.status IN ('active', 'pending', 'blocked') DESC, y.updated_at DESC, y.version DESC
         LIMIT 1
           FOR UPDATE;
        pa := CASE WHEN jsonb_typeof(c.slots -> 'pending_approval') = 'object'
                   THEN c.slots -> 'pending_approval' END;
        IF c.context_id IS NULL THEN
            o_outcome := 'no_context';
        ELSIF c.status NOT IN ('active', 'pending', 'blocked') OR c.expires_at <= v_now THEN
            -- An expired context: the approval it held dies with it, swept or not.
            o_outcome := 'expired';
            IF pa IS NOT NULL THEN
                SELECT * INTO cmd FROM cscp.command x
                 WHERE x.tenant_id = c.tenant_id AND x.command_id = (pa ->> 'command_id')::uuid FOR UPDATE;
            END IF;
            PERFORM cscp._lapse(c, cmd, 'context_expired');
        ELSIF c.reason = 'approval_expired' THEN
            o_outcome := 'approval_expired';
            SELECT * INTO cmd FROM cscp.command x
             WHERE x.tenant_id = c.tenant_id AND x.command_id = c.last_command_id;
        ELSE
            o_outcome := 'nothing_pending';
        END IF;
    ELSIF c.status NOT IN ('active', 'pending', 'blocked') OR c.expires_at <= v_now THEN
        o_outcome := 'expired';
        -- Only the pending approval dies with the context; a named command that was not it stays.
        PERFORM cscp._lapse(c, CASE WHEN pa IS NOT NULL THEN cmd END, 'context_expired');
    ELSIF pa IS NULL OR cmd.command_id::text IS DISTINCT FROM pa ->> 'command_id' THEN
        o_outcome := CASE
            WHEN command_id IS NOT NULL AND cmd.reason_code = 'approval_expired' THEN 'approval_expired'
            WHEN command_id IS NOT NULL AND pa IS NOT NULL THEN 'command_mismatch'
            WHEN command_id IS NULL AND c.reason = 'approval_expired' THEN 'approval_expired'
            ELSE 'nothing_pending' END;
        IF o_outcome = 'approval_expired' AND cmd.command_id IS NULL THEN
            SELECT * INTO cmd FROM cscp.command x
             WHERE x.tenant_id = c.tenant_id AND x.command_id = c.last_command_id;
        END IF;
    ELSIF cmd.state IS DISTINCT FROM 'authz_pending' THEN
        o_outcome := 'nothing_pending';
    ELSIF (pa ->> 'expires_at')::timestamptz <= v_now THEN
        o_outcome := 'approval_expired';
        PERFORM cscp._lapse(c, cmd, 'approval_expired');
    ELSIF pa ->> 'approver_id' IS NOT NULL AND pa ->> 'approver_id' <> approver_id THEN
        o_outcome := 'approver_mismatch';
    ELSIF decision THEN
        o_outcome := 'approved';
        PERFORM cscp._answer_apply(c, cmd, message_id, 'authorized', 'approved',
                                   jsonb_build_object('approver_id', approver_id));
    ELSE
        o_outcome := 'denied';
        PERFORM cscp._answer_apply(c, cmd, message_id, 'rejected', 'denied',
                                   jsonb_build_object('approver_id', approver_id));
    END IF;

    o_command_id := cmd.command_id;
    o_context_id := c.context_id;
    PERFORM cscp._answer_record('approve', c, tenant_id, conversation_id, message_id, approver_id,
                                o_outcome, o_outcome IN ('approved', 'denied'), o_command_id, 'authorized',
                                jsonb_build_object('decision', decision, 'approver_id', approver_id));
END
$$;
COMMENT ON FUNCTION cscp._approve(text, text, text, text, boolean, uuid) IS 'Internal: the body of cscp.approve';

CREATE FUNCTION cscp.approve(tenant_id text, conversation_id text, approver_id text, message_id text,
                             decision boolean, command_id uuid DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
LANGUAGE sql VOLATILE
AS $$
    SELECT a.o_outcome, a.o_command_id, a.o_context_id FROM cscp._approve($1, $2, $3, $4, $5, $6) a
$$;

COMMENT ON FUNCTION cscp.approve(text, text, text, text, boolean, uuid) IS
  'Decide the pending approval of a conversation: approved, denied, no_context, expired, nothing_pending, approval_expired, approver_mismatch, command_mismatch or ambiguous';
