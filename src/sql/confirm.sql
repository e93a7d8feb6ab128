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

-- C (src/confirm.c): the rules of a yes, the evidence of every outcome, the answer kept.
CREATE FUNCTION cscp.confirm(tenant_id text, conversation_id text, actor_id text, message_id text,
                             answer boolean, target_fingerprint text DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
    AS 'MODULE_PATHNAME', 'cscp_confirm' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.confirm(text, text, text, text, boolean, text) IS
  'Answer the pending confirmation of a conversation''s actor: confirmed, declined, no_context, expired, nothing_pending, confirmation_expired or target_mismatch';

-- The decisions of cscp.approve (C, src/approve.c, which calls this directly): the outcome, and
-- what the answer changes as the caller (the command's transition, an expired context
-- recorded).  What is left to the C caller: the context's slot released (o_release_command,
-- o_release_why), the answer kept for replay unless it is one (o_replayed), and the evidence
-- of an outcome that moved nothing (o_refusal, with o_context_expires_at and o_detail), the
-- last two written as cscp's owner.  The pending_approval slot names a command only when that
-- command is of the slot's context (and so of its conversation and actor); the command's own
-- window decides, not the slot's copy of it.
CREATE FUNCTION cscp._approve(tenant_id text, conversation_id text, approver_id text, message_id text,
                              decision boolean, command_id uuid,
                              OUT o_outcome text, OUT o_command_id uuid, OUT o_context_id uuid,
                              OUT o_release_command uuid, OUT o_release_why text,
                              OUT o_refusal boolean, OUT o_context_expires_at timestamptz,
                              OUT o_detail jsonb, OUT o_replayed boolean)
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
    v_lapse boolean := false;       -- the question lapses (v_lapse_cmd, v_lapse_why)
    v_lapse_cmd cscp.command;
    v_lapse_why text;
    v_apply cscp.command_state;     -- the answer moves the pending command to this state
    v_apply_why text;
    v_pa_id uuid;                   -- the command the pending approval names, if a uuid
BEGIN
    o_refusal := false;
    o_replayed := false;
    PERFORM cscp.check_tenant(tenant_id);
    PERFORM cscp.check_id('conversation_id', conversation_id);
    PERFORM cscp.check_id('approver_id', approver_id);
    PERFORM cscp.check_id('message_id', message_id);
    IF decision IS NULL THEN
        RAISE EXCEPTION 'decision must not be null'
            USING ERRCODE = '22023', HINT = 'Pass true for yes, false for no.';
    END IF;
    -- One answer per message: the advisory lock of (tenant, 'approve', conversation, message),
    -- keyed by 64 bits of its SHA-256, so that no tenant can choose ids whose lock another
    -- tenant's answers wait on.
    PERFORM pg_catalog.pg_advisory_xact_lock(('x' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(
                pg_catalog.convert_to(tenant_id || chr(1) || 'approve' || chr(1) || conversation_id
                                      || chr(1) || message_id, 'UTF8')), 'hex'), 16))::bit(64)::bigint);

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
        o_replayed := true;
        RETURN;
    END IF;

    pa := CASE WHEN jsonb_typeof(c.slots -> 'pending_approval') = 'object'
               THEN c.slots -> 'pending_approval' END;
    v_pa_id := CASE WHEN pa ->> 'command_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                    THEN (pa ->> 'command_id')::uuid END;
    IF pa IS NOT NULL AND (command_id IS NULL OR v_pa_id = command_id) THEN
        -- Bound to the slot: a command of the slot's own context, or none.
        SELECT * INTO cmd FROM cscp.command x
         WHERE x.tenant_id = c.tenant_id AND x.command_id = v_pa_id
           AND x.conversation_id = c.conversation_id AND x.context_id = c.context_id FOR UPDATE;
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
        v_pa_id := CASE WHEN pa ->> 'command_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                        THEN (pa ->> 'command_id')::uuid END;
        IF c.context_id IS NULL THEN
            o_outcome := 'no_context';
        ELSIF c.status NOT IN ('active', 'pending', 'blocked') OR c.expires_at <= v_now THEN
            -- An expired context: the approval it held dies with it, swept or not.
            o_outcome := 'expired';
            IF pa IS NOT NULL THEN
                SELECT * INTO cmd FROM cscp.command x
                 WHERE x.tenant_id = c.tenant_id AND x.command_id = v_pa_id
                   AND x.conversation_id = c.conversation_id AND x.context_id = c.context_id FOR UPDATE;
            END IF;
            v_lapse := true;
            v_lapse_cmd := cmd;
            v_lapse_why := 'context_expired';
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
        v_lapse := true;
        v_lapse_cmd := CASE WHEN pa IS NOT NULL THEN cmd END;
        v_lapse_why := 'context_expired';
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
    ELSIF cmd.state IS DISTINCT FROM 'authz_pending' OR cmd.window_expires_at IS NULL THEN
        o_outcome := 'nothing_pending';
    ELSIF cmd.window_expires_at <= v_now THEN
        o_outcome := 'approval_expired';
        v_lapse := true;
        v_lapse_cmd := cmd;
        v_lapse_why := 'approval_expired';
    ELSIF pa ->> 'approver_id' IS NOT NULL AND pa ->> 'approver_id' <> approver_id THEN
        o_outcome := 'approver_mismatch';
    ELSIF decision THEN
        o_outcome := 'approved';
        v_apply := 'authorized';
        v_apply_why := 'approved';
    ELSE
        o_outcome := 'denied';
        v_apply := 'rejected';
        v_apply_why := 'denied';
    END IF;

    IF v_lapse THEN
        -- The question lapsed: the command, if still waiting, is rejected; the context's expiry
        -- is recorded when it has expired, else its slot naming the command is released.
        IF v_lapse_cmd.state IN ('confirmation_required', 'authz_pending') THEN
            UPDATE cscp.command x SET state = 'rejected', reason_code = v_lapse_why
             WHERE x.tenant_id = v_lapse_cmd.tenant_id AND x.command_id = v_lapse_cmd.command_id;
        END IF;
        IF c.context_id IS NOT NULL AND c.expires_at <= cscp.now() THEN
            IF c.status IN ('active', 'pending', 'blocked') THEN
                UPDATE cscp.context x SET status = 'expired', reason = 'ttl'
                 WHERE x.tenant_id = c.tenant_id AND x.context_id = c.context_id;
            END IF;
        ELSIF c.context_id IS NOT NULL THEN
            o_release_command := v_lapse_cmd.command_id;
            o_release_why := v_lapse_why;
        END IF;
    ELSIF v_apply IS NOT NULL THEN
        -- The answer moves the pending command; its slot is released.
        UPDATE cscp.command x
           SET state = v_apply, reason_code = v_apply_why,
               detail = jsonb_build_object('approver_id', approver_id),
               message_ids = x.message_ids || message_id
         WHERE x.tenant_id = cmd.tenant_id AND x.command_id = cmd.command_id;
        o_release_command := cmd.command_id;
        o_release_why := v_apply_why;
    END IF;

    o_command_id := cmd.command_id;
    o_context_id := c.context_id;
    -- An outcome that moved nothing leaves an invalid_transition_attempt (written by the caller).
    IF o_outcome NOT IN ('approved', 'denied') THEN
        o_refusal := true;
        o_context_expires_at := c.expires_at;
        o_detail := jsonb_build_object('decision', decision, 'approver_id', approver_id);
    END IF;
END
$$;
COMMENT ON FUNCTION cscp._approve(text, text, text, text, boolean, uuid) IS
  'Internal: the decisions of cscp.approve, called by its C half';

-- C (src/approve.c): the decisions above, then the slot released and the evidence written.
CREATE FUNCTION cscp.approve(tenant_id text, conversation_id text, approver_id text, message_id text,
                             decision boolean, command_id uuid DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
    AS 'MODULE_PATHNAME', 'cscp_approve' LANGUAGE C VOLATILE ROWS 1;

COMMENT ON FUNCTION cscp.approve(text, text, text, text, boolean, uuid) IS
  'Decide the pending approval of a conversation: approved, denied, no_context, expired, nothing_pending, approval_expired, approver_mismatch, command_mismatch or ambiguous';
