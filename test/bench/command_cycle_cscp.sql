-- pgbench: one command's whole cycle through cscp's API, seven round trips (each its own
-- transaction, as the steps of a real conversation are): open or reuse the client's context,
-- submit a mutating command (confirmation requested), "yes", then authz_pending -> authorized
-- -> started -> executed.  Each client has its own conversation (:client_id); keys and message
-- ids are random 63-bit numbers, so no two cycles share an idempotency key.
-- Run as an application role with cscp.tenant_id = 'bench' (row-level security applies).
\set n random(1, 9000000000000000000)
SELECT status FROM cscp.context_open('bench', 'conv-' || :client_id::text, 'customer');
SELECT command_id AS cid FROM cscp.command_submit('bench', 'conv-' || :client_id::text, 'customer', 'key-' || :n::text, 'cancel_order', true, ARRAY['ask-' || :n::text], '{"order_id": "123"}', 'order:' || :n::text) \gset
SELECT outcome FROM cscp.confirm('bench', 'conv-' || :client_id::text, 'customer', 'yes-' || :n::text, true, 'order:' || :n::text);
SELECT accepted FROM cscp.command_transition(:cid, 'authz_pending', 'policy_check');
SELECT accepted FROM cscp.command_transition(:cid, 'authorized', 'order_not_shipped');
SELECT accepted FROM cscp.command_transition(:cid, 'started');
SELECT accepted FROM cscp.command_transition(:cid, 'executed', 'order_cancelled', '{"refund": "EUR 42.00"}');
