-- sweep.sql: cscp.sweep, the tidy-up that keeps tables small.
--
-- Correctness never waits for it: readers treat anything past expires_at as expired.  Each
-- action takes at most `batch` rows with FOR UPDATE SKIP LOCKED, so a sweep never blocks on,
-- nor is blocked by, a row an application transaction holds; what it skips, the next sweep takes.

-- A lower bound, over every policy, of the time a retention period under key spans wherever it
-- starts: months counted as 28 days less 2 hours and days as 22 hours (the shortest a calendar
-- month or day gets across daylight-saving shifts), zero when a period has a negative part.
-- The sweep subtracts it from the clock to bound its index scans on age: no row younger than that
-- can be due, whatever its tenant's own period, and the exact per-tenant test follows.  NULL when
-- no policy names the key (then nothing is due).
CREATE FUNCTION cscp.retention_floor(key text) RETURNS interval
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
COMMENT ON FUNCTION cscp.retention_floor(text) IS
  'The shortest time any policy''s retention period under a key can span (the policies the caller sees), a bound for the sweep''s scans';

-- The sweep's expiry of contexts, in C (context_fsm.c): the first `batch` rows due in
-- cscp.context_live (whose expires_at is at most a minute before the context's own), each
-- context still live and past its own expires_at at cscp.now() locked (those a transaction holds
-- skipped) and recorded expired with reason 'ttl', reached by the row ids its locked scan
-- returned; the trigger moves each from cscp.context_live to cscp.context_retired.  Returns the
-- number expired.
CREATE FUNCTION cscp._expire_contexts(batch int) RETURNS bigint
    AS 'MODULE_PATHNAME', 'cscp_expire_contexts' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION cscp._expire_contexts(int) IS
  'Internal: the sweep''s expiry of up to batch contexts past their TTL';

-- The part of cscp.sweep that deletes (C, src/operations/sweep.c, calls it directly after the steps it
-- takes itself: the windows, the conversations' timeouts, the contexts' expiry).
-- Each action reaches its rows by the row ids its ordered, locked scan returned (a TID scan),
-- never by a join the planner could turn into a scan of the whole table; the rows are locked, so
-- their ids hold, and the action's condition is tested again on the row it changes.  The
-- retention of a row is its tenant's (cscp.policy_effective); nothing retired after
-- cscp.retention_floor can be past it.
CREATE FUNCTION cscp._sweep_purge(batch int, v_now timestamptz,
                                  OUT n_docs bigint, OUT n_ws bigint, OUT n_purged bigint,
                                  OUT n_commands bigint, OUT n_evidence bigint,
                                  OUT n_conversations bigint, OUT n_turns bigint,
                                  OUT n_events bigint, OUT n_answers bigint, OUT n_frames bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_retired_evidence timestamptz := v_now - cscp.retention_floor('retention_evidence');
    v_retired_turns timestamptz := v_now - cscp.retention_floor('retention_turns');
    n_other bigint;
    r record;
BEGIN
    n_commands := 0;
    n_evidence := 0;
    n_conversations := 0;
    n_turns := 0;
    n_events := 0;
    n_answers := 0;
    n_frames := 0;
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
    -- the shortest retention any policy gives it (cscp.retention_floor), so it reads what is
    -- due and, beyond, only what tenants with a longer retention keep.  The context_unlist
    -- trigger takes each deleted context's row out of cscp.context_retired.
    n_purged := 0;
    FOR r IN
        SELECT k.status, k.key, v_now - cscp.retention_floor(k.key) AS bound
          FROM (VALUES ('expired'::cscp.context_status, 'retention_expired'),
                       ('closed'::cscp.context_status, 'retention_closed')) k (status, key)
    LOOP
        CONTINUE WHEN r.bound IS NULL;
        DELETE FROM cscp.context c
         WHERE c.ctid = ANY (ARRAY(
                   SELECT x.ctid
                     FROM (SELECT y.tenant_id, y.context_id FROM cscp.context_retired y
                            WHERE y.status = r.status AND y.retired_at <= r.bound
                              AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> r.key)::interval <= v_now
                            ORDER BY y.retired_at
                            LIMIT batch) d
                    CROSS JOIN LATERAL (
                          SELECT z.ctid FROM cscp.context z
                           WHERE z.tenant_id = d.tenant_id AND z.context_id = d.context_id
                             AND z.status = r.status
                             FOR UPDATE SKIP LOCKED) x))
           AND c.status = r.status
           AND c.updated_at + (cscp.policy_effective(c.tenant_id) ->> r.key)::interval <= v_now;
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
                                  AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> r.key)::interval <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
    END LOOP;

    -- Finished commands past their tenant's retention_evidence go with their evidence chain;
    -- then standalone evidence, and answers and frames no command needs any more.  Only a sweep run
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
                       AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
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
                                  AND y.retired_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
                                ORDER BY y.retired_at
                                LIMIT batch) d
                        WHERE NOT d.present));
        END IF;
        DELETE FROM cscp.evidence e
         WHERE e.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.evidence x
                    WHERE x.command_id IS NULL
                      AND x.created_at <= v_retired_evidence
                      AND x.created_at + (cscp.policy_effective(x.tenant_id) ->> 'retention_evidence')::interval <= v_now
                    ORDER BY x.created_at
                    LIMIT batch))
           AND e.command_id IS NULL;
        GET DIAGNOSTICS n_other = ROW_COUNT;
        n_evidence := n_evidence + n_other;
        -- An answer for a command stays as long as the command: a confirmed command's yes is
        -- the record that it was confirmed (cscp.check_invariants, confirmed_without_answer),
        -- and the command may outlive its answer's retention, unfinished or finished later.
        DELETE FROM cscp.answer a
         WHERE a.ctid = ANY (ARRAY(
                   SELECT x.ctid FROM cscp.answer x
                    WHERE x.created_at <= v_retired_evidence
                      AND x.created_at + (cscp.policy_effective(x.tenant_id) ->> 'retention_evidence')::interval <= v_now
                      AND NOT EXISTS (SELECT 1 FROM cscp.command y
                                       WHERE y.tenant_id = x.tenant_id AND y.command_id = x.command_id)
                    ORDER BY x.created_at
                    LIMIT batch))
           AND NOT EXISTS (SELECT 1 FROM cscp.command y
                            WHERE y.tenant_id = a.tenant_id AND y.command_id = a.command_id);
        GET DIAGNOSTICS n_answers = ROW_COUNT;
        DELETE FROM cscp.frame f
         WHERE f.ctid = ANY (ARRAY(
                   SELECT y.ctid FROM cscp.frame y
                    WHERE y.created_at <= v_retired_evidence
                      AND y.created_at + (cscp.policy_effective(y.tenant_id) ->> 'retention_evidence')::interval <= v_now
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
               AND c.closed_at + (cscp.policy_effective(c.tenant_id) ->> 'retention_turns')::interval <= v_now
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
END
$$;
COMMENT ON FUNCTION cscp._sweep_purge(int, timestamptz) IS
  'Internal: the deletions of cscp.sweep, called by its C half';

-- C (src/operations/sweep.c), with its caller's rights: after a call of this session that left work behind,
-- the pause first (worker.c); then, batch rows per action, FOR UPDATE SKIP LOCKED: confirmation
-- and approval windows that have passed are lapsed (the command rejected, the slot cleared, the
-- context back to active; context first, as everywhere), open conversations past their deadline
-- closed (before the contexts' own expiry, so that a context the conversation outlived is
-- recorded expired with the evidence of its conversation's close), live contexts past their TTL
-- expired (cscp._expire_contexts); then the deletions of cscp._sweep_purge.
CREATE FUNCTION cscp.sweep(batch int DEFAULT 10000) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_sweep' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION cscp.sweep(int) IS
  'Lapse confirmation and approval windows, time out conversations past their deadline, expire live contexts past their TTL, delete expired documents and working-set items and whatever is past retention, batch rows per action; returns counts';
