-- pgbench, W1 of `make bench`: one message turn through cscp's API, nine round trips (each its
-- own transaction): the user's turn (conversation_exchange, which also becomes the
-- last_message_id of the user's live context), open or reuse the user's context, set two slots,
-- submit a read-only command formed from the turn, and drive it authz_pending -> authorized ->
-- started -> executed.  Each client has its own conversation, :conv-<client_id>, started before
-- the run (-D conv=...); message ids and idempotency keys are random 63-bit numbers.
-- Run as an application role with cscp.tenant_id = 'bench' (row-level security applies).
\set n random(1, 9000000000000000000)
SELECT outcome FROM cscp.conversation_exchange('bench', :conv::text || '-' || :client_id::text, jsonb_build_object('messageId', 'm-' || :n::text, 'from', 'customer', 'role', 'user', 'content', '{"text": "where is my order 123?"}'::jsonb, 'ts', 1795269600000));
SELECT context_id AS ctx FROM cscp.context_open('bench', :conv::text || '-' || :client_id::text, 'customer') \gset
SELECT status FROM cscp.slot_set(:ctx::uuid, 'active_intent', '"track_order"');
SELECT status FROM cscp.slot_set(:ctx::uuid, 'active_target', to_jsonb('order:' || :n::text));
SELECT command_id AS cid FROM cscp.command_submit('bench', :conv::text || '-' || :client_id::text, 'customer', 'key-' || :n::text, 'track_order', false, ARRAY['m-' || :n::text], '{"order_id": "123"}', 'order:' || :n::text) \gset
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'authz_pending', 'policy_check');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'authorized', 'read_only');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'started');
SELECT accepted FROM cscp.command_transition(:cid::uuid, 'executed', 'order_found', '{"status": "shipped"}');
