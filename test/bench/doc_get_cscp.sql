-- pgbench, W3 of `make bench` (weight 8 of 10): read one of 100,000 sessions' documents through
-- cscp.doc_get, as an application role with cscp.tenant_id = 'bench'.
\set s random(1, 100000)
SELECT cscp.doc_get('bench', 's-' || :s::text, 'profile');
