-- The scale-out suite's scenario (test/scripts/scaleout.sh): the main flows of the other suites,
-- through the API only, run once on one node and once through the proxy on two shards; the two
-- outputs (random ids masked) must be the same.  Errors show as their SQLSTATE (the proxy adds
-- its own prefix to the message; the SQLSTATE is the shard's).
\set ON_ERROR_STOP 1
\pset footer off
-- PL/Proxy says NOTICE when it replaces the connection an error left behind.
SET client_min_messages = warning;
SET cscp.clock = '2026-05-04 09:00:00+00';
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE;
END
$$;

\echo '== tenant settings reach every node'
SELECT cscp.policy_set('acme', '{"context_ttl": "15 minutes", "confirmation_ttl": "5 minutes"}') ->> 'context_ttl' AS context_ttl;
SELECT cscp.policy_effective('acme') ->> 'confirmation_ttl' AS confirmation_ttl;
SELECT cscp.authority_set('acme', 'cfo', 250);
SELECT cscp.authority_rank('acme', 'cfo') AS cfo_rank;
-- The read-only commands below (undeclared commands are mutating by default).
SELECT count(*) AS declared FROM (SELECT cscp.command_declare('acme', n, false) FROM unnest(ARRAY['balance', 'lookup']) n) d;
SELECT pg_temp.try($$SELECT cscp.policy_set('acme', '{"no_such_key": 1}')$$) AS bad_policy;

\echo '== contexts: open, slots, transitions, expiry'
SELECT context_id AS ctx, status, expires_at FROM cscp.context_open('acme', 'wa:ana', 'ana', '{"active_intent": "pay"}') \gset
SELECT :'ctx' IS NOT NULL AS opened, status, expires_at FROM cscp.context_get('acme', 'wa:ana', 'ana');
SELECT slots FROM cscp.slot_set(:'ctx', 'active_target', '{"payee": "p-17"}');
SELECT slots FROM cscp.slot_set(:'ctx', 'x_amount', '50');
SELECT pg_temp.try(format('SELECT cscp.slot_set(%L, %L, %L)', :'ctx', 'not_a_slot', '1')) AS unknown_slot;
SELECT status, reason FROM cscp.context_transition(:'ctx', 'blocked', 'waiting for bank');
SELECT status FROM cscp.context_transition(:'ctx', 'active');
SELECT pg_temp.try(format('SELECT cscp.context_transition(%L, %L)', :'ctx', 'active')) AS same_status;
SELECT pg_temp.try($$SELECT cscp.slot_set('00000000-0000-4000-8000-000000000000', 'x_a', '1')$$) AS unknown_context;
SELECT context_id AS ctx_old FROM cscp.context_open('acme', 'wa:old', 'bo') \gset
SET cscp.clock = '2026-05-04 09:20:00+00';
SELECT status FROM cscp.context_get('acme', 'wa:old', 'bo');
SELECT pg_temp.try(format('SELECT cscp.slot_set(%L, %L, %L)', :'ctx_old', 'x_a', '1')) AS expired_context;
SET cscp.clock = '2026-05-04 09:00:00+00';

\echo '== a mutating command: confirmation, authorization, execution, replay, recovery'
SELECT command_id AS cmd, state, replayed FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-1', 'transfer',
       true, '{m1}', '{"amount": 50}', 'payee:p-17') \gset
SELECT state, replayed FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-1', 'transfer',
       true, '{m1}', '{"amount": 50}', 'payee:p-17');
SELECT pg_temp.try($$SELECT cscp.command_submit('acme', 'wa:ana', 'ana', 'k-1', 'other', true, '{m1}')$$) AS key_reused;
SELECT status, slots -> 'pending_confirmation' ->> 'target_fingerprint' AS pending FROM cscp.context_get('acme', 'wa:ana', 'ana');
SELECT outcome, command_id = :'cmd' AS this_command FROM cscp.confirm('acme', 'wa:ana', 'ana', 'm2', true, 'payee:p-17');
SELECT outcome FROM cscp.confirm('acme', 'wa:ana', 'ana', 'm2', true, 'payee:p-17');
SELECT outcome FROM cscp.confirm('acme', 'wa:ana', 'ana', 'm3', true);
SELECT accepted, state, reason_code FROM cscp.command_transition(:'cmd', 'started');
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'authz_pending', 'approval_required', '{"approver_id": "mgr"}');
SELECT outcome FROM cscp.approve('acme', 'wa:ana', 'intern', 's-1', true);
SELECT outcome, command_id = :'cmd' AS this_command FROM cscp.approve('acme', 'wa:ana', 'mgr', 's-2', true);
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'started');
SELECT accepted, state FROM cscp.command_transition(:'cmd', 'executed', 'ok', '{"ref": "TX-9"}');
SELECT state, terminal, outcome, reason_code, next_allowed, recovery_options FROM cscp.command_status(:'cmd');
SELECT state, replayed, outcome FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-1', 'transfer',
       true, '{m1}', '{"amount": 50}', 'payee:p-17');
SELECT command_id AS comp, state, replayed FROM cscp.command_recover(:'cmd', 'compensate', 'k-1-undo', '{"refund": true}') \gset
SELECT pg_temp.try(format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'teleport', 'k-x')) AS bad_kind;
SELECT outcome FROM cscp.confirm('acme', 'wa:ana', 'ana', 'm4', true);
SELECT accepted, state FROM cscp.command_transition(:'comp', 'authz_pending');
SELECT accepted, state FROM cscp.command_transition(:'comp', 'authorized');
SELECT accepted, state FROM cscp.command_transition(:'comp', 'started');
SELECT accepted, state FROM cscp.command_transition(:'comp', 'executed');
SELECT state FROM cscp.command_status(:'cmd');
SELECT count(*) AS broken_links FROM cscp.evidence_verify('acme', :'cmd');
SELECT count(*) AS broken_links_all FROM cscp.evidence_verify('acme');
\echo '   a read-only command, declined and lapsed questions'
SELECT state FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-2', 'balance', false, '{m5}');
SELECT state FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-3', 'close_account', true, '{m6}');
SELECT outcome FROM cscp.confirm('acme', 'wa:ana', 'ana', 'm7', false);
SELECT state FROM cscp.command_submit('acme', 'wa:ana', 'ana', 'k-4', 'close_account', true, '{m8}');
SELECT state FROM cscp.command_submit('acme', 'wa:nobody', 'zed', 'k-5', 'close_account', true, '{m9}');

\echo '== a multi-turn conversation: start, exchange, replay, divergence, schema, close'
SELECT * FROM cscp.conversation_start('acme', 'claim-1', 'agent',
    '{"from": "agent", "role": "agent", "content": {"text": "What happened?"}, "ts": 1}',
    schema => '{"type": "object", "required": ["text"]}', timeout_ms => 3600000, causation_id => 'run-1');
SELECT context_id AS cctx FROM cscp.context_open('acme', 'claim-1', 'ana') \gset
SELECT * FROM cscp.conversation_exchange('acme', 'claim-1',
    '{"messageId": "w1", "from": "ana", "role": "user", "content": {"text": "A tree fell"}, "ts": 2}');
SELECT * FROM cscp.conversation_exchange('acme', 'claim-1',
    '{"messageId": "w1", "from": "ana", "role": "user", "content": {"text": "A tree fell"}, "ts": 2}');
SELECT * FROM cscp.conversation_exchange('acme', 'claim-1',
    '{"messageId": "w1", "from": "ana", "role": "user", "content": {"text": "A car"}, "ts": 2}');
SELECT pg_temp.try($$SELECT cscp.conversation_exchange('acme', 'claim-1',
    '{"from": "ana", "role": "user", "content": {"photo": 1}, "ts": 3}')$$) AS schema_violation;
SELECT last_message_id FROM cscp.context_get('acme', 'claim-1', 'ana');
SELECT * FROM cscp.conversation_close('acme', 'claim-1',
    '{"from": "agent", "role": "agent", "content": {"text": "Filed."}, "ts": 4}', '{"claim": 1}');
SELECT pg_temp.try($$SELECT cscp.conversation_exchange('acme', 'claim-1',
    '{"from": "ana", "role": "user", "content": {"text": "hello?"}, "ts": 5}')$$) AS after_close;
SELECT status, reason FROM cscp.context_get('acme', 'claim-1', 'ana');
SELECT turn_index, role, sender, content FROM cscp.conversation_turns('acme', 'claim-1');
SELECT turn_index FROM cscp.conversation_turns('acme', 'claim-1', 1);
SELECT event_id, type, causation_id, turn_index FROM cscp.conversation_events('acme', 'claim-1');
SELECT pg_temp.try($$SELECT cscp.conversation_exchange('acme', 'no-such', '{"from": "a", "role": "user", "content": 1, "ts": 1}')$$) AS unknown_conversation;
SELECT * FROM cscp.conversation_start('acme', 'claim-2', 'agent',
    '{"from": "agent", "role": "agent", "content": "hi", "ts": 1}', timeout_ms => 60000);

\echo '== documents'
SELECT cscp.doc_put('acme', 'sess-1', 'profile', '{"language": "pt"}', 3600);
SELECT cscp.doc_put('acme', 'sess-1', 'profile', '{"city": "Porto"}', 3600);
SELECT cscp.doc_get('acme', 'sess-1', 'profile');
SELECT cscp.doc_get('acme', 'sess-1', 'cart');
SELECT cscp.doc_put('acme', 'sess-2', 'cart', '{"items": 2}', 60);
SELECT pg_temp.try($$SELECT cscp.doc_put('acme', 'sess-1', 'profile', '[1]', 60)$$) AS not_an_object;
SELECT cscp.doc_delete('acme', 'sess-1', 'profile'), cscp.doc_delete('acme', 'sess-1', 'profile');

\echo '== facts, supersession, the working set, context assembly'
SELECT cscp.identity_set('acme', 'u-ana', '{"user_name": "Ana", "authority": "employee"}');
SELECT fact_id, key, value, is_valid FROM cscp.fact_write('acme', 'u-ana', 'f-home', 'home', '"Lisbon"');
SELECT fact_id, supersedes, is_valid FROM cscp.fact_write('acme', 'u-ana', 'f-home2', 'home', '"Porto"', supersedes => 'f-home');
SELECT fact_id, value FROM cscp.fact_current('acme', 'u-ana', 'f-home');
SELECT fact_id, is_valid, superseded_by FROM cscp.fact_history('acme', 'u-ana', 'f-home');
SELECT fact_id FROM cscp.fact_write('acme', 'u-ana', 'f-rule', 'travel', '"economy only"',
       source => '{"type": "policy", "authority": "manager"}', is_constraint => true, constraint_type => 'policy');
SELECT pg_temp.try($$SELECT cscp.fact_write('acme', 'u-ana', 'f-rule2', 'travel', '"business"',
       source => '{"type": "conversation", "authority": "employee"}', supersedes => 'f-rule')$$) AS outranked;
SELECT pg_temp.try($$SELECT cscp.fact_write('acme', 'u-ana', 'f-home', 'home', '"x"')$$) AS duplicate_fact;
SELECT cscp.ws_put('acme', 'sess-1', 'cart', '{"items": 3}');
SELECT cscp.ws_get('acme', 'sess-1', 'cart');
SELECT cscp.env_set('acme', 'sess-1', '{"channel": "whatsapp"}');
SELECT cscp.build_context('acme', 'u-ana', 'sess-1', 'where does Ana live', 500);
-- Without a query the working set is not filtered: the session's items come from its node too.
SELECT cscp.build_context('acme', 'u-ana', 'sess-1', NULL, 500) -> 'working_set' AS working_set;

\echo '== pure functions answer the same anywhere'
SELECT cscp.canonical_json('{"b": 1.50, "a": [true, null]}'), cscp.canonical_hash('{"a": 1}');
SELECT cscp.capabilities() -> 'conversationPrimitive' AS primitive;
SELECT cscp.jsonschema_validate('{"type": "integer"}', '"5"');
SELECT cscp.command_transition_allowed('started', 'executed'), cscp.context_transition_allowed('blocked', 'pending');
SELECT cscp.token_count('three little words');
SELECT cscp.now();
SELECT cscp.routing_hash(cscp.routing_id('wa:ana')) = cscp.routing_conversation_hash('wa:ana') AS routed;
SELECT cscp.slots_visible('acme', '{"x_a": 1, "legacy": 2}');

\echo '== many conversations, each with a context and a command'
SELECT count(*) AS opened FROM generate_series(1, 40) i,
       LATERAL cscp.context_open('acme', 'bulk-' || i, 'user-' || i) c;
SELECT count(*) FILTER (WHERE s.state = 'canonicalized') AS submitted FROM generate_series(1, 40) i,
       LATERAL cscp.command_submit('acme', 'bulk-' || i, 'user-' || i, 'bulk-k-' || i, 'lookup', false, ARRAY['bm-' || i]) s;

\echo '== operators see every node'
SELECT count(*) AS live_contexts, count(*) FILTER (WHERE confirmation_pending) AS pending FROM cscp.active_context WHERE tenant_id = 'acme';
SELECT state, count(*) FROM cscp.command_lifecycle WHERE tenant_id = 'acme' GROUP BY state ORDER BY state;
SELECT conversation_id, status FROM cscp.show_active_context('acme', 'wa:ana');

\echo '== the sweep, an hour later, on every node'
SET cscp.clock = '2026-05-04 10:00:00+00';
SELECT cscp.sweep();
SELECT state FROM cscp.command_status(:'cmd');
SELECT status FROM cscp.context_get('acme', 'bulk-1', 'user-1');
SELECT event_id, type, turn_index FROM cscp.conversation_events('acme', 'claim-2') WHERE type = 'conversation.closed';
