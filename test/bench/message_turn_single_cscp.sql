-- pgbench, W1 through the single-call path of `make bench`: the same message turn as
-- message_turn_cscp.sql in five round trips -- cscp.message_turn records the user's turn, opens
-- or reuses the user's context, sets the two slots and submits the read-only command in one
-- call; then the four transitions to executed.  Run as an application role with
-- cscp.tenant_id = 'bench'; conversations :conv-<client_id> started before the run.
\set n random(1, 9000000000000000000)
SELECT r ->> 'command_id' AS cid FROM cscp.message_turn('bench', :conv::text || '-' || :client_id::text, 'customer', jsonb_build_object('messageId', 'm-' || :n::text, 'from', 'customer', 'role', 'user', 'content', '{"text": "where is my order 123?"}'::jsonb, 'ts', 1795269600000), jsonb_build_object('active_intent', 'track_order', 'active_target', 'order:' || :n::text), jsonb_build_object('idempotency_key', 'key-' || :n::text, 'name', 'track_order', 'mutating', false, 'payload', '{"order_id": "123"}'::jsonb, 'target_fingerprint', 'order:' || :n::text)) r \gset
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'authz_pending', 'policy_check');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'authorized', 'read_only');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'started');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'executed', 'order_found', '{"status": "shipped"}');
