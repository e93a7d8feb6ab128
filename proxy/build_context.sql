
-- build_context: subject_session.  The session's environment and working set live on the
-- session's node, the identity and facts on the subject's: the first call reads the former,
-- the second assembles the context with them on the subject's node.
CREATE FUNCTION cscp_proxy._session_state(_tenant text, _clock text, tenant_id text, session_id text) RETURNS jsonb
LANGUAGE plproxy AS $f$
    CLUSTER 'cscp';
    RUN ON coalesce(cscp.routing_key_hash(tenant_id, session_id), 0);
    SELECT * FROM cscp.session_state(cscp.proxy_session(_tenant, _clock, tenant_id), session_id);
$f$;
CREATE FUNCTION cscp_proxy.build_context(_tenant text, _clock text, tenant_id text, subject_id text, session_id text, query text, token_budget integer, task_id text, session_state jsonb) RETURNS jsonb
LANGUAGE plproxy AS $f$
    CLUSTER 'cscp';
    RUN ON coalesce(cscp.routing_key_hash(tenant_id, subject_id), 0);
    SELECT * FROM cscp.build_context_given(cscp.proxy_session(_tenant, _clock, tenant_id), subject_id, session_id, query, token_budget, task_id, session_state);
$f$;
CREATE FUNCTION cscp.build_context(tenant_id text, subject_id text, session_id text, query text DEFAULT NULL::text, token_budget integer DEFAULT NULL::integer, task_id text DEFAULT NULL::text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
    RETURN cscp_proxy.build_context(cscp_proxy.tenant(), cscp_proxy.clock(), $1, $2, $3, $4, $5, $6,
                                    cscp_proxy._session_state(cscp_proxy.tenant(), cscp_proxy.clock(), $1, $3));
END
$f$;
COMMENT ON FUNCTION cscp.build_context(text, text, text, text, integer, text) IS
  'The context to give the model for a subject in a session (through the proxy: the session''s node, then the subject''s)';
REVOKE ALL ON FUNCTION cscp.build_context(text, text, text, text, integer, text),
    cscp_proxy._session_state(text, text, text, text),
    cscp_proxy.build_context(text, text, text, text, text, text, integer, text, jsonb) FROM PUBLIC;
