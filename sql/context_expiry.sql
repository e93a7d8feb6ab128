\i sql/include/helpers.sql
-- The expiry invariant under a pinned clock: past expires_at a context is expired, before any
-- sweep; nothing may use it. Sliding and fixed TTLs.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
SET cscp.clock = '2026-03-01 10:00:00+00';
SELECT status, expires_at, ttl FROM cscp.context_open('t', 'exp-1', 'a', '{"active_intent": "pay"}', interval '10 minutes');
SELECT ctx_fixed('t', 'exp-shown') AS shown_id \gset

-- One second before: usable.
SET cscp.clock = '2026-03-01 10:09:59+00';
SELECT status FROM cscp.context_get('t', 'exp-1', 'a');

-- One second past expires_at: context_get says expired, slot_set refuses, no sweep has run.
SET cscp.clock = '2026-03-01 10:10:01+00';
SELECT status, expires_at FROM cscp.context_get('t', 'exp-1', 'a');
\set VERBOSITY default
SELECT cscp.slot_set(:'shown_id', 'active_target', '"acct-9"');
\set VERBOSITY terse
SELECT try(format('SELECT cscp.context_transition(%L, %L)', context_id, 'pending')) AS to_pending,
       try(format('SELECT cscp.context_transition(%L, %L)', context_id, 'closed')) AS to_closed,
       try(format('UPDATE cscp.context SET slots = %L WHERE context_id = %L', '{}', context_id)) AS direct_slots,
       try(format('UPDATE cscp.context SET expires_at = %L WHERE context_id = %L', '2026-03-02', context_id)) AS direct_revive
  FROM cscp.context WHERE conversation_id = 'exp-1';
SELECT status AS stored_status, slots, version FROM cscp.context WHERE conversation_id = 'exp-1';

-- Exactly at expires_at counts as expired.
SET cscp.clock = '2026-03-01 10:10:00+00';
SELECT status FROM cscp.context_get('t', 'exp-1', 'a');

-- Recording the expiry is the one write allowed; open then starts a new context.
SET cscp.clock = '2026-03-01 10:10:01+00';
SELECT status, slots FROM cscp.context_open('t', 'exp-1', 'a');
SELECT status, reason FROM cscp.context WHERE conversation_id = 'exp-1' ORDER BY status;

-- Sliding TTL (the default): each use extends expires_at to now + ttl.
SET cscp.clock = '2026-03-01 11:00:00+00';
SELECT expires_at FROM cscp.context_open('t', 'slide', 'a', '{}', interval '10 minutes');
SET cscp.clock = '2026-03-01 11:05:00+00';
SELECT expires_at FROM cscp.slot_set((SELECT context_id FROM cscp.context WHERE conversation_id = 'slide'), 'x_step', '1');
SET cscp.clock = '2026-03-01 11:12:00+00';
SELECT status, expires_at FROM cscp.context_transition((SELECT context_id FROM cscp.context WHERE conversation_id = 'slide'), 'pending');
SELECT status, expires_at FROM cscp.context_open('t', 'slide', 'a');
-- Reads do not extend.
SET cscp.clock = '2026-03-01 11:13:00+00';
SELECT expires_at FROM cscp.context_get('t', 'slide', 'a');

-- Fixed TTL per policy: uses do not extend.
SELECT cscp.policy_set('fx', '{"context_ttl_mode": "fixed", "context_ttl": "10 minutes"}') ->> 'context_ttl_mode' AS mode;
SET cscp.clock = '2026-03-01 12:00:00+00';
SELECT expires_at, ttl FROM cscp.context_open('fx', 'fixed', 'a');
SET cscp.clock = '2026-03-01 12:09:00+00';
SELECT expires_at FROM cscp.slot_set((SELECT context_id FROM cscp.context WHERE conversation_id = 'fixed'), 'x_step', '2');
SET cscp.clock = '2026-03-01 12:10:00+00';
SELECT status FROM cscp.context_get('fx', 'fixed', 'a');
DELETE FROM cscp.policy WHERE tenant_id = 'fx';
