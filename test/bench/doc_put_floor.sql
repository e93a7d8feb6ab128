-- pgbench, W3 of `make bench`: the floor under doc_put_cscp.sql, a plain upsert on
-- bench_floor.document that merges the keys (from empty when the document has expired).
\set s random(1, 100000)
\set k random(1, 8)
INSERT INTO bench_floor.document AS d (tenant_id, session_id, namespace, payload, expires_at)
VALUES ('bench', 's-' || :s::text, 'profile', jsonb_build_object('k' || :k::text, :s::text), now() + interval '86400 seconds')
ON CONFLICT (tenant_id, session_id, namespace) DO UPDATE
    SET payload = CASE WHEN d.expires_at <= now() THEN excluded.payload ELSE d.payload || excluded.payload END,
        created_at = CASE WHEN d.expires_at <= now() THEN now() ELSE d.created_at END,
        updated_at = now(), expires_at = excluded.expires_at;
