\i sql/include/helpers.sql
-- cscp.context_live: the live context of each (tenant, conversation, actor), kept by the guard
-- trigger whoever writes cscp.context; its expires_at a lower bound at most a minute before the
-- context's; uses and expiries of a context are HOT updates (no index of cscp.context names a
-- column they change).  Rows of this file belong to tenant 'lv'.
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();
SET timezone = 'UTC';
\set SHOW_CONTEXT never
SET cscp.clock = '2026-04-01 10:00:00+00';

-- The triple's row in cscp.context_live: whether it names the live context, and both expiries.
CREATE FUNCTION pg_temp.live(conv text)
RETURNS TABLE (names_live_context boolean, live_expires_at timestamptz, context_expires_at timestamptz)
LANGUAGE sql AS $$
    SELECT c.context_id IS NOT NULL, l.expires_at, c.expires_at
      FROM cscp.context_live l
      LEFT JOIN cscp.context c
             ON c.tenant_id = l.tenant_id AND c.context_id = l.context_id
            AND c.status IN ('active', 'pending', 'blocked')
     WHERE l.tenant_id = 'lv' AND l.conversation_id = conv
$$;
CREATE FUNCTION pg_temp.id(conv text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.context_id FROM cscp.context c
     WHERE c.tenant_id = 'lv' AND c.conversation_id = conv ORDER BY c.created_at DESC LIMIT 1
$$;

---------------------------------------------------------------------------------------------------
-- Opening a context puts its row in; a second open finds it through that row.
SELECT status, expires_at FROM cscp.context_open('lv', 'c1', 'a', '{}', interval '10 minutes');
SELECT * FROM pg_temp.live('c1');
SELECT (cscp.context_open('lv', 'c1', 'a')).context_id = pg_temp.id('c1') AS same_context;

-- A use that extends the context within the minute its expiry was in leaves the row alone; one
-- that moves it into a later minute raises the row's expires_at to the context's.
SET cscp.clock = '2026-04-01 10:00:20+00';
SELECT expires_at FROM cscp.slot_set(pg_temp.id('c1'), 'x_a', '1');
SELECT * FROM pg_temp.live('c1');
SET cscp.clock = '2026-04-01 10:01:05+00';
SELECT expires_at FROM cscp.slot_set(pg_temp.id('c1'), 'x_a', '2');
SELECT * FROM pg_temp.live('c1');

-- A write that moves the expiry earlier lowers it.
UPDATE cscp.context SET expires_at = '2026-04-01 10:05:00+00' WHERE tenant_id = 'lv' AND conversation_id = 'c1';
SELECT * FROM pg_temp.live('c1');

-- Retired, the context leaves: closed here; expired, and deleted, below.
SELECT status FROM cscp.context_transition(pg_temp.id('c1'), 'closed');
SELECT count(*) AS live_rows FROM cscp.context_live WHERE tenant_id = 'lv' AND conversation_id = 'c1';
SELECT (cscp.context_open('lv', 'c1', 'a')).status AS reopened;
SELECT * FROM pg_temp.live('c1');
DELETE FROM cscp.context WHERE tenant_id = 'lv' AND conversation_id = 'c1' AND status = 'active';
SELECT count(*) AS live_rows FROM cscp.context_live WHERE tenant_id = 'lv' AND conversation_id = 'c1';

-- A second live context for the triple, written directly, is refused (23505), and nothing changes.
SELECT (cscp.context_open('lv', 'c1', 'a')).status;
SELECT snap();
SELECT try($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('lv', 'c1', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$) AS second_live;
SELECT changes();

---------------------------------------------------------------------------------------------------
-- The sweep goes by the row's expires_at and expires what is past its own: c2's row says 10:10,
-- but a use in the same minute moved the context to 10:10:40.
SET cscp.clock = '2026-04-01 10:00:00+00';
SELECT status FROM cscp.context_open('lv', 'c2', 'a', '{}', interval '10 minutes');
SET cscp.clock = '2026-04-01 10:00:40+00';
SELECT expires_at FROM cscp.slot_set(pg_temp.id('c2'), 'x_a', '1');
SELECT * FROM pg_temp.live('c2');
SET cscp.clock = '2026-04-01 10:10:20+00';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT status FROM cscp.context WHERE context_id = pg_temp.id('c2');
SELECT * FROM pg_temp.live('c2');
SET cscp.clock = '2026-04-01 10:10:41+00';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT status, reason FROM cscp.context WHERE context_id = pg_temp.id('c2');
SELECT count(*) AS live_rows FROM cscp.context_live WHERE tenant_id = 'lv' AND conversation_id = 'c2';

---------------------------------------------------------------------------------------------------
-- Uses, transitions and the expiry of a context are HOT updates: no index entry is added.
SET cscp.clock = '2026-04-01 11:00:00+00';
SELECT status FROM cscp.context_open('lv', 'c3', 'a', '{}', interval '10 minutes');
BEGIN;
SELECT pg_stat_get_xact_tuples_updated('cscp.context'::regclass) AS updated_before,
       pg_stat_get_xact_tuples_hot_updated('cscp.context'::regclass) AS hot_before \gset
SELECT count(*) FROM cscp.slot_set(pg_temp.id('c3'), 'active_intent', '"pay"');
SELECT count(*) FROM cscp.slot_set(pg_temp.id('c3'), 'x_b', '2');
SELECT status FROM cscp.context_transition(pg_temp.id('c3'), 'pending');
SELECT status FROM cscp.context_transition(pg_temp.id('c3'), 'active');
SET LOCAL cscp.clock = '2026-04-01 11:20:00+00';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT status FROM cscp.context WHERE context_id = pg_temp.id('c3');
SELECT pg_stat_get_xact_tuples_updated('cscp.context'::regclass) - :updated_before AS updates,
       pg_stat_get_xact_tuples_hot_updated('cscp.context'::regclass) - :hot_before AS hot_updates;
COMMIT;

---------------------------------------------------------------------------------------------------
-- Written around the trigger (session_replication_role = replica), a live context deleted leaves
-- its row behind; the next open takes that row over rather than failing on it.
SELECT status FROM cscp.context_open('lv', 'c4', 'a');
BEGIN;
SET LOCAL session_replication_role = replica;
DELETE FROM cscp.context WHERE tenant_id = 'lv' AND conversation_id = 'c4';
SET LOCAL session_replication_role = origin;
SELECT count(*) AS stale_rows FROM cscp.context_live WHERE tenant_id = 'lv' AND conversation_id = 'c4';
SELECT status FROM cscp.context_open('lv', 'c4', 'a');
SELECT * FROM pg_temp.live('c4');
ROLLBACK;

-- TRUNCATE empties it with the contexts.
BEGIN;
TRUNCATE cscp.context;
SELECT count(*) AS live_rows FROM cscp.context_live;
ROLLBACK;

-- Application roles read only their tenant's rows, and may not write any.
CREATE ROLE lv_app;
SELECT cscp.grant_app('lv_app');
SET ROLE lv_app;
SET cscp.tenant_id = 'lv';
SELECT count(*) AS visible, bool_and(tenant_id = 'lv') AS own_tenant_only FROM cscp.context_live;
SELECT try($$DELETE FROM cscp.context_live$$) AS delete_rows;
SELECT try($$UPDATE cscp.context_live SET expires_at = now()$$) AS update_rows;
SELECT try($$INSERT INTO cscp.context_live VALUES ('lv', 'c9', 'a', gen_random_uuid(), now())$$) AS insert_row;
-- Through cscp it works as before: the open claims the triple's row as the owner, then inserts.
SELECT status FROM cscp.context_open('lv', 'c5', 'a');
SELECT * FROM pg_temp.live('c5');
-- Its INSERT is judged like any: a second live context for the triple is refused (23505), also
-- one that takes the live context's id, which the triple's row names (the primary key refuses
-- it); the open returns the live one; a context no longer live gives its triple up.
SELECT try($$INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('lv', 'c5', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$) AS second_live;
SELECT try(format($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
                    VALUES ('lv', %L, 'c5', 'a', cscp.now() + interval '1 hour', interval '1 hour')$$,
                  pg_temp.id('c5'))) AS same_id;
SELECT (cscp.context_open('lv', 'c5', 'a')).context_id = pg_temp.id('c5') AS open_returns_live;
SELECT (cscp.context_transition(pg_temp.id('c5'), 'closed')).status;
INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('lv', 'c5', 'a', cscp.now() + interval '1 hour', interval '1 hour');
SELECT * FROM pg_temp.live('c5');
SELECT (cscp.context_open('lv', 'c5', 'a')).context_id = l.context_id AS open_returns_inserted
  FROM cscp.context_live l WHERE l.tenant_id = 'lv' AND l.conversation_id = 'c5';
SELECT status, count(*) FROM cscp.context WHERE tenant_id = 'lv' AND conversation_id = 'c5' GROUP BY 1 ORDER BY 1;
RESET cscp.tenant_id;
RESET ROLE;
REVOKE ALL ON ALL TABLES IN SCHEMA cscp FROM lv_app;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cscp FROM lv_app;
REVOKE ALL ON SCHEMA cscp FROM lv_app;
DROP ROLE lv_app;

SELECT count(*) AS problems FROM cscp.check_invariants('lv');

-- Leave nothing for the suites after this one.
DELETE FROM cscp.context WHERE tenant_id = 'lv';
SELECT count(*) AS live_rows_left FROM cscp.context_live WHERE tenant_id = 'lv';
RESET cscp.clock;
