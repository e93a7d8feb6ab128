-- pgbench, W3 of `make bench` (weight 2 of 10): merge one key into one of 100,000 sessions'
-- documents through cscp.doc_put (TTL reset to a day).
\set s random(1, 100000)
\set k random(1, 8)
SELECT cscp.doc_put('bench', 's-' || :s::text, 'profile', jsonb_build_object('k' || :k::text, :s::text), 86400);
