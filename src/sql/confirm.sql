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

-- C (src/command/confirm.c): the rules of a yes, the evidence of every outcome, the answer kept.
CREATE FUNCTION cscp.confirm(tenant_id text, conversation_id text, actor_id text, message_id text,
                             answer boolean, target_fingerprint text DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
    AS 'MODULE_PATHNAME', 'cscp_confirm' LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION cscp.confirm(text, text, text, text, boolean, text) IS
  'Answer the pending confirmation of a conversation''s actor: confirmed, declined, no_context, expired, nothing_pending, confirmation_expired or target_mismatch';

-- C (src/command/approve.c): which approval the answer is for, its outcome, what it changes, its evidence.
CREATE FUNCTION cscp.approve(tenant_id text, conversation_id text, approver_id text, message_id text,
                             decision boolean, command_id uuid DEFAULT NULL)
RETURNS TABLE(outcome text, command_id uuid, context_id uuid)
    AS 'MODULE_PATHNAME', 'cscp_approve' LANGUAGE C VOLATILE ROWS 1;

COMMENT ON FUNCTION cscp.approve(text, text, text, text, boolean, uuid) IS
  'Decide the pending approval of a conversation: approved, denied, no_context, expired, nothing_pending, approval_expired, approver_mismatch, command_mismatch or ambiguous';
