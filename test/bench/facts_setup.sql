-- facts_setup.sql: the data of `make bench-facts` (test/scripts/bench_facts.sh), written through
-- cscp.fact_write as tenant 'bench' (run it as an application role with cscp.tenant_id = bench;
-- every trigger and row-level security apply):
--
--   valid-only   1,000 valid facts f-1 .. f-1000
--   superseded   the same 1,000 valid facts (same ids, keys and values), each the head of a
--                chain of 101: f-<i>-v0 .. f-<i>-v99 superseded, 100,000 superseded facts in all
--
-- Fact i has key topic_<i % 50 + 1>_item_<i> and a value naming topic <i % 50 + 1>, so the
-- benchmark's query 'value topic <n>' (n in 1..50) matches every fact on "value" and 20 of them
-- on the topic too. The chains are written one version at a time, 1,000 chains per statement,
-- one transaction per version, so no transaction grows large.

\set ON_ERROR_STOP 1
\timing on

-- valid-only: the 1,000 valid facts alone.
SELECT count(*) AS "valid-only facts"
  FROM generate_series(1, 1000) i,
       cscp.fact_write('bench', 'valid-only', 'f-' || i, format('topic_%s_item_%s', i % 50 + 1, i),
                       to_jsonb(format('value topic %s of item %s', i % 50 + 1, i)));

-- superseded: 1,000 chains; version 0 supersedes nothing, version j supersedes version j - 1,
-- version 100 is the valid head f-<i>, the same fact as in valid-only.
DO $$
BEGIN
    FOR j IN 0..100 LOOP
        PERFORM cscp.fact_write('bench', 'superseded',
                                CASE WHEN j = 100 THEN 'f-' || i ELSE format('f-%s-v%s', i, j) END,
                                format('topic_%s_item_%s', i % 50 + 1, i),
                                to_jsonb(CASE WHEN j = 100 THEN format('value topic %s of item %s', i % 50 + 1, i)
                                              ELSE format('old value topic %s of item %s, version %s', i % 50 + 1, i, j) END),
                                supersedes => CASE WHEN j = 0 THEN NULL ELSE format('f-%s-v%s', i, j - 1) END)
          FROM generate_series(1, 1000) i;
        COMMIT;
    END LOOP;
END
$$;

SELECT subject_id, count(*) FILTER (WHERE is_valid) AS valid, count(*) FILTER (WHERE NOT is_valid) AS superseded
  FROM cscp.fact WHERE tenant_id = 'bench' GROUP BY subject_id ORDER BY subject_id;
