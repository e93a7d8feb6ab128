\i sql/include/helpers.sql
-- cscp.command_window and cscp.command_retired: the open confirmation and approval windows and
-- the finished commands, kept by the command triggers whoever writes a command, and read by the
-- sweep.  No index of cscp.command names a column a transition changes, so every step of a
-- command is a HOT update.
-- Rows of this file belong to tenant 'cl'; random ids are masked.
-- The sweeps below count over the whole database: what earlier tests left is made inert first.
SELECT settle();
SET cscp.clock = '2026-08-01 09:00:00+00';
SET timezone = 'UTC';
\set SHOW_CONTEXT never

CREATE FUNCTION pg_temp.cmd(key text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.command_id FROM cscp.command c WHERE c.tenant_id = 'cl' AND c.idempotency_key = key
$$;
-- What both lists hold for a command: 'window <end>' and 'retired <time>'.
CREATE FUNCTION pg_temp.lists(key text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(l, ', ' ORDER BY l), 'none')
      FROM (SELECT 'window ' || w.window_expires_at AS l FROM cscp.command_window w
             WHERE w.tenant_id = 'cl' AND w.command_id = pg_temp.cmd(key)
            UNION ALL
            SELECT 'retired ' || r.retired_at FROM cscp.command_retired r
             WHERE r.tenant_id = 'cl' AND r.command_id = pg_temp.cmd(key)) x
$$;

SELECT cscp.policy_set('cl', '{"retention_evidence": "1 day"}') IS NOT NULL AS policy;
SELECT (cscp.context_open('cl', 'c1', 'ana', '{}', interval '1 day')).status;

---------------------------------------------------------------------------------------------------
-- A mutating command: its confirmation window is listed from the submit until the answer; its
-- steps list nothing; once finished it is listed by the time of its last transition.
SELECT state FROM cscp.command_submit('cl', 'c1', 'ana', 'k1', 'transfer', true, '{m1}');
SELECT pg_temp.lists('k1'), window_expires_at FROM cscp.command WHERE command_id = pg_temp.cmd('k1');
SET cscp.clock = '2026-08-01 09:01:00+00';
SELECT outcome FROM cscp.confirm('cl', 'c1', 'ana', 'm2', true);
SELECT pg_temp.lists('k1');
-- An approval window is listed too.
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('k1'), 'authz_pending', 'approval_required');
SELECT pg_temp.lists('k1') = 'window ' || (SELECT window_expires_at FROM cscp.command WHERE command_id = pg_temp.cmd('k1'))
       AS approval_window_listed;
SET cscp.clock = '2026-08-01 09:02:00+00';
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('k1'), 'authorized');
SELECT pg_temp.lists('k1');
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('k1'), 'started');
SET cscp.clock = '2026-08-01 09:03:00+00';
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('k1'), 'executed');
SELECT pg_temp.lists('k1');
-- A refused step changes nothing.
SELECT accepted, reason_code FROM cscp.command_transition(pg_temp.cmd('k1'), 'started');
SELECT pg_temp.lists('k1');
-- Compensated after executed (by its executed compensation): the row follows the new time.
SET cscp.clock = '2026-08-01 09:04:00+00';
SELECT state FROM cscp.command_recover(pg_temp.cmd('k1'), 'compensate', 'k1-comp');
SELECT outcome FROM cscp.confirm('cl', 'c1', 'ana', 'm2-comp', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('k1-comp'), s.st, 'step-' || s.st) t;
SELECT state, last_transition_at FROM cscp.command WHERE command_id = pg_temp.cmd('k1');
SELECT pg_temp.lists('k1'), pg_temp.lists('k1-comp');

---------------------------------------------------------------------------------------------------
-- Every step of a command is a HOT update: no index entry is added.
SET cscp.clock = '2026-08-01 10:00:00+00';
BEGIN;
SELECT pg_stat_get_xact_tuples_updated('cscp.command'::regclass) AS updated_before,
       pg_stat_get_xact_tuples_hot_updated('cscp.command'::regclass) AS hot_before \gset
SELECT state FROM cscp.command_submit('cl', 'c1', 'ana', 'k2', 'transfer', true, '{m3}');
SELECT outcome FROM cscp.confirm('cl', 'c1', 'ana', 'm4', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('k2'), s.st) t;
SELECT pg_stat_get_xact_tuples_updated('cscp.command'::regclass) - :updated_before AS updates,
       pg_stat_get_xact_tuples_hot_updated('cscp.command'::regclass) - :hot_before AS hot_updates;
COMMIT;

---------------------------------------------------------------------------------------------------
-- The sweep finds a lapsed window through cscp.command_window: the command is rejected, its
-- window row goes and its retired row comes.
SELECT state FROM cscp.command_submit('cl', 'c1', 'ana', 'k3', 'transfer', true, '{m5}');
SELECT pg_temp.lists('k3') LIKE 'window %' AS window_listed;
SET cscp.clock = '2026-08-01 10:30:00+00';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT state, reason_code FROM cscp.command WHERE command_id = pg_temp.cmd('k3');
SELECT pg_temp.lists('k3');

---------------------------------------------------------------------------------------------------
-- Rows left behind by writes around the triggers (session_replication_role = replica) do not
-- hold the head of either queue: the owner's sweep drops those that are due.
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO cscp.command_window VALUES ('cl', 'c1', cscp.routing_id('c1'), '2026-08-01 10:00:00+00',
                                        NULL, 'confirmation');
INSERT INTO cscp.command_retired VALUES ('cl', 'c1', cscp.routing_id('c1'), '2026-07-01 10:00:00+00');
COMMIT;
SELECT count(*) AS stale_rows FROM cscp.check_invariants('cl') WHERE kind = 'unlisted_command';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT count(*) AS stale_rows FROM cscp.check_invariants('cl') WHERE kind = 'unlisted_command';

---------------------------------------------------------------------------------------------------
-- A command deleted takes its row with it; TRUNCATE empties both lists.
SELECT state FROM cscp.command_submit('cl', 'c1', 'ana', 'k4', 'transfer', true, '{m6}');
SELECT state FROM cscp.command_submit('cl', 'c1', 'ana', 'k5', 'lookup', false, '{m7}');
SELECT accepted FROM cscp.command_transition(pg_temp.cmd('k5'), 'canceled');
SELECT pg_temp.lists('k4') LIKE 'window %' AS k4_window, pg_temp.lists('k5') LIKE 'retired %' AS k5_retired;
BEGIN;
DELETE FROM cscp.command WHERE command_id IN (pg_temp.cmd('k4'), pg_temp.cmd('k5'));
SELECT (SELECT count(*) FROM cscp.command_window WHERE tenant_id = 'cl') AS window_rows,
       (SELECT count(*) FROM cscp.command_retired WHERE tenant_id = 'cl') AS retired_rows;
ROLLBACK;
BEGIN;
TRUNCATE cscp.command;
SELECT (SELECT count(*) FROM cscp.command_window) AS window_rows,
       (SELECT count(*) FROM cscp.command_retired) AS retired_rows;
ROLLBACK;
SELECT count(*) AS invariant_problems FROM cscp.check_invariants('cl');

---------------------------------------------------------------------------------------------------
-- The purge finds finished commands through cscp.command_retired, past the tenant's
-- retention_evidence; their rows go with them.  The same sweep lapses k4's window: rejected now,
-- k4 is listed until its own retention has passed.
SELECT count(*) AS retired_rows FROM cscp.command_retired WHERE tenant_id = 'cl';
SET cscp.clock = '2026-08-03 09:00:00+00';
SELECT cscp.sweep() IS NOT NULL AS swept;
SELECT idempotency_key, state, reason_code, pg_temp.lists(idempotency_key) FROM cscp.command WHERE tenant_id = 'cl';
SELECT count(*) AS window_rows, (SELECT count(*) FROM cscp.command_retired WHERE tenant_id = 'cl') AS retired_rows
  FROM cscp.command_window WHERE tenant_id = 'cl';

---------------------------------------------------------------------------------------------------
-- Only the owner writes the lists: an application role reads its own tenant's rows.
CREATE ROLE cl_app;
SELECT cscp.grant_app('cl_app');
SET ROLE cl_app;
SET cscp.tenant_id = 'cl';
SELECT count(*) AS own_window_rows FROM cscp.command_window;
INSERT INTO cscp.command_window VALUES ('cl', 'c1', cscp.routing_id('c1'), cscp.now(), NULL, 'confirmation');
DELETE FROM cscp.command_retired;
SET cscp.tenant_id = 'other';
SELECT count(*) AS other_tenant_sees FROM cscp.command_window;
RESET ROLE;
RESET cscp.tenant_id;
DROP OWNED BY cl_app;
DROP ROLE cl_app;
