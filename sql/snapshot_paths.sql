\i sql/include/helpers.sql
-- Snapshot on every path (CSCP VIII.A): a command row names a frame only of its own context,
-- with the hash its context_ref gives, whoever writes it (the guard trigger), and any command,
-- read-only too, reaches or goes on from canonicalized only with its frame (a cancel recovery,
-- which only records a cancellation, excepted).  Direct SQL as a tenant-bound application role; as the
-- owner with the guard trigger off, the forged row is reported by check_invariants.
SET timezone = 'UTC';
SET cscp.clock = '2026-09-01 09:00:00+00';
\set SHOW_CONTEXT never
CREATE ROLE sp_app;
SELECT cscp.grant_app('sp_app', '{sp}');
SET cscp.tenant_id = 'sp';
SET ROLE sp_app;
SELECT mutating FROM cscp.command_declare('sp', 'lookup', false);
SELECT (cscp.context_open('sp', 'c1', 'ana')).status, (cscp.context_open('sp', 'c2', 'bob')).status;
SELECT state FROM cscp.command_submit('sp', 'c1', 'ana', 'k1', 'lookup', false, '{m1}');
SELECT state FROM cscp.command_submit('sp', 'c2', 'bob', 'k2', 'lookup', false, '{m2}');
CREATE TEMP TABLE k AS SELECT idempotency_key, context_id, frame_id, context_ref FROM cscp.command
 WHERE tenant_id = 'sp' AND idempotency_key IN ('k1', 'k2');
-- The API's commands each name a frame of their own context.
SELECT c.idempotency_key, f.context_id = c.context_id AS own_context
  FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
 WHERE c.tenant_id = 'sp' ORDER BY 1;

-- 1. Inserted naming another context's frame, a frame without a context, or its own context's
-- frame with a context_ref whose hash is not the frame's, at canonicalized or even received:
-- 55000, no row.
SELECT label, try(format($f$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                                                     command_name, mutating, message_ids, context_id, frame_id,
                                                     context_ref, state)
                           VALUES ('sp', %L, 'c1', 'ana', 'lookup', false, '{m1}', %L, %L, %L, %L)$f$,
                          'x-' || label, ctx, frame, ref, st))
  FROM (SELECT 'other context''s frame' AS label, k1.context_id AS ctx, k2.frame_id AS frame,
               jsonb_set(k1.context_ref, '{frame_id}', to_jsonb(k2.frame_id::text)) AS ref,
               'canonicalized' AS st
          FROM k k1, k k2 WHERE k1.idempotency_key = 'k1' AND k2.idempotency_key = 'k2'
        UNION ALL
        SELECT 'frame without context', NULL, frame_id, context_ref, 'canonicalized'
          FROM k WHERE idempotency_key = 'k1'
        UNION ALL
        SELECT 'hash not the frame''s', context_id, frame_id,
               jsonb_set(context_ref, '{context_hash}', '"sha256:00"'), 'canonicalized'
          FROM k WHERE idempotency_key = 'k1'
        UNION ALL
        SELECT 'hash not the frame''s, received', context_id, frame_id,
               jsonb_set(context_ref, '{context_hash}', '"sha256:00"'), 'received'
          FROM k WHERE idempotency_key = 'k1') t
 ORDER BY 1;
SELECT count(*) AS forged_rows FROM cscp.command WHERE idempotency_key LIKE 'x-%';

-- 2. With no context and no frame no command is recorded canonicalized, read-only or not (the
-- API records its refusals as rejected): 55000 at the INSERT, no row; a received one is refused
-- its step to canonicalized.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                      mutating, message_ids, state)
             VALUES ('sp', 'bare', 'c1', 'ana', 'lookup', false, '{m1}', 'canonicalized')$$);
SELECT count(*) AS bare_rows FROM cscp.command WHERE idempotency_key = 'bare';
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                          message_ids, state)
VALUES ('sp', 'bare', 'c1', 'ana', 'lookup', false, '{m1}', 'received');
SELECT accepted, state, reason_code FROM cscp.command_transition(
    (SELECT command_id FROM cscp.command WHERE idempotency_key = 'bare'), 'canonicalized');
SELECT try($$UPDATE cscp.command SET state = 'canonicalized' WHERE idempotency_key = 'bare'$$);
SELECT accepted, state FROM cscp.command_transition(
    (SELECT command_id FROM cscp.command WHERE idempotency_key = 'bare'), 'canceled');
-- The API's read-only command goes on with its frame.
SELECT accepted, state FROM cscp.command_transition(
    (SELECT command_id FROM cscp.command WHERE idempotency_key = 'k1'), 'authz_pending');
RESET ROLE;

-- 3. Where the guard does not run (the owner with the trigger off), check_invariants reports it.
BEGIN;
ALTER TABLE cscp.command DISABLE TRIGGER command_guard;
SELECT try(format($f$INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                                               command_name, mutating, context_id, frame_id, context_ref, state)
                     VALUES ('sp', cscp.routing_id('c1'), 'x-owner', 'c1', 'ana', 'lookup', false, %L, %L, %L,
                             'canonicalized')$f$,
                  (SELECT context_id FROM k WHERE idempotency_key = 'k1'),
                  (SELECT frame_id FROM k WHERE idempotency_key = 'k2'),
                  (SELECT context_ref FROM k WHERE idempotency_key = 'k1')));
SELECT kind, count(*) FROM cscp.check_invariants('sp') GROUP BY kind ORDER BY kind;
ROLLBACK;

RESET cscp.tenant_id;
SELECT kind, count(*) FROM cscp.check_invariants('sp') GROUP BY kind ORDER BY kind;
RESET cscp.clock;
SELECT cscp.forget_conversation('sp', c) IS NOT NULL AS forgotten FROM unnest('{c1,c2}'::text[]) c;
DELETE FROM cscp.tombstone WHERE tenant_id = 'sp';
DELETE FROM cscp.command_registry WHERE tenant_id = 'sp';
DROP TABLE k;
SELECT cscp.revoke_app('sp_app');
DROP OWNED BY sp_app;
DROP ROLE sp_app;
