-- The owner's part of the workload of test/pgtap/search_path.sql, for tenant :t after
-- workload.sql: the operators' functions, grants, API keys and every http_* endpoint, views,
-- check_invariants, the shard check.  As workload.sql, its text names only cscp's functions,
-- literals and pg_catalog-qualified names.
SELECT r IS NULL AS inv_null FROM cscp.check_invariants(:'t') r LIMIT 1;
SELECT r IS NULL AS inv_all_null FROM cscp.check_invariants() r LIMIT 1;
SELECT r IS NULL AS problems_null FROM cscp.evidence_problems(NULL, NULL) r LIMIT 1;
SELECT r IS NULL AS active_null FROM cscp.inspect_active_context(:'t') r LIMIT 1;
SELECT r IS NULL AS lifecycle_null FROM cscp.inspect_command_lifecycle(:'t', 'c1') r LIMIT 1;
SELECT r IS NULL AS show_null FROM cscp.show_active_context(:'t', 'c1') r LIMIT 1;
SELECT pg_catalog.count(*) AS active_rows FROM cscp.active_context v;
SELECT pg_catalog.count(*) AS lifecycle_rows FROM cscp.command_lifecycle v;
SELECT r IS NULL AS misplaced_null FROM cscp.shard_misplaced() r LIMIT 1;
SELECT cscp.bound_tenants('app') IS NULL AS bound_null;
SELECT cscp.http_document_key('s1', 'ns') AS doc_key;
SELECT cscp.operator_tenant_visible(:'t') AS visible;
SELECT cscp.grant_app('sp_adm_app', ARRAY[:'t']) IS NULL AS grant_null;
SELECT cscp.grant_operator('sp_adm_ops', ARRAY[:'t']) IS NULL AS grant_ops_null;
SELECT cscp.grant_gateway('sp_adm_gw') IS NULL AS grant_gw_null;

-- the gateway's endpoints, with a key of every scope
SELECT pg_catalog.concat('Bearer ', cscp.api_key_create(:'t', 'all')) AS auth \gset
SELECT cscp.http_key_tenant(:'auth') IS NULL AS key_tenant_null;
SELECT r.status FROM cscp.http_doc_put(:'auth', 'hs', 'ns', 'application/json', '{"ttlSeconds": 60, "payload": {"a": 1}}') r;
SELECT r.status FROM cscp.http_doc_get(:'auth', 'hs', 'ns') r;
SELECT r.status FROM cscp.http_doc_list(:'auth', 'hs') r;
SELECT r.status FROM cscp.http_doc_delete(:'auth', 'hs', 'ns') r;
SELECT r.status FROM cscp.http_conversation_start(:'auth', 'hc', 'application/json',
    '{"agentId": "agent", "initialTurn": {"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}}') r;
SELECT r.status FROM cscp.http_conversation_get(:'auth', 'hc') r;
SELECT r.status FROM cscp.http_context_open(:'auth', 'hc', 'ana', 'application/json', '{"slots": {"active_intent": "pay"}}') r;
SELECT r.status FROM cscp.http_context_get(:'auth', 'hc', 'ana') r;
SELECT r.status FROM cscp.http_slot_put(:'auth', 'hc', 'ana', 'active_target', 'application/json', '"acct:1"') r;
SELECT r.status FROM cscp.http_slot_delete(:'auth', 'hc', 'ana', 'active_target') r;
SELECT r.status, (r.body OPERATOR(pg_catalog.->>) 'commandId') AS hcmd FROM cscp.http_command_submit(:'auth', 'hc', 'ana', 'application/json',
    '{"idempotencyKey": "hk1", "commandName": "pay", "mutating": true, "messageIds": ["m1"], "payload": {"amount": 1}, "targetFingerprint": "acct:1"}') r \gset
SELECT r.status FROM cscp.http_confirm(:'auth', 'hc', 'ana', 'application/json', '{"messageId": "hm2", "answer": true, "targetFingerprint": "acct:1"}') r;
SELECT r.status FROM cscp.http_command_status(:'auth', :'hcmd') r;
SELECT r.status FROM cscp.http_command_transition(:'auth', :'hcmd', 'application/json', '{"toState": "started"}') r;
SELECT r.status FROM cscp.http_approve(:'auth', 'hc', 'application/json', '{"approverId": "boss", "messageId": "ha1", "decision": true}') r;
SELECT r.status FROM cscp.http_conversation_resolve(:'auth', 'hc', 'application/json',
    '{"turn": {"messageId": "hm9", "from": "agent", "role": "agent", "content": {"text": "bye"}, "ts": 9}}') r;
SELECT r.status FROM cscp.http_fact_write(:'auth', 'ana', 'application/json', '{"factId": "hf1", "key": "home", "value": "Porto"}') r;
SELECT r.status FROM cscp.http_fact_current(:'auth', 'ana', 'hf1') r;
SELECT r.status FROM cscp.http_build_context(:'auth', 'ana', 'application/json', '{"sessionId": "s1", "query": "home"}') r;
SELECT cscp.api_key_revoke(:'t', 'all') AS revoked;
SELECT r.status FROM cscp.http_doc_get(:'auth', 'hs', 'ns') r;
