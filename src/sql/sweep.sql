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

-- A lower bound, over every policy, of the time a retention period under key spans wherever it
-- starts: months counted as 28 days less 2 hours and days as 22 hours (the shortest a calendar
-- month or day gets across daylight-saving shifts), zero when a period has a negative part.
-- The sweep subtracts it from the clock to bound its index scans on age: no row younger than that
-- can be due, whatever its tenant's own period, and the exact per-tenant test follows.  NULL when
-- no policy names the key (then nothing is due).
CREATE FUNCTION cscp._retention_floor(key text) RETURNS interval
LANGUAGE sql STABLE
AS $$
    SELECT min(CASE WHEN m >= 0 AND d >= 0 AND t >= interval '0'
                    THEN m * interval '670 hours' + d * interval '22 hours' + t
                    ELSE interval '0' END)
      FROM (SELECT (extract(year FROM r) * 12 + extract(month FROM r))::int AS m,
                   extract(day FROM r)::int AS d,
                   r - date_trunc('day', r) AS t
              FROM (SELECT (p.settings ->> key)::interval AS r FROM cscp.policy p
                     WHERE p.settings ? key) s) q
$$;
COMMENT ON FUNCTION cscp._retention_floor(text) IS
  'Internal: the shortest time any policy''s retention period under a key can span, a bound for the sweep''s scans';

-- The sweep's expiry of contexts, in C (context_fsm.c): the first `batch` rows due in
-- cscp.context_live (whose expires_at is at most a minute before the context's own), each
-- context still live and past its own expires_at at cscp.now() locked (those a transaction holds
-- skipped) and recorded expired with reason 'ttl', reached by the row ids its locked scan
-- returned; the trigger's moves from cscp.context_live to cscp.context_retired are made in one
-- statement after the UPDATE rather than one a row.  Returns the number expired.
CREATE FUNCTION cscp._expire_contexts(batch int) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cscp_expire_contexts' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION cscp._expire_contexts(int) IS
  'Internal: the sweep''s expiry of up to batch contexts past their TTL';

-- The pace of a session's sweeps (worker.c): a call that follows, in a later transaction, a call
-- that left work behind (one of its actions reached the batch) first waits until
-- cscp.sweep_backlog_delay has passed since that call ended, before it reads or locks a row.
CREATE FUNCTION cscp._sweep_pause() RETURNS void
    AS 'MODULE_PATHNAME', 'cscp_sweep_pause' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp._sweep_pause() IS
  'Internal: the sweep''s pause after a call of this session that left work behind';
CREATE FUNCTION cscp._sweep_record(backlog boolean) RETURNS void
    AS 'MODULE_PATHNAME', 'cscp_sweep_record' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION cscp._sweep_record(boolean) IS
  'Internal: notes the end of a sweep of this session, and whether it left work behind';

CREATE FUNCTION cscp.sweep(batch int DEFAULT 10000) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now timestamptz;
    v_retired_evidence timestamptz;
    v_retired_turns timestamptz;
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
    -- After a call of this session that left work behind, the pause comes first, so that the
    -- time and everything read below are taken after it.
    PERFORM cscp._sweep_pause();
    v_now := cscp.now();
    -- Nothing retired after these can be past its retention (see cscp._retention_floor).
    v_retired_evidence := v_now - cscp._retention_floor('retention_evidence');
    v_retired_turns := v_now - cscp._retention_floor('retention_turns');

    -- Confirmation and approval windows that have passed, found through cscp.command_window: the
    -- command is rejected, the slot cleared, the context back to active.  Context first, as
    -- everywhere; what a transaction holds is skipped and left to the next sweep (a concurrent
    -- answer decides it anyway).  (The command's context is looked up in the select list of the
    -- limited scan: one lookup by primary key per row, never a join the planner could make a scan
    -- of the table.)
    FOR r IN
        SELECT w.tenant_id, w.command_id,
               (SELECT x.context_id FROM cscp.command x
                 WHERE x.tenant_id = w.tenant_id AND x.command_id = w.command_id) AS context_id
          FROM cscp.command_window w
         WHERE w.window_expires_at <= v_now
         ORDER BY w.window_expires_at
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
    -- Rows naming a command that is gone or out of its window (written with the triggers off)
    -- would hold the head of the queue for good: the owner's sweep drops those that are due.
    IF pg_catalog.has_table_privilege('cscp.command_window', 'DELETE') THEN
        DELETE FROM cscp.command_window w
         WHERE w.ctid = ANY (ARRAY(
                   SELECT d.ctid
                     FROM (SELECT y.ctid,
                                  EXISTS (SELECT FROM cscp.command z
                                           WHERE z.tenant_id = y.tenant_id AND z.command_id = y.command_id
                                             AND z.state IN ('confirmation_required', 'authz_pending')
                                             AND z.window_expires_at = y.window_expires_at) AS present
                             FROM cscp.command_window y
                            WHERE y.window_expires_at <= v_now
                            ORDER BY y.window_expires_at
                            LIMIT batch
                              FOR UPDATE SKIP LOCKED) d
                    WHERE NOT d.present));
    END IF;

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

    -- Live contexts past their TTL become expired (cscp._expire_contexts).  Each action below
    -- reaches its rows by the row ids its ordered, locked scan returned (a TID scan), never by a
    -- join the planner could turn into a scan of the whole table; the rows are locked, so their
    -- ids hold, and the action's condition is tested again on the row it changes.
    n_expired := cscp._expire_contexts(batch);

    -- Expired documents are deleted.
    DELETE FROM cscp.document d
     WHERE d.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.document x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND d.expires_at <= v_now;
    GET DIAGNOSTICS n_docs = ROW_COUNT;

    -- Expired working-set items are deleted.
    DELETE FROM cscp.working_set w
     WHERE w.ctid = ANY (ARRAY(
               SELECT x.ctid FROM cscp.working_set x
                WHERE x.expires_at <= v_now
                ORDER BY x.expires_at
                LIMIT batch
                  FOR UPDATE SKIP LOCKED))
       AND w.expires_at <= v_now;
    GET DIAGNOSTICS n_ws = ROW_COUNT;

    -- Closed and expired contexts past their tenant's retention are deleted, found through
    -- cscp.context_retired by status and the time they retired; the scan of each status stops at
    -- the shortest retention any policy gives it (cscp._retention_floor), so it reads what is
    -- due and, beyond, only what tenants with a longer retention keep.  The context_unlist
    -- trigger takes each deleted context's row out of cscp.context_retired.
    n_purged := 0;
    FOR r IN
        SELECT k.status, k.key, v_now - cscp._retention_floor(k.key) AS bound
          FROM (VALUES ('expired'::cscp.context_status, 'retention_expired'),
                       ('closed'::cscp.context_status, 'retention_closed')) k (status, key)
    LOOP
        CONTINUE WHEN r.bound IS NULL;
        DELETE FROM cscp.context c
         WHERE c.ctid = ANY (ARRAY(
                   SELECT x.ctid
                     FROM (SELECT y.tenant_id, y.context_id FROM cscp.context_retired y
                            WHERE y.status = r.status AND y.retired_at <= r.bound
                              AND y.retired_at + cscp._retention(y.tenant_id, r.key) <= v_now
                            ORDER BY y.retired_at
                            LIMIT batch) d
                    CROSS JOIN LATERAL (
                          SELECT z.ctid FROM cscp.context z
                           WHERE z.tenant_id = d.tenant_id AND z.context_id = d.context_id
                             AND z.status = r.status
                             FOR UPDATE SKIP LOCKED) x))
           AND c.status = r.status
           AND c.updated_at + cscp._retention(c.tenant_id, r.key) <= v_now;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_purged := n_purged + n_other;
        -- Rows naming a context that is gone (deleted with the triggers off) would hold the head
        -- of the queue for good: the owner's sweep drops those that are due.
        IF pg_catalog.has_table_privilege('cscp.context_retired', 'DELETE') THEN
            -- (The test for the context is in the select list of the limited scan: one lookup
            -- by primary key per row, never a join the planner could make a scan of the table.)
            DELETE FROM cscp.context_retired w
             WHERE w.ctid = ANY (ARRAY(
                       SELECT d.ctid
                         FROM (SELECT y.ctid,
                                      EXISTS (SELECT FROM cscp.context z
                                               WHERE z.tenant_id = y.tenant_id
                                                 AND z.context_id = y.context_id) AS present
                                 FROM cscp.context_retired y
                                WHERE y.status = r.status AND y.retired_at <= r.bound
                                  AND y.retired_at + cscp._retention(y.tenant_id, r.key) <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
    END LOOP;

    -- Finished commands past their tenant's retention_evidence go with their evidence chain;
    -- then answers, standalone evidence and frames no command needs any more.  Only a sweep run
    -- by a role that may delete evidence (the owner, a superuser) does this; application roles
    -- may neither delete commands nor evidence, and their sweep leaves them.
    IF pg_catalog.has_table_privilege('cscp.evidence', 'DELETE')
       AND pg_catalog.has_table_privilege('cscp.command', 'DELETE') THEN
        -- They are found through cscp.command_retired, by the time they finished; the
        -- command_unlist trigger takes each deleted command's row out of it.
        FOR r IN
            SELECT d.tenant_id, d.command_id
              FROM (SELECT y.tenant_id, y.command_id, y.retired_at FROM cscp.command_retired y
                     WHERE y.retired_at <= v_retired_evidence
                       AND y.retired_at + cscp._retention(y.tenant_id, 'retention_evidence') <= v_now
                     ORDER BY y.retired_at
                     LIMIT batch) d
             CROSS JOIN LATERAL (
                   SELECT FROM cscp.command x
                    WHERE x.tenant_id = d.tenant_id AND x.command_id = d.command_id
                      AND x.state IN ('rejected', 'executed', 'failed', 'canceled', 'compensated')
                      AND x.last_transition_at = d.retired_at
                      FOR UPDATE SKIP LOCKED) x
        LOOP
            DELETE FROM cscp.evidence e WHERE e.tenant_id = r.tenant_id AND e.command_id = r.command_id;
            GET DIAGNOSTICS n_other = ROW_COUNT;
            n_evidence := n_evidence + n_other;
            DELETE FROM cscp.command x WHERE x.tenant_id = r.tenant_id AND x.command_id = r.command_id;
            n_commands := n_commands + 1;
        END LOOP;
        -- Rows naming a command that is gone (deleted with the triggers off) are dropped once due.
        IF pg_catalog.has_table_privilege('cscp.command_retired', 'DELETE') THEN
            DELETE FROM cscp.command_retired w
             WHERE w.ctid = ANY (ARRAY(
                       SELECT d.ctid
                         FROM (SELECT y.ctid,
                                      EXISTS (SELECT FROM cscp.command z
                                               WHERE z.tenant_id = y.tenant_id
                                                 AND z.command_id = y.command_id) AS present
                                 FROM cscp.command_retired y
                                WHERE y.retired_at <= v_retired_evidence
                                  AND y.retired_at + cscp._retention(y.tenant_id, 'retention_evidence') <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
        DELETE FROM cscp.evidence e
         WHERE e.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.evidence x
                    WHERE x.command_id IS NULL
                      AND x.created_at <= v_retired_evidence
                      AND x.created_at + cscp._retention(x.tenant_id, 'retention_evidence') <= v_now
                    ORDER BY x.created_at
                    LIMIT batch))
           AND e.command_id IS NULL;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_evidence := n_evidence + n_other;
        DELETE FROM cscp.answer a
         WHERE a.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.answer x
                    WHERE x.created_at <= v_retired_evidence
                      AND x.created_at + cscp._retention(x.tenant_id, 'retention_evidence') <= v_now
                    ORDER BY x.created_at
                    LIMIT batch));
        GET DIAGNOSTICS n_answers = ROW_COUNT;
        DELETE FROM cscp.frame f
         WHERE f.ctid = ANY (ARRAY(
                   SELECT y.ctid FROM cscp.frame y
                    WHERE y.created_at <= v_retired_evidence
                      AND y.created_at + cscp._retention(y.tenant_id, 'retention_evidence') <= v_now
                      AND NOT EXISTS (SELECT 1 FROM cscp.command x
                                       WHERE x.tenant_id = y.tenant_id AND x.frame_id = y.frame_id)
                    ORDER BY y.created_at
                    LIMIT batch))
           AND NOT EXISTS (SELECT 1 FROM cscp.command x
                            WHERE x.tenant_id = f.tenant_id AND x.frame_id = f.frame_id);
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
               AND c.closed_at <= v_retired_turns
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

    PERFORM cscp._sweep_record(greatest(n_expired, n_docs, n_ws, n_purged, n_confirmations,
                                        n_approvals, n_commands, n_evidence, n_timeouts,
                                        n_conversations, n_turns, n_events, n_answers,
                                        n_frames) >= batch);
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
