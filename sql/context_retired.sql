\i sql/include/helpers.sql
-- cscp.context_retired: one row per expired or closed context, with the time it retired (its
-- updated_at), kept by the context triggers whoever writes cscp.context; the sweep's purge of
-- retired contexts goes through it, by status and age.  Rows of this file belong to tenants
-- 'rt' and 'rt_long'.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
SET cscp.clock = '2026-05-01 10:00:00+00';
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();

-- A context's row in cscp.context_retired, beside the context's own status and updated_at.
CREATE FUNCTION pg_temp.retired(conv text)
RETURNS TABLE (status cscp.context_status, retired_at timestamptz, context_status cscp.context_status,
               context_updated_at timestamptz)
LANGUAGE sql AS $$
    SELECT r.status, r.retired_at, c.status, c.updated_at
      FROM cscp.context_retired r
      LEFT JOIN cscp.context c ON c.tenant_id = r.tenant_id AND c.context_id = r.context_id
     WHERE r.tenant_id IN ('rt', 'rt_long') AND r.conversation_id = conv
     ORDER BY r.retired_at
$$;
CREATE FUNCTION pg_temp.id(conv text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.context_id FROM cscp.context c
     WHERE c.tenant_id IN ('rt', 'rt_long') AND c.conversation_id = conv ORDER BY c.created_at DESC LIMIT 1
$$;

---------------------------------------------------------------------------------------------------
-- A live context has no row; closing it writes one, in the statement that takes it out of
-- cscp.context_live.
SELECT status FROM cscp.context_open('rt', 'r1', 'a', '{}', interval '10 minutes');
SELECT count(*) AS retired_rows FROM cscp.context_retired WHERE tenant_id = 'rt';
SET cscp.clock = '2026-05-01 10:02:00+00';
SELECT status FROM cscp.context_transition(pg_temp.id('r1'), 'closed');
SELECT * FROM pg_temp.retired('r1');
SELECT count(*) AS live_rows FROM cscp.context_live WHERE tenant_id = 'rt' AND conversation_id = 'r1';

-- The sweep's expiry writes one too, with the time the sweep ran.
SELECT status FROM cscp.context_open('rt', 'r2', 'a', '{}', interval '10 minutes');
SET cscp.clock = '2026-05-01 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_expired' AS expired;
SELECT * FROM pg_temp.retired('r2');

-- Deleting a retired context takes its row out; deleting a live one leaves the others alone.
SELECT status FROM cscp.context_open('rt', 'r3', 'a', '{}', interval '10 minutes');
SELECT status FROM cscp.context_transition(pg_temp.id('r3'), 'closed');
SELECT status FROM cscp.context_open('rt', 'r3', 'a', '{}', interval '10 minutes');
DELETE FROM cscp.context WHERE tenant_id = 'rt' AND conversation_id = 'r3' AND status = 'closed';
SELECT count(*) AS retired_rows_of_r3 FROM cscp.context_retired WHERE conversation_id = 'r3';
DELETE FROM cscp.context WHERE tenant_id = 'rt' AND conversation_id = 'r3';
SELECT count(*) AS retired_rows FROM cscp.context_retired WHERE tenant_id = 'rt';

-- TRUNCATE empties it with the contexts.
BEGIN;
TRUNCATE cscp.context;
SELECT count(*) AS retired_rows FROM cscp.context_retired;
ROLLBACK;

---------------------------------------------------------------------------------------------------
-- The purge: expired contexts go after retention_expired (1 day), closed ones after
-- retention_closed (7 days), each counted from the time it retired; tenant rt_long keeps its
-- expired contexts 3 days.
SELECT cscp.policy_set('rt_long', '{"retention_expired": "3 days"}') ->> 'retention_expired' AS rt_long_keeps;
SET cscp.clock = '2026-05-01 10:00:00+00';
SELECT status FROM cscp.context_open('rt_long', 'l1', 'a', '{}', interval '10 minutes');
SET cscp.clock = '2026-05-01 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_expired' AS expired;
SELECT conv, (x).status, (x).retired_at FROM (VALUES ('r1'), ('r2'), ('l1')) v (conv),
       LATERAL pg_temp.retired(conv) x ORDER BY conv;
-- A second before a day has passed since r2 expired, nothing; then r2, and only r2.
SET cscp.clock = '2026-05-02 10:19:59+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SET cscp.clock = '2026-05-02 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT count(*) AS r2_rows FROM cscp.context WHERE conversation_id = 'r2';
SELECT count(*) AS r2_retired_rows FROM cscp.context_retired WHERE conversation_id = 'r2';
-- rt_long's l1 after three days, r1 (closed) after seven.
SET cscp.clock = '2026-05-04 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT count(*) AS l1_rows FROM cscp.context WHERE conversation_id = 'l1';
SET cscp.clock = '2026-05-08 10:01:59+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SET cscp.clock = '2026-05-08 10:02:00+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT count(*) AS retired_rows FROM cscp.context_retired WHERE tenant_id IN ('rt', 'rt_long');
DELETE FROM cscp.policy WHERE tenant_id = 'rt_long';

-- At most `batch` per call, oldest first.
SET cscp.clock = '2026-05-10 10:00:00+00';
SELECT count(*) FROM (SELECT cscp.context_transition((cscp.context_open('rt', 'b' || i, 'a')).context_id, 'closed')
                        FROM generate_series(1, 3) i) s;
SET cscp.clock = '2026-05-17 10:00:00+00';
SELECT cscp.sweep(2) ->> 'contexts_purged' AS first_call, cscp.sweep(2) ->> 'contexts_purged' AS second_call;

---------------------------------------------------------------------------------------------------
-- Live contexts, however old, cost the purge nothing: it reads no context that is not due.
-- (Before cscp.context_retired, the purge went by created_at and read each of these on every
-- call.)  2,000 contexts opened on May 20th, kept live by a TTL of a week; a sweep three days
-- later reads fewer than 10 rows of cscp.context.
SET cscp.clock = '2026-05-20 10:00:00+00';
INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
SELECT 'rt', 'old' || i, 'a', cscp.now() + interval '7 days', interval '7 days'
  FROM generate_series(1, 2000) i;
-- (As autovacuum would: statistics for the grown table, so the sweep's plans are made anew.)
ANALYZE cscp.context;
SET cscp.clock = '2026-05-23 10:00:00+00';
BEGIN;
SELECT pg_stat_get_xact_tuples_fetched('cscp.context'::regclass)
       + pg_stat_get_xact_tuples_returned('cscp.context'::regclass) AS read_before \gset
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT pg_stat_get_xact_tuples_fetched('cscp.context'::regclass)
       + pg_stat_get_xact_tuples_returned('cscp.context'::regclass) - :read_before < 10 AS reads_few;
COMMIT;
DELETE FROM cscp.context WHERE tenant_id = 'rt' AND conversation_id LIKE 'old%';

---------------------------------------------------------------------------------------------------
-- Written around the triggers (session_replication_role = replica): a retired context deleted
-- leaves its row, a context retired gets none; check_invariants reports both, and the owner's
-- sweep drops the row of the deleted context once it is due.
SET cscp.clock = '2026-06-01 10:00:00+00';
SELECT status FROM cscp.context_open('rt', 'o1', 'a');
SELECT status FROM cscp.context_transition(pg_temp.id('o1'), 'closed');
SELECT status FROM cscp.context_open('rt', 'o2', 'a');
BEGIN;
SET LOCAL session_replication_role = replica;
DELETE FROM cscp.context WHERE tenant_id = 'rt' AND conversation_id = 'o1';
UPDATE cscp.context SET status = 'closed' WHERE tenant_id = 'rt' AND conversation_id = 'o2';
DELETE FROM cscp.context_live WHERE tenant_id = 'rt' AND conversation_id = 'o2';
COMMIT;
SELECT kind, detail FROM cscp.check_invariants('rt') ORDER BY detail;
DELETE FROM cscp.context WHERE tenant_id = 'rt' AND conversation_id = 'o2';
SET cscp.clock = '2026-06-08 10:00:00+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT count(*) AS retired_rows FROM cscp.context_retired WHERE tenant_id = 'rt';
SELECT count(*) AS problems FROM cscp.check_invariants('rt');

---------------------------------------------------------------------------------------------------
-- The sweep's expiry (cscp._expire_contexts) moves each context it expires as any retirement is
-- moved: every context expired leaves cscp.context_live and gets its row here, with its own
-- updated_at; at most `batch` a call.
SET cscp.clock = '2026-06-01 10:00:00+00';
SELECT count(*) AS opened
  FROM generate_series(1, 30) i, cscp.context_open('rt', 'b' || i, 'a', '{}', interval '10 minutes') c;
SET cscp.clock = '2026-06-01 10:20:00+00';
CREATE FUNCTION pg_temp.batch_state()
RETURNS TABLE (expired bigint, retired_rows bigint, matching_rows bigint, live_rows bigint)
LANGUAGE sql AS $$
    SELECT count(*) FILTER (WHERE c.status = 'expired'),
           count(r.context_id),
           count(r.context_id) FILTER (WHERE r.status = 'expired' AND r.retired_at = c.updated_at
                                         AND r.conversation_id = c.conversation_id),
           count(l.context_id)
      FROM cscp.context c
      LEFT JOIN cscp.context_retired r ON r.tenant_id = c.tenant_id AND r.context_id = c.context_id
      LEFT JOIN cscp.context_live l ON l.tenant_id = c.tenant_id AND l.context_id = c.context_id
     WHERE c.tenant_id = 'rt' AND c.conversation_id LIKE 'b%'
$$;
SELECT cscp._expire_contexts(25) AS expired;
SELECT * FROM pg_temp.batch_state();
SELECT cscp._expire_contexts(25) AS expired;
SELECT * FROM pg_temp.batch_state();
SELECT cscp._expire_contexts(25) AS expired;
SELECT try($$SELECT cscp._expire_contexts(0)$$) AS zero_batch, cscp._expire_contexts(NULL) AS null_batch;

-- A trigger of the user's that deletes a context as it expires (an AFTER trigger, so it runs
-- after the UPDATE's moves): the deleted context leaves no row behind, and the others keep
-- theirs.
SET cscp.clock = '2026-06-02 10:00:00+00';
SELECT count(*) AS opened
  FROM generate_series(1, 3) i, cscp.context_open('rt', 'd' || i, 'a', '{}', interval '10 minutes') c;
CREATE FUNCTION public.rt_drop_d2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'expired' AND NEW.conversation_id = 'd2' THEN
        DELETE FROM cscp.context WHERE tenant_id = NEW.tenant_id AND context_id = NEW.context_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER rt_drop_d2 AFTER UPDATE ON cscp.context FOR EACH ROW EXECUTE FUNCTION public.rt_drop_d2();
SET cscp.clock = '2026-06-02 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_expired' AS expired;
DROP TRIGGER rt_drop_d2 ON cscp.context;
DROP FUNCTION public.rt_drop_d2();
SELECT r.conversation_id, r.status, c.status AS context_status
  FROM cscp.context_retired r
  LEFT JOIN cscp.context c ON c.tenant_id = r.tenant_id AND c.context_id = r.context_id
 WHERE r.tenant_id = 'rt' AND r.conversation_id LIKE 'd%'
 ORDER BY 1;
SELECT count(*) AS live_rows FROM cscp.context_live WHERE tenant_id = 'rt' AND conversation_id LIKE 'd%';
SELECT count(*) AS problems FROM cscp.check_invariants('rt');

-- A user's trigger that retires another context in a subtransaction and rolls it back: that
-- retirement is made in the subtransaction, so the rollback undoes all of it; e2 stays live,
-- with its row in cscp.context_live and none here.
SET cscp.clock = '2026-06-03 10:00:00+00';
SELECT status FROM cscp.context_open('rt', 'e1', 'a', '{}', interval '10 minutes');
SELECT status FROM cscp.context_open('rt', 'e2', 'a', '{}', interval '1 day');
CREATE FUNCTION public.rt_close_e2() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'expired' AND NEW.conversation_id = 'e1' THEN
        BEGIN
            UPDATE cscp.context SET status = 'closed'
             WHERE tenant_id = 'rt' AND conversation_id = 'e2' AND status = 'active';
            RAISE EXCEPTION 'undo';
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER rt_close_e2 AFTER UPDATE ON cscp.context FOR EACH ROW EXECUTE FUNCTION public.rt_close_e2();
SET cscp.clock = '2026-06-03 10:20:00+00';
SELECT cscp.sweep() ->> 'contexts_expired' AS expired;
DROP TRIGGER rt_close_e2 ON cscp.context;
DROP FUNCTION public.rt_close_e2();
SELECT c.conversation_id, c.status, l.context_id IS NOT NULL AS live_row, r.status AS retired_row
  FROM cscp.context c
  LEFT JOIN cscp.context_live l ON l.tenant_id = c.tenant_id AND l.context_id = c.context_id
  LEFT JOIN cscp.context_retired r ON r.tenant_id = c.tenant_id AND r.context_id = c.context_id
 WHERE c.tenant_id = 'rt' AND c.conversation_id LIKE 'e%'
 ORDER BY 1;
SELECT count(*) AS problems FROM cscp.check_invariants('rt');
DELETE FROM cscp.context WHERE tenant_id = 'rt'
   AND (conversation_id LIKE 'b%' OR conversation_id LIKE 'd%' OR conversation_id LIKE 'e%');

---------------------------------------------------------------------------------------------------
-- Application roles read only their tenant's rows, and may not write any; their sweep purges
-- their tenant's retired contexts, and the trigger takes the rows out as the owner.
SET cscp.clock = '2026-07-01 10:00:00+00';
SELECT status FROM cscp.context_transition((cscp.context_open('rt', 'p1', 'a')).context_id, 'closed');
SELECT status FROM cscp.context_transition((cscp.context_open('rt_other', 'p1', 'a')).context_id, 'closed');
CREATE ROLE rt_app;
SELECT cscp.grant_app('rt_app');
SET cscp.clock = '2026-07-08 10:00:00+00';
SET ROLE rt_app;
SET cscp.tenant_id = 'rt';
SELECT count(*) AS visible, bool_and(tenant_id = 'rt') AS own_tenant_only FROM cscp.context_retired;
SELECT try($$DELETE FROM cscp.context_retired$$) AS delete_rows;
SELECT try($$UPDATE cscp.context_retired SET retired_at = now()$$) AS update_rows;
SELECT try($$INSERT INTO cscp.context_retired VALUES ('rt', 'p9', gen_random_uuid(), 'closed', now())$$) AS insert_row;
SELECT cscp.sweep() ->> 'contexts_purged' AS purged;
SELECT count(*) AS retired_rows FROM cscp.context_retired;
RESET cscp.tenant_id;
RESET ROLE;
SELECT tenant_id, count(*) AS retired_rows FROM cscp.context_retired
 WHERE tenant_id IN ('rt', 'rt_other') GROUP BY 1 ORDER BY 1;
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM rt_app;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM rt_app;
REVOKE ALL ON SCHEMA cscp FROM rt_app;
DROP ROLE rt_app;

-- Leave nothing for the suites after this one.
DELETE FROM cscp.context WHERE tenant_id IN ('rt', 'rt_long', 'rt_other');
SELECT count(*) AS retired_rows_left FROM cscp.context_retired WHERE tenant_id IN ('rt', 'rt_long', 'rt_other');
SELECT count(*) AS problems FROM unnest(ARRAY['rt', 'rt_long', 'rt_other']) t, cscp.check_invariants(t);
RESET cscp.clock;
