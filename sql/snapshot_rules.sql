\i sql/include/helpers.sql
-- Snapshot-on-execute, recoveries and expiries held by the tables (issue 34, item 6), through
-- the API and through direct SQL as a tenant-bound application role: a mutating command leaves
-- canonicalized only with its context, a matching frame and its message ids; cscp.frame is
-- append-only and takes only its context's state as command_submit computes it; a recovery
-- names a command of its conversation and actor and goes on only while its kind applies; a
-- document, working-set item or context past its expiry is never revived by an UPDATE.
SET timezone = 'UTC';
SET cscp.clock = '2026-09-01 09:00:00+00';
\set SHOW_CONTEXT never
CREATE ROLE sr_app;
SELECT cscp.grant_app('sr_app', '{sr}');
SELECT cscp.policy_set('sr', '{"auto_confirm": ["ping"]}') IS NOT NULL AS policy_set;
CREATE FUNCTION pg_temp.cmd(key text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.command_id FROM cscp.command c WHERE c.tenant_id = 'sr' AND c.idempotency_key = key
$$;
CREATE FUNCTION pg_temp.ctx(conv text) RETURNS uuid LANGUAGE sql AS $$
    SELECT c.context_id FROM cscp.context c
     WHERE c.tenant_id = 'sr' AND c.conversation_id = conv AND c.status IN ('active', 'pending')
$$;
SET cscp.tenant_id = 'sr';
SET ROLE sr_app;

---------------------------------------------------------------------------------------------------
-- 1. Through the API a mutating command is formed with its frame, which matches it.
SELECT (cscp.context_open('sr', 'c1', 'ana')).status;
SELECT state FROM cscp.command_submit('sr', 'c1', 'ana', 'k1', 'transfer', true, '{m1}', '{"amount": 5}');
SELECT f.context_hash = c.context_ref ->> 'context_hash' AS frame_matches,
       f.context_id = c.context_id AS same_context, f.state -> 'message_ids' AS frame_message_ids
  FROM cscp.command c JOIN cscp.frame f ON f.tenant_id = c.tenant_id AND f.frame_id = c.frame_id
 WHERE c.command_id = pg_temp.cmd('k1');

---------------------------------------------------------------------------------------------------
-- 2. A mutating command inserted directly with no context, frame or message ids never reaches
-- canonicalized (55000 at the INSERT, no row), and one inserted received stays there: no
-- confirmation request, no auto-confirmed run (55000 by UPDATE, snapshot_missing from
-- command_transition), nothing written.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                      mutating, state)
             VALUES ('sr', 'bare', 'c1', 'ana', 'transfer', true, 'canonicalized')$$);
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                      mutating, auto_confirm, state)
             VALUES ('sr', 'bare-ping', 'c1', 'ana', 'ping', true, true, 'canonicalized')$$);
SELECT count(*) AS bare_rows FROM cscp.command WHERE idempotency_key IN ('bare', 'bare-ping');
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating, state)
VALUES ('sr', 'bare', 'c1', 'ana', 'transfer', true, 'received');
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                          auto_confirm, state)
VALUES ('sr', 'bare-ping', 'c1', 'ana', 'ping', true, true, 'received');
SELECT try($$UPDATE cscp.command SET state = 'canonicalized' WHERE command_id = pg_temp.cmd('bare')$$);
SELECT accepted, state, reason_code FROM cscp.command_transition(pg_temp.cmd('bare'), 'canonicalized');
SELECT try($$UPDATE cscp.command SET state = 'confirmation_required', window_expires_at = cscp.now() + interval '5 minutes'
              WHERE command_id = pg_temp.cmd('bare')$$);
SELECT accepted, state, reason_code FROM cscp.command_transition(pg_temp.cmd('bare'), 'confirmation_required');
SELECT try($$UPDATE cscp.command SET state = 'authz_pending' WHERE command_id = pg_temp.cmd('bare-ping')$$);
SELECT accepted, state, reason_code FROM cscp.command_transition(pg_temp.cmd('bare-ping'), 'authz_pending');
SELECT next_allowed FROM cscp.command_status(pg_temp.cmd('bare-ping'));
-- Born asking for confirmation without a frame: refused, no row.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                       mutating, message_ids, state, window_expires_at)
             VALUES ('sr', 'bare-2', 'c1', 'ana', 'transfer', true, '{m1}', 'confirmation_required',
                     cscp.now() + interval '5 minutes')$$);
SELECT count(*) AS bare_2_rows FROM cscp.command WHERE idempotency_key = 'bare-2';
-- Received, it is not even canceled: it goes nowhere.
SELECT accepted, state FROM cscp.command_transition(pg_temp.cmd('bare'), 'canceled');

---------------------------------------------------------------------------------------------------
-- 3. A command pointed at a frame that is not its own: another actor's, a context_ref whose hash
-- is not the frame's, message ids the frame did not record.  Each 55000 (snapshot_mismatch).
CREATE TEMP TABLE k1 AS SELECT * FROM cscp.command WHERE command_id = pg_temp.cmd('k1');
SELECT label, try(format($f$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                             context_id, frame_id, context_ref, message_ids, command_name, mutating,
                             state, window_expires_at)
                      SELECT 'sr', 'forged', 'c1', %L, k.context_id, k.frame_id, %s, %L, 'transfer', true,
                             'confirmation_required', cscp.now() + interval '5 minutes' FROM k1 k$f$,
                     actor, ref, ids))
  FROM (VALUES ('other actor',   'eve', 'k.context_ref', '{m1}'),
               ('forged hash',   'ana', $$k.context_ref || '{"context_hash": "sha256:00"}'$$, '{m1}'),
               ('other message', 'ana', 'k.context_ref', '{m9}')) AS t(label, actor, ref, ids);

---------------------------------------------------------------------------------------------------
-- 4. Frames: a forged state, a context that does not exist or is of another conversation, a
-- state without message ids (none, not an array, not strings), a closed context: 55000, no row.
-- No UPDATE or DELETE for the application role (42501); UPDATE refused for the owner too.
SELECT label, try(sql) FROM (VALUES
    ('other conversation', format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                                    VALUES ('sr', cscp.routing_id('c2'), 'c2', %L, '{"message_ids": []}')$$,
                                  pg_temp.ctx('c1'))),
    ('no message ids', format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                                VALUES ('sr', cscp.routing_id('c1'), 'c1', %L, '{"status": "active"}')$$,
                              pg_temp.ctx('c1'))),
    ('ids not an array', format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                                  VALUES ('sr', cscp.routing_id('c1'), 'c1', %L, '{"message_ids": "m1"}')$$,
                                pg_temp.ctx('c1'))),
    ('a number as id', format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                                VALUES ('sr', cscp.routing_id('c1'), 'c1', %L, '{"message_ids": [1]}')$$,
                              pg_temp.ctx('c1'))),
    ('forged state', format($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                              VALUES ('sr', cscp.routing_id('c1'), 'c1', %L, '{"status": "active", "slots": {}, "message_ids": ["m1"]}')$$,
                            pg_temp.ctx('c1'))),
    ('no context',   $$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
                       VALUES ('sr', cscp.routing_id('c1'), 'c1', cscp.routing_id('c1'), '{}')$$),
    ('update',       $$UPDATE cscp.frame SET state = state || '{"status": "active"}' WHERE tenant_id = 'sr'$$),
    ('delete',       $$DELETE FROM cscp.frame WHERE tenant_id = 'sr'$$)
) AS t(label, sql);
SELECT count(*) AS frames FROM cscp.frame WHERE tenant_id = 'sr';
RESET ROLE;
SELECT try($$UPDATE cscp.frame SET created_at = created_at WHERE tenant_id = 'sr'$$);
-- The state the API computes is taken, by whoever writes it (here the owner), with its message ids.
WITH f AS (INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
           SELECT 'sr', cscp.routing_id('c1'), 'c1', c.context_id, cscp._frame_state(c, '{m5}')
             FROM cscp.context c WHERE c.context_id = pg_temp.ctx('c1')
           RETURNING state)
SELECT f.state -> 'message_ids' AS message_ids FROM f;
-- A closed context takes no frame.
SELECT (cscp.context_open('sr', 'c9', 'ana')).status;
SELECT (cscp.context_transition(pg_temp.ctx('c9'), 'closed')).status;
SELECT try($$INSERT INTO cscp.frame (tenant_id, frame_id, conversation_id, context_id, state)
             SELECT 'sr', cscp.routing_id('c9'), 'c9', c.context_id, cscp._frame_state(c, '{m1}')
               FROM cscp.context c WHERE c.tenant_id = 'sr' AND c.conversation_id = 'c9'$$);
SET ROLE sr_app;

---------------------------------------------------------------------------------------------------
-- 5. Recoveries.  k1 runs to executed through the API.
SELECT outcome FROM cscp.confirm('sr', 'c1', 'ana', 'm2', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('k1'), s.st) t;
-- Inserted directly: a compensation that is not mutating, one from another conversation: 22023.
SELECT label, try(format($f$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id,
                             command_name, mutating, recovery_kind, target_command_id)
                      VALUES ('sr', 'undo-forged', %L, %L, 'transfer:compensate', %s, 'compensate', %L)$f$,
                     conv, actor, mutating, pg_temp.cmd('k1')))
  FROM (VALUES ('not mutating', 'c1', 'ana', 'false'),
               ('other conversation', 'c2', 'ana', 'true'),
               ('other actor', 'c1', 'eve', 'true')) AS t(label, conv, actor, mutating);
-- A mutating compensation inserted directly has no frame: it is refused (snapshot_missing, no
-- row), so k1 cannot become compensated by it.
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                      mutating, message_ids, recovery_kind, target_command_id, state)
             SELECT 'sr', 'undo-forged', 'c1', 'ana', 'transfer:compensate', true, '{m1}', 'compensate',
                    pg_temp.cmd('k1'), 'canonicalized'$$);
SELECT accepted, state, reason_code FROM cscp.command_transition(pg_temp.cmd('k1'), 'compensated');
-- A retry of a command that did not fail, a cancel that canceled nothing: the retry, which has no
-- frame, is refused as it is inserted (snapshot_missing); the cancel, inserted, cannot go on
-- (recovery_not_applicable), by command_transition or by UPDATE.
SELECT state FROM cscp.command_submit('sr', 'c1', 'ana', 'k2', 'transfer', true, '{m3}');
SELECT try($$INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name,
                                      mutating, recovery_kind, target_command_id, state)
             SELECT 'sr', 'retry-forged', 'c1', 'ana', 'lookup', false, 'retry', pg_temp.cmd('k1'),
                    'canonicalized'$$);
INSERT INTO cscp.command (tenant_id, idempotency_key, conversation_id, actor_id, command_name, mutating,
                          recovery_kind, target_command_id, state)
VALUES ('sr', 'cancel-forged', 'c1', 'ana', 'transfer:cancel', false, 'cancel', pg_temp.cmd('k2'),
        'canonicalized');
SELECT accepted, state, reason_code FROM cscp.command_transition(pg_temp.cmd('cancel-forged'), 'authz_pending');
SELECT try($$UPDATE cscp.command SET state = 'authz_pending' WHERE command_id = pg_temp.cmd('cancel-forged')$$);
SELECT state FROM cscp.command WHERE command_id = pg_temp.cmd('k2');
-- Through the API the same kinds work where they apply: a cancel cancels k2 and runs itself to
-- executed; a compensation asks for confirmation, runs, and compensates k1.
SELECT state FROM cscp.command_recover(pg_temp.cmd('k2'), 'cancel', 'k2-cancel');
SELECT state FROM cscp.command WHERE command_id = pg_temp.cmd('k2');
SELECT state FROM cscp.command_recover(pg_temp.cmd('k1'), 'retry', 'k1-retry');
SELECT state FROM cscp.command_recover(pg_temp.cmd('k1'), 'compensate', 'k1-undo');
SELECT outcome FROM cscp.confirm('sr', 'c1', 'ana', 'm4', true);
SELECT string_agg(t.state::text, ' ' ORDER BY s.n)
  FROM unnest('{authz_pending,authorized,started,executed}'::cscp.command_state[]) WITH ORDINALITY s(st, n),
       LATERAL cscp.command_transition(pg_temp.cmd('k1-undo'), s.st) t;
SELECT state FROM cscp.command WHERE command_id = pg_temp.cmd('k1');

---------------------------------------------------------------------------------------------------
-- 6. Past its expiry a document or working-set item is never updated (55000), so an UPDATE of
-- expires_at cannot bring it back; the API starts it anew (delete, then insert); the owner's
-- rule for contexts is the same.
SELECT cscp.doc_put('sr', 's1', 'cart', '{"items": 1}', 60);
SELECT cscp.ws_put('sr', 's1', 'focus', '"order-1"', interval '1 minute');
SELECT (cscp.context_open('sr', 'c3', 'ana', '{}', interval '1 minute')).status;
RESET ROLE;
SET cscp.clock = '2026-09-01 09:02:00+00';
SET ROLE sr_app;
SELECT label, try(sql) FROM (VALUES
    ('document expires_at', $$UPDATE cscp.document SET expires_at = cscp.now() + interval '1 hour' WHERE tenant_id = 'sr'$$),
    ('document payload',    $$UPDATE cscp.document SET payload = '{"items": 2}' WHERE tenant_id = 'sr'$$),
    ('working set',         $$UPDATE cscp.working_set SET expires_at = cscp.now() + interval '1 hour' WHERE tenant_id = 'sr'$$),
    ('context',             $$UPDATE cscp.context SET expires_at = cscp.now() + interval '1 hour'
                              WHERE tenant_id = 'sr' AND conversation_id = 'c3'$$)
) AS t(label, sql);
SELECT cscp.doc_get('sr', 's1', 'cart') AS doc, cscp.ws_get('sr', 's1', 'focus') AS ws;
SELECT cscp.doc_put('sr', 's1', 'cart', '{"coupon": "x"}', 60);
SELECT cscp.ws_put('sr', 's1', 'focus', '"order-2"');
SELECT cscp.doc_get('sr', 's1', 'cart') AS doc, cscp.ws_get('sr', 's1', 'focus') AS ws;
SELECT created_at FROM cscp.document WHERE tenant_id = 'sr';
-- Recorded expired, or purged: both allowed.
UPDATE cscp.context SET status = 'expired' WHERE tenant_id = 'sr' AND conversation_id = 'c3' RETURNING status;
SELECT cscp.ws_put('sr', 's1', 'old', '1', interval '1 minute');
RESET ROLE;
SET cscp.clock = '2026-09-01 09:04:00+00';
SET ROLE sr_app;
DELETE FROM cscp.working_set WHERE tenant_id = 'sr' AND key = 'old';
-- Writes beyond max_ttl or infinite are refused (22023), whoever writes.
SELECT label, try(sql) FROM (VALUES
    ('document', $$INSERT INTO cscp.document (tenant_id, session_id, namespace, payload, expires_at)
                   VALUES ('sr', 's2', 'n', '{}', 'infinity')$$),
    ('working set', $$INSERT INTO cscp.working_set (tenant_id, session_id, key, value, expires_at)
                      VALUES ('sr', 's2', 'k', '1', cscp.now() + interval '1 year')$$)
) AS t(label, sql);

---------------------------------------------------------------------------------------------------
RESET ROLE;
RESET cscp.tenant_id;
SELECT kind, count(*) FROM cscp.check_invariants('sr') GROUP BY kind ORDER BY kind;
RESET cscp.clock;
SELECT cscp.forget_conversation('sr', c) IS NOT NULL AS forgotten FROM unnest('{c1,c3,c9,s1}'::text[]) c;
DELETE FROM cscp.tombstone WHERE tenant_id = 'sr';
DELETE FROM cscp.policy WHERE tenant_id = 'sr';
SELECT cscp.revoke_app('sr_app');
DROP OWNED BY sr_app;
DROP ROLE sr_app;
