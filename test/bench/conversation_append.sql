-- Appending to a long conversation costs what appending to a new one costs: 10,000 exchanges
-- into one conversation, each timed (clock_timestamp around each call), then the mean of the
-- last 1,000 over the mean of the first 1,000; and the last 20 turns of the 10,000-turn
-- conversation read through conversation_turns(..., 20) touch only those rows.  Each append
-- commits on its own (in one transaction, 10,000 updates of the conversation row would leave a
-- chain of row versions that no pruning can remove before commit).
-- Run on a throwaway cluster with cscp installed:  psql -X -f test/bench/conversation_append.sql
\set ON_ERROR_STOP 1
\pset footer off
CREATE TEMP TABLE append_times (i int PRIMARY KEY, us double precision);
SELECT turn_index FROM cscp.conversation_start('bench', 'long', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "start"}, "ts": 0}');
DO $$
DECLARE
    t0 timestamptz;
BEGIN
    FOR i IN 1..10000 LOOP
        t0 := clock_timestamp();
        PERFORM cscp.conversation_exchange('bench', 'long',
            jsonb_build_object('from', CASE WHEN i % 2 = 0 THEN 'agent' ELSE 'maria' END,
                               'role', CASE WHEN i % 2 = 0 THEN 'agent' ELSE 'user' END,
                               'content', jsonb_build_object('text', 'turn ' || i), 'ts', i));
        INSERT INTO append_times VALUES (i, extract(epoch FROM clock_timestamp() - t0) * 1e6);
        COMMIT;   -- one transaction per append, as an application makes them
    END LOOP;
END
$$;
SELECT round(avg(us) FILTER (WHERE i <= 1000)::numeric, 1) AS first_1000_us,
       round(avg(us) FILTER (WHERE i > 9000)::numeric, 1) AS last_1000_us,
       round((avg(us) FILTER (WHERE i > 9000) / avg(us) FILTER (WHERE i <= 1000))::numeric, 3) AS ratio
  FROM append_times;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM cscp.conversation_turns('bench', 'long', 20);
