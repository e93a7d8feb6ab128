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
SELECT cscp.sweep(2) AS first_batch;
SELECT cscp.sweep(2) AS second_batch;
SELECT cscp.sweep(2) AS third_batch;
SELECT status, reason, count(*) FROM cscp.context WHERE tenant_id = 'w' GROUP BY 1, 2 ORDER BY 1;

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

SELECT try($$SELECT cscp.sweep(0)$$);
SELECT try($$SELECT cscp.sweep(NULL)$$);
SELECT try($$SELECT cscp.sweep(2000000)$$);
