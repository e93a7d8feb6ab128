-- make bench-proxy: one message turn of an agent, as the application (tenant bench) does it:
-- the user's turn recorded, the context opened (or reused) and two slots set, a read-only
-- command submitted and driven to executed.  9 round trips.  Conversations conv-1..conv-200
-- exist (bench_proxy.sh starts them).
\set c random(1, 200)
\set k random(1, 2000000000)
SELECT turn_index FROM cscp.conversation_exchange('bench', 'conv-' || :c::int,
    jsonb_build_object('from', 'user-' || :c::int, 'role', 'user', 'content', jsonb_build_object('text', 'where is my order?'), 'ts', :k::bigint));
SELECT context_id FROM cscp.context_open('bench', 'conv-' || :c::int, 'user-' || :c::int) \gset
SELECT version FROM cscp.slot_set(:context_id, 'active_intent', '"order_status"');
SELECT version FROM cscp.slot_set(:context_id, 'x_order', to_jsonb(:k::bigint));
SELECT command_id FROM cscp.command_submit('bench', 'conv-' || :c::int, 'user-' || :c::int, 'k-' || :client_id::int || '-' || :k::bigint,
    'order_status', false, ARRAY['m-' || :k::bigint]) \gset
SELECT accepted FROM cscp.command_transition(:command_id, 'authz_pending');
SELECT accepted FROM cscp.command_transition(:command_id, 'authorized');
SELECT accepted FROM cscp.command_transition(:command_id, 'started');
SELECT accepted FROM cscp.command_transition(:command_id, 'executed', 'ok');
