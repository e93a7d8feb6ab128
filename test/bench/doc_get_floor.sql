-- pgbench, W3 of `make bench`: the floor under doc_get_cscp.sql, a plain primary-key select
-- (with the same expiry filter) on bench_floor.document.
\set s random(1, 100000)
SELECT d.payload FROM bench_floor.document d
 WHERE d.tenant_id = 'bench' AND d.session_id = 's-' || :s::text AND d.namespace = 'profile' AND d.expires_at > now();
