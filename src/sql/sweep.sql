-- sweep.sql: cscp.sweep, the tidy-up that keeps tables small.
--
-- Correctness never waits for it: readers treat anything past expires_at as expired.  Each
-- action takes at most `batch` rows with FOR UPDATE SKIP LOCKED, so a sweep never blocks on,
-- nor is blocked by, a row an application transaction holds; what it skips, the next sweep takes.

-- The retention period under key for a tenant (its own policy, else the default).
CREATE FUNCTION cscp._retention(tenant_id text, key text) RETURNS interval
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT (p.settings ->> key)::interval FROM cscp.policy p WHERE p.tenant_id = $1),
                    (SELECT (p.settings ->> key)::interval FROM cscp.policy p WHERE p.tenant_id = '*'))
$$;
COMMENT ON FUNCTION cscp._retention(text, text) IS 'Internal: a tenant''s retention period under a policy key';

CREATE FUNCTION cscp.sweep(batch int DEFAULT 10000) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now timestamptz := cscp.now();
    n_expired bigint;
    n_docs bigint;
    n_purged bigint;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 1000000'
            USING ERRCODE = '22023', DETAIL = format('The batch given is %s.', coalesce(batch::text, 'null')),
                  HINT = 'Call cscp.sweep repeatedly with a moderate batch, such as 10000.';
    END IF;

    -- Live contexts past their TTL become expired.
    WITH due AS (
        SELECT c.tenant_id, c.context_id FROM cscp.context c
         WHERE c.status IN ('active', 'pending', 'blocked') AND c.expires_at <= v_now
         ORDER BY c.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    UPDATE cscp.context c SET status = 'expired', reason = 'ttl'
      FROM due WHERE c.tenant_id = due.tenant_id AND c.context_id = due.context_id;
    GET DIAGNOSTICS n_expired = ROW_COUNT;

    -- Expired documents are deleted.
    WITH due AS (
        SELECT d.tenant_id, d.session_id, d.namespace FROM cscp.document d
         WHERE d.expires_at <= v_now
         ORDER BY d.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM cscp.document d USING due
     WHERE d.tenant_id = due.tenant_id AND d.session_id = due.session_id
       AND d.namespace = due.namespace;
    GET DIAGNOSTICS n_docs = ROW_COUNT;

    -- Closed and expired contexts past their tenant's retention are deleted.
    WITH due AS (
        SELECT c.tenant_id, c.context_id FROM cscp.context c
         WHERE c.status IN ('expired', 'closed')
           AND c.updated_at + cscp._retention(c.tenant_id,
                   CASE c.status WHEN 'closed' THEN 'retention_closed' ELSE 'retention_expired' END) <= v_now
         ORDER BY c.updated_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM cscp.context c USING due
     WHERE c.tenant_id = due.tenant_id AND c.context_id = due.context_id;
    GET DIAGNOSTICS n_purged = ROW_COUNT;

    RETURN jsonb_build_object('contexts_expired', n_expired,
                              'documents_deleted', n_docs,
                              'contexts_purged', n_purged);
END
$$;
COMMENT ON FUNCTION cscp.sweep(int) IS
  'Expire live contexts past their TTL, delete expired documents and retired contexts past retention, batch rows per action; returns counts';
