-- pgbench, W3 of `make bench`: the naive baseline's doc_put (PL/pgSQL, baseline_plpgsql.sql).
\set s random(1, 100000)
\set k random(1, 8)
SELECT bench_naive.doc_put('bench', 's-' || :s::text, 'profile', jsonb_build_object('k' || :k::text, :s::text), 86400);
