\i sql/include/helpers.sql
-- cscp.sweep: expires live contexts past expires_at, deletes expired documents, working-set items and retired
-- contexts past their tenant's retention, at most `batch` rows per action.
SET timezone = 'UTC';
-- Start from empty tables, so the counts below are this file's own.
DELETE FROM cscp.context;
DELETE FROM cscp.document;
DELETE FROM cscp.working_set;
SET cscp.clock = '2026-04-01 10:00:00+00';
SELECT count(*) FROM (SELECT cscp.context_open('w', 'sw-' || i, 'a', '{}', interval '10 minutes')
                        FROM generate_series(1, 5) i) s;
SELECT (cscp.context_transition((cscp.context_open('w', 'sw-closed', 'a')).context_id, 'closed')).status;
SELECT cscp.doc_put('w', 'sess', 'ns-' || i, '{}', 60) FROM generate_series(1, 3) i;
SELECT cscp.ws_put('w', 'sess', 'item-' || i, '1', interval '1 minute') FROM generate_series(1, 3) i;
SELECT cscp.sweep() AS nothing_due;

SET cscp.clock = '2026-04-01 10:10:00+00';
-- A call does one batch of each action and returns: it never waits, also not after a call that
-- left work behind (an action reached the batch).  Pacing a backlog is the caller's, or the
-- background worker's (cscp.sweep_backlog_delay, 6 s by default, is the worker's alone).  Three
-- calls in a row with a backlog, each under a statement timeout shorter than that delay, in less
-- than the delay all together: none waited.
SET statement_timeout = '5s';
SELECT clock_timestamp() AS before_first \gset
SELECT cscp.sweep(2) AS first_batch;
SELECT cscp.sweep(2) AS second_batch;
SELECT cscp.sweep(2) AS third_batch;
SELECT clock_timestamp() - :'before_first'::timestamptz < interval '5 s' AS not_paced;
SELECT cscp.sweep(2) ->> 'contexts_expired' AS after_nothing_left_behind;
SELECT status, reason, count(*) FROM cscp.context WHERE tenant_id = 'w' GROUP BY 1, 2 ORDER BY 1;
-- Calls within one transaction, and in one statement, each take their own batch.
SELECT count(*) FROM (SELECT cscp.context_open('w', 'sw-pace-' || i, 'a', '{}', interval '1 minute')
                        FROM generate_series(1, 4) i) s;
SET cscp.clock = '2026-04-01 10:20:00+00';
BEGIN;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS first_in_transaction,
       cscp.sweep(1) ->> 'contexts_expired' AS second_in_statement;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS third_in_transaction;
COMMIT;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS fourth;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS nothing_left;
RESET statement_timeout;
DELETE FROM cscp.context WHERE tenant_id = 'w' AND conversation_id LIKE 'sw-pace-%';
-- The worker's pace is the server's (postgresql.conf, ALTER SYSTEM): no session sets it, not even
-- a superuser's, and an application role's sweep cannot change it either.
SELECT try($$SET cscp.sweep_backlog_delay = 0$$);
-- An application role's calls do not wait either (its tenant's rows only, row-level security).
CREATE ROLE sw_app;
SELECT cscp.grant_app('sw_app');
SET ROLE sw_app;
SET cscp.tenant_id = 'w-app';
SELECT try($$SET cscp.sweep_backlog_delay = 0$$);
SELECT count(*) FROM (SELECT cscp.context_open('w-app', 'sw-app-' || i, 'a', '{}', interval '1 minute')
                        FROM generate_series(1, 3) i) s;
RESET ROLE;
SET cscp.clock = '2026-04-01 10:30:00+00';
SET ROLE sw_app;
SET statement_timeout = '5s';
SELECT clock_timestamp() AS before_first \gset
SELECT cscp.sweep(1) ->> 'contexts_expired' AS app_first,
       cscp.sweep(1) ->> 'contexts_expired' AS app_second_in_statement;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS app_third;
SELECT cscp.sweep(1) ->> 'contexts_expired' AS app_nothing_left;
SELECT clock_timestamp() - :'before_first'::timestamptz < interval '5 s' AS not_paced;
RESET statement_timeout;
RESET cscp.tenant_id;
RESET ROLE;
SET cscp.clock = '2026-04-01 10:10:00+00';
DELETE FROM cscp.context WHERE tenant_id = 'w-app';
DROP OWNED BY sw_app;
DROP ROLE sw_app;

-- Retention: closed kept 7 days, expired 1 day by default; per tenant by policy.
SET cscp.clock = '2026-04-02 10:10:00+00';
SELECT cscp.sweep() AS after_one_day;
SET cscp.clock = '2026-04-08 10:00:00+00';
SELECT cscp.sweep() AS after_seven_days;
SELECT count(*) AS left_of_w FROM cscp.context WHERE tenant_id = 'w';

SELECT cscp.policy_set('w2', '{"retention_closed": "1 hour"}') ->> 'retention_closed' AS retention_closed;
SELECT (cscp.context_transition((cscp.context_open('w2', 'r', 'a')).context_id, 'closed')).status;
SET cscp.clock = '2026-04-08 11:00:00+00';
SELECT cscp.sweep() AS per_tenant_retention;
DELETE FROM cscp.policy WHERE tenant_id = 'w2';

-- The sweep's scans by age stop at the shortest time any policy's retention can span
-- (cscp.retention_floor): a month counts 28 days less 2 hours, a day 22 hours, a period with a
-- negative part nothing; no policy with the key, NULL.
SELECT cscp.retention_floor('retention_expired') AS default_expired,
       cscp.retention_floor('retention_closed') AS default_closed,
       cscp.retention_floor('no_such_key') AS no_key;
BEGIN;
SELECT cscp.policy_set('*', '{"retention_closed": "1 mon 2 days 03:00"}') IS NOT NULL AS policy;
SELECT cscp.retention_floor('retention_closed') AS with_months;
-- A period with a negative part spans different times on different dates: refused.
SELECT try($$SELECT cscp.policy_set('w3', '{"retention_closed": "1 mon -1 day"}')$$) AS with_a_negative_part;
ROLLBACK;
-- The bound never keeps a due row: a month after January 31st is February 28th, 28 days.
SELECT cscp.policy_set('w3', '{"retention_closed": "1 mon"}') IS NOT NULL AS policy;
SET cscp.clock = '2026-01-31 00:00:00+00';
SELECT (cscp.context_transition((cscp.context_open('w3', 'm', 'a')).context_id, 'closed')).status;
SET cscp.clock = '2026-02-27 23:59:59+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged_a_second_early;
SET cscp.clock = '2026-02-28 00:00:00+00';
SELECT cscp.sweep() ->> 'contexts_purged' AS purged_on_february_28;
SELECT count(*) AS left_of_w3 FROM cscp.context WHERE tenant_id = 'w3';
DELETE FROM cscp.policy WHERE tenant_id = 'w3';

SELECT try($$SELECT cscp.sweep(0)$$);
SELECT try($$SELECT cscp.sweep(NULL)$$);
SELECT try($$SELECT cscp.sweep(2000000)$$);
