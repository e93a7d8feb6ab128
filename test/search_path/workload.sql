-- The workload of test/pgtap/search_path.sql: one call of every public function an application
-- role may run (contexts, slots, commands and their transitions and recovery, confirm, approve,
-- conversations, facts, build_context, documents, working set, identity, forget, the sweep), for
-- tenant :t, under whatever search_path and role the includer set.  Its own text names nothing
-- that the planted objects (plant.sql) could stand in for: only cscp's functions, literals, and
-- pg_catalog-qualified names, so that a hit is cscp's.  Ids read back go to psql variables.  A
-- few statements write cscp's tables directly, as an application may, to run the row triggers.
SELECT cscp.policy_set(:'t', '{"auto_confirm": [], "detail_level": "full", "context_ttl": "1 hour"}') IS NULL AS policy_null;
SELECT cscp.policy_effective(:'t') IS NULL AS effective_null;
SELECT cscp.authority_set(:'t', 'cfo', 150) IS NULL AS authority_null;
SELECT cscp.authority_rank(:'t', 'cfo') AS rank;
SELECT r.command_name FROM cscp.command_declare(:'t', 'transfer', true, true, 'high') r;
SELECT r.command_name FROM cscp.command_declare(:'t', 'lookup', false) r;

-- conversations
SELECT r.turn_index FROM cscp.conversation_start(:'t', 'c1', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}', NULL, 600000) r;
SELECT r.outcome FROM cscp.conversation_exchange(:'t', 'c1',
    '{"messageId": "m1", "from": "ana", "role": "user", "content": {"text": "cancel order 12"}, "ts": 2}') r;
SELECT r.turn_index FROM cscp.conversation_start(:'t', 'c2', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}', '{"type": "object", "properties": {"content": {"type": "object"}}}', 1000) r;

-- contexts and slots
SELECT r.context_id AS ctx FROM cscp.context_open(:'t', 'c1', 'ana', '{"active_intent": "cancel"}') r \gset
SELECT r.status FROM cscp.slot_set(:'ctx', 'active_target', '"order:12"') r;
SELECT r.status FROM cscp.slot_set(:'ctx', 'active_target', NULL) r;
SELECT r.status FROM cscp.context_get(:'t', 'c1', 'ana') r;
SELECT cscp.slots_visible(:'t', '{"a": 1}') IS NULL AS slots_null;

-- commands: a read-only one to its end, a mutating one confirmed, one canceled by recovery,
-- one approved, one compensated
SELECT r.command_id AS cmd1 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k1', 'lookup', false, '{m1}') r \gset
SELECT r.accepted FROM cscp.command_transition(:'cmd1', 'authz_pending') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd1', 'authorized') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd1', 'started') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd1', 'executed') r;
SELECT r.state FROM cscp.command_status(:'cmd1') r;
SELECT r.state FROM cscp.command_submit(:'t', 'c1', 'ana', 'k1', 'lookup', false, '{m1}') r;
SELECT r.command_id AS cmd2 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k2', 'cancel_order', true, '{m1}', '{"order": 12}', 'fp2') r \gset
SELECT r.outcome FROM cscp.confirm(:'t', 'c1', 'ana', 'm2', true, 'fp2') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd2', 'started') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd2', 'failed', 'boom') r;
SELECT r.state FROM cscp.command_recover(:'cmd2', 'retry', 'k2r') r;
SELECT r.command_id AS cmd3 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k3', 'cancel_order', true, '{m3}', '{"order": 13}', 'fp3') r \gset
SELECT r.state FROM cscp.command_recover(:'cmd3', 'cancel', 'k3c') r;
SELECT r.command_id AS cmd4 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k4', 'report', false, '{m4}') r \gset
SELECT r.accepted FROM cscp.command_transition(:'cmd4', 'authz_pending', 'approval_required', '{"approver_id": "boss"}') r;
SELECT r.outcome FROM cscp.approve(:'t', 'c1', 'boss', 'a1', true) r;
SELECT r.accepted FROM cscp.command_transition(:'cmd4', 'started') r;
SELECT r.accepted FROM cscp.command_transition(:'cmd4', 'executed') r;
SELECT r.state FROM cscp.command_recover(:'cmd4', 'compensate', 'k4c') r;
SELECT r.command_id AS cmd5 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k5', 'transfer', true, '{m5}', '{"amount": 5}', 'fp5') r \gset
SELECT r.outcome FROM cscp.confirm(:'t', 'c1', 'ana', 'm6', false, 'fp5') r;
SELECT cscp.command_next_allowed(x) IS NULL AS next_null FROM cscp.command x WHERE x.command_id OPERATOR(pg_catalog.=) :'cmd1';
SELECT cscp.check_command(:'t', :'cmd1') IS NULL AS check_null;

-- one call: a turn, the sender's context and a command
SELECT r IS NULL AS turn_null FROM cscp.message_turn(:'t', 'c1', 'ana',
    '{"messageId": "m7", "from": "ana", "role": "user", "content": {"text": "where is order 12?"}, "ts": 3}',
    '{"active_intent": "track_order", "active_target": "order:12"}',
    '{"idempotency_key": "k7", "name": "track_order", "payload": {"order_id": "12"}, "target_fingerprint": "order:12"}') r;
SELECT r.turn_index FROM cscp.conversation_turns(:'t', 'c1') r LIMIT 1;
SELECT r.turn_index FROM cscp.conversation_turns(:'t', 'c1', 2) r LIMIT 1;
SELECT r.seq FROM cscp.conversation_events(:'t', 'c1') r LIMIT 1;
SELECT r.state FROM cscp.conversation_get(:'t', 'c1') r;
SELECT cscp.conversation_export(:'t', 'c1') IS NULL AS export_null;
SELECT cscp.capabilities() IS NULL AS capabilities_null;
SELECT r.outcome FROM cscp.conversation_exchange(:'t', 'c2',
    '{"messageId": "m1", "from": "bo", "role": "user", "content": {"text": "x"}, "ts": 2}') r;

-- identity, facts, working set, environment, build_context
SELECT cscp.identity_set(:'t', 'ana', '{"user_name": "Ana", "authority": "employee"}') IS NULL AS identity_null;
SELECT cscp.identity_replace(:'t', 'ana', '{"user_name": "Ana M", "authority": "employee"}', 'renamed') IS NULL AS replace_null;
SELECT r.fact_id FROM cscp.fact_write(:'t', 'ana', 'f1', 'home_city', '"Porto"') r;
SELECT r.fact_id FROM cscp.fact_write(:'t', 'ana', 'f2', 'home_city', '"Lisbon"', '{"type": "conversation"}', 'f1') r;
SELECT r.fact_id FROM cscp.fact_write(:'t', 'ana', 'f3', 'budget', '100', '{"type": "policy", "authority": "cfo"}',
                                      NULL, 'session', 's1', '{f2}', true, 'hard') r;
SELECT r.fact_id FROM cscp.fact_current(:'t', 'ana', 'f1') r;
SELECT r.fact_id FROM cscp.fact_history(:'t', 'ana', 'f2') r LIMIT 1;
SELECT cscp.ws_put(:'t', 's1', 'draft', '{"to": "porto"}') IS NULL AS ws_null;
SELECT cscp.ws_get(:'t', 's1', 'draft') IS NULL AS ws_get_null;
SELECT cscp.env_set(:'t', 's1', '{"tz": "UTC", "locale": "pt"}') IS NULL AS env_null;
SELECT cscp.build_context(:'t', 'ana', 's1', 'where does ana live', 2000) IS NULL AS built_null;
SELECT cscp.build_context(:'t', 'ana', 's1', NULL, NULL, 'task-1') IS NULL AS built2_null;
SELECT cscp.build_context_given(:'t', 'ana', 's1', 'porto', 2000, NULL,
    '{"environment": {"tz": "UTC"}, "working_set": [["draft", {"to": "porto"}]]}') IS NULL AS given_null;
SELECT cscp.session_state(:'t', 's1') IS NULL AS session_null;
SELECT cscp.token_count('where does ana live') AS tokens;

-- documents
SELECT cscp.doc_put(:'t', 's1', 'ns', '{"a": 1}', 600) IS NULL AS doc_null;
SELECT cscp.doc_put(:'t', 's1', 'ns', '{"b": 2}', 600) IS NULL AS doc2_null;
SELECT cscp.doc_get(:'t', 's1', 'ns') IS NULL AS doc_get_null;
SELECT r IS NULL AS list_null FROM cscp.doc_list(:'t', 's1') r LIMIT 1;
SELECT cscp.doc_put(:'t', 's1', 'gone', '{"c": 3}', 600) IS NULL AS doc3_null;
SELECT cscp.doc_delete(:'t', 's1', 'gone') AS deleted;

-- evidence, the pure helpers, routing
SELECT r IS NULL AS verify_null FROM cscp.evidence_verify(:'t') r LIMIT 1;
SELECT r IS NULL AS verify_cmd_null FROM cscp.evidence_verify(:'t', :'cmd2') r LIMIT 1;
SELECT cscp.canonical_hash('{"b": [1, 2], "a": "x"}') IS NULL AS hash_null, cscp.canonical_json('{"b": 1, "a": 2}') IS NULL AS json_null;
SELECT cscp.jsonschema_check('{"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}') IS NULL AS check_null,
       cscp.jsonschema_validate('{"type": "object", "required": ["a"]}', '{"a": 1}') IS NULL AS validate_null;
SELECT cscp.policy_validate('{"context_ttl": "1 hour"}') IS NULL AS policy_valid_null;
SELECT cscp.routing_id('c1') IS NULL AS rid_null, cscp.routing_conversation_hash('c1') IS NULL AS rch_null,
       cscp.routing_key_hash(:'t', 'ana') IS NULL AS rkh_null, cscp.routing_hash(:'cmd1') IS NULL AS rh_null;
SELECT cscp.forget_hash(:'t', 'conversation', 'c2') IS NULL AS forget_hash_null;
SELECT cscp.retention_floor('context_ttl') IS NULL AS floor_null;
SELECT cscp.api_scopes() IS NULL AS scopes_null;
SELECT cscp.current_tenant() IS NULL AS current_null, cscp.now() IS NULL AS now_null;

-- direct SQL on cscp's tables: the row triggers (C, running SPI) under the same search_path
UPDATE cscp.context x SET slots = x.slots OPERATOR(pg_catalog.||) '{"active_target": "order:99"}'
 WHERE x.context_id OPERATOR(pg_catalog.=) :'ctx';
SELECT r.command_id AS cmd9 FROM cscp.command_submit(:'t', 'c1', 'ana', 'k9', 'lookup', false, '{m9}') r \gset
UPDATE cscp.command x SET state = 'authz_pending' WHERE x.command_id OPERATOR(pg_catalog.=) :'cmd9';
UPDATE cscp.command x SET state = 'authorized' WHERE x.command_id OPERATOR(pg_catalog.=) :'cmd9';
INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, source)
VALUES (:'t', 'ana', 'f9', 'pet', '"cat"', '{"type": "conversation"}');
DELETE FROM cscp.document d
 WHERE d.tenant_id OPERATOR(pg_catalog.=) :'t' AND d.session_id OPERATOR(pg_catalog.=) 's1'
   AND d.namespace OPERATOR(pg_catalog.=) 'ns';

-- contexts to their end, conversations closed, erasures
SELECT r.status FROM cscp.context_transition(:'ctx', 'blocked', 'waiting') r;
SELECT r.status FROM cscp.context_transition(:'ctx', 'active') r;
SELECT r.turn_index FROM cscp.conversation_close(:'t', 'c1',
    '{"messageId": "m9", "from": "agent", "role": "agent", "content": {"text": "bye"}, "ts": 9}', '{"resolved": true}') r;
SELECT r.turn_index FROM cscp.conversation_start(:'t', 'c3', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}') r;
SELECT r.context_id IS NULL AS ctx3_null FROM cscp.context_open(:'t', 'c3', 'bob', '{"active_intent": "x"}') r;
SELECT cscp.forget_conversation(:'t', 'c3') IS NULL AS forgot_null;
SELECT cscp.forget_subject(:'t', 'bob') IS NULL AS forgot_subject_null;

-- left for the sweep: a question that lapses, a conversation that times out, a context that expires
SELECT r.turn_index FROM cscp.conversation_start(:'t', 'c4', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "hi"}, "ts": 1}', NULL, 1000) r;
SELECT r.context_id IS NULL AS ctx4_null FROM cscp.context_open(:'t', 'c4', 'cy', '{"active_intent": "pay"}') r;
SELECT r.state FROM cscp.command_submit(:'t', 'c4', 'cy', 'k8', 'pay', true, '{m1}', '{"amount": 8}', 'fp8') r;
SELECT cscp.doc_put(:'t', 's2', 'late', '{"d": 1}', 60) IS NULL AS late_doc_null;
