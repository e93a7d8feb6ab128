-- pgbench, W3 of `make bench`: the naive baseline's doc_get (PL/pgSQL, baseline_plpgsql.sql).
\set s random(1, 100000)
SELECT bench_naive.doc_get('bench', 's-' || :s::text, 'profile');
