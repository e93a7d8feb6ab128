-- sweep.sql: cscp.sweep, the tidy-up that keeps tables small.
--
-- Correctness never waits for it: readers treat anything past expires_at as expired.  Each
-- action takes at most `batch` rows with FOR UPDATE SKIP LOCKED, so a sweep never blocks on,
-- nor is blocked by, a row an application transaction holds; what it skips, the next sweep takes.

-- The retention period under key for a tenant (its own policy, else the default).
CREATE FUNCTION cscp._retention(tenant_id text, key text) RETURNS interval
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT (p.settings ->> key)::interval FROM cscp.policy p WHERE p.tenant_id = $1),
                    (SELECT (p.settings ->> key)::interval FROM cscp.policy p WHERE p.tenant_id = '*'))
$$;
COMMENT ON FUNCTION cscp._retention(text, text) IS 'Internal: a tenant''s retention period under a policy key';

CREATE FUNCTION cscp.sweep(batch int DEFAULT 10000) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now timestamptz := cscp.now();
    n_expired bigint;
    n_docs bigint;
    n_ws bigint;
    n_purged bigint;
    n_confirmations bigint := 0;
    n_approvals bigint := 0;
    n_commands bigint := 0;
    n_evidence bigint := 0;
    n_other bigint;
    n_timeouts bigint := 0;
    n_conversations bigint := 0;
    n_turns bigint := 0;
    n_events bigint := 0;
    n_answers bigint := 0;
    n_frames bigint := 0;
    r record;
    v_ctx cscp.context;
    v_cmd cscp.command;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 1000000'
            USING ERRCODE = '22023', DETAIL = format('The batch given is %s.', coalesce(batch::text, 'null')),
                  HINT = 'Call cscp.sweep repeatedly with a moderate batch, such as 10000.';
    END IF;

    -- Confirmation and approval windows that have passed: the command is rejected, the slot
    -- cleared, the context back to active.  Context first, as everywhere; what a transaction
    -- holds is skipped and left to the next sweep (a concurrent answer decides it anyway).
    FOR r IN
        SELECT x.tenant_id, x.command_id, x.context_id FROM cscp.command x
         WHERE x.state IN ('confirmation_required', 'authz_pending') AND x.window_expires_at <= v_now
         ORDER BY x.window_expires_at
         LIMIT batch
    LOOP
        v_ctx := NULL;
        IF r.context_id IS NOT NULL THEN
            SELECT * INTO v_ctx FROM cscp.context x
             WHERE x.tenant_id = r.tenant_id AND x.context_id = r.context_id
               FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
        END IF;
        SELECT * INTO v_cmd FROM cscp.command x
         WHERE x.tenant_id = r.tenant_id AND x.command_id = r.command_id
           AND x.state IN ('confirmation_required', 'authz_pending') AND x.window_expires_at <= v_now
           FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        IF v_cmd.state = 'confirmation_required' THEN
            PERFORM cscp._lapse(v_ctx, v_cmd, 'confirmation_expired');
            n_confirmations := n_confirmations + 1;
        ELSE
            PERFORM cscp._lapse(v_ctx, v_cmd, 'approval_expired');
            n_approvals := n_approvals + 1;
        END IF;
    END LOOP;

    -- Open conversations past their deadline are closed: a system turn, a null outcome, their
    -- contexts closed (before the contexts' own expiry below, so that a context the conversation
    -- outlived is recorded expired, with the evidence of its conversation's close).
    FOR r IN
        SELECT c.tenant_id, c.conversation_id FROM cscp.conversation c
         WHERE c.state = 'open' AND c.deadline <= v_now
         ORDER BY c.deadline
         LIMIT batch
           FOR UPDATE SKIP LOCKED
    LOOP
        IF cscp._conversation_timeout(r.tenant_id, r.conversation_id) THEN
            n_timeouts := n_timeouts + 1;
        END IF;
    END LOOP;

    -- Live contexts past their TTL become expired.
    WITH due AS (
        SELECT c.tenant_id, c.context_id FROM cscp.context c
         WHERE c.status IN ('active', 'pending', 'blocked') AND c.expires_at <= v_now
         ORDER BY c.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    UPDATE cscp.context c SET status = 'expired', reason = 'ttl'
      FROM due WHERE c.tenant_id = due.tenant_id AND c.context_id = due.context_id;
    GET DIAGNOSTICS n_expired = ROW_COUNT;

    -- Expired documents are deleted.
    WITH due AS (
        SELECT d.tenant_id, d.session_id, d.namespace FROM cscp.document d
         WHERE d.expires_at <= v_now
         ORDER BY d.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM cscp.document d USING due
     WHERE d.tenant_id = due.tenant_id AND d.session_id = due.session_id
       AND d.namespace = due.namespace;
    GET DIAGNOSTICS n_docs = ROW_COUNT;

    -- Expired working-set items are deleted.
    WITH due AS (
        SELECT w.tenant_id, w.session_id, w.key FROM cscp.working_set w
         WHERE w.expires_at <= v_now
         ORDER BY w.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM cscp.working_set w USING due
     WHERE w.tenant_id = due.tenant_id AND w.session_id = due.session_id AND w.key = due.key;
    GET DIAGNOSTICS n_ws = ROW_COUNT;

    -- Closed and expired contexts past their tenant's retention are deleted.
    WITH due AS (
        SELECT c.tenant_id, c.context_id FROM cscp.context c
         WHERE c.status IN ('expired', 'closed')
           AND c.updated_at + cscp._retention(c.tenant_id,
                   CASE c.status WHEN 'closed' THEN 'retention_closed' ELSE 'retention_expired' END) <= v_now
         ORDER BY c.updated_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM cscp.context c USING due
     WHERE c.tenant_id = due.tenant_id AND c.context_id = due.context_id;
    GET DIAGNOSTICS n_purged = ROW_COUNT;

    -- Finished commands past their tenant's retention_evidence go with their evidence chain;
    -- then answers, standalone evidence and frames no command needs any more.  Only a sweep run
    -- by a role that may delete evidence (the owner, a superuser) does this; application roles
    -- may neither delete commands nor evidence, and their sweep leaves them.
    IF pg_catalog.has_table_privilege('cscp.evidence', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.command', 'DELETE') THEN
        FOR r IN
            SELECT x.tenant_id, x.command_id FROM cscp.command x
             WHERE x.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
               AND x.last_transition_at + cscp._retention(x.tenant_id, 'retention_evidence') <= v_now
             ORDER BY x.last_transition_at
             LIMIT batch
               FOR UPDATE SKIP LOCKED
        LOOP
            DELETE FROM cscp.evidence e WHERE e.tenant_id = r.tenant_id AND e.command_id = r.command_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_evidence := n_evidence + n_other;
            DELETE FROM cscp.command x WHERE x.tenant_id = r.tenant_id AND x.command_id = r.command_id;
            n_commands := n_commands + 1;
        END LOOP;
        WITH due AS (
            SELECT e.tenant_id, e.evidence_id FROM cscp.evidence e
             WHERE e.command_id IS NULL
               AND e.created_at + cscp._retention(e.tenant_id, 'retention_evidence') <= v_now
             ORDER BY e.created_at
             LIMIT batch)
        DELETE FROM cscp.evidence e USING due
         WHERE e.tenant_id = due.tenant_id AND e.evidence_id = due.evidence_id;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_evidence := n_evidence + n_other;
        WITH due AS (
            SELECT a.tenant_id, a.conversation_id, a.kind, a.message_id FROM cscp.answer a
             WHERE a.created_at + cscp._retention(a.tenant_id, 'retention_evidence') <= v_now
             ORDER BY a.created_at
             LIMIT batch)
        DELETE FROM cscp.answer a USING due
         WHERE a.tenant_id = due.tenant_id AND a.conversation_id = due.conversation_id
           AND a.kind = due.kind AND a.message_id = due.message_id;
        GET DIAGNOSTICS n_answers = ROW_COUNT;
        WITH due AS (
            SELECT f.tenant_id, f.frame_id FROM cscp.frame f
             WHERE f.created_at + cscp._retention(f.tenant_id, 'retention_evidence') <= v_now
               AND NOT EXISTS (SELECT 1 FROM cscp.command x
                                WHERE x.tenant_id = f.tenant_id AND x.frame_id = f.frame_id)
             ORDER BY f.created_at
             LIMIT batch)
        DELETE FROM cscp.frame f USING due
         WHERE f.tenant_id = due.tenant_id AND f.frame_id = due.frame_id;
        GET DIAGNOSTICS n_frames = ROW_COUNT;
    END IF;

    -- Closed conversations past their tenant's retention_turns go with their turns and events
    -- (by a role that may delete them: the owner, a superuser).
    IF pg_catalog.has_table_privilege('cscp.turn', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.event', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.conversation', 'DELETE') THEN
        FOR r IN
            SELECT c.tenant_id, c.conversation_id FROM cscp.conversation c
             WHERE c.state = 'closed'
               AND c.closed_at + cscp._retention(c.tenant_id, 'retention_turns') <= v_now
             ORDER BY c.closed_at
             LIMIT batch
               FOR UPDATE SKIP LOCKED
        LOOP
            DELETE FROM cscp.turn t WHERE t.tenant_id = r.tenant_id AND t.conversation_id = r.conversation_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_turns := n_turns + n_other;
            DELETE FROM cscp.event e WHERE e.tenant_id = r.tenant_id AND e.conversation_id = r.conversation_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_events := n_events + n_other;
            DELETE FROM cscp.conversation c
             WHERE c.tenant_id = r.tenant_id AND c.conversation_id = r.conversation_id;
            n_conversations := n_conversations + 1;
        END LOOP;
    END IF;

    RETURN jsonb_build_object('contexts_expired', n_expired,
                              'documents_deleted', n_docs,
                              'working_set_deleted', n_ws,
                              'contexts_purged', n_purged,
                              'confirmations_lapsed', n_confirmations,
                              'approvals_lapsed', n_approvals,
                              'commands_purged', n_commands,
                              'evidence_purged', n_evidence,
                              'conversations_timed_out', n_timeouts,
                              'conversations_purged', n_conversations,
                              'turns_purged', n_turns,
                              'events_purged', n_events,
                              'answers_purged', n_answers,
                              'frames_purged', n_frames);
END
$$;
COMMENT ON FUNCTION cscp.sweep(int) IS
  'Lapse confirmation and approval windows, time out conversations past their deadline, expire live contexts past their TTL, delete expired documents and working-set items and whatever is past retention, batch rows per action; returns counts';
