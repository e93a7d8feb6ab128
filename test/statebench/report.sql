-- StateBench report: replay every loaded timeline in both modes, then per track the queries,
-- resurrections (a must_not_mention phrase in the context), how many of them the data itself
-- leaves valid ("needs reasoning": every leaked phrase also occurs in the data's valid state, see
-- test/statebench/replay.sql) and how many it calls invalid (a store or harness fault; target 0),
-- queries with every must_mention phrase, the writes cscp refused, the superseded, hypothetical or
-- draft facts any context told (cscp's promise: none, ever) and the told facts the data's own
-- fields call invalid or out of scope.  psql variable budget: build_context's token budget.
\pset footer off
SELECT statebench.replay_all(:budget) AS timelines_replayed;

\echo
\echo 'Per track (raw: the data as it is; markers: text markers mapped to cscp scopes)'
\echo 'resurrections = needs reasoning + data says invalid'
WITH t AS (
    SELECT r.track, r.mode, count(*) AS queries,
           count(*) FILTER (WHERE r.resurrection) AS resurrections,
           count(*) FILTER (WHERE r.leak_valid) AS needs_reasoning,
           count(*) FILTER (WHERE r.resurrection AND NOT r.leak_valid) AS data_invalid,
           count(*) FILTER (WHERE r.all_mentioned) AS all_mentioned,
           sum(r.stale_told) AS stale_told,
           sum(r.told_invalid) AS told_invalid
      FROM statebench.result r GROUP BY ROLLUP (r.track), r.mode
), x AS (
    SELECT f.mode, f.track, count(*) AS refused FROM statebench.refusal f GROUP BY ROLLUP (f.track), f.mode
)
SELECT coalesce(raw.track, 'ALL') AS track, raw.queries,
       raw.resurrections AS "resurrections raw", raw.needs_reasoning AS "needs reasoning raw",
       raw.data_invalid AS "data says invalid raw",
       mk.resurrections AS "resurrections markers", mk.needs_reasoning AS "needs reasoning markers",
       mk.data_invalid AS "data says invalid markers",
       raw.all_mentioned AS "all mentioned raw", mk.all_mentioned AS "all mentioned markers",
       coalesce(xr.refused, 0) AS "refused writes raw", coalesce(xm.refused, 0) AS "refused writes markers",
       raw.stale_told + mk.stale_told AS "superseded facts told",
       mk.told_invalid AS "invalid in data told markers"
  FROM t raw
  JOIN t mk ON mk.mode = 'markers' AND mk.track IS NOT DISTINCT FROM raw.track
  LEFT JOIN x xr ON xr.mode = 'raw' AND xr.track IS NOT DISTINCT FROM raw.track
  LEFT JOIN x xm ON xm.mode = 'markers' AND xm.track IS NOT DISTINCT FROM raw.track
 WHERE raw.mode = 'raw'
 ORDER BY raw.track IS NULL, raw.track;

\echo
\echo 'Refused writes by cause'
SELECT mode, sqlstate, regexp_replace(message, '"[^"]*"', '"…"', 'g') AS message, count(*)
  FROM statebench.refusal GROUP BY 1, 2, 3 ORDER BY 1, 4 DESC;
